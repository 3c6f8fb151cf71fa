"""Logging in with a second factor: the first step answers an ``mfa_token`` that is no session,
the second answers the session (aal 2); a token dies after 5 wrong answers, in 5 minutes, or when
a factor changes; wrong answers count in login throttling per account and per address."""

from __future__ import annotations

from typing import Any

import pytest

from service.config.readers import secret_keys
from service.domain import totp
from tests.support.api import PASSWORD, Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.mfa import (
    PUBLIC_URL,
    SECRETS_KEY,
    code_for,
    enable_totp,
    first_step,
    second_step,
)

EMAIL = "alice@example.com"


@pytest.fixture
async def mfa_api(make_api) -> Api:  # type: ignore[no-untyped-def]
    return await make_api(
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY), public_url=PUBLIC_URL
    )


def wrong(code: str) -> str:
    return str((int(code) + 500_000) % 1_000_000).zfill(6)


async def audit_types(api: Api, token: str) -> list[dict[str, Any]]:
    response = await api.client.get("/api/v1/audit-events", headers=bearer(token))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]["events"]


async def test_the_first_step_answers_an_mfa_token_and_no_session(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    await enable_totp(mfa_api, token, clock)
    step = await first_step(mfa_api, EMAIL)
    assert set(step) == {"mfa_required", "mfa_token", "methods", "expires_at"}
    assert step["methods"] == ["totp", "recovery_code"]
    assert step["mfa_token"].startswith("fhm_")


async def test_an_mfa_token_is_not_a_session_anywhere(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    await enable_totp(mfa_api, token, clock)
    mfa_token = (await first_step(mfa_api, EMAIL))["mfa_token"]
    secret_part = mfa_token.split(".")[0]
    for sent in (mfa_token, secret_part):
        for path in ("/api/v1/auth/session", "/api/v1/keys", "/api/v1/files"):
            response = await mfa_api.client.get(path, headers=bearer(sent))
            assert response.status == 401, (path, await response.text())
        verify = await mfa_api.client.get(
            "/api/v1/auth/verify",
            headers={**bearer(sent), "X-Required-Permission": "files.read"},
        )
        assert verify.status == 401
        response = await mfa_api.client.get("/api/v1/files", headers={"X-API-Key": sent})
        assert response.status == 401


async def test_the_second_step_answers_the_login_and_the_session_shows_aal_2(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, _ = await enable_totp(mfa_api, token, clock)
    step = await first_step(mfa_api, EMAIL)
    response = await second_step(mfa_api, step["mfa_token"], code=code_for(secret, clock))
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert set(data) == {"user", "token", "expires_at", "absolute_expires_at"}
    session = await mfa_api.client.get("/api/v1/auth/session", headers=bearer(data["token"]))
    shown = (await session.json())["data"]
    assert shown["aal"] == 2 and shown["authenticated_recently"] is True
    listed = await mfa_api.client.get("/api/v1/auth/sessions", headers=bearer(data["token"]))
    current = [s for s in (await listed.json())["data"]["sessions"] if s["current"]]
    assert current[0]["aal"] == 2
    assert current[0]["authenticated_at"] == shown["authenticated_at"]
    # A session opened by the password alone says so.
    old = await mfa_api.client.get("/api/v1/auth/session", headers=bearer(token))
    assert (await old.json())["data"]["aal"] == 1
    # The token is spent by the right answer.
    clock.advance(seconds=totp.STEP_SECONDS)
    again = await second_step(mfa_api, step["mfa_token"], code=code_for(secret, clock))
    await assert_error(again, 401, "mfa_token_invalid")


async def test_five_wrong_answers_kill_the_mfa_token(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, _ = await enable_totp(mfa_api, token, clock)
    step = await first_step(mfa_api, EMAIL)
    right = code_for(secret, clock)
    for left in (4, 3, 2, 1, 0):
        body = await assert_error(
            await second_step(mfa_api, step["mfa_token"], code=wrong(right)),
            401,
            "mfa_code_invalid",
        )
        assert body["details"] == {"attempts_left": left}
    await assert_error(
        await second_step(mfa_api, step["mfa_token"], code=right), 401, "mfa_token_invalid"
    )


async def test_an_mfa_token_expires_after_five_minutes(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, _ = await enable_totp(mfa_api, token, clock)
    step = await first_step(mfa_api, EMAIL)
    clock.advance(seconds=301)
    response = await second_step(mfa_api, step["mfa_token"], code=code_for(secret, clock))
    await assert_error(response, 401, "mfa_token_invalid")


async def test_a_forged_or_foreign_mfa_token_is_refused(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, _ = await enable_totp(mfa_api, token, clock)
    bob = await mfa_api.user_with_session("bob@example.com")
    await enable_totp(mfa_api, bob, clock)
    bobs = (await first_step(mfa_api, "bob@example.com"))["mfa_token"]
    alices_id = (await first_step(mfa_api, EMAIL))["mfa_token"].split(".")[1]
    # Bob's token pointed at Alice's account: no such step there.
    swapped = f"{bobs.split('.')[0]}.{alices_id}"
    for sent in (swapped, "fhm_nonsense.usr_x", "x" * 50):
        response = await second_step(mfa_api, sent, code=code_for(secret, clock))
        await assert_error(response, 401, "mfa_token_invalid")


async def test_wrong_answers_count_in_the_accounts_login_throttling(
    make_api, clock: FakeClock
) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY),
        login_failures_per_email=3,
        login_failures_per_address=1000,
    )
    token = await api.user_with_session(EMAIL)
    secret, _ = await enable_totp(api, token, clock)
    right = code_for(secret, clock)
    # Two tokens, so the 5 answers of one are not what stops the guessing.
    for _ in range(3):
        step = await first_step(api, EMAIL)
        await assert_error(
            await second_step(api, step["mfa_token"], code=wrong(right)), 401, "mfa_code_invalid"
        )
    # The account is throttled now: even the right code, even a right password, is refused.
    step_response = await api.client.post(
        "/api/v1/auth/login", json={"email": EMAIL, "password": PASSWORD}
    )
    await assert_error(step_response, 429, "login_throttled")


async def test_wrong_answers_count_in_the_addresss_login_throttling(
    make_api, clock: FakeClock
) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY),
        login_failures_per_email=1000,
        login_failures_per_address=4,
    )
    steps = []
    for name in ("a", "b"):
        email = f"{name}@example.com"
        token = await api.user_with_session(email)
        secret, _ = await enable_totp(api, token, clock)
        steps.append((await first_step(api, email), code_for(secret, clock)))
    for step, right in steps * 2:
        await assert_error(
            await second_step(api, step["mfa_token"], code=wrong(right)), 401, "mfa_code_invalid"
        )
    step, right = steps[0]
    await assert_error(
        await second_step(api, step["mfa_token"], code=right), 429, "login_throttled"
    )


async def test_a_right_password_alone_does_not_clear_the_accounts_failures(
    make_api, clock: FakeClock
) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY),
        login_failures_per_email=2,
        login_failures_per_address=1000,
    )
    token = await api.user_with_session(EMAIL)
    secret, _ = await enable_totp(api, token, clock)
    right = code_for(secret, clock)
    step = await first_step(api, EMAIL)
    await assert_error(
        await second_step(api, step["mfa_token"], code=wrong(right)), 401, "mfa_code_invalid"
    )
    await first_step(api, EMAIL)  # the right password: the failure above stays counted
    await assert_error(
        await second_step(api, step["mfa_token"], code=wrong(right)), 401, "mfa_code_invalid"
    )
    await assert_error(
        await second_step(api, step["mfa_token"], code=right), 429, "login_throttled"
    )


