"""Editing a key (issue 13): PATCH /api/v1/keys/{id} and what it changes on the very next
request: name, permissions, expiry, enabled (401 api_key_disabled), allowed_ips (403
ip_not_allowed, trusted proxies and forward-auth included) and the key's own rate; the fields
GET /keys shows; the refusals; the audit events; and the per-request lookup still one round trip.

Driven over HTTP against the real Redis server of the fixtures; time moves only through the
injected ``clock``.
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta
from typing import Any

import pytest
import redis as redis_sync
from redis.exceptions import ConnectionError as RedisConnectionError

from service.app import STORE
from service.domain.outcomes import KeyChanged
from service.store.api_keys import ApiKeyStore
from service.store.fields import KEY_EXPIRED_GRACE_MS
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock, iso_of, parse_iso
from tests.support.keys import (
    EMAIL,
    KEYS,
    WHOAMI,
    audit_events,
    edit,
    edited,
    key_and_session,
    listed,
    sha256_hex,
)
from tests.support.mfa import reauthenticated
from tests.support.openapi import DOCUMENT, validator

VERIFY = "/api/v1/auth/verify"


async def verify(api: Api, key: str, **headers: str) -> Any:
    return await api.client.get(
        VERIFY, headers={"X-API-Key": key, "X-Required-Permission": "files.read", **headers}
    )


# -- what GET /keys shows ------------------------------------------------------------------------


async def test_a_new_key_is_listed_enabled_from_anywhere_at_the_default_rate(api: Api) -> None:
    token, key = await key_and_session(api)
    view = await listed(api, token, key["id"])
    assert view["enabled"] is True
    assert view["allowed_ips"] == []
    assert view["rate_limit"] is None
    assert view["previous_secret_expires_at"] is None


# -- each change, in force on the next request -------------------------------------------------


async def test_an_edit_answers_the_whole_record_and_the_list_shows_the_same(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api, name="old", permissions=["files.read"])
    clock.advance(hours=1)
    token = await reauthenticated(api, token)  # the edit widens the key: a step-up first
    data = await edited(
        api,
        token,
        key["id"],
        {
            "name": "  renamed  ",
            "permissions": ["files.write", "files.read"],
            "expires_days": 7,
            "enabled": True,
            "allowed_ips": ["127.0.0.1", "10.1.2.3/8", "2001:db8::1/32"],
            "rate_limit": {"per_second": 5, "burst": 10},
        },
    )
    assert data["id"] == key["id"] and data["key_prefix"] == key["key_prefix"]
    assert data["name"] == "renamed"
    assert data["permissions"] == ["files.read", "files.write"]
    assert data["created_at"] == key["created_at"]
    # expires_days counts from the edit (an hour after the creation), not from the creation.
    assert parse_iso(data["expires_at"]) - parse_iso(iso_of(clock)) == timedelta(days=7)
    assert data["allowed_ips"] == ["127.0.0.1/32", "10.0.0.0/8", "2001:db8::/32"]
    assert data["rate_limit"] == {"per_second": 5, "burst": 10}
    assert await listed(api, token, key["id"]) == data


async def test_a_permission_change_is_in_force_on_the_next_request(api: Api) -> None:
    token, key = await key_and_session(api, permissions=["files.read"])
    assert (await api.files(key=key["secret_key"])).status == 200

    await edited(api, token, key["id"], {"permissions": ["files.write"]})
    error = await assert_error(
        await api.files(key=key["secret_key"]), 403, "insufficient_permission"
    )
    assert error["details"] == {"required_permission": "files.read"}

    await edited(api, token, key["id"], {"permissions": ["files.read"]})
    assert (await api.files(key=key["secret_key"])).status == 200


async def test_a_new_expiry_counts_from_the_edit_and_is_in_force_at_once(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api, expires_days=30)
    clock.advance(days=20)
    token = await api.login(EMAIL)  # the first session is long over
    data = await edited(api, token, key["id"], {"expires_days": 1})
    assert parse_iso(data["expires_at"]) - parse_iso(iso_of(clock)) == timedelta(days=1)
    clock.advance(hours=23, seconds=3599)
    assert (await api.files(key=key["secret_key"])).status == 200
    clock.advance(seconds=1)
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_expired")
    # The entry follows the new expiry in Redis too (kept the usual grace past it).
    entry = f"fh:key:{sha256_hex(key['secret_key'])}"
    expected = parse_iso(data["expires_at"]).timestamp() * 1000 + KEY_EXPIRED_GRACE_MS
    assert abs(redis_client.pexpiretime(entry) - expected) < 1000


async def test_a_disabled_key_is_refused_everywhere_until_enabled_again(api: Api) -> None:
    token, key = await key_and_session(api)
    secret = key["secret_key"]
    data = await edited(api, token, key["id"], {"enabled": False})
    assert data["enabled"] is False

    for response in (
        await api.files(key=secret),
        await api.client.get(WHOAMI, headers={"X-API-Key": secret}),
        await verify(api, secret),
    ):
        error = await assert_error(response, 401, "api_key_disabled")
        assert response.headers["WWW-Authenticate"].startswith("ApiKey")
        assert secret not in str(error)
    assert (await listed(api, token, key["id"]))["enabled"] is False

    await edited(api, token, key["id"], {"enabled": True})
    assert (await api.files(key=secret)).status == 200


async def test_a_disabled_key_still_counts_toward_the_limit(make_api: Any) -> None:
    api = await make_api(max_keys_per_account=1)
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"enabled": False})
    response = await api.client.post(
        KEYS, json={"name": "second", "permissions": ["files.read"]}, headers=bearer(token)
    )
    await assert_error(response, 409, "key_limit_reached")


async def test_a_key_is_refused_outside_its_allowed_ips_and_served_inside(api: Api) -> None:
    token, key = await key_and_session(api)
    secret = key["secret_key"]

    await edited(api, token, key["id"], {"allowed_ips": ["10.0.0.0/8", "2001:db8::/32"]})
    for response in (
        await api.files(key=secret),
        await api.client.get(WHOAMI, headers={"X-API-Key": secret}),
    ):
        error = await assert_error(response, 403, "ip_not_allowed")
        assert "127.0.0.1" not in str(error) and secret not in str(error)

    await edited(api, token, key["id"], {"allowed_ips": ["10.0.0.0/8", "127.0.0.0/30"]})
    assert (await api.files(key=secret)).status == 200
    await edited(api, token, key["id"], {"allowed_ips": ["10.0.0.0/8"]})
    await assert_error(await api.files(key=secret), 403, "ip_not_allowed")


@pytest.mark.parametrize("anywhere", [[], None])
async def test_an_empty_or_null_allow_list_means_from_anywhere(api: Api, anywhere: Any) -> None:
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"allowed_ips": ["192.0.2.1"]})
    await assert_error(await api.files(key=key["secret_key"]), 403, "ip_not_allowed")

    data = await edited(api, token, key["id"], {"allowed_ips": anywhere})
    assert data["allowed_ips"] == []
    assert (await api.files(key=key["secret_key"])).status == 200


async def test_allowed_ips_are_kept_in_one_canonical_form_without_repeats(api: Api) -> None:
    token, key = await key_and_session(api)
    data = await edited(
        api,
        token,
        key["id"],
        {
            "allowed_ips": [
                "192.0.2.7",
                "192.0.2.7/32",
                "2001:DB8:0:0::5",
                "::ffff:198.51.100.9",
                "198.51.100.0/24",
                "10.9.8.7/8",
            ]
        },
    )
    assert data["allowed_ips"] == [
        "192.0.2.7/32",
        "2001:db8::5/128",
        "198.51.100.9/32",
        "198.51.100.0/24",
        "10.0.0.0/8",
    ]


async def test_the_allow_list_is_checked_against_the_client_behind_a_trusted_proxy(
    make_api: Any,
) -> None:
    api = await make_api(trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"allowed_ips": ["203.0.113.0/24"]})

    def from_(address: str) -> dict[str, str]:
        return {"X-API-Key": key["secret_key"], "X-Forwarded-For": address}

    assert (await api.client.get("/api/v1/files", headers=from_("203.0.113.9"))).status == 200
    await assert_error(
        await api.client.get("/api/v1/files", headers=from_("198.51.100.1")), 403, "ip_not_allowed"
    )
    # A client can't pass as allowed by writing the header itself: only the entry the trusted
    # proxy appended counts.
    spoofed = from_("203.0.113.9, 198.51.100.1")
    await assert_error(
        await api.client.get("/api/v1/files", headers=spoofed), 403, "ip_not_allowed"
    )


async def test_an_untrusted_peer_is_checked_by_its_own_address_whatever_it_forwards(
    api: Api,
) -> None:
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"allowed_ips": ["203.0.113.0/24"]})
    headers = {"X-API-Key": key["secret_key"], "X-Forwarded-For": "203.0.113.9"}
    await assert_error(
        await api.client.get("/api/v1/files", headers=headers), 403, "ip_not_allowed"
    )


async def test_forward_auth_checks_the_address_the_gateway_forwards(make_api: Any) -> None:
    api = await make_api(trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"allowed_ips": ["203.0.113.0/24"]})

    allowed = await verify(api, key["secret_key"], **{"X-Forwarded-For": "203.0.113.77"})
    assert allowed.status == 200, await allowed.text()
    refused = await verify(api, key["secret_key"], **{"X-Forwarded-For": "192.0.2.1"})
    await assert_error(refused, 403, "ip_not_allowed")
    assert refused.headers["X-Auth-Error"] == "ip_not_allowed"
    await edited(api, token, key["id"], {"enabled": False})
    disabled = await verify(api, key["secret_key"], **{"X-Forwarded-For": "203.0.113.77"})
    await assert_error(disabled, 401, "api_key_disabled")
    assert disabled.headers["X-Auth-Error"] == "api_key_disabled"


async def test_a_rate_of_its_own_replaces_the_default_and_null_restores_it(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api)
    secret = key["secret_key"]
    await edited(api, token, key["id"], {"rate_limit": {"per_second": 1, "burst": 2}})

    served = await api.files(key=secret)
    assert served.status == 200
    # An accepted request names the key's own policy too, and counts its own bucket.
    assert served.headers["RateLimit-Policy"] == '"credential";q=2;w=2'
    assert served.headers["RateLimit"] == '"credential";r=1;t=1'
    assert (await api.files(key=secret)).status == 200
    refused = await api.files(key=secret)
    error = await assert_error(refused, 429, "rate_limited")
    assert refused.headers["Retry-After"] == "1"
    assert error["details"] == {"retry_after_seconds": 1}
    assert refused.headers["RateLimit-Policy"] == '"credential";q=2;w=2'

    clock.advance(seconds=1)
    assert (await api.files(key=secret)).status == 200
    await assert_error(await api.files(key=secret), 429, "rate_limited")

    data = await edited(api, token, key["id"], {"rate_limit": None})
    assert data["rate_limit"] is None
    # The bucket keeps what was taken from it (at 1/s its two requests fill the default's 2 s
    # of tolerance); once that has passed, the default's bursts of 200 are back.
    clock.advance(seconds=2)
    assert [(await api.files(key=secret)).status for _ in range(20)] == [200] * 20


async def test_a_lower_rate_is_in_force_on_the_next_request_though_the_worker_holds_a_lease(
    make_api: Any,
) -> None:
    # A slow refill, so what the requests below take from the bucket is still there however slow
    # the machine: the bucket's expiry runs on Redis's real clock.
    api = await make_api(rate_limit_per_second=10, rate_limit_burst=1000)
    token, key = await key_and_session(api)
    secret = key["secret_key"]
    # Leases of 1, 2, 4, 8, 16 and 32 requests: the last one is far from used up.
    for _ in range(40):
        assert (await api.files(key=secret)).status == 200

    await edited(api, token, key["id"], {"rate_limit": {"per_second": 1, "burst": 1}})

    # The bucket holds the 40 taken above (4 s at 10/s): at 1/s with a burst of 1 there
    # is no room, and the worker's lease, taken under the old rate, serves nothing more.
    refused = await api.files(key=secret)
    await assert_error(refused, 429, "rate_limited")
    assert refused.headers["RateLimit-Policy"] == '"credential";q=1;w=1'


async def test_the_own_rate_of_one_key_leaves_other_keys_at_the_default(api: Api) -> None:
    token, slow = await key_and_session(api)
    other = await api.create_key(token)
    await edited(api, token, slow["id"], {"rate_limit": {"per_second": 1, "burst": 1}})
    assert (await api.files(key=slow["secret_key"])).status == 200
    await assert_error(await api.files(key=slow["secret_key"]), 429, "rate_limited")
    served = await api.files(key=other["secret_key"])
    assert served.status == 200
    assert served.headers["RateLimit-Policy"] == '"credential";q=200;w=2'


async def test_with_limits_off_a_key_rate_of_its_own_limits_nothing(make_api: Any) -> None:
    api = await make_api(rate_limit_per_second=0)
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"rate_limit": {"per_second": 1, "burst": 1}})
    assert [(await api.files(key=key["secret_key"])).status for _ in range(5)] == [200] * 5


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"undocumented": 1}, {"undocumented"}),
        ({"id": "key_x"}, {"id"}),
        ({"name": ""}, {"name"}),
        ({"name": None}, {"name"}),
        ({"name": "x" * 101}, {"name"}),
        ({"name": "a\x00b"}, {"name"}),
        ({"permissions": []}, {"permissions"}),
        ({"permissions": ["files.delete"]}, {"permissions"}),
        ({"permissions": None}, {"permissions"}),
        ({"expires_days": 0}, {"expires_days"}),
        ({"expires_days": 3651}, {"expires_days"}),
        ({"expires_days": 30.0}, {"expires_days"}),
        ({"expires_days": None}, {"expires_days"}),
        ({"enabled": "false"}, {"enabled"}),
        ({"enabled": 0}, {"enabled"}),
        ({"enabled": None}, {"enabled"}),
        ({"allowed_ips": "10.0.0.0/8"}, {"allowed_ips"}),
        ({"allowed_ips": ["10.0.0.0/33"]}, {"allowed_ips"}),
        ({"allowed_ips": ["not an address"]}, {"allowed_ips"}),
        ({"allowed_ips": [" 10.0.0.1"]}, {"allowed_ips"}),
        ({"allowed_ips": ["fe80::1%eth0"]}, {"allowed_ips"}),
        ({"allowed_ips": ["010.0.0.1"]}, {"allowed_ips"}),
        ({"allowed_ips": [7]}, {"allowed_ips"}),
        ({"allowed_ips": [f"10.0.0.{n}" for n in range(101)]}, {"allowed_ips"}),
        ({"rate_limit": 5}, {"rate_limit"}),
        ({"rate_limit": {}}, {"rate_limit"}),
        ({"rate_limit": {"per_second": 0, "burst": 1}}, {"rate_limit"}),
        ({"rate_limit": {"per_second": 10_001, "burst": 1}}, {"rate_limit"}),
        ({"rate_limit": {"per_second": 1, "burst": 10_001}}, {"rate_limit"}),
        ({"rate_limit": {"per_second": 1.5, "burst": 2}}, {"rate_limit"}),
        ({"rate_limit": {"per_second": 1, "burst": 2, "window": 3}}, {"rate_limit"}),
        ({"name": "", "enabled": "no", "other": 1}, {"name", "enabled", "other"}),
    ],
)
async def test_bad_edits_are_refused_per_field_and_change_nothing(
    api: Api, body: dict[str, Any], fields: set[str]
) -> None:
    token, key = await key_and_session(api)
    before = await listed(api, token, key["id"])
    error = await assert_error(await edit(api, token, key["id"], body), 400, "validation_failed")
    assert set(error["details"]) == fields
    assert await listed(api, token, key["id"]) == before
    assert (await api.files(key=key["secret_key"])).status == 200


async def test_the_bad_items_of_an_allow_list_are_named_by_position_from_1_not_echoed(
    api: Api,
) -> None:
    """Positions count from 1, as a person counts the lines of the list they typed."""
    token, key = await key_and_session(api)
    body = {"allowed_ips": ["10.0.0.1", "nonsense-value", "192.0.2.0/24", "300.1.1.1"]}
    error = await assert_error(await edit(api, token, key["id"], body), 400, "validation_failed")
    problem = error["details"]["allowed_ips"]
    assert problem == (
        "items at positions 2, 4 (counting from 1) are not IPv4/IPv6 addresses or CIDR networks"
    )
    assert "nonsense-value" not in problem and "300.1.1.1" not in problem


async def test_a_rate_limit_problem_names_each_of_its_fields(api: Api) -> None:
    token, key = await key_and_session(api)
    body = {"rate_limit": {"per_second": 0, "extra": 1}}
    error = await assert_error(await edit(api, token, key["id"], body), 400, "validation_failed")
    assert set(error["details"]["rate_limit"]) == {"per_second", "burst", "extra"}


@pytest.mark.parametrize("body", [b"", b"[]", b"{", b'"enabled"'])
async def test_a_body_that_is_no_json_object_is_refused(api: Api, body: bytes) -> None:
    token, key = await key_and_session(api)
    response = await api.client.patch(
        f"{KEYS}/{key['id']}",
        data=body,
        headers={**bearer(token), "Content-Type": "application/json"},
    )
    assert response.status == 400
    assert (await response.json())["error"]["code"] in {"malformed_json", "body_not_object"}


async def test_an_unknown_foreign_revoked_expired_or_malformed_key_is_key_not_found(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api, expires_days=1)
    bob = await api.user_with_session("bob@example.com")
    bobs = await api.create_key(bob)
    revoked = await api.create_key(token)
    assert (await api.client.delete(f"{KEYS}/{revoked['id']}", headers=bearer(token))).status == 200

    for key_id in (bobs["id"], revoked["id"], "key_" + "A" * 22, "not-a-key-id", "leaked"):
        await assert_error(await edit(api, token, key_id, {"enabled": False}), 404, "key_not_found")
    assert (await api.files(key=bobs["secret_key"])).status == 200
    clock.advance(days=1)
    token = await api.login(EMAIL)
    await assert_error(await edit(api, token, key["id"], {"name": "x"}), 404, "key_not_found")


async def test_only_a_session_may_edit_a_key(api: Api) -> None:
    token, key = await key_and_session(api, permissions=["keys.write", "keys.read"])
    response = await api.client.patch(
        f"{KEYS}/{key['id']}", json={"enabled": False}, headers={"X-API-Key": key["secret_key"]}
    )
    await assert_error(response, 403, "session_required")
    response = await api.client.patch(f"{KEYS}/{key['id']}", json={"enabled": False})
    await assert_error(response, 401, "credential_missing")
    assert (await listed(api, token, key["id"]))["enabled"] is True


# -- the audit trail -----------------------------------------------------------------------------


async def test_an_edit_is_recorded_with_the_changed_fields_and_their_new_values(
    api: Api,
) -> None:
    token, key = await key_and_session(api, name="ci", permissions=["files.read"])
    data = await edited(
        api,
        token,
        key["id"],
        {
            "name": "ci",  # unchanged: not in the event
            "permissions": ["files.read", "files.write"],
            "allowed_ips": ["192.0.2.1"],
            "rate_limit": {"per_second": 3, "burst": 4},
            "expires_days": 10,
        },
    )
    [event] = await audit_events(api, token, "key.edited")
    named = {"type": "api_key", "key_id": key["id"], "name": "ci", "key_prefix": key["key_prefix"]}
    assert event["target"] == named
    assert event["actor"]["type"] == "session"
    assert event["ip"] == "127.0.0.1"
    assert event["changes"] == {
        "permissions": ["files.read", "files.write"],
        "permissions_added": ["files.write"],
        "permissions_removed": [],
        "allowed_ips": ["192.0.2.1/32"],
        "rate_limit": {"per_second": 3, "burst": 4},
        "expires_at": data["expires_at"],
    }
    await edited(api, token, key["id"], {"rate_limit": None, "allowed_ips": None})
    latest = (await audit_events(api, token, "key.edited"))[0]
    assert latest["changes"] == {"rate_limit": None, "allowed_ips": []}
    await edited(api, token, key["id"], {"permissions": ["files.write", "folders.read"]})
    latest = (await audit_events(api, token, "key.edited"))[0]
    assert latest["changes"] == {
        "permissions": ["files.write", "folders.read"],
        "permissions_added": ["folders.read"],
        "permissions_removed": ["files.read"],
    }


async def test_disabling_and_enabling_are_events_of_their_own(api: Api) -> None:
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"enabled": False, "name": "paused"})
    await edited(api, token, key["id"], {"enabled": True})
    kinds = [event["type"] for event in await audit_events(api, token)]
    assert kinds[:3] == ["key.enabled", "key.disabled", "key.edited"]
    # Each names the key as it was until then: the rename is a change of the edit.
    names = [key["name"], key["name"], "paused"]
    for event, name in zip((await audit_events(api, token))[2::-1], names, strict=True):
        assert event["target"] == {
            "type": "api_key",
            "key_id": key["id"],
            "name": name,
            "key_prefix": key["key_prefix"],
        }
    for event in (await audit_events(api, token))[:2]:
        assert event["changes"] is None


async def test_an_edit_that_changes_nothing_records_and_writes_nothing(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api, name="same")
    before = len(await audit_events(api, token))
    entry = f"fh:key:{sha256_hex(key['secret_key'])}"
    stored = redis_client.hgetall(entry)
    data = await edited(api, token, key["id"], {"name": "same", "enabled": True})
    assert data == await listed(api, token, key["id"])
    await edited(api, token, key["id"], {})
    assert len(await audit_events(api, token)) == before
    assert redis_client.hgetall(entry) == stored


async def test_an_edit_whose_event_cannot_be_written_is_503_and_not_made(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    key = await api.create_key(token)
    trail = f"fh:{{{user.id}}}:audit"
    redis_client.delete(trail)
    redis_client.set(trail, "not a sorted set")  # every write to the trail now fails

    response = await edit(api, token, key["id"], {"enabled": False, "name": "x"})
    await assert_error(response, 503, "store_unavailable")
    redis_client.delete(trail)
    view = await listed(api, token, key["id"])
    assert view["enabled"] is True and view["name"] == key["name"]
    assert (await api.files(key=key["secret_key"])).status == 200


async def test_an_edit_that_failed_after_changing_the_listing_is_completed_by_its_retry(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, key = await key_and_session(api)

    async def broken(*args: Any) -> None:
        raise RedisConnectionError("refused by the test")

    with monkeypatch.context() as patch:
        patch.setattr(api.app[STORE].api_keys._entries, "write", broken)
        response = await edit(api, token, key["id"], {"enabled": False})
        await assert_error(response, 503, "store_unavailable")
    # The failed change is not in force (its entries were not written); the list already says
    # what was asked, and the retry, finding nothing left to change there, writes the entries.
    assert (await api.files(key=key["secret_key"])).status == 200
    assert (await edited(api, token, key["id"], {"enabled": False}))["enabled"] is False
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_disabled")


# -- what Redis holds ---------------------------------------------------------------------------


async def test_the_digest_entry_holds_every_setting_and_drops_those_reset(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api)
    entry = f"fh:key:{sha256_hex(key['secret_key'])}"
    assert set(redis_client.hgetall(entry)) == {"u", "k", "p", "e"}
    await edited(
        api,
        token,
        key["id"],
        {
            "enabled": False,
            "allowed_ips": ["10.0.0.0/8", "192.0.2.1"],
            "rate_limit": {"per_second": 7, "burst": 9},
        },
    )
    stored = redis_client.hgetall(entry)
    assert (stored["x"], stored["n"], stored["r"]) == ("1", "10.0.0.0/8,192.0.2.1/32", "7:9")
    await edited(api, token, key["id"], {"enabled": True, "allowed_ips": [], "rate_limit": None})
    assert set(redis_client.hgetall(entry)) == {"u", "k", "p", "e", "v"}


@pytest.mark.parametrize(
    ("field", "value"), [("n", "10.0.0.0/8,garbage"), ("n", ""), ("r", "fast"), ("r", "0:1")]
)
async def test_a_damaged_setting_in_the_digest_entry_fails_closed(
    api: Api, redis_client: redis_sync.Redis, field: str, value: str
) -> None:
    _, key = await key_and_session(api)
    redis_client.hset(f"fh:key:{sha256_hex(key['secret_key'])}", field, value)
    await assert_error(await api.files(key=key["secret_key"]), 503, "store_unavailable")


async def test_a_damaged_disabled_flag_still_disables(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    _, key = await key_and_session(api)
    redis_client.hset(f"fh:key:{sha256_hex(key['secret_key'])}", "x", "garbage")
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_disabled")


# -- as documented -------------------------------------------------------------------------------


async def test_the_new_refusals_match_their_documented_responses(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = await make_api(trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    token, key = await key_and_session(api, permissions=["files.write"])
    key_only = {"X-API-Key": key["secret_key"]}
    forwarded = {"X-Forwarded-For": "192.0.2.1"}
    outside = {**key_only, **forwarded}
    files = "/api/v1/files"
    await edited(api, token, key["id"], {"allowed_ips": ["127.0.0.1"]})
    answers = [
        (await api.client.get(files, headers=key_only), "ApiKeyForbidden"),
        (await api.client.get(files, headers=outside), "ApiKeyForbidden"),
        (await api.client.get(WHOAMI, headers=outside), "IpNotAllowed"),
        (await verify(api, key["secret_key"], **forwarded), "VerifyForbidden"),
    ]
    await edited(api, token, key["id"], {"enabled": False})
    answers += [
        (await api.client.get(files, headers=key_only), "AnyCredentialUnauthorized"),
        (await api.client.get(WHOAMI, headers=key_only), "WhoamiUnauthorized"),
        (await verify(api, key["secret_key"]), "VerifyUnauthorized"),
    ]

    async def busy(*args: Any) -> None:
        raise KeyChanged()

    monkeypatch.setattr(ApiKeyStore, "edit", busy)
    answers.append((await edit(api, token, key["id"], {"name": "x"}), "KeyBusy"))

    checked = []
    for response, name in answers:
        documented = DOCUMENT["components"]["responses"][name]
        body = await response.json()
        schema = f"/components/responses/{name}/content/application~1json/schema"
        assert not list(validator(schema).iter_errors(body)), (name, body)
        for header in documented.get("headers", {}):
            assert header in response.headers, (name, header)
        checked.append((response.status, body["error"]["code"]))
    assert checked == [
        (403, "insufficient_permission"),
        (403, "ip_not_allowed"),
        (403, "ip_not_allowed"),
        (403, "ip_not_allowed"),
        (401, "api_key_disabled"),
        (401, "api_key_disabled"),
        (401, "api_key_disabled"),
        (409, "key_busy"),
    ]


async def test_an_expired_key_is_answered_expired_whatever_its_other_settings(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api, expires_days=1)
    await edited(api, token, key["id"], {"enabled": False, "allowed_ips": ["192.0.2.1"]})
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_disabled")
    clock.advance(days=1)
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_expired")
