"""What every second-factor change does besides itself: it ends every other session of the
account (their tokens refused from the next request), keeps the caller's, and is one audit event
that holds no secret."""

from __future__ import annotations

import pytest

from service.config.readers import secret_keys
from service.domain import totp
from tests.support.api import Api, bearer
from tests.support.clock import FakeClock
from tests.support.mfa import (
    PUBLIC_URL,
    SECRETS_KEY,
    SoftPasskey,
    add_passkey,
    code_for,
    enable_totp,
    first_step,
    second_step,
    start_totp,
)

EMAIL = "alice@example.com"


@pytest.fixture
async def mfa_api(make_api) -> Api:  # type: ignore[no-untyped-def]
    return await make_api(
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY), public_url=PUBLIC_URL
    )


async def alive(api: Api, token: str) -> bool:
    response = await api.client.get("/api/v1/auth/session", headers=bearer(token))
    return response.status == 200


async def test_every_factor_change_ends_the_other_sessions_and_keeps_the_callers(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    bystander = await mfa_api.login(EMAIL)
    secret, _ = await enable_totp(mfa_api, token, clock)
    assert not await alive(mfa_api, bystander) and await alive(mfa_api, token)

    async def with_code() -> str:
        """Another device's session, opened with the password and a fresh code."""
        step = await first_step(mfa_api, EMAIL)
        clock.advance(seconds=totp.STEP_SECONDS)
        response = await second_step(mfa_api, step["mfa_token"], code=code_for(secret, clock))
        assert response.status == 200, await response.text()
        return (await response.json())["data"]["token"]

    bystander = await with_code()
    response = await mfa_api.client.post("/api/v1/auth/mfa/recovery-codes", headers=bearer(token))
    assert (await response.json())["data"]["sessions_ended"] == 1
    assert not await alive(mfa_api, bystander) and await alive(mfa_api, token)

    bystander = await with_code()
    added = await add_passkey(mfa_api, token, SoftPasskey())
    assert added["sessions_ended"] == 1
    assert not await alive(mfa_api, bystander) and await alive(mfa_api, token)

    bystander = await with_code()
    response = await mfa_api.client.delete(
        f"/api/v1/auth/mfa/webauthn/{added['id']}", headers=bearer(token)
    )
    assert (await response.json())["data"]["sessions_ended"] == 1
    assert not await alive(mfa_api, bystander) and await alive(mfa_api, token)

    bystander = await with_code()
    response = await mfa_api.client.delete("/api/v1/auth/mfa/totp", headers=bearer(token))
    assert (await response.json())["data"]["sessions_ended"] == 1
    assert not await alive(mfa_api, bystander) and await alive(mfa_api, token)


async def test_starting_an_enrolment_changes_nothing_and_ends_nothing(mfa_api: Api) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    bystander = await mfa_api.login(EMAIL)
    await start_totp(mfa_api, token)
    assert await alive(mfa_api, bystander)


async def test_each_factor_change_is_one_audit_event_without_a_secret(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, codes = await enable_totp(mfa_api, token, clock)
    await mfa_api.client.post("/api/v1/auth/mfa/recovery-codes", headers=bearer(token))
    added = await add_passkey(mfa_api, token, SoftPasskey(), name="Laptop")
    await mfa_api.client.delete(f"/api/v1/auth/mfa/webauthn/{added['id']}", headers=bearer(token))
    await mfa_api.client.delete("/api/v1/auth/mfa/totp", headers=bearer(token))
    response = await mfa_api.client.get("/api/v1/audit-events", headers=bearer(token))
    events = (await response.json())["data"]["events"]
    kinds = [event["type"] for event in events if event["type"].startswith("mfa.")]
    assert kinds == [
        "mfa.totp_disabled",
        "mfa.webauthn_removed",
        "mfa.webauthn_added",
        "mfa.recovery_codes_regenerated",
        "mfa.totp_enabled",
    ]
    passkey_events = [e for e in events if e["type"].startswith("mfa.webauthn")]
    assert {e["target"]["name"] for e in passkey_events} == {"Laptop"}
    text = await response.text()
    assert secret not in text
    assert not any(code in text or code.replace("-", "") in text for code in codes)
