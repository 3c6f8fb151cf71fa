"""A key that no longer works says why: revoked (by its owner, or as reported leaked) and when,
rolled out past its grace and when, expired and when; a typo or a key never issued is
``invalid_api_key``, which names the usual mistakes (a session token, the listed prefix).
Remembering why costs a working key nothing, and an unknown key still one round trip (a second
read only with limits off)."""

from __future__ import annotations

from typing import Any

import pytest
import redis as redis_sync

from service.api.context import AUTHENTICATOR
from service.clock import iso
from service.domain.credentials import generate_api_key
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.keys import EMAIL, KEYS, key_and_session, rolled, sha256_hex
from tests.support.mfa import reauthenticated
from tests.support.redis import client_commands

FILES = "/api/v1/files"
VERIFY = "/api/v1/auth/verify"
CHALLENGE = 'ApiKey realm="filehost"'


@pytest.fixture(params=["limits on", "limits off"])
async def api(request: pytest.FixtureRequest, make_api: Any) -> Api:
    """With limits on, a key is looked up by the script that takes from its bucket; off, by a
    plain HMGET (and a second read when it finds nothing)."""
    return await make_api(rate_limit_per_second=100 if request.param == "limits on" else 0)


async def refused(api: Api, secret: str, code: str) -> dict[str, Any]:
    """The refusal of ``secret``, the same in X-API-Key, as a Bearer token and at verify."""
    errors = []
    for headers in ({"X-API-Key": secret}, bearer(secret)):
        response = await api.client.get(FILES, headers=headers)
        errors.append(await assert_error(response, 401, code))
        assert response.headers["WWW-Authenticate"] == CHALLENGE
        assert secret not in await response.text()
        gateway = {**headers, "X-Required-Permission": "files.read"}
        at_verify = await api.client.get(VERIFY, headers=gateway)
        errors.append(await assert_error(at_verify, 401, code))
        assert at_verify.headers["X-Auth-Error"] == code
    assert all(error == errors[0] for error in errors)
    return errors[0]


async def test_a_revoked_key_says_it_was_revoked_and_when(api: Api, clock: FakeClock) -> None:
    token, key = await key_and_session(api)
    clock.advance(hours=1)
    response = await api.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))
    revoked_at = (await response.json())["data"]["revoked_at"]
    clock.advance(days=3)

    error = await refused(api, key["secret_key"], "api_key_revoked")

    assert error["message"] == f"The API key was revoked at {revoked_at}."
    assert error["details"] == {"revoked_at": revoked_at, "revoked_reason": "revoked_by_owner"}


async def test_a_key_reported_leaked_says_so(api: Api) -> None:
    _, key = await key_and_session(api)
    reported = await api.client.post(f"{KEYS}/leaked", json={"secrets": [key["secret_key"]]})
    assert reported.status == 202

    error = await refused(api, key["secret_key"], "api_key_revoked")

    assert error["message"].endswith(", after it was reported leaked.")
    assert error["details"]["revoked_reason"] == "reported_leaked"


async def test_a_typo_and_a_key_never_issued_are_not_valid_without_details(api: Api) -> None:
    _, key = await key_and_session(api)
    secret = key["secret_key"]
    typo = secret[:10] + ("A" if secret[10] != "A" else "B") + secret[11:]
    for wrong in (typo, generate_api_key()):
        error = await refused(api, wrong, "invalid_api_key")
        assert error == {"code": "invalid_api_key", "message": "The API key is not valid."}


async def test_the_mistakes_integrators_make_are_named_without_the_value(api: Api) -> None:
    """A session token in X-API-Key, a key sent with its scheme, the prefix the list shows: each
    refused as any value that is no key, saying what it looks like, never echoing it."""
    token, key = await key_and_session(api)
    listed = await api.client.get(KEYS, headers=bearer(token))
    (shown,) = [item for item in (await listed.json())["data"]["keys"] if item["id"] == key["id"]]
    prefix = shown["key_prefix"]
    assert prefix.endswith("...") and key["secret_key"].startswith(prefix[:-3])
    error = await refused(api, prefix, "invalid_api_key")
    assert error["message"] == (
        "This looks like a key's prefix as the keys list shows it, not its secret: a secret is "
        "shown once, when the key is made or rolled."
    )
    for sent, message in (
        (
            token,
            "This looks like a session token, not an API key: send it as Authorization: Bearer.",
        ),
        (f"Bearer {key['secret_key']}", 'Send the API key alone in X-API-Key, without "Bearer".'),
    ):
        for path, extra in ((FILES, {}), (VERIFY, {"X-Required-Permission": "files.read"})):
            response = await api.client.get(path, headers={"X-API-Key": sent, **extra})
            error = await assert_error(response, 401, "invalid_api_key")
            assert error == {"code": "invalid_api_key", "message": message}
            assert sent.split()[-1] not in await response.text()


async def test_an_expired_key_says_when_it_expired(api: Api, clock: FakeClock) -> None:
    _, key = await key_and_session(api, expires_days=30)
    clock.advance(days=30, hours=5)

    error = await refused(api, key["secret_key"], "api_key_expired")

    assert error["details"] == {"expired_at": key["expires_at"]}
    assert error["message"] == f"The API key expired at {key['expires_at']}."


