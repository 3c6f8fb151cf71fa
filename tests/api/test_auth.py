"""Sessions: POST /api/v1/auth/login, POST /api/v1/auth/logout, GET /api/v1/auth/session, and how
the Authorization and X-API-Key headers are read.

Each test drives the service over HTTP as a client would, against the real Redis server of the
fixtures; time moves only through the injected ``clock``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis as redis_sync

import service.auth.passwords
from service.app import STORE
from service.domain import credentials
from service.store.fields import SESSION_EXPIRED_GRACE_MS
from tests.support.api import PASSWORD, SPEC_PERMISSIONS, Api, assert_error, bearer
from tests.support.clock import FakeClock, at, parse_iso
from tests.support.keys import sha256_hex

LOGIN = "/api/v1/auth/login"
LOGOUT = "/api/v1/auth/logout"
SESSION = "/api/v1/auth/session"
EMAIL = "alice@example.com"
HOUR_MS = 3_600_000


def with_bad_checksum(secret: str) -> str:
    last = secret[-1]
    return secret[:-1] + ("A" if last != "A" else "B")


async def post_login(api: Api, body: Any) -> Any:
    return await api.client.post(LOGIN, json=body)


async def session_status(api: Api, token: str) -> int:
    response = await api.client.get(SESSION, headers=bearer(token))
    return response.status


async def wait_for_idle_deadline_change(
    redis_client: redis_sync.Redis, token: str, before: str | None
) -> str:
    """The background renewal write lands a few loop turns after the response; poll for it."""
    key = f"fh:session:{sha256_hex(token)}"
    for _ in range(200):
        current = redis_client.hget(key, "i")
        if current != before:
            assert current is not None
            return current
        await asyncio.sleep(0.005)
    raise AssertionError(f"the session's idle deadline was never renewed (still {before})")


# -- login -------------------------------------------------------------------------------------


async def test_login_returns_user_token_and_both_deadlines(api: Api, clock: FakeClock) -> None:
    user = await api.create_user(EMAIL)
    now = at(clock)

    response = await post_login(api, {"email": EMAIL, "password": PASSWORD})

    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["success"] is True
    data = body["data"]
    assert set(data) == {"user", "token", "expires_at", "absolute_expires_at"}
    assert data["user"] == {"id": user.id, "email": EMAIL}
    assert isinstance(data["token"], str) and data["token"].startswith("fhs_")
    assert (parse_iso(data["expires_at"]) - now).total_seconds() == 86400
    assert (parse_iso(data["absolute_expires_at"]) - now).total_seconds() == 7 * 86400


async def test_each_login_opens_a_new_session_with_a_distinct_token(api: Api) -> None:
    await api.create_user(EMAIL)
    first = await api.login(EMAIL)
    second = await api.login(EMAIL)
    assert first != second
    assert await session_status(api, first) == 200
    assert await session_status(api, second) == 200


@pytest.mark.parametrize(
    "typed_email",
    ["ALICE@EXAMPLE.COM", "Alice@Example.com", "  alice@example.com  ", " ALICE@example.COM\t"],
)
async def test_login_email_matches_case_insensitively_and_ignores_surrounding_spaces(
    api: Api, typed_email: str
) -> None:
    user = await api.create_user(EMAIL)
    response = await post_login(api, {"email": typed_email, "password": PASSWORD})
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert data["user"] == {"id": user.id, "email": EMAIL}


async def test_login_password_is_case_sensitive(api: Api) -> None:
    await api.create_user(EMAIL)
    response = await post_login(api, {"email": EMAIL, "password": PASSWORD.upper()})
    await assert_error(response, 401, "invalid_credentials")


async def test_wrong_password_and_unknown_email_get_the_same_refusal(api: Api) -> None:
    await api.create_user(EMAIL)

    wrong_password = await post_login(api, {"email": EMAIL, "password": "not the password"})
    unknown_email = await post_login(api, {"email": "nobody@example.com", "password": PASSWORD})

    first = await assert_error(wrong_password, 401, "invalid_credentials")
    second = await assert_error(unknown_email, 401, "invalid_credentials")
    assert first == second
    assert "token" not in first
    assert wrong_password.headers.get("WWW-Authenticate")
    assert wrong_password.headers.get("WWW-Authenticate") == unknown_email.headers.get(
        "WWW-Authenticate"
    )
    assert wrong_password.headers["WWW-Authenticate"].lower().startswith("bearer")


async def test_failed_login_creates_no_session(api: Api, redis_client: redis_sync.Redis) -> None:
    await api.create_user(EMAIL)
    response = await post_login(api, {"email": EMAIL, "password": "not the password"})
    await assert_error(response, 401, "invalid_credentials")
    assert redis_client.keys("fh:session:*") == []


@pytest.mark.parametrize(
    ("body", "bad_fields"),
    [
        ({"password": PASSWORD}, {"email"}),
        ({"email": EMAIL}, {"password"}),
        ({}, {"email", "password"}),
        ({"email": None, "password": PASSWORD}, {"email"}),
        ({"email": 42, "password": PASSWORD}, {"email"}),
        ({"email": ["alice@example.com"], "password": PASSWORD}, {"email"}),
        ({"email": EMAIL, "password": 12345678}, {"password"}),
        ({"email": EMAIL, "password": True}, {"password"}),
        ({"email": EMAIL, "password": {"value": PASSWORD}}, {"password"}),
        ({"email": "", "password": PASSWORD}, {"email"}),
        ({"email": "   ", "password": PASSWORD}, {"email"}),
        ({"email": EMAIL, "password": ""}, {"password"}),
        ({"email": EMAIL, "password": PASSWORD, "remember_me": True}, {"remember_me"}),
        ({"email": EMAIL, "password": "x" * 1025}, {"password"}),
        ({"email": "a" * 250 + "@example.com", "password": PASSWORD}, {"email"}),
    ],
    ids=[
        "missing-email",
        "missing-password",
        "empty-object",
        "null-email",
        "number-email",
        "list-email",
        "number-password",
        "bool-password",
        "object-password",
        "empty-email",
        "blank-email",
        "empty-password",
        "unknown-field",
        "password-over-1024",
        "email-over-254",
    ],
)
async def test_login_with_invalid_fields_is_refused_with_validation_failed(
    api: Api, body: dict[str, Any], bad_fields: set[str]
) -> None:
    await api.create_user(EMAIL)
    error = await assert_error(await post_login(api, body), 400, "validation_failed")
    assert set(error["details"]) == bad_fields


async def test_login_validation_never_echoes_the_password(api: Api) -> None:
    secret = "s3cret-" + "x" * 1100
    response = await post_login(api, {"email": 7, "password": secret})
    await assert_error(response, 400, "validation_failed")
    assert "s3cret-" not in await response.text()


async def test_password_of_exactly_1024_characters_is_checked_not_rejected(api: Api) -> None:
    long_password = "p" * 1024
    await api.create_user(EMAIL, long_password)
    response = await post_login(api, {"email": EMAIL, "password": long_password})
    assert response.status == 200, await response.text()
    wrong = await post_login(api, {"email": EMAIL, "password": "p" * 1023 + "q"})
    await assert_error(wrong, 401, "invalid_credentials")


async def test_session_token_is_stored_only_as_a_digest(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    digest = sha256_hex(token)
    assert await session_status(api, token) == 200  # stored, and findable

    stored: list[str] = []
    for key in redis_client.scan_iter("*"):
        stored.append(key)
        kind = redis_client.type(key)
        if kind == "hash":
            for field, value in redis_client.hgetall(key).items():
                stored.extend([field, value])
        elif kind == "zset":
            stored.extend(redis_client.zrange(key, 0, -1))
        elif kind == "string":
            value = redis_client.get(key)
            if value is not None:  # gone since its type was read, as below
                stored.append(value)
        elif kind == "none":
            continue  # gone since the scan: a rate bucket lives milliseconds after one request
        else:
            raise AssertionError(f"unexpected key type {kind} for {key}")

    assert f"fh:session:{digest}" in stored
    random_part = token[len("fhs_") : -6]
    assert not [item for item in stored if token in item or random_part in item]


# -- logout ------------------------------------------------------------------------------------


async def test_logout_ends_that_session_and_the_token_is_refused_afterwards(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session(EMAIL)
    now = at(clock)

    response = await api.client.post(LOGOUT, headers=bearer(token))

    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["success"] is True
    assert parse_iso(body["data"]["logged_out_at"]) == now
    assert redis_client.exists(f"fh:session:{sha256_hex(token)}") == 0
    await assert_error(await api.client.get(SESSION, headers=bearer(token)), 401, "invalid_session")
    await assert_error(await api.files(token=token), 401, "invalid_session")
    await assert_error(await api.client.post(LOGOUT, headers=bearer(token)), 401, "invalid_session")


async def test_logout_leaves_the_users_other_sessions_working(api: Api) -> None:
    await api.create_user(EMAIL)
    laptop = await api.login(EMAIL)
    phone = await api.login(EMAIL)

    response = await api.client.post(LOGOUT, headers=bearer(laptop))
    assert response.status == 200

    assert await session_status(api, laptop) == 401
    assert await session_status(api, phone) == 200


async def test_logout_with_an_api_key_is_refused_with_session_required(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=SPEC_PERMISSIONS)

    response = await api.client.post(LOGOUT, headers={"X-API-Key": key["secret_key"]})

    await assert_error(response, 403, "session_required")
    # Nothing was logged out: the session and the key both still work.
    assert await session_status(api, token) == 200
    assert (await api.files(key=key["secret_key"])).status == 200


async def test_logout_without_a_credential_is_refused(api: Api) -> None:
    await assert_error(await api.client.post(LOGOUT), 401, "credential_missing")


# -- current session ---------------------------------------------------------------------------


async def test_session_endpoint_with_a_session_shows_the_user_and_all_ten_permissions(
    api: Api, clock: FakeClock
) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)

    response = await api.client.get(SESSION, headers=bearer(token))

    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert data["user"] == {"id": user.id, "email": EMAIL}
    assert data["credential"] == {"type": "session"}
    assert data["permissions"] == SPEC_PERMISSIONS
    assert (parse_iso(data["expires_at"]) - at(clock)).total_seconds() == 86400


async def test_session_endpoint_with_an_api_key_shows_exactly_the_keys_permissions(
    api: Api,
) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    key = await api.create_key(token, permissions=["folders.read", "files.read", "keys.read"])

    response = await api.client.get(SESSION, headers={"X-API-Key": key["secret_key"]})

    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert data["user"] == {"id": user.id, "email": EMAIL}
    assert data["credential"] == {"type": "api_key", "key_id": key["id"]}
    assert data["permissions"] == ["files.read", "folders.read", "keys.read"]
    assert data["expires_at"] == key["expires_at"]


async def test_session_endpoint_shows_each_user_their_own_account(api: Api) -> None:
    alice = await api.create_user("alice@example.com")
    bob = await api.create_user("bob@example.com")
    alice_token = await api.login("alice@example.com")
    bob_token = await api.login("bob@example.com")

    alice_view = await (await api.client.get(SESSION, headers=bearer(alice_token))).json()
    bob_view = await (await api.client.get(SESSION, headers=bearer(bob_token))).json()

    assert alice_view["data"]["user"] == {"id": alice.id, "email": "alice@example.com"}
    assert bob_view["data"]["user"] == {"id": bob.id, "email": "bob@example.com"}


# -- session lifetime --------------------------------------------------------------------------


async def test_session_unused_for_the_idle_timeout_is_refused_as_expired(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session(EMAIL)

    clock.advance(hours=24)

    response = await api.client.get(SESSION, headers=bearer(token))
    error = await assert_error(response, 401, "session_expired")
    assert "WWW-Authenticate" in response.headers
    assert token not in error["message"]


async def test_session_unused_just_under_the_idle_timeout_still_works(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session(EMAIL)
    clock.advance(hours=23, seconds=3599)
    assert await session_status(api, token) == 200


async def test_session_used_every_23_hours_stays_valid_past_the_idle_timeout(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session(EMAIL)
    key = f"fh:session:{sha256_hex(token)}"
    idle = redis_client.hget(key, "i")
    assert idle is not None

    for _ in range(4):  # 92 hours in all, far past the 24 h idle timeout
        clock.advance(hours=23)
        assert await session_status(api, token) == 200
        renewed = await wait_for_idle_deadline_change(redis_client, token, idle)
        assert int(renewed) == clock.now_ms() + 24 * HOUR_MS
        idle = renewed

    # Renewal moved only the idle deadline; a full idle period without use still ends it.
    clock.advance(hours=24)
    await assert_error(await api.client.get(SESSION, headers=bearer(token)), 401, "session_expired")


async def test_concurrent_requests_due_for_renewal_write_it_once(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session(EMAIL)
    idle = redis_client.hget(f"fh:session:{sha256_hex(token)}", "i")
    clock.advance(hours=2)
    redis_client.config_resetstat()

    statuses = await asyncio.gather(*(session_status(api, token) for _ in range(30)))

    assert statuses == [200] * 30
    await wait_for_idle_deadline_change(redis_client, token, idle)
    await asyncio.sleep(0.1)  # any further renewal would have landed by now
    # The renewal script is the only PEXPIREAT on this path: one write, not one per request.
    assert redis_client.info("commandstats")["cmdstat_pexpireat"]["calls"] == 1


async def test_session_is_refused_after_the_absolute_maximum_even_when_used_regularly(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    await api.create_user(EMAIL)
    login = await post_login(api, {"email": EMAIL, "password": PASSWORD})
    data = (await login.json())["data"]
    token = data["token"]
    absolute_ms = int(redis_client.hget(f"fh:session:{sha256_hex(token)}", "a"))
    assert absolute_ms == clock.now_ms() + 7 * 24 * HOUR_MS
    idle = redis_client.hget(f"fh:session:{sha256_hex(token)}", "i")

    for _ in range(7):  # 161 h: still inside the 168 h maximum
        clock.advance(hours=23)
        assert await session_status(api, token) == 200
        idle = await wait_for_idle_deadline_change(redis_client, token, idle)

    # The last renewal was capped at the absolute deadline, not pushed 24 h further.
    assert int(idle) == absolute_ms

    clock.advance(hours=6, seconds=3599)  # one second before the maximum
    assert await session_status(api, token) == 200
    clock.advance(seconds=1)
    await assert_error(await api.client.get(SESSION, headers=bearer(token)), 401, "session_expired")


async def test_absolute_maximum_is_enforced_even_if_the_stored_idle_deadline_is_later(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    # E.g. a renewal written by a worker with a longer idle setting: the maximum still wins.
    token = await api.user_with_session(EMAIL)
    key = f"fh:session:{sha256_hex(token)}"
    absolute_ms = int(redis_client.hget(key, "a"))
    redis_client.hset(key, "i", absolute_ms + 30 * 24 * HOUR_MS)

    clock.advance(days=7)

    await assert_error(await api.client.get(SESSION, headers=bearer(token)), 401, "session_expired")


async def test_short_configured_lifetimes_are_enforced(
    make_api: Any, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(session_idle_seconds=600, session_max_seconds=1800)
    await api.create_user(EMAIL)
    login = await post_login(api, {"email": EMAIL, "password": PASSWORD})
    data = (await login.json())["data"]
    token = data["token"]
    start = at(clock)
    assert (parse_iso(data["expires_at"]) - start).total_seconds() == 600
    assert (parse_iso(data["absolute_expires_at"]) - start).total_seconds() == 1800

    idle = redis_client.hget(f"fh:session:{sha256_hex(token)}", "i")
    for _ in range(3):  # used every 9 minutes: 27 minutes, past the 10-minute idle timeout
        clock.advance(seconds=540)
        assert await session_status(api, token) == 200
        idle = await wait_for_idle_deadline_change(redis_client, token, idle)

    clock.advance(seconds=180)  # 30 minutes since login: the maximum
    await assert_error(await api.client.get(SESSION, headers=bearer(token)), 401, "session_expired")


async def test_idle_session_under_short_lifetime_expires_without_use(
    make_api: Any, clock: FakeClock
) -> None:
    api = await make_api(session_idle_seconds=600, session_max_seconds=1800)
    token = await api.user_with_session(EMAIL)
    clock.advance(seconds=599)
    assert await session_status(api, token) == 200
    # That use renewed the deadline to 599 + 600 s; one more full idle period ends it.
    clock.advance(seconds=600)
    assert await session_status(api, token) == 401


# -- Authorization and X-API-Key headers -------------------------------------------------------


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer", "bEaReR"])
async def test_bearer_scheme_is_accepted_in_any_case(api: Api, scheme: str) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers={"Authorization": f"{scheme} {token}"})
    assert response.status == 200, await response.text()


async def test_extra_spaces_between_scheme_and_token_are_accepted(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers={"Authorization": f"Bearer    {token}"})
    assert response.status == 200, await response.text()


@pytest.mark.parametrize(
    "value", ["Basic YWxpY2VAZXhhbXBsZS5jb206cGFzc3dvcmQ=", "Token abc", "Digest x=1"]
)
async def test_other_authorization_schemes_are_refused(api: Api, value: str) -> None:
    await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers={"Authorization": value})
    await assert_error(response, 401, "unsupported_auth_scheme")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_a_bare_token_without_scheme_is_refused(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers={"Authorization": token})
    await assert_error(response, 401, "unsupported_auth_scheme")


@pytest.mark.parametrize("value", ["Bearer", "Bearer ", "bearer    "])
async def test_bearer_without_a_token_is_refused(api: Api, value: str) -> None:
    await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers={"Authorization": value})
    await assert_error(response, 401, "invalid_session")
    assert "WWW-Authenticate" in response.headers


async def test_token_with_a_bad_checksum_is_refused(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers=bearer(with_bad_checksum(token)))
    await assert_error(response, 401, "invalid_session")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-1],
        lambda t: t[:20],
        lambda t: t + "A",
        lambda t: t.upper(),
        lambda t: t[:10] + "!" + t[11:],
    ],
    ids=["truncated-by-one", "truncated", "extended", "upper-cased", "bad-char"],
)
async def test_malformed_session_tokens_are_refused(api: Api, mangle: Any) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers=bearer(mangle(token)))
    error = await assert_error(response, 401, "invalid_session")
    assert token[4:20] not in error["message"]


async def test_well_formed_but_unknown_session_token_is_refused(api: Api) -> None:
    from service.domain.credentials import generate_session_token

    await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers=bearer(generate_session_token()))
    await assert_error(response, 401, "invalid_session")


async def test_an_api_key_sent_as_a_bearer_token_is_that_api_key(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token)
    response = await api.client.get(SESSION, headers=bearer(key["secret_key"]))
    assert response.status == 200, await response.text()
    assert (await response.json())["data"]["credential"] == {"type": "api_key", "key_id": key["id"]}
    # A session token given the key's prefix is read as a key, and refused as a malformed one.
    mangled = await api.client.get(SESSION, headers=bearer("fhk_" + token[4:]))
    error = await assert_error(mangled, 401, "invalid_api_key")
    assert token[4:20] not in error["message"]


async def test_a_session_token_sent_as_an_api_key_is_refused(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get(SESSION, headers={"X-API-Key": token})
    await assert_error(response, 401, "invalid_api_key")


async def test_sending_both_an_api_key_and_a_session_is_refused_as_ambiguous(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token)
    response = await api.client.get(
        SESSION, headers={"X-API-Key": key["secret_key"], "Authorization": f"Bearer {token}"}
    )
    await assert_error(response, 400, "ambiguous_credentials")


async def test_the_api_key_header_sent_twice_is_refused(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token)
    headers = [("X-API-Key", key["secret_key"]), ("X-API-Key", key["secret_key"])]
    response = await api.client.get(SESSION, headers=headers)
    await assert_error(response, 400, "duplicate_header")


async def test_the_authorization_header_sent_twice_is_refused(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    headers = [("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")]
    response = await api.client.get(SESSION, headers=headers)
    await assert_error(response, 400, "duplicate_header")


async def test_no_credential_is_refused_with_credential_missing(api: Api) -> None:
    response = await api.client.get(SESSION)
    await assert_error(response, 401, "credential_missing")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


# -- an expired session is answered as expired, in real time -------------------------------------


def real_now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_a_session_past_its_deadline_in_real_time_is_answered_session_expired(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    """Redis's own clock passes the deadline too: the entry must still be there (for a grace),
    so the answer is session_expired, never invalid_session, and never a pass."""
    user = await api.create_user(EMAIL)
    store = api.app[STORE]
    idle_token, absolute_token, renewed = (credentials.generate_session_token() for _ in range(3))
    now = real_now_ms()
    await store.sessions.add(credentials.digest(idle_token), user.id, now, now + 800, now + HOUR_MS)
    await store.sessions.add(credentials.digest(absolute_token), user.id, now, now + 800, now + 800)
    await store.sessions.add(
        credentials.digest(renewed), user.id, now, now + HOUR_MS, now + HOUR_MS
    )
    # The authenticator's renewal (expire_at = the new idle deadline), shortened to 800 ms.
    await store.sessions.renew(credentials.digest(renewed), now + 800, now + 800)

    await asyncio.sleep(1.2)
    clock.catch_up()

    for token in (idle_token, absolute_token, renewed):
        response = await api.client.get(SESSION, headers=bearer(token))
        await assert_error(response, 401, "session_expired")
        # Kept at most the documented grace past the deadline, then removed by Redis.
        ttl = redis_client.pttl(f"fh:session:{sha256_hex(token)}")
        assert 0 < ttl < SESSION_EXPIRED_GRACE_MS, ttl


async def test_a_login_whose_user_is_deleted_during_the_password_check_gets_no_session(
    api: Api, monkeypatch: pytest.MonkeyPatch, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    real = service.auth.passwords._check_sync

    def check_while_the_user_is_deleted(password: str, password_hash: str) -> bool:
        redis_client.delete(f"fh:{{{user.id}}}:user")  # a deletion's first step
        return real(password, password_hash)

    monkeypatch.setattr(service.auth.passwords, "_check_sync", check_while_the_user_is_deleted)
    response = await post_login(api, {"email": EMAIL, "password": PASSWORD})

    await assert_error(response, 401, "invalid_credentials")
    assert redis_client.keys("fh:session:*") == []
    assert redis_client.zcard(f"fh:{{{user.id}}}:sessions") == 0
