"""Forward-auth for keys bound to folders: ``GET /auth/verify`` of a bound key whose original
request names a file, folder or alias outside its folders is 403, as is a key whose folders were
all deleted; and what binding costs: nothing for a key that is not bound (its lookup runs exactly
the commands it ran before binding existed), the round trips of an unbound key's request for a
bound key's read of a file or folder."""

from __future__ import annotations

from typing import Any

import pytest
import redis as redis_sync

from service.api.context import AUTHENTICATOR
from service.domain.credentials import new_id
from tests.support.api import Api, assert_error, bearer
from tests.support.bound import (
    EVERY_FILE_AND_FOLDER_PERMISSION,
    FILES,
    FOLDERS,
    VERIFY,
    Account,
    account,
    verify_headers,
)
from tests.support.clock import FakeClock

PERMISSIONS = [*EVERY_FILE_AND_FOLDER_PERMISSION, "aliases.read", "aliases.write"]


@pytest.fixture
async def world(api: Api, clock: FakeClock) -> Account:
    return await account(api, clock, permissions=PERMISSIONS)


def inside_and_outside(world: Account) -> tuple[list[str], list[str]]:
    """Original URIs naming what is inside the key's folders, and what is not."""
    inbox, private = world.folder_id("inbox"), world.folder_id("private")
    inside = [
        f"{FILES}/{world.files['inbox_sub']}",
        f"{FILES}/{world.files['outbox']}/content",
        f"{FOLDERS}/{inbox}",
        f"{FOLDERS}/{world.folder_id('inbox_sub')}",
        f"{FILES}?folder_id={inbox}",
        f"{FOLDERS}?parent_id={inbox}&limit=5",
        FILES,
        f"{FILES}?limit=3",
        FOLDERS,
        # Many files at once: the service checks each one; a folder's archive, its folder.
        f"{FILES}/bulk",
        f"{FILES}/archive?ids={world.files['inbox']},{world.files['private']}",
        f"{FOLDERS}/{inbox}/archive",
        f"{FILES}?q=inbox&folder_id={inbox}",
    ]
    outside = [
        f"{FILES}/{world.files['private']}",
        f"{FILES}/{world.files['top']}/content",
        f"{FILES}/{new_id('fil')}",
        f"{FILES}/nonsense/content",
        f"{FOLDERS}/{private}",
        f"{FOLDERS}/{private}/archive",
        f"{FILES}/archive/more",
        f"{FILES}?q=private&folder_id={private}",
        f"{FOLDERS}/{new_id('fld')}",
        f"{FILES}?folder_id={private}",
        f"{FILES}?folder_id=root",
        f"{FILES}?folder_id={inbox}&folder_id={private}",
        f"{FILES}?folder_id=",
        f"{FOLDERS}?parent_id={private}",
        f"/api/v1/aliases/{new_id('als')}",
        "/api/v1/settings",
    ]
    return inside, outside


async def test_verify_passes_what_is_inside_and_refuses_what_is_not(
    api: Api, world: Account
) -> None:
    secret = world.key["secret_key"]
    inside, outside = inside_and_outside(world)
    for uri in inside:
        response = await api.client.get(VERIFY, headers=verify_headers(secret, uri))
        assert response.status == 200, (uri, await response.text())
        assert response.headers["X-Auth-Permissions"] == ",".join(PERMISSIONS)
        assert response.headers["X-Auth-Key-Id"] == world.key["id"]
    errors = []
    for uri in outside:
        for method in ("GET", "DELETE"):
            response = await api.client.get(VERIFY, headers=verify_headers(secret, uri, method))
            error = await assert_error(response, 403, "insufficient_permission")
            assert response.headers["X-Auth-Error"] == "insufficient_permission"
            if "settings" not in uri:  # a permission the key lacks comes first there
                errors.append(error)
    assert errors and all(error == errors[0] for error in errors)
    assert errors[0]["details"] == {"bound_to_folders": True}


async def test_traefiks_headers_are_read_the_same_way(api: Api, world: Account) -> None:
    for uri, status in (
        (f"{FILES}/{world.files['inbox']}", 200),
        (f"{FILES}/{world.files['private']}", 403),
    ):
        headers = {
            "X-API-Key": world.key["secret_key"],
            "X-Forwarded-Method": "GET",
            "X-Forwarded-Uri": uri,
        }
        assert (await api.client.get(VERIFY, headers=headers)).status == status


async def test_the_settings_are_refused_however_they_are_asked_for(
    api: Api, world: Account
) -> None:
    from tests.support.bound import bound_key

    every = ["files.read", "settings.read", "settings.write"]
    key = await bound_key(api, world.token, [world.folder_id("inbox")], every)
    for headers in (
        {"X-Required-Permission": "settings.read"},
        {"X-Original-Method": "PATCH", "X-Original-URI": "/api/v1/settings"},
    ):
        response = await api.client.get(VERIFY, headers={"X-API-Key": key["secret_key"], **headers})
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"] == {"bound_to_folders": True}
    # Files it may read, named by permission alone: passed.
    named = {"X-API-Key": key["secret_key"], "X-Required-Permission": "files.read"}
    assert (await api.client.get(VERIFY, headers=named)).status == 200


