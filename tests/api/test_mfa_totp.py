"""TOTP as a second factor: enrolling (pending until confirmed), the secret encrypted at rest
with the operator's key (and TOTP failing closed without one), codes accepted once, recovery
codes hashed, single-use and shown once."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis as redis_sync

from service.config.readers import secret_keys
from service.domain import totp
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.mfa import (
    OTHER_SECRETS_KEY,
    PUBLIC_URL,
    SECRETS_KEY,
    code_for,
    enable_totp,
    first_step,
    reauthenticate,
    second_step,
    start_totp,
)

EMAIL = "alice@example.com"


def keys(*raw: str) -> Any:
    return secret_keys("FILEHOST_SECRETS_KEY", ",".join(raw))


@pytest.fixture
async def mfa_api(make_api) -> Api:  # type: ignore[no-untyped-def]
    return await make_api(secrets_key=keys(SECRETS_KEY), public_url=PUBLIC_URL)


async def mfa_state(api: Api, token: str) -> dict[str, Any]:
    response = await api.client.get("/api/v1/auth/mfa", headers=bearer(token))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def test_enrolment_answers_secret_uri_and_qr_svg_and_does_nothing_until_confirmed(
    mfa_api: Api,
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    started = await start_totp(mfa_api, token)
    assert re.fullmatch(r"[A-Z2-7]{32}", started["secret"])
    assert started["otpauth_uri"].startswith("otpauth://totp/")
    assert f"secret={started['secret']}" in started["otpauth_uri"]
    svg = started["qr_svg"]
    assert svg.startswith("<svg") and "<script" not in svg and "data:" not in svg
    state = await mfa_state(mfa_api, token)
    assert state["totp"]["enabled"] is False
    assert state["totp"]["pending_expires_at"] == started["expires_at"]
    # Never confirmed: the login is unchanged.
    login = await mfa_api.client.post(
        "/api/v1/auth/login", json={"email": EMAIL, "password": "correct horse battery staple"}
    )
    assert "token" in (await login.json())["data"]


async def test_confirming_with_a_wrong_code_is_400_and_a_right_one_enables_with_ten_codes(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret = (await start_totp(mfa_api, token))["secret"]
    wrong = str((int(code_for(secret, clock)) + 1) % 1_000_000).zfill(6)
    response = await mfa_api.client.post(
        "/api/v1/auth/mfa/totp/confirm", json={"code": wrong}, headers=bearer(token)
    )
    await assert_error(response, 400, "mfa_code_invalid")
    assert "WWW-Authenticate" not in response.headers
    response = await mfa_api.client.post(
        "/api/v1/auth/mfa/totp/confirm",
        json={"code": code_for(secret, clock)},
        headers=bearer(token),
    )
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert len(data["recovery_codes"]) == 10
    assert len(set(data["recovery_codes"])) == 10
    assert all(re.fullmatch(r"([A-Z2-7]{4}-){3}[A-Z2-7]{4}", c) for c in data["recovery_codes"])
    state = await mfa_state(mfa_api, token)
    assert state["totp"]["enabled"] is True and state["recovery_codes_left"] == 10


async def test_an_enrolment_expires_after_ten_minutes(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret = (await start_totp(mfa_api, token))["secret"]
    clock.advance(seconds=601)
    # The session's authentication is as old: a sensitive operation needs it again first.
    reauthenticated = await reauthenticate(mfa_api, token)
    token = (await reauthenticated.json())["data"]["token"]
    response = await mfa_api.client.post(
        "/api/v1/auth/mfa/totp/confirm",
        json={"code": code_for(secret, clock)},
        headers=bearer(token),
    )
    await assert_error(response, 404, "totp_enrollment_not_found")


async def test_the_secret_is_stored_encrypted_and_recovery_codes_only_as_hashes(
    mfa_api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, codes = await enable_totp(mfa_api, token, clock)
    everything = []
    for key in redis_client.scan_iter("*"):
        kind = redis_client.type(key)
        if kind == "hash":
            everything.append(str(redis_client.hgetall(key)))
        elif kind == "set":
            everything.append(str(redis_client.smembers(key)))
        elif kind == "string":
            everything.append(str(redis_client.get(key)))
        elif kind == "zset":
            everything.append(str(redis_client.zrange(key, 0, -1)))
    dump = "\n".join(everything)
    assert secret not in dump
    assert secret.lower() not in dump
    for code in codes:
        assert code not in dump and code.replace("-", "") not in dump


async def test_a_code_is_accepted_once_and_an_older_step_never_after(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, _ = await enable_totp(mfa_api, token, clock)
    code = code_for(secret, clock)
    step = await first_step(mfa_api, EMAIL)
    assert (await second_step(mfa_api, step["mfa_token"], code=code)).status == 200
    again = await first_step(mfa_api, EMAIL)
    await assert_error(
        await second_step(mfa_api, again["mfa_token"], code=code), 401, "mfa_code_invalid"
    )
    # The step before the one used is within the window, but older: refused too.
    await assert_error(
        await second_step(mfa_api, again["mfa_token"], code=code_for(secret, clock, -1)),
        401,
        "mfa_code_invalid",
    )
    # The next step's code is fine.
    clock.advance(seconds=totp.STEP_SECONDS)
    ok = await second_step(mfa_api, again["mfa_token"], code=code_for(secret, clock))
    assert ok.status == 200, await ok.text()


async def test_the_confirming_code_cannot_log_in(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret = (await start_totp(mfa_api, token))["secret"]
    code = code_for(secret, clock)
    response = await mfa_api.client.post(
        "/api/v1/auth/mfa/totp/confirm", json={"code": code}, headers=bearer(token)
    )
    assert response.status == 200
    step = await first_step(mfa_api, EMAIL)
    await assert_error(
        await second_step(mfa_api, step["mfa_token"], code=code), 401, "mfa_code_invalid"
    )


async def test_a_recovery_code_works_once_in_any_case_and_lowers_the_count(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    _, codes = await enable_totp(mfa_api, token, clock)
    typed = codes[0].lower().replace("-", " ")
    step = await first_step(mfa_api, EMAIL)
    response = await second_step(mfa_api, step["mfa_token"], recovery_code=typed)
    assert response.status == 200, await response.text()
    fresh = (await response.json())["data"]["token"]
    assert (await mfa_state(mfa_api, fresh))["recovery_codes_left"] == 9
    step = await first_step(mfa_api, EMAIL)
    await assert_error(
        await second_step(mfa_api, step["mfa_token"], recovery_code=codes[0]),
        401,
        "mfa_code_invalid",
    )


async def test_regenerated_recovery_codes_replace_the_old_ones(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    _, old = await enable_totp(mfa_api, token, clock)
    response = await mfa_api.client.post("/api/v1/auth/mfa/recovery-codes", headers=bearer(token))
    assert response.status == 201, await response.text()
    new = (await response.json())["data"]["recovery_codes"]
    assert len(new) == 10 and not set(new) & set(old)
    step = await first_step(mfa_api, EMAIL)
    await assert_error(
        await second_step(mfa_api, step["mfa_token"], recovery_code=old[1]),
        401,
        "mfa_code_invalid",
    )
    ok = await second_step(mfa_api, step["mfa_token"], recovery_code=new[1])
    assert ok.status == 200, await ok.text()


async def test_recovery_codes_need_a_factor(mfa_api: Api) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    response = await mfa_api.client.post("/api/v1/auth/mfa/recovery-codes", headers=bearer(token))
    await assert_error(response, 409, "mfa_not_enabled")


async def test_disabling_totp_restores_the_one_step_login_and_drops_recovery_codes(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    await enable_totp(mfa_api, token, clock)
    response = await mfa_api.client.delete("/api/v1/auth/mfa/totp", headers=bearer(token))
    assert response.status == 200, await response.text()
    state = await mfa_state(mfa_api, token)
    assert state["totp"]["enabled"] is False and state["recovery_codes_left"] == 0
    assert await mfa_api.login(EMAIL)
    again = await mfa_api.client.delete("/api/v1/auth/mfa/totp", headers=bearer(token))
    await assert_error(again, 404, "totp_not_enabled")


async def test_enrolling_twice_is_409(mfa_api: Api, clock: FakeClock) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    await enable_totp(mfa_api, token, clock)
    response = await mfa_api.client.post("/api/v1/auth/mfa/totp", headers=bearer(token))
    await assert_error(response, 409, "totp_already_enabled")


# -- the operator's key ---------------------------------------------------------------------


async def test_without_a_secrets_key_totp_fails_closed_and_the_rest_works(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    state = await mfa_state(api, token)
    assert state["available"] == {"totp": False, "webauthn": False}
    assert state["setup"]["secrets_key"] == "missing"
    response = await api.client.post("/api/v1/auth/mfa/totp", headers=bearer(token))
    error = await assert_error(response, 409, "mfa_not_configured")
    assert error["details"] == {"setting": "FILEHOST_SECRETS_KEY"}
    assert (await api.create_key(token))["id"]
    assert await api.login(EMAIL)


async def test_a_secret_sealed_with_a_dropped_key_fails_closed_at_login(
    make_api, clock: FakeClock
) -> None:  # type: ignore[no-untyped-def]
    first = await make_api(secrets_key=keys(SECRETS_KEY))
    token = await first.user_with_session(EMAIL)
    secret, codes = await enable_totp(first, token, clock)
    # Rotated properly: the new key first, the old one kept.
    rotated = await make_api(secrets_key=keys(OTHER_SECRETS_KEY, SECRETS_KEY))
    step = await first_step(rotated, EMAIL)
    ok = await second_step(rotated, step["mfa_token"], code=code_for(secret, clock))
    assert ok.status == 200, await ok.text()
    # The old key dropped too early: no code is accepted, and nothing is stored in clear.
    dropped = await make_api(secrets_key=keys(OTHER_SECRETS_KEY))
    step = await first_step(dropped, EMAIL)
    clock.advance(seconds=totp.STEP_SECONDS)
    refused = await second_step(dropped, step["mfa_token"], code=code_for(secret, clock))
    await assert_error(refused, 503, "mfa_unavailable")
    # A recovery code still opens the account.
    ok = await second_step(dropped, step["mfa_token"], recovery_code=codes[0])
    assert ok.status == 200, await ok.text()
