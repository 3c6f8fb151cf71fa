"""Secrets the service must read back (TOTP secrets) kept encrypted at rest with the operator's
keys (``FILEHOST_SECRETS_KEY`` or ``FILEHOST_SECRETS_KEY_FILE``).

AES-256-GCM from ``cryptography``: a random 96-bit nonce per sealing, and the secret's context
(what it is and whose: ``totp:usr_…``) as associated data, so a sealed value copied into another
account or another use does not open. A sealed value is ``v1.<key id>.<nonce + ciphertext,
base64url>``; the key id (a digest of the key, never the key) says which key opens it. The first
key seals, every key opens: a new key is put first and the old ones kept until ``rotate`` has
sealed everything again (``filehost-auth secrets rotate``). Without a key nothing can be sealed:
the factors that need it are refused (503 ``mfa_unavailable``), nothing is ever stored in clear.
Never logs a secret or a key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_VERSION = "v1"
# What ``derived_key`` derives from when the operator gave no key: the same for every
# application this process builds, never stored.
_PROCESS_KEY = os.urandom(32)
_NONCE_BYTES = 12


def derived_key(keys: tuple[bytes, ...], purpose: str) -> bytes:
    """A key for ``purpose`` (signing alias cookies, public ETags) derived from the first of
    the operator's keys, so that it is never stored: not in Redis, not in a backup. Without a
    key (an application built by hand, never ``serve``), from a random one of this process."""
    base = keys[0] if keys else _PROCESS_KEY
    return hmac.new(base, b"filehost derived key\0" + purpose.encode(), "sha256").digest()


class SecretUnreadable(Exception):
    """A sealed value no configured key opens (its key was dropped, or it was damaged)."""


def key_id(key: bytes) -> str:
    """A key's public name in sealed values: 8 hex digits of a digest of it."""
    return hashlib.sha256(b"filehost secrets key id\0" + key).hexdigest()[:8]


class SecretBox:
    def __init__(self, keys: tuple[bytes, ...]) -> None:
        self._ciphers = {key_id(key): AESGCM(key) for key in keys}
        self._sealing = key_id(keys[0]) if keys else None

    @property
    def available(self) -> bool:
        """Whether a key is configured, so that a secret can be sealed."""
        return self._sealing is not None

    def seal(self, secret: str, context: str) -> str:
        assert self._sealing is not None, "check available first"
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ciphers[self._sealing].encrypt(
            nonce, secret.encode("utf-8"), context.encode("utf-8")
        )
        body = base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")
        return f"{_VERSION}.{self._sealing}.{body}"

    def open(self, sealed: str, context: str) -> str:
        version, _, rest = sealed.partition(".")
        kid, _, body = rest.partition(".")
        cipher = self._ciphers.get(kid)
        if version != _VERSION or cipher is None:
            raise SecretUnreadable()
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            plain = cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], context.encode())
        except (binascii.Error, ValueError, InvalidTag):
            raise SecretUnreadable() from None
        return plain.decode("utf-8")

    def sealed_by_current_key(self, sealed: str) -> bool:
        return sealed.split(".", 2)[1:2] == [self._sealing]

    def rotate(self, sealed: str, context: str) -> str | None:
        """``sealed`` sealed again with the first key; None when it already is."""
        if self.sealed_by_current_key(sealed):
            return None
        return self.seal(self.open(sealed, context), context)
