"""What a store operation can answer besides its value: the outcomes callers must tell apart
from a Redis failure (``redis.RedisError``, answered 503) and an unreadable record
(``service.errors.CorruptRecord``)."""

from __future__ import annotations


class AccountGone(Exception):
    """A session, key or file could not be created: its user record is gone (being deleted)."""


class KeyChanged(Exception):
    """A key changed under several changes in a row: other requests keep changing it. Nothing of
    this change was made."""
