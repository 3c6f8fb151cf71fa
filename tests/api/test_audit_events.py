"""The audit trail (issue 14): every recorded event type with its fields, GET
/api/v1/audit-events (pages, cursors, the type filter, its refusals, who may read it), the bounds
(retention and maximum), failing closed when an event cannot be written (but never turning a
failed login into a 503), and a search of every stored event of a full run for every secret.

Driven over HTTP against the real Redis server of the fixtures; time moves only through the
injected ``clock``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import redis as redis_sync
from redis.exceptions import ConnectionError as RedisConnectionError

from service.api.context import POLICY
from service.domain import credentials
from service.domain.audit_events import EVENT_TYPES
from service.store.audit import AuditStore
from tests.support.api import PASSWORD, Api, assert_error, bearer, my_session_id
from tests.support.clock import FakeClock, at, parse_iso

EVENTS = "/api/v1/audit-events"
SESSIONS = "/api/v1/auth/sessions"
SESSION = "/api/v1/auth/session"
LOGIN = "/api/v1/auth/login"
EMAIL = "alice@example.com"
UA = "Mozilla/5.0 (audit test)"
FIELDS = {"id", "at", "type", "actor", "ip", "user_agent", "target", "changes"}
NEW_PASSWORD = "a brand new passphrase"
WRONG_PASSWORD = "not the password at all"


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def headers(token: str) -> dict[str, str]:
    return {**bearer(token), "User-Agent": UA}


async def login(api: Api, email: str = EMAIL, password: str = PASSWORD) -> str:
    response = await api.client.post(
        LOGIN, json={"email": email, "password": password}, headers={"User-Agent": UA}
    )
    assert response.status == 200, await response.text()
    return (await response.json())["data"]["token"]


async def page(api: Api, token: str, **query: Any) -> dict[str, Any]:
    response = await api.client.get(EVENTS, params=query, headers=bearer(token))
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert set(data) == {"events", "next_cursor"}
    for event in data["events"]:
        assert set(event) == FIELDS
        assert credentials.is_valid_id(event["id"], "evt")
        assert event["type"] in EVENT_TYPES
    return data


async def events(api: Api, token: str, **query: Any) -> list[dict[str, Any]]:
    return (await page(api, token, **query))["events"]


def session(session_id: str, device: str | None = UA) -> dict[str, Any]:
    """A session as an event names it: its public id and the User-Agent it signed in with."""
    return {"type": "session", "session_id": session_id, "device": device}


def audit_keys(redis_client: redis_sync.Redis) -> list[str]:
    return list(redis_client.scan_iter("fh:*:audit"))


# -- each event, with its fields -------------------------------------------------------------


async def test_a_login_is_recorded_with_the_session_it_opened(api: Api, clock: FakeClock) -> None:
    await api.create_user(EMAIL)
    token = await login(api)
    session_id = await my_session_id(api, token)

    (event,) = await events(api, token)

    assert event["type"] == "login.succeeded"
    assert parse_iso(event["at"]) == at(clock)
    assert event["actor"] == event["target"] == session(session_id)
    assert event["ip"] == "127.0.0.1"
    assert event["user_agent"] == UA
    assert event["changes"] is None


async def test_a_failed_login_is_recorded_only_for_an_existing_account_and_names_no_factor(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    await api.create_user(EMAIL)
    response = await api.client.post(
        LOGIN, json={"email": EMAIL, "password": WRONG_PASSWORD}, headers={"User-Agent": UA}
    )
    await assert_error(response, 401, "invalid_credentials")
    for email in ("nobody@example.com", "ALICE@example.org"):
        response = await api.client.post(LOGIN, json={"email": email, "password": PASSWORD})
        await assert_error(response, 401, "invalid_credentials")
    token = await login(api)

    failed, succeeded = (await events(api, token))[::-1]

    assert succeeded["type"] == "login.succeeded"
    assert failed["type"] == "login.failed"
    assert failed["actor"] is None and failed["target"] is None and failed["changes"] is None
    assert (failed["ip"], failed["user_agent"]) == ("127.0.0.1", UA)
    assert "password" not in str(failed) and "email" not in str(failed)
    assert len(audit_keys(redis_client)) == 1  # the unknown emails left nothing anywhere


async def test_logout_is_recorded_for_the_session_that_ended(api: Api) -> None:
    await api.create_user(EMAIL)
    watcher = await login(api)
    leaving = await login(api)
    leaving_id = await my_session_id(api, leaving)
    response = await api.client.post("/api/v1/auth/logout", headers=headers(leaving))
    assert response.status == 200

    event = (await events(api, watcher))[0]

    assert event["type"] == "logout"
    assert event["actor"] == event["target"] == session(leaving_id)
    assert event["user_agent"] == UA and event["ip"] == "127.0.0.1"


async def test_ending_one_session_is_recorded_with_who_ended_which(api: Api) -> None:
    await api.create_user(EMAIL)
    mine = await login(api)
    other = await login(api)
    mine_id, other_id = await my_session_id(api, mine), await my_session_id(api, other)
    response = await api.client.delete(f"{SESSIONS}/{other_id}", headers=headers(mine))
    assert response.status == 200

    event = (await events(api, mine))[0]

    assert event["type"] == "session.ended"
    assert event["actor"] == session(mine_id)
    assert event["target"] == session(other_id)
    assert event["changes"] is None


async def test_sessions_are_named_by_the_device_they_signed_in_with(api: Api) -> None:
    """The acting session by the User-Agent stored at its login, whatever the request sends; the
    ended one by its own; the request's User-Agent stays the event's ``user_agent``."""
    await api.create_user(EMAIL)
    devices = {}
    for device in ("laptop/1.0", "phone/2.0"):
        response = await api.client.post(
            LOGIN, json={"email": EMAIL, "password": PASSWORD}, headers={"User-Agent": device}
        )
        devices[device] = (await response.json())["data"]["token"]
    laptop, phone = devices["laptop/1.0"], devices["phone/2.0"]
    phone_id = await my_session_id(api, phone)
    response = await api.client.delete(
        f"{SESSIONS}/{phone_id}", headers={**bearer(laptop), "User-Agent": "curl/8.5.0"}
    )
    assert response.status == 200

    event = (await events(api, laptop))[0]

    assert event["type"] == "session.ended"
    assert event["actor"] == session(await my_session_id(api, laptop), "laptop/1.0")
    assert event["target"] == session(phone_id, "phone/2.0")
    assert event["user_agent"] == "curl/8.5.0"


async def test_ending_every_other_session_records_one_event_per_ended_session(api: Api) -> None:
    await api.create_user(EMAIL)
    mine = await login(api)
    others = [await login(api) for _ in range(3)]
    other_ids = {await my_session_id(api, token) for token in others}
    response = await api.client.delete(SESSIONS, headers=headers(mine))
    assert (await response.json())["data"] == {"ended": 3}

    ended = await events(api, mine, type="session.ended")

    assert {event["target"]["session_id"] for event in ended} == other_ids
    assert len(ended) == 3
    mine_id = await my_session_id(api, mine)
    assert all(e["actor"] == session(mine_id) for e in ended)
    assert all(e["target"]["device"] == UA for e in ended)
    nothing = await api.client.delete(SESSIONS, headers=headers(mine))
    assert (await nothing.json())["data"] == {"ended": 0}
    assert len(await events(api, mine, type="session.ended")) == 3  # nothing ended, nothing new


async def test_a_password_change_is_one_event_and_its_ended_sessions_are_part_of_it(
    api: Api,
) -> None:
    await api.create_user(EMAIL)
    mine = await login(api)
    await login(api)
    response = await api.client.post(
        "/api/v1/auth/password",
        json={"current_password": PASSWORD, "new_password": NEW_PASSWORD},
        headers=headers(mine),
    )
    assert (await response.json())["data"]["sessions_ended"] == 1

    event = (await events(api, mine))[0]

    assert event["type"] == "password.changed"
    assert event["actor"] == session(await my_session_id(api, mine))
    assert event["target"] is None and event["changes"] is None
    assert await events(api, mine, type="session.ended") == []


async def test_keys_created_and_revoked_are_recorded_but_an_expired_key_is_not_an_event(
    make_api: Any, clock: FakeClock
) -> None:
    api = await make_api(session_idle_seconds=3 * 86400)
    await api.create_user(EMAIL)
    token = await login(api)
    session_id = await my_session_id(api, token)
    response = await api.client.post(
        "/api/v1/keys",
        json={"name": "backup", "permissions": ["files.read", "files.write"], "expires_days": 7},
        headers=headers(token),
    )
    key = (await response.json())["data"]
    revoked = await api.client.delete(f"/api/v1/keys/{key['id']}", headers=headers(token))
    assert revoked.status == 200
    short = await api.create_key(token, name="short", expires_days=1)

    revoke_event, create_event = (await events(api, token))[1:3]

    assert create_event["type"] == "key.created"
    assert create_event["actor"] == session(session_id)
    named = {
        "type": "api_key",
        "key_id": key["id"],
        "name": "backup",
        "key_prefix": key["key_prefix"],
    }
    assert create_event["target"] == named
    assert create_event["changes"] == {
        "name": "backup",
        "permissions": ["files.read", "files.write"],
        "expires_at": key["expires_at"],
    }
    assert revoke_event["type"] == "key.revoked"
    assert revoke_event["target"] == named
    assert revoke_event["user_agent"] == UA

    clock.advance(days=1, seconds=1)  # the short key has expired: not an event
    before = await events(api, token)
    gone = await api.client.delete(f"/api/v1/keys/{short['id']}", headers=bearer(token))
    await assert_error(gone, 404, "key_not_found")
    assert await events(api, token) == before
    unknown = await api.client.delete(
        f"/api/v1/keys/{credentials.new_id('key')}", headers=bearer(token)
    )
    await assert_error(unknown, 404, "key_not_found")
    assert await events(api, token) == before


# -- the list ------------------------------------------------------------------------------------


async def test_pages_are_newest_first_and_events_arriving_between_pages_shift_nothing(
    api: Api, clock: FakeClock
) -> None:
    await api.create_user(EMAIL)
    token = await login(api)
    for n in range(24):
        if n % 3 == 0:
            clock.advance(seconds=1)  # several events per millisecond, and some apart
        await api.app[POLICY].login.login(EMAIL, PASSWORD, "192.0.2.1", f"agent {n}")
    everything = await events(api, token, limit=1000)
    assert len(everything) == 25
    assert [e["user_agent"] for e in everything[:24]] == [f"agent {n}" for n in range(23, -1, -1)]

    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        query: dict[str, Any] = {"limit": 10}
        if cursor is not None:
            query["cursor"] = cursor
        data = await page(api, token, **query)
        seen.extend(data["events"])
        cursor = data["next_cursor"]
        # New events between pages: newer than any cursor, so never on a later page.
        await api.app[POLICY].login.login(EMAIL, PASSWORD, "192.0.2.2", "between pages")
        if cursor is None:
            break
    assert [e["id"] for e in seen] == [e["id"] for e in everything]
    assert len(await events(api, token, limit=1000)) == 28


async def test_the_last_page_has_a_null_cursor_and_limit_defaults_to_100(api: Api) -> None:
    await api.create_user(EMAIL)
    token = await login(api)
    for _ in range(100):
        await api.app[POLICY].login.login(EMAIL, PASSWORD)
    first = await page(api, token)
    assert len(first["events"]) == 100 and first["next_cursor"] is not None
    last = await page(api, token, cursor=first["next_cursor"])
    assert len(last["events"]) == 1 and last["next_cursor"] is None
    exact = await page(api, token, limit=101)
    assert len(exact["events"]) == 101 and exact["next_cursor"] is None


async def test_the_type_filter_pages_through_one_type_only(api: Api) -> None:
    await api.create_user(EMAIL)
    token = await login(api)
    created = []
    for n in range(7):
        created.append((await api.create_key(token, name=f"k{n}"))["id"])
        await api.app[POLICY].login.login(EMAIL, PASSWORD)
    seen: list[str] = []
    cursor = None
    while True:
        query: dict[str, Any] = {"limit": 3, "type": "key.created"}
        if cursor:
            query["cursor"] = cursor
        data = await page(api, token, **query)
        assert {e["type"] for e in data["events"]} <= {"key.created"}
        seen.extend(e["target"]["key_id"] for e in data["events"])
        cursor = data["next_cursor"]
        if cursor is None:
            break
    assert seen == created[::-1]
    assert len(await events(api, token, type="login.succeeded")) == 8
    assert await events(api, token, type="key.revoked_as_leaked") == []


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=1001",
        "limit=-1",
        "limit=abc",
        "limit=1.5",
        "limit=",
        "limit=%EF%BC%91",  # a full-width digit
        "limit=5&limit=6",
        "cursor=",
        "cursor=not-a-cursor",
        "cursor=MTIz%3D",
        "cursor=" + "A" * 40,
        "cursor=MDAxMjM",  # "00123": not a cursor this service gives
        "cursor=MQ&cursor=Mg",
        "type=",
        "type=login",
        "type=key.expired",
        "type=LOGOUT",
        "type=logout&type=logout",
    ],
)
async def test_a_bad_limit_cursor_or_type_is_400(api: Api, query: str) -> None:
    token = await api.user_with_session()
    response = await api.client.get(f"{EVENTS}?{query}", headers=bearer(token))
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) <= {"limit", "cursor", "type"}


async def test_api_keys_are_refused_and_a_credential_is_required(api: Api) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token, permissions=["keys.read", "settings.read"]))["secret_key"]
    await assert_error(
        await api.client.get(EVENTS, headers={"X-API-Key": key}), 403, "session_required"
    )
    await assert_error(await api.client.get(EVENTS), 401, "credential_missing")


async def test_each_account_sees_only_its_own_events(api: Api) -> None:
    await api.create_user(EMAIL)
    await api.create_user("bob@example.com")
    alice = await login(api)
    bob = await login(api, "bob@example.com")
    await api.create_key(alice, name="alice's")
    await api.client.post(LOGIN, json={"email": "bob@example.com", "password": WRONG_PASSWORD})
    alice_session, bob_session = await my_session_id(api, alice), await my_session_id(api, bob)

    alices = await events(api, alice)
    bobs = await events(api, bob)

    assert [e["type"] for e in alices] == ["key.created", "login.succeeded"]
    assert [e["type"] for e in bobs] == ["login.failed", "login.succeeded"]
    assert bob_session not in str(alices) and alice_session not in str(bobs)
    # Alice's cursor names a position, not an event: on Bob's trail it shows only Bob's.
    first = await page(api, alice, limit=1)
    later = await events(api, bob, cursor=first["next_cursor"])
    assert {e["id"] for e in later} <= {e["id"] for e in bobs}


async def test_the_gateway_path_records_nothing(api: Api, redis_client: redis_sync.Redis) -> None:
    user = await api.create_user(EMAIL)
    token = await login(api)
    key = await api.create_key(token, permissions=["files.read"])
    trail = f"fh:{{{user.id}}}:audit"
    before = redis_client.zrange(trail, 0, -1, withscores=True)

    for credential in ({"X-API-Key": key["secret_key"]}, bearer(token)):
        assert (await api.client.get("/api/v1/files", headers=credential)).status == 200
        verified = await api.client.get(
            "/api/v1/auth/verify", headers={**credential, "X-Required-Permission": "files.read"}
        )
        assert verified.status == 200
        assert (await api.client.get(SESSION, headers=credential)).status == 200
    secret = key["secret_key"]
    # Its last character changed: to "x", unless it already is one (1 key in 62).
    bad_key = {"X-API-Key": secret[:-1] + ("y" if secret.endswith("x") else "x")}
    assert (await api.client.get("/api/v1/files", headers=bad_key)).status == 401

    assert redis_client.zrange(trail, 0, -1, withscores=True) == before


# -- the bounds ----------------------------------------------------------------------------------


async def test_events_older_than_the_retention_are_never_listed_and_are_dropped(
    make_api: Any, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(
        audit_retention_days=10, session_idle_seconds=30 * 86400, session_max_seconds=30 * 86400
    )
    user = await api.create_user(EMAIL)
    trail = f"fh:{{{user.id}}}:audit"
    old = await login(api)
    pttl = redis_client.pttl(trail)
    assert 9.9 * 86_400_000 < pttl <= 10 * 86_400_000  # the key expires with its retention

    clock.advance(days=9)
    await api.app[POLICY].login.login(EMAIL, PASSWORD)
    clock.advance(days=1, seconds=1)  # the first login is past the retention
    token = await api.app[POLICY].login.login(EMAIL, PASSWORD)

    listed = await events(api, token.token)
    assert len(listed) == 2  # the first was dropped by the write, and is never listed
    assert redis_client.zcard(trail) == 2
    clock.advance(days=9, hours=23)
    assert len(await events(api, token.token)) == 1  # past it, though nothing wrote since
    assert old  # its token was used only to record the first event


async def test_at_most_the_maximum_of_events_are_kept_the_oldest_dropped_first(
    make_api: Any, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(audit_max_events=5)
    user = await api.create_user(EMAIL)
    token = await login(api)
    for n in range(9):
        await api.app[POLICY].login.login(EMAIL, PASSWORD, None, f"agent {n}")

    listed = await events(api, token)

    assert [e["user_agent"] for e in listed] == [f"agent {n}" for n in range(8, 3, -1)]
    assert redis_client.zcard(f"fh:{{{user.id}}}:audit") == 5


async def test_deleting_the_user_deletes_its_trail(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    await api.user_with_session()
    assert len(audit_keys(redis_client)) == 1
    await api.app[POLICY].users.delete_user(EMAIL)
    assert audit_keys(redis_client) == []


# -- failing closed --------------------------------------------------------------------------


@pytest.fixture
def broken_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every event written on its own (not inside another script) fails as if Redis were down."""

    async def fail(self: AuditStore, user_id: str, batch: Any) -> None:
        raise RedisConnectionError("audit write refused by the test")

    monkeypatch.setattr(AuditStore, "record", fail)