async def test_a_rolled_out_secret_says_it_was_replaced_and_when_its_grace_ended(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api)
    data = await rolled(api, token, key["id"], grace=600)
    ends = data["previous_secret_expires_at"]
    clock.advance(seconds=600)  # its entry still there, marked with the grace's end

    error = await refused(api, key["secret_key"], "api_key_replaced")
    assert error["details"] == {"grace_ended_at": ends}
    assert ends in error["message"]

    # Rolled again: the older secret's entry goes, and the record of why takes its place.
    clock.advance(seconds=5)
    token = await reauthenticated(api, token)  # a roll needs a recent authentication
    now = iso(clock.now_ms())
    newest = await rolled(api, token, key["id"], grace=0)
    assert (await refused(api, key["secret_key"], "api_key_replaced"))["details"] == {
        "grace_ended_at": ends
    }
    assert (await refused(api, data["secret_key"], "api_key_replaced"))["details"] == {
        "grace_ended_at": now
    }
    assert (await api.files(key=newest["secret_key"])).status == 200


async def test_a_grace_cut_short_by_another_roll_ends_when_it_was_cut(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api)
    await rolled(api, token, key["id"], grace=3600)
    clock.advance(seconds=10)
    cut_at = iso(clock.now_ms())
    await rolled(api, token, key["id"], grace=3600)
    error = await refused(api, key["secret_key"], "api_key_replaced")
    assert error["details"] == {"grace_ended_at": cut_at}


async def test_revoking_a_key_in_a_grace_makes_both_secrets_revoked(
    api: Api, clock: FakeClock
) -> None:
    token, key = await key_and_session(api)
    data = await rolled(api, token, key["id"], grace=3600)
    response = await api.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))
    revoked_at = (await response.json())["data"]["revoked_at"]
    clock.advance(hours=2)  # past the grace: still revoked, not replaced
    for secret in (key["secret_key"], data["secret_key"]):
        error = await refused(api, secret, "api_key_revoked")
        assert error["details"]["revoked_at"] == revoked_at


async def test_a_secret_whose_key_expired_during_its_grace_is_not_called_replaced(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    token, key = await key_and_session(api, expires_days=1)
    data = await rolled(api, token, key["id"], grace=604_800)
    # Its key expired and its entries went (as Redis removes them a day after the expiry).
    clock.advance(days=3)
    for secret in (key["secret_key"], data["secret_key"]):
        redis_client.delete(f"fh:key:{sha256_hex(secret)}")
    await refused(api, key["secret_key"], "invalid_api_key")


async def test_a_deleted_users_keys_are_simply_unknown(api: Api) -> None:
    from service.api.context import POLICY

    token, key = await key_and_session(api)
    data = await rolled(api, token, key["id"], grace=3600)
    await api.app[POLICY].users.delete_user(EMAIL)
    for secret in (key["secret_key"], data["secret_key"]):
        await refused(api, secret, "invalid_api_key")


async def test_why_is_read_in_the_lookups_one_round_trip(
    make_api: Any, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(rate_limit_per_second=100)
    token, key = await key_and_session(api)
    other = await api.create_key(token, name="working")
    assert (await api.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))).status == 200
    unknown = generate_api_key()
    # Each secret once before counting: a cluster's node loads the lookup script at its first
    # use there (NOSCRIPT, then EVAL), which the counts are not about.
    for secret, status in ((other["secret_key"], 200), (key["secret_key"], 401), (unknown, 401)):
        assert (await api.files(key=secret)).status == status
    await api.app[AUTHENTICATOR]._background.drain()  # the key's last use

    # Every command Redis ran, a script's own included: the working key's script reads its
    # entry and bucket and writes the bucket; a missing entry's reads the entry and why.
    for secret, status, ran in (
        (other["secret_key"], 200, {"evalsha": 1, "hmget": 1, "get": 1, "set": 1}),
        (key["secret_key"], 401, {"evalsha": 1, "hmget": 1, "get": 1}),  # revoked
        (unknown, 401, {"evalsha": 1, "hmget": 1, "get": 1}),
    ):
        redis_client.config_resetstat()
        assert (await api.files(key=secret)).status == status
        commands = {
            name.removeprefix("cmdstat_"): value["calls"]
            for name, value in redis_client.info("commandstats").items()
        }
        for not_the_lookups in ("info", "config|resetstat", "zrange"):  # zrange: files listed
            commands.pop(not_the_lookups, None)
        assert commands == ran, (status, commands)


async def test_with_limits_off_only_a_missing_entry_costs_a_second_read(
    make_api: Any, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(rate_limit_per_second=0)
    token, key = await key_and_session(api)
    other = await api.create_key(token, name="working")
    assert (await api.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))).status == 200
    assert (await api.files(key=other["secret_key"])).status == 200
    await api.app[AUTHENTICATOR]._background.drain()

    redis_client.config_resetstat()
    assert (await api.files(key=other["secret_key"])).status == 200
    assert client_commands(redis_client) == {"hmget": 1, "zrange": 1}
    for secret in (key["secret_key"], generate_api_key()):
        redis_client.config_resetstat()
        assert (await api.files(key=secret)).status == 401
        assert client_commands(redis_client) == {"hmget": 1, "get": 1}
