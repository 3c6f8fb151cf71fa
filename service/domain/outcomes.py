"""What a store operation can answer besides its value: the outcomes callers must tell apart
from a Redis failure (``redis.RedisError``, answered 503) and an unreadable record
(``service.errors.CorruptRecord``)."""

from __future__ import annotations


class AccountGone(Exception):
    """A session, key or file could not be created: its user record is gone (being deleted)."""


class KeyChanged(Exception):
    """A key changed under several changes in a row: other requests keep changing it. Nothing of
    this change was made."""


class KeyGone(Exception):
    """A key secret that no longer works, and why: ``reason`` is ``revoked``, ``leaked``
    (revoked as reported leaked) or ``replaced`` (rolled out, its grace over); ``at`` (ms) is
    when it stopped working. Raised by the lookup for a secret whose entry is gone but is still
    remembered (``service.store.fields.KEY_GONE_MS``)."""

    def __init__(self, reason: str, at: int) -> None:
        self.reason = reason
        self.at = at


class FolderNotLive(Exception):
    """A key could not be bound to its folders: one of them is not a live folder of the account
    (unknown, another account's, or being deleted). Nothing of the change was made."""


class FolderGone(Exception):
    """The folder a file was to be put in is not a live folder of the account."""


class PauseTooLong(Exception):
    """The snapshot took longer than the pause: writes may have landed while it was read."""

    def __init__(self, took_ms: int, max_pause_ms: int) -> None:
        super().__init__(f"reading the store took {took_ms} ms, longer than the {max_pause_ms} ms")
        self.took_ms, self.max_pause_ms = took_ms, max_pause_ms


# Why a secret stopped working, as its key-gone record says (then ``:<ms>``).
GONE_REVOKED = "revoked"


GONE_LEAKED = "leaked"


GONE_REPLACED = "replaced"


GONE_REASONS = (GONE_REVOKED, GONE_LEAKED, GONE_REPLACED)
