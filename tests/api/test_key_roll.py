"""Rolling a key (issue 13): POST /api/v1/keys/{id}/roll gives the key a new secret, shown once;
the old one keeps working for the grace chosen (measured with the injected clock: served at
N - 1 s, refused at N s) and is refused after it, at once without one; rolling again ends the
older grace; everything else about the key stays, and later changes reach both secrets. Also:
its refusals, its audit event, concurrent rolls and edits, and the per-request lookup still one
round trip with every setting a key can have.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis as redis_sync
from redis.exceptions import ConnectionError as RedisConnectionError

from service.api.context import AUTHENTICATOR, POLICY
from service.app import STORE
from service.clock import iso
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.keys import (
    EMAIL,
    KEYS,
    WHOAMI,
    audit_events,
    edited,
    key_and_session,
    listed,
    roll,
    rolled,
    sha256_hex,
    status_of,
)
from tests.support.redis import client_commands

# -- the new secret --------------------------------------------------------------------------


async def test_a_roll_keeps_the_key_and_shows_its_new_secret_once(api: Api) -> None:
    token, key = await key_and_session(api, name="deploy", permissions=["files.read"])
    data = await rolled(api, token, key["id"])

    new = data["secret_key"]
    assert new != key["secret_key"] and new.startswith("fhk_")
    assert data["key_prefix"] == new[:12] + "..."
    for field in ("id", "name", "permissions", "created_at", "expires_at"):
        assert data[field] == key[field], field
    assert (data["enabled"], data["allowed_ips"], data["rate_limit"]) == (True, [], None)
    view = await listed(api, token, key["id"])
    assert view == {field: value for field, value in data.items() if field != "secret_key"}
    assert new not in str(view)
    assert await status_of(api, new) == 200


async def test_without_a_grace_the_old_secret_is_refused_at_once(api: Api) -> None:
    token, key = await key_and_session(api)
    assert await status_of(api, key["secret_key"]) == 200
    data = await rolled(api, token, key["id"], grace=0)
    assert data["previous_secret_expires_at"] is None
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_replaced")
    assert await status_of(api, data["secret_key"]) == 200


async def test_a_roll_without_a_body_has_no_grace(api: Api) -> None:
    token, key = await key_and_session(api)
    response = await api.client.post(f"{KEYS}/{key['id']}/roll", headers=bearer(token))
    assert response.status == 201, await response.text()
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_replaced")


@pytest.mark.parametrize("grace", [1, 60, 604_800])
async def test_the_old_secret_works_until_its_grace_ends_and_never_after(
    api: Api, clock: FakeClock, grace: int
) -> None:
    token, key = await key_and_session(api, expires_days=30)
    old = key["secret_key"]
    # Redis expires the old entry by its own clock: the shortest grace gets its whole second.
    clock.catch_up()
    data = await rolled(api, token, key["id"], grace=grace)
    assert data["previous_secret_expires_at"] == iso(clock.now_ms() + grace * 1000)

    clock.advance(seconds=grace - 1)
    assert await status_of(api, old) == 200
    assert await status_of(api, data["secret_key"]) == 200
    clock.advance(seconds=1)
    error = await assert_error(await api.files(key=old), 401, "api_key_replaced")
    assert error["details"] == {"grace_ended_at": data["previous_secret_expires_at"]}
    assert await status_of(api, data["secret_key"]) == 200
    token = await api.login(EMAIL)  # a week's grace outlives the session
    assert (await listed(api, token, key["id"]))["previous_secret_expires_at"] is None


async def test_rolling_again_ends_the_older_grace_at_once(api: Api) -> None:
    token, key = await key_and_session(api)
    first = key["secret_key"]
    second = (await rolled(api, token, key["id"], grace=3600))["secret_key"]
    assert await status_of(api, first) == 200

    third = await rolled(api, token, key["id"], grace=600)

    await assert_error(await api.files(key=first), 401, "api_key_replaced")
    assert await status_of(api, second) == 200  # in the new grace
    assert await status_of(api, third["secret_key"]) == 200


async def test_a_grace_past_the_expiry_ends_with_the_key(api: Api, clock: FakeClock) -> None:
    token, key = await key_and_session(api, expires_days=1)
    data = await rolled(api, token, key["id"], grace=604_800)
    clock.advance(days=1)
    for secret in (key["secret_key"], data["secret_key"]):
        await assert_error(await api.files(key=secret), 401, "api_key_expired")


async def test_the_old_entry_is_kept_in_redis_only_until_its_grace_ends(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api)
    old_entry = f"fh:key:{sha256_hex(key['secret_key'])}"
    await rolled(api, token, key["id"], grace=600)
    ends = clock.now_ms() + 600_000
    assert int(redis_client.hget(old_entry, "g")) == ends
    assert redis_client.pexpiretime(old_entry) == ends
    await rolled(api, token, key["id"], grace=0)
    assert not redis_client.exists(old_entry)


# -- everything else stays, and later changes reach both secrets -------------------------------


async def test_a_rolled_key_keeps_its_settings_on_the_new_secret(api: Api) -> None:
    token, key = await key_and_session(api, permissions=["files.write"])
    await edited(
        api,
        token,
        key["id"],
        {"allowed_ips": ["192.0.2.0/24"], "rate_limit": {"per_second": 2, "burst": 3}},
    )
    data = await rolled(api, token, key["id"], grace=60)
    assert data["allowed_ips"] == ["192.0.2.0/24"]
    assert data["rate_limit"] == {"per_second": 2, "burst": 3}
    for secret in (key["secret_key"], data["secret_key"]):
        await assert_error(await api.files(key=secret), 403, "ip_not_allowed")

    await edited(api, token, key["id"], {"allowed_ips": []})
    for secret in (key["secret_key"], data["secret_key"]):
        await assert_error(await api.files(key=secret), 403, "insufficient_permission")


async def test_a_disabled_key_stays_disabled_when_rolled(api: Api) -> None:
    token, key = await key_and_session(api)
    await edited(api, token, key["id"], {"enabled": False})
    data = await rolled(api, token, key["id"], grace=60)
    assert data["enabled"] is False
    for secret in (key["secret_key"], data["secret_key"]):
        await assert_error(await api.files(key=secret), 401, "api_key_disabled")


async def test_an_edit_during_the_grace_reaches_both_secrets_at_once(api: Api) -> None:
    token, key = await key_and_session(api, permissions=["files.read"])
    data = await rolled(api, token, key["id"], grace=3600)
    secrets = (key["secret_key"], data["secret_key"])

    await edited(api, token, key["id"], {"enabled": False})
    for secret in secrets:
        await assert_error(await api.files(key=secret), 401, "api_key_disabled")
    await edited(api, token, key["id"], {"enabled": True, "permissions": ["files.write"]})
    for secret in secrets:
        await assert_error(await api.files(key=secret), 403, "insufficient_permission")
    await edited(api, token, key["id"], {"permissions": ["files.read"]})
    assert [await status_of(api, secret) for secret in secrets] == [200, 200]


async def test_revoking_a_rolled_key_ends_both_secrets_and_their_entries(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api)
    data = await rolled(api, token, key["id"], grace=3600)
    response = await api.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))
    assert response.status == 200
    for secret in (key["secret_key"], data["secret_key"]):
        await assert_error(await api.files(key=secret), 401, "api_key_revoked")
        assert not redis_client.exists(f"fh:key:{sha256_hex(secret)}")


async def test_deleting_the_user_ends_both_secrets(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api)
    data = await rolled(api, token, key["id"], grace=3600)
    await api.app[POLICY].users.delete_user(EMAIL)
    for secret in (key["secret_key"], data["secret_key"]):
        await assert_error(await api.files(key=secret), 401, "invalid_api_key")
    assert list(redis_client.scan_iter("fh:key:*")) == []


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"grace_seconds": -1},
        {"grace_seconds": 604_801},
        {"grace_seconds": 60.0},
        {"grace_seconds": "60"},
        {"grace_seconds": None},
        {"grace_seconds": True},
        {"grace": 60},
    ],
)
async def test_a_bad_grace_is_refused_and_nothing_is_rolled(api: Api, body: dict[str, Any]) -> None:
    token, key = await key_and_session(api)
    error = await assert_error(await roll(api, token, key["id"], body), 400, "validation_failed")
    assert set(error["details"]) == set(body)
    assert (await listed(api, token, key["id"]))["key_prefix"] == key["key_prefix"]
    assert await status_of(api, key["secret_key"]) == 200


async def test_an_unknown_foreign_revoked_expired_or_malformed_key_is_not_rolled(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api, expires_days=1)
    bob = await api.user_with_session("bob@example.com")
    bobs = await api.create_key(bob)
    revoked = await api.create_key(token)
    assert (await api.client.delete(f"{KEYS}/{revoked['id']}", headers=bearer(token))).status == 200
    for key_id in (bobs["id"], revoked["id"], "key_" + "B" * 22, "nonsense"):
        await assert_error(await roll(api, token, key_id), 404, "key_not_found")
    assert await status_of(api, bobs["secret_key"]) == 200
    clock.advance(days=1)
    token = await api.login(EMAIL)
    await assert_error(await roll(api, token, key["id"]), 404, "key_not_found")


async def test_only_a_session_may_roll_a_key(api: Api) -> None:
    _, key = await key_and_session(api, permissions=["keys.write"])
    response = await api.client.post(
        f"{KEYS}/{key['id']}/roll", json={}, headers={"X-API-Key": key["secret_key"]}
    )
    await assert_error(response, 403, "session_required")
    assert await status_of(api, key["secret_key"]) == 403  # still the same key, files.read lacking


# -- the audit trail -----------------------------------------------------------------------------


async def test_a_roll_is_recorded_with_its_grace_and_never_a_secret(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api)
    data = await rolled(api, token, key["id"], grace=90)
    [event] = await audit_events(api, token, "key.rolled")
    # Named by the prefix it had until the roll; the new one is among the changes.
    assert event["target"] == {
        "type": "api_key",
        "key_id": key["id"],
        "name": key["name"],
        "key_prefix": key["key_prefix"],
    }
    assert event["actor"]["type"] == "session"
    assert event["changes"] == {
        "grace_seconds": 90,
        "previous_secret_expires_at": iso(clock.now_ms() + 90_000),
        "key_prefix": data["key_prefix"],
    }
    assert data["key_prefix"] != key["key_prefix"]
    stored = str(redis_client.zrange(next(redis_client.scan_iter("fh:*:audit")), 0, -1))
    for secret in (key["secret_key"], data["secret_key"]):
        for text in (stored, str(await audit_events(api, token))):
            assert secret not in text and sha256_hex(secret) not in text
            assert secret[:16] not in text


async def test_a_roll_whose_event_cannot_be_written_is_503_and_not_made(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    key = await api.create_key(token)
    trail = f"fh:{{{user.id}}}:audit"
    redis_client.delete(trail)
    redis_client.set(trail, "not a sorted set")

    await assert_error(
        await roll(api, token, key["id"], {"grace_seconds": 60}), 503, "store_unavailable"
    )
    redis_client.delete(trail)
    assert (await listed(api, token, key["id"]))["key_prefix"] == key["key_prefix"]
    assert await status_of(api, key["secret_key"]) == 200
    assert len(list(redis_client.scan_iter("fh:key:*"))) == 1


# -- failing part-way -----------------------------------------------------------------------------


async def broken(*args: Any, **kwargs: Any) -> None:
    raise RedisConnectionError("refused by the test")


@pytest.mark.parametrize("step", ["_entries.create", "_confirm_roll", "_finish_roll"])
async def test_a_roll_that_failed_part_way_leaves_the_old_secret_and_its_retry_gives_the_grace(
    api: Api, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    token, key = await key_and_session(api)
    old = key["secret_key"]
    owner, _, name = f"api_keys.{step}".rpartition(".")
    target = api.app[STORE]
    for attribute in owner.split("."):
        target = getattr(target, attribute)
    with monkeypatch.context() as patch:
        patch.setattr(target, name, broken)
        failed = await roll(api, token, key["id"], {"grace_seconds": 60})
        await assert_error(failed, 503, "store_unavailable")
    assert await status_of(api, old) == 200
    # An edit meanwhile, and the failed roll's grace passing, leave it the key's secret.
    await edited(api, token, key["id"], {"name": "still the old secret"})
    clock.advance(seconds=61)
    assert await status_of(api, old) == 200

    data = await rolled(api, token, key["id"], grace=60)
    clock.advance(seconds=59)
    assert [await status_of(api, old), await status_of(api, data["secret_key"])] == [200, 200]
    clock.advance(seconds=1)
    await assert_error(await api.files(key=old), 401, "api_key_replaced")
    assert await status_of(api, data["secret_key"]) == 200


# -- concurrent changes ------------------------------------------------------------------------


async def test_concurrent_rolls_leave_exactly_the_last_secret_working(api: Api) -> None:
    token, key = await key_and_session(api)
    responses = await asyncio.gather(*(roll(api, token, key["id"]) for _ in range(6)))
    secrets = []
    for response in responses:
        assert response.status in (201, 409), await response.text()
        if response.status == 201:
            secrets.append((await response.json())["data"]["secret_key"])
    assert secrets
    working = [
        secret for secret in [key["secret_key"], *secrets] if await status_of(api, secret) == 200
    ]
    assert len(working) == 1
    assert (await listed(api, token, key["id"]))["key_prefix"] == working[0][:12] + "..."


async def test_a_roll_finishing_while_another_reads_it_unfinished_keeps_its_secret(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving that matters for the ``rolling`` mark: roll X has changed the listing
    and is about to finish; roll Y reads the listing (X unfinished: its secret never shown, to be
    dropped); X finishes and shows its secret; only then does Y try its change. Y's change is
    refused and made again from the finished listing, so X's secret is the previous one in Y's
    grace, never deleted."""
    token, key = await key_and_session(api)
    store = api.app[STORE].api_keys
    real_finish, real_change = store._finish_roll, store._entries.change
    x_at_finish, x_may_finish = asyncio.Event(), asyncio.Event()
    y_has_read, y_may_change = asyncio.Event(), asyncio.Event()

    async def finish(*args: Any) -> bool:
        x_at_finish.set()
        await x_may_finish.wait()
        return await real_finish(*args)

    async def change(*args: Any) -> int:
        if x_at_finish.is_set() and not y_has_read.is_set():  # Y's first change: hold it
            y_has_read.set()
            await y_may_change.wait()
        return await real_change(*args)

    monkeypatch.setattr(store, "_finish_roll", finish)
    monkeypatch.setattr(store._entries, "change", change)
    x = asyncio.ensure_future(roll(api, token, key["id"], {"grace_seconds": 0}))
    await x_at_finish.wait()
    y = asyncio.ensure_future(roll(api, token, key["id"], {"grace_seconds": 3600}))
    await y_has_read.wait()
    x_may_finish.set()
    x_rolled = await x
    assert x_rolled.status == 201, await x_rolled.text()
    y_may_change.set()
    y_rolled = await y
    assert y_rolled.status == 201, await y_rolled.text()

    x_secret = (await x_rolled.json())["data"]["secret_key"]
    y_data = (await y_rolled.json())["data"]
    assert y_data["previous_secret_expires_at"] is not None
    assert await status_of(api, x_secret) == 200  # in Y's grace
    assert await status_of(api, y_data["secret_key"]) == 200
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_replaced")


