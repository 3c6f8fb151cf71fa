"""TOTP (RFC 6238: HMAC-SHA-1, 6 digits, 30-second steps) as the second factor uses it: a new
secret, the ``otpauth://`` URI an authenticator app reads, and which step a code belongs to.

Plain functions over values, no I/O; pyotp computes each code and the comparison is constant
time. A step is the number of 30-second periods since the Unix epoch: the store remembers the
last step a code was accepted for, so no code (nor an older one) is accepted twice. Never logs a
code or a secret.
"""

from __future__ import annotations

import hmac

import pyotp

STEP_SECONDS = 30
DIGITS = 6
# Steps accepted either side of now: a clock a little off, a code typed as it changed.
WINDOW = 1
# 32 base32 characters: the 160 bits RFC 4226 recommends for a shared secret.
SECRET_LENGTH = 32


def new_secret() -> str:
    return pyotp.random_base32(SECRET_LENGTH)


def step_at(now_ms: int) -> int:
    return now_ms // 1000 // STEP_SECONDS


def is_code(text: str) -> bool:
    """Whether ``text`` has a code's shape (6 ASCII digits): anything else can't be one."""
    return len(text) == DIGITS and text.isascii() and text.isdigit()


def matching_step(secret: str, code: str, now_ms: int) -> int | None:
    """The latest step within ``WINDOW`` of now whose code is ``code``, or None. Every step of
    the window is computed and compared, whichever matches."""
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    now = step_at(now_ms)
    found = None
    for step in range(now - WINDOW, now + WINDOW + 1):
        if hmac.compare_digest(totp.generate_otp(step).encode(), code.encode()):
            found = step
    return found


def code_at(secret: str, step: int) -> str:
    """The code of ``step`` (the tests' authenticator app)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).generate_otp(step)


def provisioning_uri(secret: str, account: str, issuer: str) -> str:
    """The ``otpauth://totp/…`` URI an authenticator app reads from the QR code."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).provisioning_uri(
        name=account, issuer_name=issuer
    )
