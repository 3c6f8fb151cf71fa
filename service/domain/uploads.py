"""A resumable upload as stored (``UploadRecord``), and what the upload store answers when one
is added (``ADDED`` or why not) and when a request claims one (``TAKEN`` or why not)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Adding an upload: added, too many in progress, too many bytes held, the account gone.
ADDED, TOO_MANY, TOO_MANY_BYTES, ACCOUNT_GONE = 1, -1, -2, -3
# Claiming one for a request: taken, gone (unknown, expired), at another offset, another
# request's, already finished.
TAKEN, GONE, ELSEWHERE, BUSY, FINISHED = 1, 0, 2, 3, 4


@dataclass(frozen=True, slots=True)
class UploadRecord:
    """An upload as stored: ``length`` None while deferred; ``done`` once finished."""

    id: str
    user_id: str
    file_id: str
    length: int | None
    offset: int
    expires_at: int
    meta: dict[str, Any]
    made_by: str  # a key's id, or "session"
    state: dict[str, Any]
    done: dict[str, Any] | None = None
    # The running SHA-256's saved state, and the offset it has hashed up to.
    sha: tuple[int, bytes] | None = None