async def test_a_change_whose_event_cannot_be_written_is_503_and_not_made(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await api.create_user(EMAIL)
    mine = await login(api)
    other = await login(api)
    other_id = await my_session_id(api, other)
    key = await api.create_key(mine)

    async def fail(self: AuditStore, user_id: str, batch: Any) -> None:
        raise RedisConnectionError("audit write refused by the test")

    monkeypatch.setattr(AuditStore, "record", fail)
    attempts = [
        ("DELETE", f"/api/v1/keys/{key['id']}"),
        ("DELETE", f"{SESSIONS}/{other_id}"),
        ("DELETE", SESSIONS),
        ("POST", "/api/v1/auth/logout"),
    ]
    for method, path in attempts:
        response = await api.client.request(method, path, headers=bearer(mine))
        await assert_error(response, 503, "store_unavailable")
    assert (await api.files(key=key["secret_key"])).status == 200
    assert (await api.client.get(SESSION, headers=bearer(other))).status == 200
    assert (await api.client.get(SESSION, headers=bearer(mine))).status == 200


async def test_a_failed_login_whose_event_cannot_be_written_is_still_401(
    api: Api, broken_record: None
) -> None:
    await api.create_user(EMAIL)
    response = await api.client.post(LOGIN, json={"email": EMAIL, "password": WRONG_PASSWORD})
    await assert_error(response, 401, "invalid_credentials")


async def test_a_login_key_or_password_change_recorded_in_its_own_step_fails_whole(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    token = await login(api)
    trail = f"fh:{{{user.id}}}:audit"
    redis_client.delete(trail)
    redis_client.set(trail, "not a sorted set")  # every write to the trail now fails

    await assert_error(
        await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD}),
        503,
        "store_unavailable",
    )
    await assert_error(
        await api.client.post(
            "/api/v1/keys", json={"name": "k", "permissions": ["files.read"]}, headers=bearer(token)
        ),
        503,
        "store_unavailable",
    )
    await assert_error(
        await api.client.post(
            "/api/v1/auth/password",
            json={"current_password": PASSWORD, "new_password": NEW_PASSWORD},
            headers=bearer(token),
        ),
        503,
        "store_unavailable",
    )
    redis_client.delete(trail)
    # Nothing was made: one session, no key, the old password.
    response = await api.client.get(SESSIONS, headers=bearer(token))
    assert len((await response.json())["data"]["sessions"]) == 1
    response = await api.client.get("/api/v1/keys", headers=bearer(token))
    assert (await response.json())["data"]["keys"] == []
    assert await login(api)


