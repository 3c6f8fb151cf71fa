"""Request-rate limits per API key and per session: 429 with Retry-After and the RateLimit fields
of the IETF HTTPAPI draft, kept in Redis so every worker and instance shares one bucket.

Time moves only through the injected clock, so the bucket arithmetic is exact.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis as redis_sync

from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.redis import RedisServer, free_port

FIELD = re.compile(r'^"credential";r=(\d+);t=(\d+)$')


def remaining(response) -> int:  # type: ignore[no-untyped-def]
    match = FIELD.match(response.headers["RateLimit"])
    assert match, response.headers["RateLimit"]
    return int(match.group(1))


@pytest.fixture
async def steady(make_api) -> Api:  # type: ignore[no-untyped-def]
    """The default burst refilling once a second: a bucket's key lives a second in Redis, which
    expires it in real time, so a slow machine can't refill it between a test's requests (at
    the default 100/s it would be gone 10 ms after one request)."""
    return await make_api(rate_limit_per_second=1, rate_limit_burst=200)


async def test_an_accepted_key_is_told_its_policy_and_what_is_left(api: Api) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]

    first = await api.files(key=key)

    assert first.status == 200
    # Defaults: 100 requests/s sustained, bursts of 200 (an empty bucket refills in 2 s).
    assert first.headers["RateLimit-Policy"] == '"credential";q=200;w=2'
    assert remaining(first) == 199


async def test_each_accepted_request_takes_one_from_the_bucket(steady: Api) -> None:
    api = steady
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]

    first = await api.files(key=key)
    second = await api.files(key=key)

    assert first.status == second.status == 200
    assert [remaining(first), remaining(second)] == [199, 198]


async def test_a_key_over_its_burst_gets_429_until_its_bucket_refills(
    make_api, clock: FakeClock
) -> None:
    api = await make_api(rate_limit_per_second=2, rate_limit_burst=3)
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]

    left = [remaining(await api.files(key=key)) for _ in range(3)]
    refused = await api.files(key=key)

    assert left == [2, 1, 0]
    error = await assert_error(refused, 429, "rate_limited")
    assert refused.headers["Retry-After"] == "1"
    assert error["details"] == {"retry_after_seconds": 1}
    assert refused.headers["RateLimit-Policy"] == '"credential";q=3;w=2'
    assert FIELD.match(refused.headers["RateLimit"]).group(1) == "0"
    assert key not in await refused.text()

    # A refused request takes nothing: one emission interval later exactly one more fits.
    clock.advance(seconds=0.5)
    assert (await api.files(key=key)).status == 200
    await assert_error(await api.files(key=key), 429, "rate_limited")
    clock.advance(seconds=1.5)
    assert [(await api.files(key=key)).status for _ in range(3)] == [200, 200, 200]


async def test_each_key_and_each_session_has_its_own_bucket(make_api) -> None:
    api = await make_api(rate_limit_per_second=1, rate_limit_burst=2)
    token = await api.user_with_session()
    first = (await api.create_key(token, name="first"))["secret_key"]
    second = (await api.create_key(token, name="second"))["secret_key"]

    for _ in range(2):
        assert (await api.files(key=first)).status == 200
    await assert_error(await api.files(key=first), 429, "rate_limited")

    assert (await api.files(key=second)).status == 200
    # The session made two requests (the two key creations) and has used its burst too.
    await assert_error(await api.files(token=token), 429, "rate_limited")
    other_session = await api.login("alice@example.com")
    assert (await api.files(token=other_session)).status == 200


async def test_the_bucket_is_shared_by_every_instance_on_the_same_redis(
    make_api, clock: FakeClock
) -> None:
    # Two apps on one Redis stand for two workers (or two hosts) behind one load balancer.
    one = await make_api(rate_limit_per_second=1, rate_limit_burst=4)
    other = await make_api(rate_limit_per_second=1, rate_limit_burst=4)
    token = await one.user_with_session()
    key = (await one.create_key(token))["secret_key"]

    statuses = []
    for n in range(6):
        statuses.append((await (one if n % 2 else other).files(key=key)).status)

    assert statuses == [200, 200, 200, 200, 429, 429]


async def test_limits_off_means_no_fields_and_no_bucket(make_api, redis_client) -> None:
    api = await make_api(rate_limit_per_second=0)
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]

    for _ in range(5):
        response = await api.files(key=key)
        assert response.status == 200
        assert "RateLimit" not in response.headers
        assert "RateLimit-Policy" not in response.headers
    assert redis_client.keys("fh:rate:*") == []


async def test_refusals_other_than_the_rate_carry_no_rate_fields(steady: Api) -> None:
    api = steady
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]

    wrong = await api.files(key=key[:-8] + "AAAAAAAA")
    missing = await api.files()
    accepted = await api.client.get("/api/v1/auth/session", headers=bearer(token))

    for response in (wrong, missing):
        assert response.status == 401
        assert "RateLimit" not in response.headers
    assert remaining(accepted) == 198  # logging in takes nothing; the key creation and this did


async def test_a_bucket_lives_only_as_long_as_it_takes_to_refill(make_api, redis_client) -> None:
    # A slow rate, so that each take adds a whole second and the buckets outlive the checks.
    api = await make_api(rate_limit_per_second=1, rate_limit_burst=10)
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]
    await api.files(key=key)

    buckets = redis_client.keys("fh:rate:*")
    assert len(buckets) == 2  # the session's and the key's
    for bucket in buckets:
        # The hash tag is the credential entry's own name: one cluster slot for both.
        assert re.fullmatch(r"fh:rate:\{fh:(key|session):[0-9a-f]{64}\}", bucket)
        assert 0 < redis_client.pttl(bucket) <= 10_000


async def test_buckets_never_reach_the_append_only_file(tmp_path: Path, make_api) -> None:
    """A write per request must not become an fsync per request: buckets are kept out of the AOF
    (and replication) while the credentials they limit are in it."""
    server = RedisServer(free_port(), tmp_path, ("--appendonly", "yes", "--appendfsync", "always"))
    server.start()
    try:
        api = await make_api(redis_url=server.url, rate_limit_per_second=1, rate_limit_burst=50)
        token = await api.user_with_session()
        key = (await api.create_key(token))["secret_key"]
        for _ in range(5):
            assert (await api.files(key=key)).status == 200
        client = redis_sync.Redis(port=server.port, decode_responses=True)
        assert len(client.keys("fh:rate:*")) == 2
        client.close()

        aof = b"".join(path.read_bytes() for path in (tmp_path / "appendonlydir").glob("*.aof"))
        assert b"fh:key:" in aof and b"fh:session:" in aof
        assert b"fh:rate:" not in aof
    finally:
        server.stop()


async def test_a_busy_key_takes_leases_yet_no_instance_admits_more_than_the_bucket_grants(
    make_api, redis_client
) -> None:
    # Two instances on one Redis; a burst of 64 lets each worker lease up to 4 requests.
    one = await make_api(rate_limit_per_second=1, rate_limit_burst=64)
    other = await make_api(rate_limit_per_second=1, rate_limit_burst=64)
    token = await one.user_with_session()
    key = (await one.create_key(token))["secret_key"]
    redis_client.config_resetstat()

    statuses = [(await (one if n % 2 else other).files(key=key)).status for n in range(100)]

    accepted = statuses.count(200)
    # Never more than the bucket holds; fewer only by what a worker still holds in a lease.
    assert 64 - 2 * 3 <= accepted <= 64
    assert set(statuses) == {200, 429}
    # Each refusal ran the script; of the accepted requests most were a plain HMGET.
    scripts = redis_client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert scripts - statuses.count(429) < accepted / 2


async def test_requests_served_from_a_lease_count_down_one_by_one(steady: Api) -> None:
    api = steady
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]

    left = [remaining(await api.files(key=key)) for _ in range(30)]

    assert left == list(range(199, 169, -1))


async def test_a_revoked_key_is_refused_at_once_though_its_worker_holds_a_lease(
    make_api,
) -> None:
    api = await make_api(rate_limit_per_second=1000, rate_limit_burst=1000)
    token = await api.user_with_session()
    created = await api.create_key(token)
    for _ in range(20):  # leases of 1, 2, 4, 8 and 16: the last one is not used up
        assert (await api.files(key=created["secret_key"])).status == 200

    revoked = await api.client.delete(f"/api/v1/keys/{created['id']}", headers=bearer(token))
    assert revoked.status == 200

    await assert_error(await api.files(key=created["secret_key"]), 401, "api_key_revoked")


async def test_an_unused_lease_is_given_back_and_the_bucket_refills_exactly(
    make_api, clock: FakeClock
) -> None:
    api = await make_api(rate_limit_per_second=1, rate_limit_burst=64)
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]
    for _ in range(4):  # takes of 1, 2 and 4: 7 taken from the bucket, 3 of them unused
        assert (await api.files(key=key)).status == 200

    clock.advance(seconds=1.5)  # the lease is over: its 3 go back with the next take

    # Exactly as if each request had been counted alone: 64 - 5 requests + 1.5 s of refill.
    assert remaining(await api.files(key=key)) == 60


async def test_a_session_over_its_rate_can_still_log_out_and_revoke_keys(make_api) -> None:
    """Ending a credential is never rate limited (issue 11, #3): a busy session that gets 429
    for everything else can still revoke a leaked key and log out, and both take effect."""
    api = await make_api(rate_limit_per_second=1, rate_limit_burst=3)
    token = await api.user_with_session()
    key = await api.create_key(token)
    while (await api.files(token=token)).status != 429:
        pass
    await assert_error(await api.files(token=token), 429, "rate_limited")

    revoked = await api.client.delete(f"/api/v1/keys/{key['id']}", headers=bearer(token))
    logged_out = await api.client.post("/api/v1/auth/logout", headers=bearer(token))

    assert revoked.status == 200, await revoked.text()
    assert logged_out.status == 200, await logged_out.text()
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_revoked")
    await assert_error(await api.files(token=token), 401, "invalid_session")
