"""The shapes the table of error codes (``service.errors.Code``) is made of: what a 401's
``WWW-Authenticate`` asks for (``Challenge``), and one row of the table (``Row``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum, unique
from types import MappingProxyType

_REALM = 'realm="filehost"'


@unique
class Challenge(StrEnum):
    """What a 401's ``WWW-Authenticate`` asks for (RFC 9110: every 401 carries one). ``ApiKey``
    is this service's own scheme, for the ``X-API-Key`` header."""

    headers: Mapping[str, str]  # {"WWW-Authenticate": the challenge}, made once

    BEARER = f"Bearer {_REALM}"
    # A session token that was sent and refused (RFC 6750 section 3.1).
    INVALID_TOKEN = f'Bearer {_REALM}, error="invalid_token"'
    API_KEY = f"ApiKey {_REALM}"
    # A vanity alias's password, sent in X-Alias-Password (or the form of its page).
    ALIAS_PASSWORD = f"AliasPassword {_REALM}"

    def __new__(cls, value: str) -> Challenge:
        member = str.__new__(cls, value)
        member._value_ = value
        member.headers = MappingProxyType({"WWW-Authenticate": value})
        return member


@dataclass(frozen=True)
class Row:
    status: int
    code: str
    message: str
    challenge: Challenge | None = None
    # Seconds, for a refusal whose Retry-After never changes.
    retry_after: int | None = None
    # False for a code no HTTP answer carries: the CLI's own, and the 499 that is only logged.
    sent: bool = True
