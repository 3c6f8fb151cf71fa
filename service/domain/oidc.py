"""Single sign-on's pure values: the PKCE pair and the random pieces of a sign-in (state,
nonce, the one-time login code), a linked identity, what a sign-in carried from the callback to
the exchange, and the rules that read an ID token's claims (allowed domains, the provider's own
second factor). No I/O; no secret is logged or stored here, only digests leave for storage."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# What a trip to the provider is for: a sign-in, linking an identity to the signed-in account,
# or a step-up of the signed-in session.
PURPOSES = ("login", "link", "reauthenticate")
# ``amr`` values (RFC 8176) that say the provider checked more than a password.
MFA_AMR = frozenset({"mfa", "otp", "hwk", "swk", "sms", "tel", "fpt", "face", "iris", "sc"})
# ``acr`` values that mean the same in the providers we document (Keycloak's level 2 and
# above are configured per realm: an operator names them as ``mfa`` or a URL ending in it).
MFA_ACR_WORDS = ("mfa", "multi-factor", "multifactor", "2fa", "phr", "phrh")
BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"


def random_piece() -> str:
    """256 random bits, base64url: a state, a nonce, a login code or a PKCE verifier."""
    return secrets.token_urlsafe(32)


def code_challenge(verifier: str) -> str:
    """The S256 challenge of a PKCE verifier (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def identity_digest(issuer: str, subject: str) -> str:
    """A name for (issuer, subject) fit for a key: the two can hold any character."""
    return hashlib.sha256(json.dumps([issuer, subject]).encode("utf-8")).hexdigest()


def email_domain(email: str) -> str:
    return email.rpartition("@")[2].lower()


def domain_allowed(email: str | None, allowed: tuple[str, ...]) -> bool:
    """Whether ``email`` is in one of the ``allowed`` domains (every domain when none is set)."""
    if not allowed:
        return True
    return email is not None and email_domain(email) in allowed


def provider_did_mfa(claims: Mapping[str, Any]) -> bool:
    """Whether an ID token's ``amr`` or ``acr`` says the provider checked a second factor."""
    amr = claims.get("amr")
    if isinstance(amr, list) and any(isinstance(item, str) and item in MFA_AMR for item in amr):
        return True
    acr = claims.get("acr")
    if isinstance(acr, str):
        lowered = acr.lower()
        return any(lowered == word or lowered.endswith(f"/{word}") for word in MFA_ACR_WORDS)
    return False


@dataclass(frozen=True, slots=True)
class PendingSignIn:
    """A trip to the provider, kept under the digest of its ``state`` until the callback: the
    nonce and PKCE verifier it was started with, the digest of its browser cookie, its purpose,
    and when it was started."""

    nonce: str
    verifier: str
    browser: str  # digest of the cookie that binds it to the browser that started it
    purpose: str
    started_at: int

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, raw: str) -> PendingSignIn:
        return cls(**json.loads(raw))


@dataclass(frozen=True, slots=True)
class SignedIn:
    """What a verified callback hands to the exchange under a one-time login code: the
    identity, its account (None for a link or a step-up, decided at the exchange), the
    provider's session id (for back-channel logout), whether the provider did a second factor
    and when the person authenticated there."""

    purpose: str
    issuer: str
    subject: str
    email: str | None
    user_id: str | None
    provider_sid: str | None
    provider_mfa: bool
    auth_time: int | None  # ms
    started_at: int  # ms, when the trip began (a step-up's auth_time must not be older)
    verified_at: int  # ms, when the callback verified it (the login code counts from then)

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, raw: str) -> SignedIn:
        return cls(**json.loads(raw))


@dataclass(frozen=True, slots=True)
class Identity:
    """An identity at the provider linked to an account: ``idn_…``, the provider (issuer), its
    subject, the e-mail it had when linked, and when."""

    id: str
    issuer: str
    subject: str
    email: str | None
    linked_at: int

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, raw: str) -> Identity:
        return cls(**json.loads(raw))
