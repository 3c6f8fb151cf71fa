"""Leak reports (issue 13): POST /api/v1/keys/leaked takes no credential and revokes at once
every live key among the values reported, whichever account holds it; the answer is 202 with
the same body whatever was found; each revocation is recorded for the key's owner with a
leak_report actor; reports are limited per client address; bad bodies are 400 and echo nothing.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
import redis as redis_sync

from service.auth.leak_reports import LEAK_REPORT_WINDOW_SECONDS, LEAK_REPORTS_PER_ADDRESS
from service.domain.credentials import generate_api_key
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.keys import EMAIL, KEYS, audit_events, edited, key_and_session, rolled, status_of

LEAKED = f"{KEYS}/leaked"
UA = "secret-scanner/1.0"


async def report(api: Api, secrets: Any, **headers: str) -> Any:
    return await api.client.post(
        LEAKED, json={"secrets": secrets}, headers={"User-Agent": UA, **headers}
    )


async def reported(api: Api, secrets: list[str], **headers: str) -> dict[str, Any]:
    response = await report(api, secrets, **headers)
    assert response.status == 202, await response.text()
    assert response.headers["Cache-Control"] == "no-store"
    return await response.json()


async def keys_of(api: Api, token: str) -> list[str]:
    response = await api.client.get(KEYS, headers=bearer(token))
    return [key["id"] for key in (await response.json())["data"]["keys"]]


async def test_reported_keys_of_any_account_are_revoked_at_once(api: Api) -> None:
    alice, alices = await key_and_session(api)
    kept = await api.create_key(alice)
    bob = await api.user_with_session("bob@example.com")
    bobs = await api.create_key(bob)

    body = await reported(api, [alices["secret_key"], bobs["secret_key"], "fhk_not-a-key"])

    assert body == {"success": True, "data": {"received": 3}}
    for secret in (alices["secret_key"], bobs["secret_key"]):
        error = await assert_error(await api.files(key=secret), 401, "api_key_revoked")
        assert error["details"]["revoked_reason"] == "reported_leaked"
    assert await keys_of(api, alice) == [kept["id"]]
    assert await keys_of(api, bob) == []
    assert await status_of(api, kept["secret_key"]) == 200


async def test_the_answer_is_the_same_whatever_was_found(api: Api) -> None:
    _, key = await key_and_session(api)
    answers = []
    for value in (key["secret_key"], key["secret_key"], generate_api_key(), "anything at all"):
        response = await report(api, [value])
        answers.append((response.status, await response.read()))
    assert len(set(answers)) == 1
    assert answers[0] == (202, b'{"success":true,"data":{"received":1}}')


async def test_a_secret_still_in_its_grace_revokes_its_key(api: Api) -> None:
    token, key = await key_and_session(api)
    new = (await rolled(api, token, key["id"], grace=3600))["secret_key"]
    await reported(api, [key["secret_key"]])
    for secret in (key["secret_key"], new):
        error = await assert_error(await api.files(key=secret), 401, "api_key_revoked")
        assert error["details"]["revoked_reason"] == "reported_leaked"
    assert await keys_of(api, token) == []


async def test_a_secret_that_no_longer_works_revokes_nothing(api: Api, clock: FakeClock) -> None:
    token, key = await key_and_session(api, expires_days=30)
    new = (await rolled(api, token, key["id"], grace=60))["secret_key"]
    clock.advance(seconds=60)
    expiring = await api.create_key(token, expires_days=1)
    clock.advance(days=1)
    await reported(api, [key["secret_key"], expiring["secret_key"]])
    assert await status_of(api, new) == 200
    token = await api.login(EMAIL)
    assert await keys_of(api, token) == [key["id"]]
    assert await audit_events(api, token, "key.revoked_as_leaked") == []


async def test_a_disabled_key_reported_leaked_is_revoked_too(api: Api) -> None:
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"enabled": False})
    await reported(api, [key["secret_key"]])
    assert await keys_of(api, token) == []


async def test_the_owner_sees_the_revocation_and_why_in_the_audit_trail(api: Api) -> None:
    token, key = await key_and_session(api)
    await reported(api, [key["secret_key"], key["secret_key"]])

    [event] = await audit_events(api, token, "key.revoked_as_leaked")
    assert event["actor"] == {"type": "leak_report", "ip": "127.0.0.1"}
    assert (event["ip"], event["user_agent"]) == ("127.0.0.1", UA)
    assert event["target"] == {
        "type": "api_key",
        "key_id": key["id"],
        "name": key["name"],
        "key_prefix": key["key_prefix"],
    }
    assert event["changes"] == {"revoked_reason": "reported_leaked"}
    assert await audit_events(api, token, "key.revoked") == []
    assert key["secret_key"] not in str(await audit_events(api, token))


async def test_the_reporter_is_named_by_the_address_behind_a_trusted_proxy(
    make_api: Any,
) -> None:
    api = await make_api(trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    token, key = await key_and_session(api)
    await reported(api, [key["secret_key"]], **{"X-Forwarded-For": "198.51.100.23"})
    [event] = await audit_events(api, token, "key.revoked_as_leaked")
    assert event["actor"] == {"type": "leak_report", "ip": "198.51.100.23"}


async def test_reports_are_limited_per_client_address(make_api: Any) -> None:
    api = await make_api(trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    token, key = await key_and_session(api)
    one = {"X-Forwarded-For": "203.0.113.5"}
    for _ in range(LEAK_REPORTS_PER_ADDRESS):
        await reported(api, [generate_api_key()], **one)

    refused = await report(api, [key["secret_key"]], **one)

    error = await assert_error(refused, 429, "leak_reports_throttled")
    retry_after = int(refused.headers["Retry-After"])
    assert 1 <= retry_after <= LEAK_REPORT_WINDOW_SECONDS
    assert error["details"] == {"retry_after_seconds": retry_after}
    assert await status_of(api, key["secret_key"]) == 200  # a refused report looks at nothing
    # Another address is counted on its own; an IPv6 client per /64.
    await reported(api, [key["secret_key"]], **{"X-Forwarded-For": "203.0.113.6"})
    assert await keys_of(api, token) == []
    for host in range(LEAK_REPORTS_PER_ADDRESS):
        await reported(api, ["x"], **{"X-Forwarded-For": f"2001:db8:1:2::{host + 1}"})
    other_host = {"X-Forwarded-For": "2001:db8:1:2:ffff::9"}
    await assert_error(await report(api, ["x"], **other_host), 429, "leak_reports_throttled")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"secrets": []},
        {"secrets": "fhk_x"},
        {"secrets": None},
        {"secrets": [7]},
        {"secrets": [""]},
        {"secrets": ["x" * 257]},
        {"secrets": ["x"] * 101},
        {"secrets": ["x"], "note": "found on a paste site"},
    ],
)
async def test_a_bad_report_is_400_and_echoes_nothing(api: Api, body: dict[str, Any]) -> None:
    _, key = await key_and_session(api)
    if body.get("secrets") == ["x"]:
        body = {**body, "secrets": [key["secret_key"]]}
    response = await api.client.post(LEAKED, json=body)
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) <= {"secrets", "note"}
    assert key["secret_key"] not in await response.text()
    assert await status_of(api, key["secret_key"]) == 200


async def test_a_report_whose_event_cannot_be_written_is_503_and_revokes_nothing(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    key = await api.create_key(token)
    trail = f"fh:{{{user.id}}}:audit"
    redis_client.delete(trail)
    redis_client.set(trail, "not a sorted set")

    await assert_error(await report(api, [key["secret_key"]]), 503, "store_unavailable")
    redis_client.delete(trail)
    assert await status_of(api, key["secret_key"]) == 200
    await reported(api, [key["secret_key"]])  # the reporter's retry revokes it
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_revoked")
