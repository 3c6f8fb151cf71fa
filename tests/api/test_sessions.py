"""The account's sessions: GET /api/v1/auth/sessions, DELETE /api/v1/auth/sessions/{id} and
DELETE /api/v1/auth/sessions (issue 14).

Driven over HTTP against the real Redis server of the fixtures; time moves only through the
injected ``clock``. Two workers are in tests/system/test_serve.py.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import redis as redis_sync

from service.api.context import POLICY
from service.domain import credentials
from tests.support.api import PASSWORD, Api, assert_error, bearer
from tests.support.clock import FakeClock, at, parse_iso

SESSIONS = "/api/v1/auth/sessions"
SESSION = "/api/v1/auth/session"
EMAIL = "alice@example.com"
FIELDS = {
    "id",
    "created_at",
    "last_seen_at",
    "expires_at",
    "absolute_expires_at",
    "ip",
    "user_agent",
    "current",
    "aal",
    "authenticated_at",
    "method",
    "provider",
}


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


async def listed(api: Api, token: str) -> list[dict[str, Any]]:
    response = await api.client.get(SESSIONS, headers=bearer(token))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]["sessions"]


async def status_of(api: Api, token: str) -> int:
    return (await api.client.get(SESSION, headers=bearer(token))).status


async def login_as(api: Api, user_agent: str | None = None, email: str = EMAIL) -> str:
    headers = {"User-Agent": user_agent} if user_agent is not None else {}
    response = await api.client.post(
        "/api/v1/auth/login", json={"email": email, "password": PASSWORD}, headers=headers
    )
    assert response.status == 200, await response.text()
    return (await response.json())["data"]["token"]


# -- the list ----------------------------------------------------------------------------------


async def test_the_list_shows_every_live_session_newest_first_with_the_callers_marked(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    await api.create_user(EMAIL)
    first = await login_as(api)
    opened_first = at(clock)
    clock.advance(seconds=5)
    second = await login_as(api)
    opened_second = at(clock)

    sessions = await listed(api, first)

    assert [set(view) for view in sessions] == [FIELDS, FIELDS]
    newest, oldest = sessions
    assert parse_iso(newest["created_at"]) == opened_second
    assert parse_iso(oldest["created_at"]) == opened_first
    assert (newest["current"], oldest["current"]) == (False, True)
    assert [view["current"] for view in await listed(api, second)] == [True, False]
    for view in sessions:
        assert credentials.is_valid_id(view["id"], "ses")
        assert view["ip"] == "127.0.0.1"  # the peer, as login throttling sees it
        assert (view["method"], view["provider"]) == ("password", None)
        assert parse_iso(view["last_seen_at"]) == parse_iso(view["created_at"])
        created = parse_iso(view["created_at"])
        assert (parse_iso(view["expires_at"]) - created).total_seconds() == 24 * 3600
        assert (parse_iso(view["absolute_expires_at"]) - created).total_seconds() == 7 * 86400
    # The public id is neither the token nor its digest, nor derived from them.
    body = str(sessions)
    for token in (first, second):
        assert token not in body and sha256_hex(token) not in body
    assert newest["id"] != oldest["id"]
    stored = redis_client.hget(f"fh:session:{sha256_hex(second)}", "id")
    assert stored == newest["id"]


async def test_the_user_agent_is_recorded_at_login_cut_to_256_characters(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    token = await login_as(api)
    login = api.app[POLICY].login
    await login.login(EMAIL, PASSWORD, "203.0.113.9", "Mozilla/5.0 (X11)")
    await login.login(EMAIL, PASSWORD, "2001:db8::1", "x" * 1000)
    await login.login(EMAIL, PASSWORD, None, None)

    by_ip = {view["ip"]: view["user_agent"] for view in await listed(api, token)}

    assert by_ip["203.0.113.9"] == "Mozilla/5.0 (X11)"
    assert by_ip["2001:db8::1"] == "x" * 256
    assert by_ip[None] is None
    assert len(by_ip) == 4
    assert redis_client.zcard(f"fh:{{{user.id}}}:sessions") == 4


async def test_login_over_http_records_the_user_agent(api: Api) -> None:
    await api.create_user(EMAIL)
    token = await login_as(api, user_agent="Firefox/132.0 " + "y" * 300)
    (view,) = await listed(api, token)
    assert view["user_agent"] == ("Firefox/132.0 " + "y" * 300)[:256]


async def test_last_seen_moves_with_the_existing_renewal_write_only(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    await api.create_user(EMAIL)
    watcher = await login_as(api)
    token = await login_as(api)
    entry = f"fh:session:{sha256_hex(token)}"
    before = redis_client.hgetall(entry)

    clock.advance(seconds=30)  # within the renewal interval (60 s): nothing is written
    assert await status_of(api, token) == 200
    await asyncio.sleep(0.05)
    assert redis_client.hgetall(entry) == before

    clock.advance(seconds=40)  # past it: the renewal writes the idle deadline and last sight
    seen = at(clock)
    assert await status_of(api, token) == 200
    for _ in range(200):
        if redis_client.hget(entry, "s") != before["s"]:
            break
        await asyncio.sleep(0.005)
    after = redis_client.hgetall(entry)
    assert set(after) == set(before)
    assert after["i"] != before["i"]

    view = next(view for view in await listed(api, watcher) if not view["current"])
    assert parse_iso(view["last_seen_at"]) == seen
    assert parse_iso(view["expires_at"]).timestamp() == seen.timestamp() + 24 * 3600


async def test_expired_and_ended_sessions_are_not_listed(api: Api, clock: FakeClock) -> None:
    await api.create_user(EMAIL)
    old = await login_as(api)
    clock.advance(hours=23)
    fresh = await login_as(api)
    assert len(await listed(api, fresh)) == 2
    clock.advance(hours=1, seconds=1)  # past the first session's idle deadline
    assert [view["current"] for view in await listed(api, fresh)] == [True]
    assert await status_of(api, old) == 401
    logged_out = await login_as(api)
    assert (await api.client.post("/api/v1/auth/logout", headers=bearer(logged_out))).status == 200
    assert len(await listed(api, fresh)) == 1


async def test_a_session_opened_before_public_ids_gets_one_when_listed(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    await api.create_user(EMAIL)
    token = await login_as(api)
    entry = f"fh:session:{sha256_hex(token)}"
    redis_client.hdel(entry, "id", "s", "ip", "ua")

    (view,) = await listed(api, token)

    assert credentials.is_valid_id(view["id"], "ses")
    assert view["last_seen_at"] == view["created_at"]
    assert view["ip"] is None and view["user_agent"] is None
    assert (await listed(api, token))[0]["id"] == view["id"]  # kept
    ended = await api.client.delete(f"{SESSIONS}/{view['id']}", headers=bearer(token))
    assert ended.status == 200


async def test_the_list_shows_only_the_callers_account(api: Api) -> None:
    await api.create_user(EMAIL)
    await api.create_user("bob@example.com")
    alice = await login_as(api)
    bob = await login_as(api, email="bob@example.com")
    await login_as(api, email="bob@example.com")

    assert len(await listed(api, alice)) == 1
    assert len(await listed(api, bob)) == 2


# -- ending one ----------------------------------------------------------------------------------


async def test_ending_a_session_refuses_its_token_from_the_next_request(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    mine = await login_as(api)
    stolen = await login_as(api)
    assert await status_of(api, stolen) == 200
    target = next(view for view in await listed(api, mine) if not view["current"])

    response = await api.client.delete(f"{SESSIONS}/{target['id']}", headers=bearer(mine))

    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert data["id"] == target["id"]
    assert parse_iso(data["ended_at"]) == at(clock)
    refused = await api.client.get(SESSION, headers=bearer(stolen))
    await assert_error(refused, 401, "invalid_session")
    assert await status_of(api, mine) == 200
    assert [view["current"] for view in await listed(api, mine)] == [True]
    # Gone from the store and from the account's index (which user deletion reads).
    assert not redis_client.exists(f"fh:session:{sha256_hex(stolen)}")
    assert redis_client.zrange(f"fh:{{{user.id}}}:sessions", 0, -1) == [sha256_hex(mine)]
    again = await api.client.delete(f"{SESSIONS}/{target['id']}", headers=bearer(mine))
    await assert_error(again, 404, "session_not_found")


async def test_a_session_can_end_itself_by_id(api: Api) -> None:
    await api.create_user(EMAIL)
    token = await login_as(api)
    (view,) = await listed(api, token)
    response = await api.client.delete(f"{SESSIONS}/{view['id']}", headers=bearer(token))
    assert response.status == 200
    assert await status_of(api, token) == 401


async def test_unknown_malformed_and_foreign_ids_are_all_404(api: Api) -> None:
    await api.create_user(EMAIL)
    await api.create_user("bob@example.com")
    alice = await login_as(api)
    bob = await login_as(api, email="bob@example.com")
    (bobs,) = await listed(api, bob)

    for session_id in (
        bobs["id"],
        credentials.new_id("ses"),
        "ses_short",
        credentials.new_id("key"),
        sha256_hex(bob),
        bob,
    ):
        response = await api.client.delete(f"{SESSIONS}/{session_id}", headers=bearer(alice))
        await assert_error(response, 404, "session_not_found")
    assert await status_of(api, bob) == 200


# -- ending every other --------------------------------------------------------------------------


async def test_ending_every_other_session_keeps_only_the_callers(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    await api.create_user("bob@example.com")
    mine = await login_as(api)
    others = [await login_as(api) for _ in range(3)]
    bob = await login_as(api, email="bob@example.com")

    response = await api.client.delete(SESSIONS, headers=bearer(mine))

    assert response.status == 200, await response.text()
    assert (await response.json())["data"] == {"ended": 3}
    for token in others:
        await assert_error(
            await api.client.get(SESSION, headers=bearer(token)), 401, "invalid_session"
        )
    assert await status_of(api, mine) == 200
    assert await status_of(api, bob) == 200
    assert redis_client.zrange(f"fh:{{{user.id}}}:sessions", 0, -1) == [sha256_hex(mine)]
    again = await api.client.delete(SESSIONS, headers=bearer(mine))
    assert (await again.json())["data"] == {"ended": 0}


async def test_user_deletion_still_ends_every_session(api: Api) -> None:
    await api.create_user(EMAIL)
    tokens = [await login_as(api) for _ in range(2)]
    await api.client.delete(SESSIONS, headers=bearer(tokens[0]))
    third = await login_as(api)
    await api.app[POLICY].users.delete_user(EMAIL)
    for token in (*tokens, third):
        assert await status_of(api, token) == 401


# -- who may ---------------------------------------------------------------------------------------


async def test_api_keys_and_missing_credentials_are_refused(api: Api) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]
    (view,) = await listed(api, token)
    for method, path in (
        ("GET", SESSIONS),
        ("DELETE", SESSIONS),
        ("DELETE", f"{SESSIONS}/{view['id']}"),
    ):
        response = await api.client.request(method, path, headers={"X-API-Key": key})
        await assert_error(response, 403, "session_required")
        response = await api.client.request(method, path)
        await assert_error(response, 401, "credential_missing")
    assert await status_of(api, token) == 200


async def test_ending_is_never_refused_for_the_callers_rate(make_api) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(rate_limit_per_second=1, rate_limit_burst=2)
    await api.create_user(EMAIL)
    mine = await login_as(api)
    other = await login_as(api)
    third = await login_as(api)
    (thirds,) = [view for view in await listed(api, third) if view["current"]]
    for _ in range(5):
        await api.client.get(SESSION, headers=bearer(mine))
    await assert_error(await api.client.get(SESSIONS, headers=bearer(mine)), 429, "rate_limited")

    one = await api.client.delete(f"{SESSIONS}/{thirds['id']}", headers=bearer(mine))
    assert one.status == 200, await one.text()
    rest = await api.client.delete(SESSIONS, headers=bearer(mine))
    assert rest.status == 200, await rest.text()
    assert (await rest.json())["data"] == {"ended": 1}
    assert (await api.client.get(SESSION, headers=bearer(other))).status == 401
