"""Credential formats: generating, checking and digesting API key secrets, session tokens and the
short-lived token of a login's second step (``mfa_token``).

Pure functions over strings and bytes; no I/O. Both kinds of secret share one format, modelled on
GitHub's tokens: ``<kind>_<43 base62 chars of randomness><6 base62 chars of CRC32>``. The random
part carries 256 bits; the checksum lets a mistyped or truncated credential be refused without a
store lookup, and the fixed prefix lets secret scanners find leaked ones.

This module never logs and never stores a secret; only ``digest()`` output leaves it for storage.
"""

from __future__ import annotations

import hashlib
import secrets
import zlib
from collections.abc import Callable

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE62_SET = frozenset(BASE62)
_RANDOM_CHARS = 43  # ceil(256 / log2(62)): enough base62 characters for 32 random bytes
_CHECKSUM_CHARS = 6  # 62**6 > 2**32: a CRC32 always fits

API_KEY_KIND = "fhk_"
SESSION_KIND = "fhs_"
# The second step of a login (``mfa_token``): a credential of its own kind, so it can never pass
# for a session.
MFA_TOKEN_KIND = "fhm_"  # noqa: S105 - a kind prefix, not a secret
# A download ticket's secret: one file, folder or selection, for a minute, while its session lasts.
DOWNLOAD_TICKET_KIND = "fhd_"
SECRET_LENGTH = len(API_KEY_KIND) + _RANDOM_CHARS + _CHECKSUM_CHARS

# Shown in key listings: the kind plus enough random characters to tell keys apart at a glance.
DISPLAY_PREFIX_LENGTH = len(API_KEY_KIND) + 8


def _base62(number: int, width: int) -> str:
    chars = []
    for _ in range(width):
        number, remainder = divmod(number, 62)
        chars.append(BASE62[remainder])
    return "".join(reversed(chars))


# Every two-character base62 string, by value: a CRC32 (< 62**6) is three of them. Checking a
# credential is on every request's path, and three lookups cost a fraction of six divisions.
_PAIRS = tuple(a + b for a in BASE62 for b in BASE62)
_PAIR_SPAN = len(_PAIRS)  # 62**2


def _checksum(body: str) -> str:
    crc = zlib.crc32(body.encode("ascii"))
    high, low = divmod(crc, _PAIR_SPAN)
    return _PAIRS[high // _PAIR_SPAN] + _PAIRS[high % _PAIR_SPAN] + _PAIRS[low]


def _generate(kind: str) -> str:
    body = kind + _base62(int.from_bytes(secrets.token_bytes(32), "big"), _RANDOM_CHARS)
    return body + _checksum(body)


def generate_api_key() -> str:
    """A new API key secret (shown to its owner once, stored only as a digest)."""
    return _generate(API_KEY_KIND)


# The characters a secret drawn for ``generate_api_key_where`` varies at its end: 62**3 bodies
# to test for each draw of the rest, enough for a one-in-16384 condition (a cluster slot).
_VARIED_CHARS = 3


def generate_api_key_where(accept: Callable[[str], bool]) -> str:
    """A new API key secret for which ``accept`` holds: its first random characters drawn as
    ``generate_api_key`` draws them, its last ones the first of the 62**3 choices accepted
    (so at least 238 random bits remain). For a condition that holds for one secret in
    thousands, such as its entry's Redis Cluster slot; run it off the event loop."""
    kept = _RANDOM_CHARS - _VARIED_CHARS
    while True:
        random = _base62(int.from_bytes(secrets.token_bytes(32), "big"), _RANDOM_CHARS)
        head = API_KEY_KIND + random[:kept]
        for pair in _PAIRS:
            for last in BASE62:
                body = head + pair + last
                secret = body + _checksum(body)
                if accept(secret):
                    return secret


def generate_session_token() -> str:
    """A new opaque session token (stored only as a digest)."""
    return _generate(SESSION_KIND)


def generate_mfa_token() -> str:
    """A new login's second-step token (stored only as a digest)."""
    return _generate(MFA_TOKEN_KIND)


def generate_download_ticket() -> str:
    """A new download ticket's secret (stored only as a digest)."""
    return _generate(DOWNLOAD_TICKET_KIND)


def is_well_formed(secret: str, kind: str) -> bool:
    """True when ``secret`` has the kind's prefix, the right length and alphabet and a valid
    checksum. A False answer needs no store lookup: such a credential can never exist."""
    if len(secret) != SECRET_LENGTH or not secret.startswith(kind):
        return False
    tail = secret[len(kind) :]
    # Exactly the base62 alphabet, without a set; bytes' isalnum is a table lookup per character
    # where str's asks the Unicode database (the isascii check first: it makes encode safe).
    if not (tail.isascii() and tail.encode().isalnum()):
        return False
    body, check = secret[:-_CHECKSUM_CHARS], secret[-_CHECKSUM_CHARS:]
    # The checksum is public information derived from the public part: no timing secret here.
    return _checksum(body) == check


def digest(secret: str) -> str:
    """The storage form of a secret: SHA-256, hex. The secret has 256 bits of entropy, so a
    plain fast hash is enough: nothing can be brute-forced from it."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def display_prefix(secret: str) -> str:
    """The short, non-secret label of a key shown in lists, e.g. ``fhk_3kP9aQ2x...``."""
    return secret[:DISPLAY_PREFIX_LENGTH] + "..."


def new_id(kind: str) -> str:
    """A random public identifier such as ``key_…`` or ``usr_…`` (128 bits, base62)."""
    return kind + "_" + _base62(int.from_bytes(secrets.token_bytes(16), "big"), 22)


def is_valid_id(value: str, kind: str) -> bool:
    """True when ``value`` has the shape ``new_id(kind)`` produces."""
    return (
        len(value) == len(kind) + 23
        and value.startswith(kind + "_")
        and _BASE62_SET.issuperset(value[len(kind) + 1 :])
    )