async def test_a_disable_racing_rolls_reaches_every_secret_they_hand_out(api: Api) -> None:
    token, key = await key_and_session(api)
    rolls = [roll(api, token, key["id"], {"grace_seconds": 3600}) for _ in range(4)]
    disable = api.client.patch(
        f"{KEYS}/{key['id']}", json={"enabled": False}, headers=bearer(token)
    )
    *responses, disabled = await asyncio.gather(*rolls, disable)
    assert disabled.status == 200, await disabled.text()
    secrets = [key["secret_key"]]
    for response in responses:
        assert response.status in (201, 409), await response.text()
        if response.status == 201:
            secrets.append((await response.json())["data"]["secret_key"])
    for secret in secrets:
        assert (await api.files(key=secret)).status == 401
    assert (await listed(api, token, key["id"]))["enabled"] is False


async def test_a_revocation_racing_rolls_leaves_no_secret_working(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api)
    rolls = [roll(api, token, key["id"], {"grace_seconds": 3600}) for _ in range(4)]
    revoke = api.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))
    *responses, revoked = await asyncio.gather(*rolls, revoke)
    assert revoked.status == 200, await revoked.text()
    secrets = [key["secret_key"]]
    for response in responses:
        assert response.status in (201, 404, 409), await response.text()
        if response.status == 201:
            secrets.append((await response.json())["data"]["secret_key"])
    for secret in secrets:
        # Revoked, or replaced by a later roll before the revocation: never working.
        response = await api.files(key=secret)
        assert response.status == 401, await response.text()
        assert (await response.json())["error"]["code"] in ("api_key_revoked", "api_key_replaced")
    assert list(redis_client.scan_iter("fh:key:*")) == []


