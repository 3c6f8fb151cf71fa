"""Forward-auth for keys bound to folders: ``GET /auth/verify`` of a bound key whose original
request names a file, folder or alias outside its folders is 403, as is a key whose folders were
all deleted or a query naming a listed folder as other frameworks read it; a bound key's 200
names its folders (``X-Auth-Folder-Ids``) for the upstream to hold it to; and what binding
costs: nothing for a key that is not bound (its lookup runs exactly the commands it ran before
binding existed), the round trips of an unbound key's request for a bound key's read of a file
or folder."""

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
from tests.support.keys import edited

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
        f"{FILES}?limit=5;folder_id={private}",  # Rack before 3 splits on ';' too
        f"/api/v1/aliases/{new_id('als')}",
        "/api/v1/settings",
    ]
    return inside, outside


async def test_verify_passes_what_is_inside_and_refuses_what_is_not(
    api: Api, world: Account
) -> None:
    secret = world.key["secret_key"]
    inside, outside = inside_and_outside(world)
    folder_ids = f"{world.folder_id('inbox')},{world.folder_id('outbox')}"
    for uri in inside:
        response = await api.client.get(VERIFY, headers=verify_headers(secret, uri))
        assert response.status == 200, (uri, await response.text())
        assert response.headers["X-Auth-Permissions"] == ",".join(PERMISSIONS)
        assert response.headers["X-Auth-Key-Id"] == world.key["id"]
        assert response.headers["X-Auth-Folder-Ids"] == folder_ids
    errors = []
    for uri in outside:
        for method in ("GET", "DELETE"):
            response = await api.client.get(VERIFY, headers=verify_headers(secret, uri, method))
            error = await assert_error(response, 403, "insufficient_permission")
            assert response.headers["X-Auth-Error"] == "insufficient_permission"
            assert "X-Auth-Folder-Ids" not in response.headers
            if "settings" not in uri:  # a permission the key lacks comes first there
                errors.append(error)
    assert errors and all(error == errors[0] for error in errors)
    assert errors[0]["details"] == {"bound_to_folders": True}


async def test_a_listed_folder_spelled_as_other_frameworks_read_it_is_refused(
    api: Api, world: Account
) -> None:
    # PHP, Rails and qs read ``folder_id[]`` as the field, ASP.NET ignores case, PHP reads ``.``
    # as ``_``; Python's parse_qs reads none of them as ``folder_id``. Refused even for a folder
    # inside, and whatever the path: the upstream may list any folder so named.
    inbox, private = world.folder_id("inbox"), world.folder_id("private")
    spelled = [
        f"{FILES}?folder_id[]={private}",
        f"{FILES}?folder_id%5B%5D={private}",
        f"{FILES}?folder_id%5b%5d={inbox}",
        f"{FILES}?folder%5Fid[0]={inbox}",
        f"{FILES}?folder_id={inbox}&folder_id[]={private}",
        f"{FILES}?FOLDER_ID={private}",
        f"{FILES}?folder.id={private}",
        f"{FILES}?folder_id%255B%255D={private}",  # for an upstream that decodes twice
        f"{FOLDERS}?parent_id[]={private}",
        f"{FOLDERS}?Parent_Id={private}",
        f"{FILES}/bulk?folder_id[]={private}",
        f"{FILES}/{world.files['inbox']}?parent_id[]={private}",
    ]
    whole = await api.create_key(world.token, name="whole", permissions=PERMISSIONS)
    for uri in spelled:
        for method in ("GET", "DELETE"):
            headers = verify_headers(world.key["secret_key"], uri, method)
            error = await assert_error(
                await api.client.get(VERIFY, headers=headers), 403, "insufficient_permission"
            )
            assert error["details"] == {"bound_to_folders": True}, uri
        # A key of the whole account may list any folder, however it is spelled.
        response = await api.client.get(VERIFY, headers=verify_headers(whole["secret_key"], uri))
        assert response.status == 200, uri
    # The field itself, and names that only begin like it, are read as before.
    for uri in (f"{FILES}?folder_id={inbox}", f"{FILES}?folder_ids={private}&q=folder_id[]"):
        response = await api.client.get(
            VERIFY, headers=verify_headers(world.key["secret_key"], uri)
        )
        assert response.status == 200, (uri, await response.text())


