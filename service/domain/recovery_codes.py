"""Recovery codes: ten single-use codes shown once, each 16 characters of the RFC 4648 base32
alphabet (80 random bits), written ``XXXX-XXXX-XXXX-XXXX``.

Stored only as an HMAC-SHA-256 keyed by the account's id. A fast hash is enough, as for API key
digests: 80 random bits can't be searched from a stolen store (2^80 guesses per code), unlike a
password; keying by the account makes a digest useless for any other account. Guessing online
counts in login throttling like a password. Plain functions, no I/O; never logs a code.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
LENGTH = 16
COUNT = 10
_GROUP = 4


def generate() -> list[str]:
    """``COUNT`` new codes, as they are shown."""
    return [_shown("".join(secrets.choice(ALPHABET) for _ in range(LENGTH))) for _ in range(COUNT)]


def _shown(code: str) -> str:
    return "-".join(code[i : i + _GROUP] for i in range(0, LENGTH, _GROUP))


def normalise(text: str) -> str | None:
    """A code as typed (any case, with or without hyphens and spaces) in its stored form; None
    when it can't be one."""
    code = text.replace("-", "").replace(" ", "").upper()
    if len(code) != LENGTH or not all(char in ALPHABET for char in code):
        return None
    return code


def digest(user_id: str, code: str) -> str:
    """The stored form of a normalised code of the account ``user_id``."""
    key = b"filehost recovery code\0" + user_id.encode("ascii")
    return hmac.new(key, code.encode("ascii"), hashlib.sha256).hexdigest()
