"""Second factors as a user's devices answer them: an authenticator app's TOTP codes on the
test's clock, and a software passkey (an EC P-256 key made with ``cryptography``) that answers
WebAuthn registrations (attestation ``none``) and assertions the way a browser hands them over,
for any origin and relying party a test names: the service's, or a phisher's."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from service.domain import totp
from tests.support.api import PASSWORD, Api, bearer
from tests.support.clock import FakeClock

# An operator's key for TOTP secrets (FILEHOST_SECRETS_KEY): 32 bytes in base64.
SECRETS_KEY = base64.b64encode(bytes(range(32))).decode()
OTHER_SECRETS_KEY = base64.b64encode(bytes(range(32, 64))).decode()
PUBLIC_URL = "https://files.example.com"


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def code_for(secret: str, clock: FakeClock, steps: int = 0) -> str:
    """The code an authenticator app shows at the clock's time, ``steps`` steps later."""
    return totp.code_at(secret, totp.step_at(clock.now_ms()) + steps)


async def start_totp(api: Api, token: str) -> dict[str, Any]:
    response = await api.client.post("/api/v1/auth/mfa/totp", headers=bearer(token))
    assert response.status == 201, await response.text()
    return (await response.json())["data"]


async def enable_totp(api: Api, token: str, clock: FakeClock) -> tuple[str, list[str]]:
    """Enrol and confirm TOTP: (secret, recovery codes). The clock moves a step on, so the
    confirming code is not the one a test uses next."""
    secret = (await start_totp(api, token))["secret"]
    response = await api.client.post(
        "/api/v1/auth/mfa/totp/confirm",
        json={"code": code_for(secret, clock)},
        headers=bearer(token),
    )
    assert response.status == 200, await response.text()
    clock.advance(seconds=totp.STEP_SECONDS)
    return secret, (await response.json())["data"]["recovery_codes"]


async def first_step(api: Api, email: str, password: str = PASSWORD) -> dict[str, Any]:
    response = await api.client.post(
        "/api/v1/auth/login", json={"email": email, "password": password}
    )
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert data["mfa_required"] is True, data
    return data


async def second_step(api: Api, mfa_token: str, **answer: Any) -> Any:
    return await api.client.post("/api/v1/auth/login/mfa", json={"mfa_token": mfa_token, **answer})


async def reauthenticate(api: Api, token: str, password: str = PASSWORD, **answer: Any) -> Any:
    return await api.client.post(
        "/api/v1/auth/reauthenticate",
        json={"password": password, **answer},
        headers=bearer(token),
    )


class SoftPasskey:
    """A roaming authenticator in software: one credential, a sign count that grows."""

    def __init__(self, sign_count: int = 0) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = secrets.token_bytes(32)
        self.sign_count = sign_count

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps(
            {
                1: 2,  # kty: EC2
                3: -7,  # alg: ES256
                -1: 1,  # crv: P-256
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )

    @staticmethod
    def _client_data(kind: str, challenge: str, origin: str) -> bytes:
        return json.dumps(
            {"type": kind, "challenge": challenge, "origin": origin, "crossOrigin": False}
        ).encode()

    def register(
        self, options: dict[str, Any], origin: str = PUBLIC_URL, rp_id: str | None = None
    ) -> dict[str, Any]:
        """``navigator.credentials.create()`` answering ``options``, as ``toJSON()`` gives it;
        made for ``origin`` and ``rp_id`` (the options' by default)."""
        rp_id = rp_id or options["rp"]["id"]
        client_data = self._client_data("webauthn.create", options["challenge"], origin)
        attested = (
            bytes(16)  # AAGUID: none
            + len(self.credential_id).to_bytes(2, "big")
            + self.credential_id
            + self._cose_key()
        )
        auth_data = (
            hashlib.sha256(rp_id.encode()).digest()
            + bytes([0x01 | 0x04 | 0x40])  # user present, verified, attested credential data
            + self.sign_count.to_bytes(4, "big")
            + attested
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "transports": ["usb"],
            },
            "clientExtensionResults": {},
        }

    def assert_(
        self,
        options: dict[str, Any],
        origin: str = PUBLIC_URL,
        rp_id: str | None = None,
        count_up: bool = True,
    ) -> dict[str, Any]:
        """``navigator.credentials.get()`` answering ``options``, as ``toJSON()`` gives it."""
        rp_id = rp_id or options["rpId"]
        if count_up:
            self.sign_count += 1
        client_data = self._client_data("webauthn.get", options["challenge"], origin)
        auth_data = (
            hashlib.sha256(rp_id.encode()).digest()
            + bytes([0x01 | 0x04])
            + self.sign_count.to_bytes(4, "big")
        )
        signature = self.key.sign(
            auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256())
        )
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": None,
            },
            "clientExtensionResults": {},
        }


async def add_passkey(
    api: Api, token: str, passkey: SoftPasskey, name: str = "YubiKey"
) -> dict[str, Any]:
    response = await api.client.post("/api/v1/auth/mfa/webauthn/options", headers=bearer(token))
    assert response.status == 200, await response.text()
    options = (await response.json())["data"]
    response = await api.client.post(
        "/api/v1/auth/mfa/webauthn",
        json={"name": name, "credential": passkey.register(options)},
        headers=bearer(token),
    )
    assert response.status == 201, await response.text()
    return (await response.json())["data"]


async def reauthenticated(api: Api, token: str, **answer: Any) -> str:
    """The new token of a reauthentication with the password (and ``answer``): what a client
    does after ``reauthentication_required``."""
    response = await reauthenticate(api, token, **answer)
    assert response.status == 200, await response.text()
    return (await response.json())["data"]["token"]