# -- still one round trip ------------------------------------------------------------------------


@pytest.mark.parametrize("limits", ["on", "off"])
async def test_a_key_with_every_setting_still_costs_one_command_per_request(
    make_api: Any, redis_client: redis_sync.Redis, limits: str
) -> None:
    api = await make_api(rate_limit_per_second=100 if limits == "on" else 0)
    token, key = await key_and_session(api)
    await edited(
        api,
        token,
        key["id"],
        {
            "allowed_ips": [f"10.{n}.0.0/16" for n in range(99)] + ["127.0.0.1"],
            "rate_limit": {"per_second": 1000, "burst": 1000},
        },
    )
    new_secret = (await rolled(api, token, key["id"], grace=3600))["secret_key"]

    def gateway(secret: str) -> dict[str, str]:
        return {"X-API-Key": secret, "X-Required-Permission": "files.read"}

    for secret in (key["secret_key"], new_secret):
        assert (await api.client.get("/api/v1/auth/verify", headers=gateway(secret))).status == 200
    await api.app[AUTHENTICATOR]._background.drain()  # the key's last use, written once a minute

    redis_client.config_resetstat()
    requests = 40
    for n in range(requests):
        secret = (key["secret_key"], new_secret)[n % 2]
        response = await api.client.get("/api/v1/auth/verify", headers=gateway(secret))
        assert response.status == 200, await response.text()

    commands = client_commands(redis_client)
    assert sum(commands.values()) == requests, commands
    assert set(commands) <= {"evalsha", "hmget"}, commands
    if limits == "off":
        assert commands == {"hmget": requests}
    # And the whoami of a key (not the gateway's path) still reads it once, plus its user.
    redis_client.config_resetstat()
    assert (await api.client.get(WHOAMI, headers={"X-API-Key": new_secret})).status == 200
    assert sum(client_commands(redis_client).values()) == 2
