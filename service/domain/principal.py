"""Who is calling: the one shape both credential carriers produce."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from service.domain.permissions import BIT, BOUND_TO_FOLDERS, UPLOAD_ONLY
from service.domain.records import RateVerdict


class CredentialType(StrEnum):
    SESSION = "session"
    API_KEY = "api_key"


class Principal(NamedTuple):
    """Who is calling, as one credential check found it. Made once per request, so a NamedTuple:
    immutable, and the cheapest record Python makes."""

    user_id: str
    credential: CredentialType
    permissions: int  # bit mask, see domain.permissions (a bound key's has BOUND_TO_FOLDERS)
    expires_at: int  # ms; for a session, the idle deadline as of this request
    key_id: str | None = None  # API keys only
    token_digest: str | None = None  # sessions only; lets logout end exactly this session
    rate: RateVerdict | None = None  # this request's take from the credential's rate bucket

    def may(self, permission: str) -> bool:
        """Whether the credential holds ``permission``; an upload-only key holds none."""
        return self.permissions & (BIT[permission] | UPLOAD_ONLY) == BIT[permission]

    def may_upload(self, permission: str) -> bool:
        """``may`` for an upload itself (``files.write``) and the alias asked for with it
        (``aliases.write``): the one thing an upload-only key may do too."""
        return bool(self.permissions & BIT[permission])

    @property
    def upload_only(self) -> bool:
        """Whether this is an upload-only key (``UPLOAD_ONLY``)."""
        return bool(self.permissions & UPLOAD_ONLY)

    @property
    def bound(self) -> bool:
        """Whether this is an API key bound to folders (``service.auth.reach``)."""
        return bool(self.permissions & BOUND_TO_FOLDERS)
