"""A key's request rate is spent only by requests it serves: a request refused for its key (a
disabled or expired key, a rolled-out secret past its grace, an address outside the key's
allowed networks) takes nothing from the key's bucket, so whoever holds a leaked key cannot lock
its owner out with 429s; and a rolled key's secrets share the key's one bucket through the
grace. The clock is the test's, so every count is exact; the two-worker case is in
``tests/system/hardening/test_refusals_take_no_rate_workers.py``."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import pytest

from service.domain.credentials import digest
from service.domain.key_rules import AllowLists, address_form, address_ranges, canonical_network
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock

KEYS = "/api/v1/keys"
FILES = "/api/v1/files"
# The key's own rate in these tests: one request a second, bursts of five.
RATE = {"per_second": 1, "burst": 5}


async def _key(api: Api, token: str, **settings: Any) -> dict[str, Any]:
    key = await api.create_key(token, permissions=["files.read"])
    response = await api.client.patch(
        f"{KEYS}/{key['id']}", json={"rate_limit": RATE, **settings}, headers=bearer(token)
    )
    assert response.status == 200, await response.text()
    return key


async def _edit(api: Api, token: str, key_id: str, body: dict[str, Any]) -> None:
    response = await api.client.patch(f"{KEYS}/{key_id}", json=body, headers=bearer(token))
    assert response.status == 200, await response.text()


async def _files(api: Api, secret: str, forwarded_for: str | None = None) -> Any:
    headers = {"X-API-Key": secret}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    return await api.client.get(FILES, headers=headers)


async def _statuses(api: Api, secret: str, count: int, forwarded_for: str | None = None) -> list:
    return [(await _files(api, secret, forwarded_for)).status for _ in range(count)]


def _bucket_exists(redis_client: Any, secret: str) -> bool:
    entry = f"fh:key:{digest(secret)}"
    return bool(redis_client.exists(f"fh:rate:{{{entry}}}"))


@pytest.fixture
async def api(make_api: Any) -> Api:
    # The client's address comes from X-Forwarded-For, as behind a proxy on loopback.
    proxies = (ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("::1/128"))
    return await make_api(trusted_proxies=proxies)


async def test_requests_from_outside_a_pinned_keys_networks_leave_its_rate_alone(
    api: Api,
) -> None:
    token = await api.user_with_session()
    key = await _key(api, token, allowed_ips=["192.0.2.7"])

    refused = await _statuses(api, key["secret_key"], 12, forwarded_for="198.51.100.1")
    served = await _statuses(api, key["secret_key"], 5, forwarded_for="192.0.2.7")

    assert refused == [403] * 12
    assert served == [200] * 5
    await assert_error(await _files(api, key["secret_key"], "192.0.2.7"), 429, "rate_limited")


async def test_a_disabled_keys_refused_requests_leave_its_rate_alone(api: Api) -> None:
    token = await api.user_with_session()
    key = await _key(api, token, enabled=False)

    refused = await _statuses(api, key["secret_key"], 12)
    await _edit(api, token, key["id"], {"enabled": True})
    served = await _statuses(api, key["secret_key"], 5)

    assert refused == [401] * 12
    assert served == [200] * 5
    await assert_error(await _files(api, key["secret_key"]), 429, "rate_limited")


async def test_an_expired_keys_requests_take_nothing(
    api: Api, clock: FakeClock, redis_client: Any
) -> None:
    token = await api.user_with_session()
    key = await _key(api, token, expires_days=1)
    clock.advance(days=1, seconds=1)

    refused = await _statuses(api, key["secret_key"], 12)

    assert refused == [401] * 12
    assert not _bucket_exists(redis_client, key["secret_key"])


async def test_a_rolled_out_secret_past_its_grace_takes_nothing_from_the_key(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    key = await _key(api, token)
    response = await api.client.post(
        f"{KEYS}/{key['id']}/roll", json={"grace_seconds": 1}, headers=bearer(token)
    )
    assert response.status == 201, await response.text()
    new_secret = (await response.json())["data"]["secret_key"]
    clock.advance(seconds=10)  # the grace is over, and both buckets are full again

    refused = await _statuses(api, key["secret_key"], 12)
    served = await _statuses(api, new_secret, 5)

    assert refused == [401] * 12
    assert served == [200] * 5
    await assert_error(await _files(api, new_secret), 429, "rate_limited")


async def test_a_rolled_keys_two_secrets_share_the_keys_one_rate_through_the_grace(
    api: Api,
) -> None:
    token = await api.user_with_session()
    key = await _key(api, token)
    response = await api.client.post(
        f"{KEYS}/{key['id']}/roll", json={"grace_seconds": 3600}, headers=bearer(token)
    )
    assert response.status == 201, await response.text()
    new_secret = (await response.json())["data"]["secret_key"]

    old_served = await _statuses(api, key["secret_key"], 3)
    new_served = await _statuses(api, new_secret, 2)

    assert old_served == [200] * 3 and new_served == [200] * 2
    await assert_error(await _files(api, new_secret), 429, "rate_limited")
    await assert_error(await _files(api, key["secret_key"]), 429, "rate_limited")


async def test_every_secret_of_a_rolled_key_has_its_entry_in_one_cluster_slot(
    api: Api,
) -> None:
    from service.app import STORE

    token = await api.user_with_session()
    key = await api.create_key(token)
    secrets = [key["secret_key"]]
    for _ in range(3):
        response = await api.client.post(
            f"{KEYS}/{key['id']}/roll", json={"grace_seconds": 60}, headers=bearer(token)
        )
        assert response.status == 201, await response.text()
        secrets.append((await response.json())["data"]["secret_key"])

    store = api.app[STORE]
    assert len({store.api_keys.entry_slot(digest(secret)) for secret in secrets}) == 1
    assert (await _files(api, secrets[-1])).status == 200


# What the lookup script decides must be what the authenticator decides: for every pair below,
# a request is served (it takes) exactly when AllowLists allows the address.
NETWORKS = [
    ["127.0.0.1"],
    ["10.0.0.0/8", "192.0.2.0/24"],
    ["0.0.0.0/0"],
    ["::/0"],
    ["2001:db8::/32"],
    ["::ffff:198.51.100.0/120"],
    ["2001:db8::1", "203.0.113.5"],
    ["fe80::/10", "::1"],
]
ADDRESSES = [
    "127.0.0.1",
    "127.0.0.2",
    "10.255.255.255",
    "11.0.0.0",
    "192.0.2.255",
    "198.51.100.77",
    "::ffff:198.51.100.77",
    "::ffff:10.1.2.3",
    "::1",
    "2001:db8::1",
    "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
    "2001:db9::",
    "fe80::1",
    "203.0.113.5",
    "not an address",
    None,
]


@pytest.mark.parametrize("networks", NETWORKS, ids=[",".join(n) for n in NETWORKS])
async def test_the_lookup_compares_addresses_as_the_authenticator_does(
    networks: list[str], api: Api
) -> None:
    from service.app import STORE

    store = api.app[STORE]
    token = await api.user_with_session()
    key = await _key(api, token, allowed_ips=networks)
    secret_digest = digest(key["secret_key"])
    canonical = [canonical_network(network) for network in networks]
    stored = ",".join(canonical)  # type: ignore[arg-type]
    assert address_ranges(canonical)  # type: ignore[arg-type]
    allow_lists = AllowLists()
    for address in ADDRESSES:
        entry = await store.lookup.find_api_key(
            secret_digest, 0, 1, 0, 0, address_form(address).encode()
        )
        taken = entry.rate is not None
        assert taken == allow_lists.allows(stored, address), (networks, address)


async def test_an_entry_written_before_addresses_were_compared_in_the_lookup_is_rewritten(
    api: Api, redis_client: Any
) -> None:
    token = await api.user_with_session()
    key = await _key(api, token, allowed_ips=["192.0.2.7"])
    entry = f"fh:key:{digest(key['secret_key'])}"
    redis_client.hdel(entry, "a")  # as an entry of an earlier release holds it

    assert (await _files(api, key["secret_key"], "192.0.2.7")).status == 200
    for _ in range(50):  # the rewrite runs in the background
        if redis_client.hexists(entry, "a"):
            break
        await asyncio.sleep(0.02)

    assert redis_client.hget(entry, "a") == address_ranges(["192.0.2.7/32"])
    refused = await _statuses(api, key["secret_key"], 12, forwarded_for="198.51.100.1")
    served = await _statuses(api, key["secret_key"], 4, forwarded_for="192.0.2.7")
    assert refused == [403] * 12 and served == [200] * 4