async def test_a_factor_change_kills_a_pending_second_step(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, _ = await enable_totp(mfa_api, token, clock)
    step = await first_step(mfa_api, EMAIL)
    response = await mfa_api.client.post("/api/v1/auth/mfa/recovery-codes", headers=bearer(token))
    assert response.status == 201
    answer = await second_step(mfa_api, step["mfa_token"], code=code_for(secret, clock))
    await assert_error(answer, 401, "mfa_token_invalid")


async def test_logins_with_a_second_factor_are_audited_with_the_method(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, codes = await enable_totp(mfa_api, token, clock)
    step = await first_step(mfa_api, EMAIL)
    right = code_for(secret, clock)
    await second_step(mfa_api, step["mfa_token"], code=wrong(right))
    response = await second_step(mfa_api, step["mfa_token"], recovery_code=codes[3])
    fresh = (await response.json())["data"]["token"]
    events = await audit_types(mfa_api, fresh)
    kinds = [event["type"] for event in events]
    assert kinds[:3] == ["login.succeeded", "mfa.recovery_code_used", "login.failed"]
    assert events[0]["changes"] == {"method": "recovery_code", "aal": 2}
    assert events[2]["changes"] == {"method": "totp"}
    assert "mfa.totp_enabled" in kinds


async def test_accounts_without_a_factor_log_in_as_before(mfa_api: Api) -> None:
    await mfa_api.create_user(EMAIL)
    response = await mfa_api.client.post(
        "/api/v1/auth/login", json={"email": EMAIL, "password": PASSWORD}
    )
    data = (await response.json())["data"]
    assert set(data) == {"user", "token", "expires_at", "absolute_expires_at"}
