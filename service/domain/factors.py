"""An account's second factors as the policy reads them: its passkeys, its TOTP and recovery
codes (``MfaState``), and a login's pending second step (``LoginStep``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Passkey:
    """A passkey as stored: never secret (a public key), but never shown beyond its name and
    times either."""

    id: str
    name: str
    credential_id: str  # base64url
    public_key: str  # COSE, base64url
    created_at: int
    transports: tuple[str, ...]
    sign_count: int
    last_used_at: int | None


@dataclass(frozen=True, slots=True)
class MfaState:
    generation: int
    totp_sealed: str | None
    totp_enabled_at: int | None
    totp_last_step: int
    passkeys: list[Passkey]
    recovery_codes_left: int
    pending_expires_at: int | None

    @property
    def has_factor(self) -> bool:
        return self.totp_sealed is not None or bool(self.passkeys)


@dataclass(frozen=True, slots=True)
class LoginStep:
    """A login's second step as its entry holds it."""

    expires_at: int
    answers: int
    generation: int
    challenge: str | None  # base64url; None until WebAuthn options were asked for
    password_hash: str
    # A sign-in through the provider that asks for the account's second factor: how the session
    # it opens counts as opened (JSON of ``SignInVia``'s fields); None for a password login.
    via: str | None = None
