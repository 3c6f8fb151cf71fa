"""Who is calling: the one shape both credential carriers produce."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from service.domain.permissions import BIT, BOUND_TO_FOLDERS
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
        return bool(self.permissions & BIT[permission])

    @property
    def bound(self) -> bool:
        """Whether this is an API key bound to folders (``service.auth.reach``)."""
        return bool(self.permissions & BOUND_TO_FOLDERS)