async def test_a_key_whose_folders_were_deleted_passes_nothing(api: Api, world: Account) -> None:
    for name in ("inbox", "outbox"):
        response = await api.client.delete(
            f"{FOLDERS}/{world.folder_id(name)}?recursive=true", headers=bearer(world.token)
        )
        assert response.status == 200
    secret = world.key["secret_key"]
    named = {"X-API-Key": secret, "X-Required-Permission": "files.read"}
    for headers in (
        named,
        verify_headers(secret, FILES),
        verify_headers(secret, f"{FILES}/{world.files['top']}"),
        {**named, "X-Original-Method": "GET", "X-Original-URI": "/elsewhere/entirely"},
    ):
        response = await api.client.get(VERIFY, headers=headers)
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"]["bound_to_folders"] is True


async def test_an_unbound_key_is_verified_as_before(api: Api, world: Account) -> None:
    # Nothing of an original request's object is read for a key that is not bound: what the
    # service itself answers for it is the upstream's to say.
    key = await api.create_key(world.token, name="whole", permissions=PERMISSIONS)
    for uri in inside_and_outside(world)[1][:-1]:  # all but the settings
        response = await api.client.get(VERIFY, headers=verify_headers(key["secret_key"], uri))
        assert response.status == 200, uri


# -- what binding costs ------------------------------------------------------------------------


def commands_run(redis_client: redis_sync.Redis) -> dict[str, int]:
    """Every command Redis ran since the last reset, a script's own included."""
    calls = {
        name.removeprefix("cmdstat_"): value["calls"]
        for name, value in redis_client.info("commandstats").items()
    }
    for admin in ("info", "config|resetstat"):
        calls.pop(admin, None)
    return calls


@pytest.mark.parametrize("limits", ["on", "off"])
async def test_an_unbound_keys_request_runs_exactly_the_commands_it_ran_before(
    make_api: Any, clock: FakeClock, redis_client: redis_sync.Redis, limits: str
) -> None:
    api = await make_api(rate_limit_per_second=100 if limits == "on" else 0)
    world = await account(api, clock)
    # With limits on, a key's lookup is the script that reads its entry and bucket and writes
    # the bucket (a key's second request, as in tests/api/test_key_refusals.py: later ones may
    # come from a lease); off, a plain HMGET. A page of files is one ZRANGE, a file one HGET.
    lookup = {"evalsha": 1, "hmget": 1, "get": 1, "set": 1} if limits == "on" else {"hmget": 1}
    file_id = world.files["private"]
    for path, extra, more in (
        (FILES, {}, {"zrange": 1}),
        (f"{FILES}/{file_id}", {}, {"hget": 1}),
        (VERIFY, {"X-Required-Permission": "files.read"}, {}),
        (VERIFY, {"X-Original-Method": "GET", "X-Original-URI": f"{FILES}/{file_id}"}, {}),
    ):
        key = await api.create_key(world.token, name="whole", permissions=["files.read"])
        headers = {"X-API-Key": key["secret_key"]}
        assert (await api.client.get(FILES, headers=headers)).status == 200
        await api.app[AUTHENTICATOR]._background.drain()  # the key's last use
        redis_client.config_resetstat()
        assert (await api.client.get(path, headers={**headers, **extra})).status == 200
        assert commands_run(redis_client) == {**lookup, **more}, path


async def test_a_bound_keys_read_of_a_file_or_folder_costs_no_more_round_trips(
    make_api: Any, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(rate_limit_per_second=0)  # the lookup: one plain HMGET
    world = await account(api, clock)
    # Each request once before counting: a cluster's node loads a script at its first use there
    # (NOSCRIPT, then EVAL), which the counts below are not about.
    uri = f"{FILES}/{world.files['inbox']}"
    await api.client.get(FILES, headers=world.secret)
    await api.client.get(uri, headers=world.secret)
    await api.client.get(f"{FOLDERS}/{world.folder_id('inbox_sub')}", headers=world.secret)
    await api.client.get(VERIFY, headers=verify_headers(world.key["secret_key"], uri))
    await api.app[AUTHENTICATOR]._background.drain()
    # The lookup, then one script: the key's folders, the file's record and its folder's
    # parents (one level here), each a read inside the script.
    for path in (f"{FILES}/{world.files['inbox']}", f"{FILES}/{world.files['private']}"):
        redis_client.config_resetstat()
        await api.client.get(path, headers=world.secret)
        assert commands_run(redis_client) == {"hmget": 1, "evalsha": 1, "hget": 3}, path
    # A folder: the lookup, then one script reading the key's folders and the folder's
    # parents (and their records, up to the key's folder).
    redis_client.config_resetstat()
    await api.client.get(f"{FOLDERS}/{world.folder_id('inbox_sub')}", headers=world.secret)
    assert commands_run(redis_client) == {"hmget": 1, "evalsha": 1, "hget": 5}
    # At verify, the same one script more than an unbound key's lookup.
    redis_client.config_resetstat()
    assert (
        await api.client.get(VERIFY, headers=verify_headers(world.key["secret_key"], uri))
    ).status == 200
    assert commands_run(redis_client) == {"hmget": 1, "evalsha": 1, "hget": 3}