async def test_a_bound_keys_folders_are_named_upstream_as_its_binding_holds_them_now(
    api: Api, world: Account
) -> None:
    # What verify does not check itself (a collection, ids in a body, an upload, a move's
    # destination) passes, and the upstream is told the folders to hold the key to.
    secret = world.key["secret_key"]
    inbox, outbox = world.folder_id("inbox"), world.folder_id("outbox")
    requests = [
        ("GET", FILES),
        ("GET", f"{FILES}?q=private"),
        ("POST", f"{FILES}/bulk"),
        ("POST", FILES),
        ("PATCH", f"{FILES}/{world.files['inbox']}"),
        ("GET", "/elsewhere/entirely"),  # named permission below: a route the map leaves out
    ]

    async def folders_named(method: str, uri: str) -> str | None:
        headers = verify_headers(secret, uri, method)
        if uri.startswith("/elsewhere"):
            headers["X-Required-Permission"] = "files.read"
        response = await api.client.get(VERIFY, headers=headers)
        assert response.status == 200, (method, uri, await response.text())
        return response.headers.get("X-Auth-Folder-Ids")

    assert [await folders_named(*request) for request in requests] == [f"{inbox},{outbox}"] * 6
    named = {"X-API-Key": secret, "X-Required-Permission": "files.read"}
    response = await api.client.get(VERIFY, headers=named)
    assert response.headers["X-Auth-Folder-Ids"] == f"{inbox},{outbox}"
    # An edit holds from the next request: rebound, the order it was given in.
    await edited(api, world.token, world.key["id"], {"folder_ids": [outbox, inbox]})
    assert await folders_named("GET", FILES) == f"{outbox},{inbox}"
    await edited(api, world.token, world.key["id"], {"folder_ids": [outbox]})
    assert await folders_named("GET", FILES) == outbox
    refused = await api.client.get(
        VERIFY, headers=verify_headers(secret, f"{FILES}/{world.files['inbox']}")
    )
    await assert_error(refused, 403, "insufficient_permission")
    # Unbound, the key is the whole account's again: no folders named.
    await edited(api, world.token, world.key["id"], {"folder_ids": None})
    assert await folders_named("GET", FILES) is None


async def test_no_folders_are_named_for_an_unbound_key_or_a_session(
    api: Api, world: Account
) -> None:
    key = await api.create_key(world.token, name="whole", permissions=PERMISSIONS)
    for credential in ({"X-API-Key": key["secret_key"]}, bearer(world.token)):
        for extra in (
            {"X-Required-Permission": "files.read"},
            {"X-Original-Method": "GET", "X-Original-URI": f"{FILES}?folder_id[]=x"},
        ):
            response = await api.client.get(VERIFY, headers={**credential, **extra})
            assert response.status == 200, await response.text()
            assert "X-Auth-Folder-Ids" not in response.headers


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
    # At verify, the same one script more than an unbound key's lookup, which also reads the
    # key's folders for X-Auth-Folder-Ids.
    redis_client.config_resetstat()
    response = await api.client.get(VERIFY, headers=verify_headers(world.key["secret_key"], uri))
    assert response.headers["X-Auth-Folder-Ids"] == ",".join(world.key["folder_ids"])
    assert commands_run(redis_client) == {"hmget": 1, "evalsha": 1, "hget": 3}
    # A collection: one script reading the key's folders, and its first folder's parents to see
    # that one is live (one level here).
    redis_client.config_resetstat()
    response = await api.client.get(VERIFY, headers=verify_headers(world.key["secret_key"], FILES))
    assert response.headers["X-Auth-Folder-Ids"] == ",".join(world.key["folder_ids"])
    assert commands_run(redis_client) == {"hmget": 1, "evalsha": 1, "hget": 2}
