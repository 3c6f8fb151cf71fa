"""What a key is doing: ``GET /api/v1/keys/{id}/usage``. Each worker counts a key's requests and
refusals in memory and flushes them once a second (and when it stops); the owner reads 30 UTC
days of them, with the key's last use. Two instances on one store add up; /auth/verify counts;
refusals of a key that exists count for it, unknown keys for nobody; revoking forgets it all."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, date, datetime, timedelta
from typing import Any

import redis as redis_sync

from service.api.context import KEY_USAGE, POLICY
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock, parse_iso
from tests.support.keys import EMAIL, KEYS, edited

FILES = "/api/v1/files"
FOLDERS = "/api/v1/folders"
VERIFY = "/api/v1/auth/verify"


def usage_path(key_id: str) -> str:
    return f"{KEYS}/{key_id}/usage"


async def usage(api: Api, token: str, key_id: str) -> dict[str, Any]:
    response = await api.client.get(usage_path(key_id), headers=bearer(token))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


def today(clock: FakeClock) -> str:
    return datetime.fromtimestamp(clock.now_ms() / 1000, UTC).date().isoformat()


def counts_by_day(data: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {
        day["date"]: (day["requests"], day["refused"])
        for day in data["days"]
        if day["requests"] or day["refused"]
    }


async def status(api: Api, path: str, headers: dict[str, str]) -> int:
    response = await api.client.get(path, headers=headers)
    await response.read()
    return response.status


async def test_requests_and_refusals_are_counted_per_day_across_instances(
    both: tuple[Api, Api], clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    lane, plain = both
    token = await lane.user_with_session(EMAIL)
    key = await lane.create_key(token, permissions=["files.read"])
    other = await lane.create_key(token, name="other", permissions=["files.read"])
    secret = {"X-API-Key": key["secret_key"]}
    fresh = await usage(lane, token, key["id"])
    assert len(fresh["days"]) == 30 and counts_by_day(fresh) == {}
    assert fresh["last_used_at"] is None and fresh["last_used_ip"] is None

    for _ in range(3):  # the gateway lane's answers
        assert await status(lane, FILES, secret) == 200
    assert await status(plain, FILES, secret) == 200
    # A gateway's sub-request counts like any other, and so does a permission it lacks.
    assert await status(plain, VERIFY, {**secret, "X-Required-Permission": "files.read"}) == 200
    assert await status(lane, VERIFY, {**secret, "X-Required-Permission": "files.write"}) == 403
    assert await status(plain, FOLDERS, secret) == 403  # folders.read: refused
    # Unknown and malformed keys belong to no key.
    assert await status(plain, FILES, {"X-API-Key": "fhk_" + "A" * 40}) == 401
    assert await status(plain, FILES, {"X-API-Key": "nonsense"}) == 401
    for api in both:
        await api.app[KEY_USAGE].flush()
    data = await usage(plain, token, key["id"])
    assert counts_by_day(data) == {today(clock): (7, 2)}
    assert data["last_used_ip"] == "127.0.0.1"
    assert abs(parse_iso(data["last_used_at"]).timestamp() * 1000 - clock.now_ms()) < 1000
    assert counts_by_day(await usage(lane, token, other["id"])) == {}

    # The next day: a disabled key's requests are refusals of it, on the day they were made.
    clock.advance(days=1)
    token = await plain.login(EMAIL)
    await edited(plain, token, key["id"], {"enabled": False})
    assert await status(plain, FILES, secret) == 401
    assert await status(lane, VERIFY, {**secret, "X-Required-Permission": "files.read"}) == 401
    for api in both:
        await api.app[KEY_USAGE].flush()
    data = await usage(lane, token, key["id"])
    yesterday = (date.fromisoformat(today(clock)) - timedelta(days=1)).isoformat()
    assert counts_by_day(data) == {yesterday: (7, 2), today(clock): (2, 2)}
    dates = [date.fromisoformat(day["date"]) for day in data["days"]]
    assert len(dates) == 30 and dates[-1].isoformat() == today(clock)
    assert all(later - earlier == timedelta(days=1) for earlier, later in itertools.pairwise(dates))

    # Revoking forgets what the key did, and a flush after it brings nothing back.
    assert await status(plain, FILES, {"X-API-Key": other["secret_key"]}) == 200
    response = await lane.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))
    assert response.status == 200
    plain.app[KEY_USAGE].used(_owner(redis_client), key["id"], "10.0.0.1")  # counted meanwhile
    for api in both:
        await api.app[KEY_USAGE].flush()
    left = {name for name in redis_client.scan_iter("*key-usage*")}
    assert left and all(other["id"] in name for name in left), left
    await assert_error(
        await lane.client.get(usage_path(key["id"]), headers=bearer(token)), 404, "key_not_found"
    )


def _owner(redis_client: redis_sync.Redis) -> str:
    """The user id of the test's one account, as its keys' Redis names carry it."""
    name = next(iter(redis_client.scan_iter("*}:keys")))
    return name.split("{")[1].split("}")[0]


async def test_another_accounts_key_is_not_found_and_a_key_may_not_ask(api: Api) -> None:
    alice = await api.user_with_session(EMAIL)
    key = await api.create_key(alice)
    bob = await api.user_with_session("bob@example.com")
    for key_id in (key["id"], "key_unknown", "not-an-id"):
        response = await api.client.get(usage_path(key_id), headers=bearer(bob))
        await assert_error(response, 404, "key_not_found")
    response = await api.client.get(usage_path(key["id"]), headers={"X-API-Key": key["secret_key"]})
    await assert_error(response, 403, "session_required")


async def test_rate_limited_requests_are_refusals_and_each_second_is_flushed(
    make_api: Any, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(rate_limit_per_second=1, rate_limit_burst=2, key_usage_flush_seconds=1)
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token)
    secret = {"X-API-Key": key["secret_key"]}
    statuses = [await status(api, FILES, secret) for _ in range(5)]
    limited = statuses.count(429)
    assert limited and statuses.count(200) == 5 - limited, statuses
    # No flush asked for: the worker's own, within a second or so (watched in the store: the
    # session has a rate too).
    for _ in range(100):  # 10 s at most, for a busy machine
        await asyncio.sleep(0.1)
        if any(redis_client.scan_iter("*key-usage*")):
            break
    assert counts_by_day(await usage(api, token, key["id"])) == {today(clock): (5, limited)}


async def test_what_was_counted_is_flushed_when_the_app_stops(
    make_api: Any, clock: FakeClock
) -> None:
    first = await make_api()  # the tests' settings flush only when asked, or at the end
    token = await first.user_with_session(EMAIL)
    key = await first.create_key(token)
    assert await status(first, FILES, {"X-API-Key": key["secret_key"]}) == 200
    await first.client.close()  # the app's shutdown
    second = await make_api()
    assert counts_by_day(await usage(second, token, key["id"])) == {today(clock): (1, 0)}


async def test_deleting_the_user_deletes_what_their_keys_did(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token)
    assert await status(api, FILES, {"X-API-Key": key["secret_key"]}) == 200
    await api.app[KEY_USAGE].flush()
    assert any(redis_client.scan_iter("*key-usage*"))
    await api.app[POLICY].users.delete_user(EMAIL)
    assert not any(redis_client.scan_iter("*key-usage*"))
