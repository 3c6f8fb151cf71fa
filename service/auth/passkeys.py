"""Passkeys (WebAuthn Level 2 credentials) as a second factor, through Duo Labs' py_webauthn: the
options a browser's ``navigator.credentials.create()``/``.get()`` takes (their JSON form), and
the checks of what it answers: the challenge, the origin and relying party
(``FILEHOST_PUBLIC_URL``: its host is the RP id, the origin the one the answer must come from),
user presence, the signature and, for an assertion, a growing sign count. No CBOR or COSE is
read here: the library does it.

User verification is preferred, not required: the password was checked already, and a security
key without a PIN is still something the user has. No attestation is asked for (``none``): the
service trusts no authenticator maker over another.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from service.domain.factors import Passkey

# py_webauthn is imported where a ceremony uses it: it is among the slowest imports, which every
# worker and every command would otherwise pay at start for a rare request (docs/development.md).
if TYPE_CHECKING:
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor

CEREMONY_TIMEOUT_MS = 300_000  # what the browser is told; the challenge lives as long


class PasskeyRefused(Exception):
    """A registration or assertion that does not verify; ``reason`` says why, for a client."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_challenge() -> str:
    return b64url(secrets.token_bytes(32))


@dataclass(frozen=True, slots=True)
class Verified:
    """A passkey's assertion that verified: which passkey, and its new sign count."""

    passkey_id: str
    sign_count: int


def _descriptor(passkey: Passkey) -> PublicKeyCredentialDescriptor:
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor

    return PublicKeyCredentialDescriptor(id=unb64url(passkey.credential_id))


def browser_origin(url: str) -> str:
    """The origin a browser reports for pages under ``url`` (``FILEHOST_PUBLIC_URL``, which may
    carry a path): scheme and host in lower case, the port only when it is not the scheme's
    default, no path."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    port = "" if parts.port in (None, default) else f":{parts.port}"
    return f"{parts.scheme.lower()}://{host}{port}"


class Passkeys:
    def __init__(self, public_url: str, rp_name: str = "filehost") -> None:
        self.origin = browser_origin(public_url)
        self.rp_id = urlsplit(public_url).hostname or ""
        self._rp_name = rp_name

    def registration_options(
        self, user_id: str, email: str, existing: list[Passkey], challenge: str
    ) -> dict[str, Any]:
        """``PublicKeyCredentialCreationOptions`` as JSON (``options_to_json_dict``); the
        account's passkeys excluded, so an authenticator is never registered twice."""
        from webauthn import generate_registration_options
        from webauthn.helpers import options_to_json_dict
        from webauthn.helpers.structs import (
            AttestationConveyancePreference,
            AuthenticatorSelectionCriteria,
            ResidentKeyRequirement,
            UserVerificationRequirement,
        )

        options = generate_registration_options(
            rp_id=self.rp_id,
            rp_name=self._rp_name,
            user_name=email,
            user_id=user_id.encode("ascii"),
            user_display_name=email,
            challenge=unb64url(challenge),
            timeout=CEREMONY_TIMEOUT_MS,
            attestation=AttestationConveyancePreference.NONE,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.DISCOURAGED,
                user_verification=UserVerificationRequirement.PREFERRED,
            ),
            exclude_credentials=[_descriptor(passkey) for passkey in existing],
        )
        return options_to_json_dict(options)

    def verify_registration(
        self, credential: dict[str, Any], challenge: str
    ) -> tuple[str, str, int, tuple[str, ...]]:
        """(credential id, public key, sign count, transports) of a registration that
        verifies; ``PasskeyRefused`` otherwise."""
        from webauthn import verify_registration_response
        from webauthn.helpers.exceptions import WebAuthnException

        try:
            verified = verify_registration_response(
                credential=credential,
                expected_challenge=unb64url(challenge),
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
            )
        except (WebAuthnException, ValueError, TypeError, KeyError) as refused:
            raise PasskeyRefused(_reason(refused)) from None
        response = credential.get("response")
        transports = response.get("transports") if isinstance(response, dict) else None
        kept = tuple(str(t)[:32] for t in (transports if isinstance(transports, list) else [])[:8])
        return (
            b64url(verified.credential_id),
            b64url(verified.credential_public_key),
            verified.sign_count,
            kept,
        )

    def assertion_options(self, passkeys: list[Passkey], challenge: str) -> dict[str, Any]:
        """``PublicKeyCredentialRequestOptions`` as JSON, allowing the account's passkeys."""
        from webauthn import generate_authentication_options
        from webauthn.helpers import options_to_json_dict
        from webauthn.helpers.structs import UserVerificationRequirement

        options = generate_authentication_options(
            rp_id=self.rp_id,
            challenge=unb64url(challenge),
            timeout=CEREMONY_TIMEOUT_MS,
            allow_credentials=[_descriptor(passkey) for passkey in passkeys],
            user_verification=UserVerificationRequirement.PREFERRED,
        )
        return options_to_json_dict(options)

    def verify_assertion(
        self, credential: dict[str, Any], challenge: str, passkeys: list[Passkey]
    ) -> Verified:
        """Which of ``passkeys`` signed ``challenge`` for this origin and relying party, with
        its new sign count; ``PasskeyRefused`` otherwise (an unknown credential included)."""
        raw_id = credential.get("rawId", credential.get("id"))
        found = next((p for p in passkeys if p.credential_id == raw_id), None)
        if found is None:
            raise PasskeyRefused("the credential is not one of this account's passkeys")
        from webauthn import verify_authentication_response
        from webauthn.helpers.exceptions import WebAuthnException

        try:
            verified = verify_authentication_response(
                credential=credential,
                expected_challenge=unb64url(challenge),
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                credential_public_key=unb64url(found.public_key),
                credential_current_sign_count=found.sign_count,
            )
        except (WebAuthnException, ValueError, TypeError, KeyError) as refused:
            raise PasskeyRefused(_reason(refused)) from None
        return Verified(found.id, verified.new_sign_count)


_REASONS = (
    ("origin", "it was made for another origin"),
    ("rp id", "it was made for another relying party"),
    ("challenge", "its challenge is not the one issued"),
    ("sign count", "its sign count did not grow (a cloned authenticator?)"),
    ("signature", "its signature does not verify"),
    ("present", "the user was not present"),
)


def _reason(error: Exception) -> str:
    """What a client is told of a refusal, in words of our own: the library's messages may
    quote what the request sent."""
    from webauthn.helpers.exceptions import WebAuthnException

    message = str(error).lower() if isinstance(error, WebAuthnException) else ""
    for needle, reason in _REASONS:
        if needle in message:
            return reason
    return "it is malformed or does not verify"