# -- no secret in any event ----------------------------------------------------------------------


async def test_no_secret_token_digest_or_password_appears_in_any_event_of_a_full_run(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    old_hash = user.password_hash
    tokens = [await login(api) for _ in range(3)]
    main, doomed, spare = tokens
    await api.client.post(LOGIN, json={"email": EMAIL, "password": WRONG_PASSWORD})
    key = await api.create_key(main, name="audited")
    kept = await api.create_key(main, name="kept")
    assert (
        await api.client.delete(f"/api/v1/keys/{key['id']}", headers=bearer(main))
    ).status == 200
    doomed_id = await my_session_id(api, doomed)
    assert (await api.client.delete(f"{SESSIONS}/{doomed_id}", headers=bearer(main))).status == 200
    assert (await api.client.post("/api/v1/auth/logout", headers=bearer(spare))).status == 200
    changed = await api.client.post(
        "/api/v1/auth/password",
        json={"current_password": PASSWORD, "new_password": NEW_PASSWORD},
        headers=bearer(main),
    )
    assert changed.status == 200
    tokens.append(await login(api, password=NEW_PASSWORD))
    await api.create_key(main, name="after")
    stale = await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD})
    await assert_error(stale, 401, "invalid_credentials")  # the old password: a failed login
    listed = await events(api, main, limit=1000)
    new_hash = redis_client.hget(f"fh:{{{user.id}}}:user", "pw")

    secrets = [
        PASSWORD,
        NEW_PASSWORD,
        WRONG_PASSWORD,
        old_hash,
        new_hash,
        key["secret_key"],
        kept["secret_key"],
        sha256_hex(key["secret_key"]),
        sha256_hex(kept["secret_key"]),
    ]
    for token in tokens:
        secrets.extend((token, sha256_hex(token)))
    stored: list[str] = []
    for name in audit_keys(redis_client):
        stored.append(name)
        stored.extend(member for member, _ in redis_client.zrange(name, 0, -1, withscores=True))
    assert len(stored) == 1 + len(listed)
    types = {event["type"] for event in listed}
    assert types == {
        "login.succeeded",
        "login.failed",
        "key.created",
        "key.revoked",
        "session.ended",
        "logout",
        "password.changed",
    }
    for text in (*stored, str(listed)):
        for secret in secrets:
            assert secret not in text
            assert secret[:16] not in text  # not even a recognisable piece
