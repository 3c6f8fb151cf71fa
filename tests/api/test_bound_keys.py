"""Keys bound to folders: ``folder_ids`` on create, edit and list; a bound key sees, lists,
uploads, creates and moves only inside its folders' subtrees, everything outside answering 404
exactly like an unknown id; it is refused what belongs to the whole account; deleting one of its
folders takes it out of the key, and a key left with none is refused everything, never widened.
Forward-auth for bound keys is in ``tests/api/test_bound_keys_gateway.py``."""

from __future__ import annotations

from typing import Any

import pytest

from service.app import STORE
from service.domain.credentials import new_id
from service.domain.folders import Outcome
from service.domain.permissions import BOUND_TO_FOLDERS, to_mask
from service.domain.stored_forms import folder_record
from tests.support.api import Api, assert_error, bearer
from tests.support.bound import (
    FILES,
    FOLDERS,
    KEYS,
    Account,
    account,
    bound_key,
    file_ids,
    listed_key,
)
from tests.support.clock import FakeClock
from tests.support.files import upload, uploaded
from tests.support.folders import SETTINGS, create_folder, folder, patch
from tests.support.keys import EVENTS, edited, sha256_hex
from tests.support.openapi import validator


@pytest.fixture
async def world(api: Api, clock: FakeClock) -> Account:
    return await account(api, clock)


# -- folder_ids on the key endpoints ---------------------------------------------------------


async def test_a_key_is_created_bound_and_listed_with_its_folders(api: Api, world: Account) -> None:
    ids = [world.folder_id("inbox"), world.folder_id("outbox")]
    assert world.key["folder_ids"] == ids
    listed = await listed_key(api, world.token, world.key["id"])
    assert listed["folder_ids"] == ids
    unbound = await api.create_key(world.token, name="whole account")
    assert unbound["folder_ids"] is None
    assert (await listed_key(api, world.token, unbound["id"]))["folder_ids"] is None
    response = await api.client.get(KEYS, headers=bearer(world.token))
    validator("/components/schemas/KeyListEnvelope").validate(await response.json())


async def test_duplicates_are_folded_and_the_order_kept(api: Api, world: Account) -> None:
    ids = [world.folder_id("outbox"), world.folder_id("inbox"), world.folder_id("outbox")]
    key = await bound_key(api, world.token, ids)
    assert key["folder_ids"] == ids[:2]


@pytest.mark.parametrize(
    "value",
    [[], "fld_x", {"id": "fld_x"}, [1], [None], [f"x{n}" for n in range(51)]],
    ids=["empty", "a-string", "an-object", "a-number", "a-null", "fifty-one"],
)
async def test_folder_ids_of_the_wrong_shape_are_refused(
    api: Api, world: Account, value: Any
) -> None:
    for method, path, body in (
        ("POST", KEYS, {"name": "k", "permissions": ["files.read"], "folder_ids": value}),
        ("PATCH", f"{KEYS}/{world.key['id']}", {"folder_ids": value}),
    ):
        response = await api.client.request(method, path, json=body, headers=bearer(world.token))
        error = await assert_error(response, 400, "validation_failed")
        assert set(error["details"]) == {"folder_ids"}


async def test_a_folder_that_is_not_the_accounts_is_404_naming_the_field(
    api: Api, world: Account
) -> None:
    other = await api.user_with_session("other@example.com")
    theirs = (await folder(api, "Theirs", token=other))["id"]
    doomed = await folder(api, "Doomed", token=world.token)
    deleted = await api.client.delete(f"{FOLDERS}/{doomed['id']}", headers=bearer(world.token))
    assert deleted.status == 200
    answers = []
    for folder_id in (theirs, new_id("fld"), "fld_short", "root", doomed["id"]):
        ids = [world.folder_id("inbox"), folder_id]
        created = await api.client.post(
            KEYS,
            json={"name": "k", "permissions": ["files.read"], "folder_ids": ids},
            headers=bearer(world.token),
        )
        edit = await api.client.patch(
            f"{KEYS}/{world.key['id']}", json={"folder_ids": ids}, headers=bearer(world.token)
        )
        for response in (created, edit):
            error = await assert_error(response, 404, "folder_not_found")
            assert error["details"] == {"field": "folder_ids"}
            answers.append(error)
    assert all(answer == answers[0] for answer in answers)
    # Nothing was made or changed.
    assert (await listed_key(api, world.token, world.key["id"]))["folder_ids"] == world.key[
        "folder_ids"
    ]
    response = await api.client.get(KEYS, headers=bearer(world.token))
    assert len((await response.json())["data"]["keys"]) == 1


async def test_an_edit_binds_rebinds_and_unbinds_from_the_next_request(
    api: Api, world: Account
) -> None:
    key = await api.create_key(world.token, name="edited", permissions=["files.read"])
    secret = {"X-API-Key": key["secret_key"]}
    every_file = set(world.files.values())
    assert set(await file_ids(api, secret)) == every_file

    private = world.folder_id("private")
    data = await edited(api, world.token, key["id"], {"folder_ids": [private]})
    assert data["folder_ids"] == [private]
    assert await file_ids(api, secret) == [world.files["private"]]

    inbox = world.folder_id("inbox")
    assert (await edited(api, world.token, key["id"], {"folder_ids": [inbox]}))["folder_ids"] == [
        inbox
    ]
    assert set(await file_ids(api, secret)) == {world.files["inbox"], world.files["inbox_sub"]}

    assert (await edited(api, world.token, key["id"], {"folder_ids": None}))["folder_ids"] is None
    assert set(await file_ids(api, secret)) == every_file


async def test_the_entry_marks_a_bound_key_and_holds_nothing_else_of_it(
    api: Api, world: Account, redis_client: Any
) -> None:
    permissions = to_mask(["files.read", "files.write", "folders.read", "folders.write"])
    entry = redis_client.hgetall(f"fh:key:{sha256_hex(world.key['secret_key'])}")
    assert set(entry) == {"u", "k", "p", "e"}
    assert int(entry["p"]) == permissions | BOUND_TO_FOLDERS
    await edited(api, world.token, world.key["id"], {"folder_ids": None})
    entry = redis_client.hgetall(f"fh:key:{sha256_hex(world.key['secret_key'])}")
    assert set(entry) == {"u", "k", "p", "e", "v"}
    assert int(entry["p"]) == permissions


async def test_binding_changes_are_audit_events_naming_the_folders(
    api: Api, world: Account
) -> None:
    inbox = world.folder_id("inbox")
    await edited(api, world.token, world.key["id"], {"folder_ids": [inbox]})
    await edited(api, world.token, world.key["id"], {"folder_ids": None})
    response = await api.client.get(EVENTS, headers=bearer(world.token))
    events = (await response.json())["data"]["events"]
    changes = [e["changes"] for e in events if e["target"].get("key_id") == world.key["id"]]
    assert changes[:3] == [
        {"folder_ids": None},
        {"folder_ids": [inbox]},
        {
            "name": "bound",
            "permissions": ["files.read", "files.write", "folders.read", "folders.write"],
            "expires_at": world.key["expires_at"],
            "folder_ids": [inbox, world.folder_id("outbox")],
        },
    ]


# -- what a bound key sees --------------------------------------------------------------------


async def test_a_file_outside_answers_exactly_like_an_unknown_one(api: Api, world: Account) -> None:
    for place in ("inbox", "inbox_sub", "outbox"):
        file_id = world.files[place]
        for path in (f"{FILES}/{file_id}", f"{FILES}/{file_id}/content"):
            assert (await api.client.get(path, headers=world.secret)).status == 200, place
    unknown = []
    for file_id in (world.files["private"], world.files["top"], new_id("fil"), "nonsense"):
        for method, path, body in (
            ("GET", f"{FILES}/{file_id}", None),
            ("GET", f"{FILES}/{file_id}/content", None),
            ("PATCH", f"{FILES}/{file_id}", {"name": "mine now"}),
            ("DELETE", f"{FILES}/{file_id}", None),
        ):
            response = await api.client.request(method, path, json=body, headers=world.secret)
            unknown.append((await assert_error(response, 404, "file_not_found"), response))
    assert all(error == unknown[0][0] for error, _ in unknown)
    # Nothing outside was touched.
    for place in ("private", "top"):
        response = await api.client.get(
            f"{FILES}/{world.files[place]}", headers=bearer(world.token)
        )
        assert (await response.json())["data"]["name"] == f"{place}.txt"


async def test_a_folder_outside_answers_exactly_like_an_unknown_one(
    api: Api, world: Account
) -> None:
    private = world.folder_id("private")
    errors = []
    for folder_id in (private, new_id("fld"), "root"):
        for method, path, body in (
            ("GET", f"{FOLDERS}/{folder_id}", None),
            ("PATCH", f"{FOLDERS}/{folder_id}", {"name": "Mine"}),
            ("DELETE", f"{FOLDERS}/{folder_id}?recursive=true", None),
        ):
            response = await api.client.request(method, path, json=body, headers=world.secret)
            errors.append(await assert_error(response, 404, "folder_not_found"))
    assert all(error == errors[0] for error in errors)
    for query in ({"folder_id": private}, {"folder_id": "root"}):
        response = await api.client.get(FILES, params=query, headers=world.secret)
        error = await assert_error(response, 404, "folder_not_found")
        assert error["details"] == {"field": "folder_id"}
    response = await api.client.get(FOLDERS, params={"parent_id": private}, headers=world.secret)
    assert (await assert_error(response, 404, "folder_not_found"))["details"] == {
        "field": "parent_id"
    }


async def test_a_folders_path_starts_at_the_keys_outermost_folder(api: Api, world: Account) -> None:
    deeper = await folder(api, "Deeper", world.folder_id("inbox_sub"), token=world.token)
    response = await api.client.get(f"{FOLDERS}/{deeper['id']}", headers=world.secret)
    assert response.status == 200
    path = (await response.json())["data"]["path"]
    assert [step["name"] for step in path] == ["Inbox", "Sub"]
    # Bound to the inner folder alone, nothing above it is named.
    inner = await bound_key(api, world.token, [world.folder_id("inbox_sub")])
    response = await api.client.get(
        f"{FOLDERS}/{deeper['id']}", headers={"X-API-Key": inner["secret_key"]}
    )
    assert [step["name"] for step in (await response.json())["data"]["path"]] == ["Sub"]
    response = await api.client.get(
        f"{FOLDERS}/{world.folder_id('inbox')}", headers={"X-API-Key": inner["secret_key"]}
    )
    await assert_error(response, 404, "folder_not_found")


async def test_the_keys_top_level_is_its_folders(api: Api, world: Account) -> None:
    # Bound to a folder and one inside it too: the inner one is not at the top.
    key = await bound_key(
        api,
        world.token,
        [world.folder_id("outbox"), world.folder_id("inbox_sub"), world.folder_id("inbox")],
    )
    secret = {"X-API-Key": key["secret_key"]}
    for query in ({}, {"parent_id": "root"}):
        response = await api.client.get(FOLDERS, params=query, headers=secret)
        assert response.status == 200
        answer = await response.json()
        validator("/components/schemas/FolderListEnvelope").validate(answer)
        assert [f["name"] for f in answer["data"]["folders"]] == ["Inbox", "Outbox"]
    first = await api.client.get(FOLDERS, params={"limit": "1"}, headers=secret)
    page = (await first.json())["data"]
    assert [f["name"] for f in page["folders"]] == ["Inbox"]
    second = await api.client.get(
        FOLDERS, params={"limit": "1", "cursor": page["next_cursor"]}, headers=secret
    )
    page = (await second.json())["data"]
    assert [f["name"] for f in page["folders"]] == ["Outbox"] and page["next_cursor"] is None
    inside = await api.client.get(
        FOLDERS, params={"parent_id": world.folder_id("inbox")}, headers=secret
    )
    assert [f["name"] for f in (await inside.json())["data"]["folders"]] == ["Sub"]


async def test_listing_every_file_lists_the_files_of_the_keys_folders(
    api: Api, world: Account
) -> None:
    inside = [world.files[place] for place in ("outbox", "inbox_sub", "inbox")]
    assert await file_ids(api, world.secret) == inside  # newest first, across both folders
    assert await file_ids(api, world.secret, limit=1) == inside
    response = await api.client.get(FILES, headers=world.secret)
    validator("/components/schemas/FileListEnvelope").validate(await response.json())
    inbox = await file_ids(api, world.secret, folder_id=world.folder_id("inbox"))
    assert inbox == [world.files["inbox"]]


async def test_a_page_examines_a_bounded_number_of_files_and_goes_on_from_there(
    api: Api, world: Account, clock: FakeClock
) -> None:
    from service.store import bindings

    # Outside files between the inside ones: with the bound at 2, pages come short (even
    # empty) and the cursor still reaches every file inside.
    for n in range(5):
        clock.advance(seconds=0.001)
        await uploaded(api, b"x", token=world.token, filename=f"out{n}.txt")
    clock.advance(seconds=0.001)
    late = await uploaded(api, b"late", token=world.token, folder_id=world.folder_id("inbox"))
    original = bindings.SCAN_BOUND
    bindings.SCAN_BOUND = 2
    try:
        pages = []
        params = {"limit": "1"}
        while True:
            response = await api.client.get(FILES, params=params, headers=world.secret)
            data = (await response.json())["data"]
            pages.append([file["id"] for file in data["files"]])
            if data["next_cursor"] is None:
                break
            params["cursor"] = data["next_cursor"]
    finally:
        bindings.SCAN_BOUND = original
    inside = [late["id"]] + [world.files[p] for p in ("outbox", "inbox_sub", "inbox")]
    assert [file_id for page in pages for file_id in page] == inside
    assert [] in pages  # a page of outside files only: empty, with a cursor on


# -- what a bound key puts where ---------------------------------------------------------------


async def test_an_upload_without_a_folder_goes_to_the_first_of_the_keys_folders(
    api: Api, world: Account
) -> None:
    made = await uploaded(api, b"x", key=world.key["secret_key"])
    assert made["folder_id"] == world.folder_id("inbox")
    # The account's default folder, when it is inside the key's folders, wins.
    response = await patch(
        api, SETTINGS, {"default_folder_id": world.folder_id("outbox")}, world.token
    )
    assert response.status == 200
    assert (await uploaded(api, b"x", key=world.key["secret_key"]))["folder_id"] == world.folder_id(
        "outbox"
    )
    # Outside them, it is left alone.
    await patch(api, SETTINGS, {"default_folder_id": world.folder_id("private")}, world.token)
    assert (await uploaded(api, b"x", key=world.key["secret_key"]))["folder_id"] == world.folder_id(
        "inbox"
    )
    assert (await uploaded(api, b"x", token=world.token))["folder_id"] == world.folder_id("private")


@pytest.mark.parametrize("after", [False, True], ids=["field-first", "field-after"])
async def test_an_upload_outside_is_404_and_stores_nothing(
    api: Api, world: Account, after: bool
) -> None:
    before = await file_ids(api, bearer(world.token))
    for folder_id in (world.folder_id("private"), "root", new_id("fld")):
        response = await upload(
            api, b"x", key=world.key["secret_key"], folder_id=folder_id, folder_after=after
        )
        error = await assert_error(response, 404, "folder_not_found")
        assert error["details"] == {"field": "folder_id"}
    assert await file_ids(api, bearer(world.token)) == before
    inside = world.folder_id("inbox_sub")
    made = await uploaded(
        api, b"x", key=world.key["secret_key"], folder_id=inside, folder_after=after
    )
    assert made["folder_id"] == inside


async def test_folders_are_made_and_moved_only_inside(api: Api, world: Account) -> None:
    key = world.key["secret_key"]
    made = await folder(api, "New", world.folder_id("inbox"), key=key)
    for parent in (None, world.folder_id("private")):
        error = await assert_error(
            await create_folder(api, "Nope", parent, key=key), 404, "folder_not_found"
        )
        assert error["details"] == {"field": "parent_id"}
    moved = await patch(
        api, f"{FOLDERS}/{made['id']}", {"parent_id": world.folder_id("outbox")}, key=key
    )
    assert (await moved.json())["data"]["parent_id"] == world.folder_id("outbox")
    for parent in (None, world.folder_id("private")):
        response = await patch(api, f"{FOLDERS}/{made['id']}", {"parent_id": parent}, key=key)
        error = await assert_error(response, 404, "folder_not_found")
        assert error["details"] == {"field": "parent_id"}
    # One of its own folders, into another of them: both inside.
    moved = await patch(
        api,
        f"{FOLDERS}/{world.folder_id('outbox')}",
        {"parent_id": world.folder_id("inbox")},
        key=key,
    )
    assert moved.status == 200


async def test_files_are_moved_only_inside(api: Api, world: Account) -> None:
    key = world.key["secret_key"]
    path = f"{FILES}/{world.files['inbox']}"
    moved = await patch(api, path, {"folder_id": world.folder_id("outbox")}, key=key)
    assert (await moved.json())["data"]["folder_id"] == world.folder_id("outbox")
    for destination in (None, world.folder_id("private")):
        response = await patch(api, path, {"folder_id": destination}, key=key)
        error = await assert_error(response, 404, "folder_not_found")
        assert error["details"] == {"field": "folder_id"}
    owner = await api.client.get(path, headers=bearer(world.token))
    assert (await owner.json())["data"]["folder_id"] == world.folder_id("outbox")


async def test_account_wide_operations_are_refused(api: Api, world: Account) -> None:
    every = [
        "files.read",
        "files.write",
        "folders.read",
        "folders.write",
        "settings.read",
        "settings.write",
        "keys.read",
        "keys.write",
    ]
    key = await bound_key(api, world.token, [world.folder_id("inbox")], every)
    secret = {"X-API-Key": key["secret_key"]}
    for method, path, body in (("GET", SETTINGS, None), ("PATCH", SETTINGS, {})):
        response = await api.client.request(method, path, json=body, headers=secret)
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"] == {"bound_to_folders": True}
    for method, path in (
        ("GET", KEYS),
        ("POST", KEYS),
        ("GET", "/api/v1/audit-events"),
        ("GET", "/api/v1/auth/sessions"),
    ):
        response = await api.client.request(method, path, json={}, headers=secret)
        await assert_error(response, 403, "session_required")


# -- deleting a bound folder ------------------------------------------------------------------


async def test_deleting_a_bound_folder_takes_it_out_of_the_key(api: Api, world: Account) -> None:
    response = await api.client.delete(
        f"{FOLDERS}/{world.folder_id('outbox')}?recursive=true", headers=bearer(world.token)
    )
    assert response.status == 200
    listed = await listed_key(api, world.token, world.key["id"])
    assert listed["folder_ids"] == [world.folder_id("inbox")]
    assert set(await file_ids(api, world.secret)) == {
        world.files["inbox"],
        world.files["inbox_sub"],
    }
    response = await api.client.get(EVENTS, headers=bearer(world.token))
    event = (await response.json())["data"]["events"][0]
    assert event["type"] == "key.edited"
    assert event["target"] == {"key_id": world.key["id"]}
    assert event["changes"] == {"folder_ids": [world.folder_id("inbox")]}


async def test_a_folder_deleted_inside_a_deleted_subtree_leaves_the_key_too(
    api: Api, world: Account
) -> None:
    inner = await bound_key(api, world.token, [world.folder_id("inbox_sub")])
    response = await api.client.delete(
        f"{FOLDERS}/{world.folder_id('inbox')}?recursive=true", headers=bearer(world.token)
    )
    assert response.status == 200
    assert (await listed_key(api, world.token, inner["id"]))["folder_ids"] == []
    assert (await listed_key(api, world.token, world.key["id"]))["folder_ids"] == [
        world.folder_id("outbox")
    ]


async def test_a_key_left_without_folders_is_refused_everything_never_widened(
    api: Api, world: Account
) -> None:
    for name in ("inbox", "outbox"):
        response = await api.client.delete(
            f"{FOLDERS}/{world.folder_id(name)}?recursive=true", headers=bearer(world.token)
        )
        assert response.status == 200
    assert (await listed_key(api, world.token, world.key["id"]))["folder_ids"] == []
    attempts = [
        ("GET", FILES, None),
        ("GET", f"{FILES}/{world.files['top']}", None),
        ("GET", f"{FILES}/{world.files['private']}/content", None),
        ("GET", f"{FILES}?folder_id=root", None),
        ("GET", FOLDERS, None),
        ("GET", f"{FOLDERS}/{world.folder_id('private')}", None),
        ("POST", FOLDERS, {"name": "Anywhere"}),
        ("PATCH", f"{FILES}/{world.files['top']}", {"name": "x"}),
        ("DELETE", f"{FILES}/{world.files['private']}", None),
    ]
    for method, path, body in attempts:
        response = await api.client.request(method, path, json=body, headers=world.secret)
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"] == {"bound_to_folders": True, "folder_ids": []}, path
    error = await assert_error(
        await upload(api, b"x", key=world.key["secret_key"]), 403, "insufficient_permission"
    )
    assert await file_ids(api, bearer(world.token)) == [
        world.files["top"],
        world.files["private"],
    ]
    # Bound again, it works again.
    private = world.folder_id("private")
    await edited(api, world.token, world.key["id"], {"folder_ids": [private]})
    assert await file_ids(api, world.secret) == [world.files["private"]]


async def test_a_deletion_whose_unbinding_failed_is_finished_later_and_widens_nothing(
    api: Api, world: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.store.api_keys import ApiKeyStore

    unbind = ApiKeyStore.unbind

    async def unreachable(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the store went away")

    monkeypatch.setattr(ApiKeyStore, "unbind", unreachable)
    response = await api.client.delete(
        f"{FOLDERS}/{world.folder_id('outbox')}?recursive=true", headers=bearer(world.token)
    )
    assert response.status == 200  # the deletion is made; what is left of it waits
    listed = await listed_key(api, world.token, world.key["id"])
    assert listed["folder_ids"] == [world.folder_id("inbox"), world.folder_id("outbox")]
    # Meanwhile the folder is gone for the key as for everyone.
    await assert_error(
        await api.client.get(f"{FILES}/{world.files['outbox']}", headers=world.secret),
        404,
        "file_not_found",
    )
    assert world.files["outbox"] not in await file_ids(api, world.secret)

    monkeypatch.setattr(ApiKeyStore, "unbind", unbind)
    await folder(api, "Any change", token=world.token)  # finishes what the account left
    listed = await listed_key(api, world.token, world.key["id"])
    assert listed["folder_ids"] == [world.folder_id("inbox")]


async def test_binding_a_folder_being_deleted_is_404(api: Api, world: Account) -> None:
    # Detached (a deletion's first step) and not yet removed: not a live folder, so a key is
    # never bound to what its deletion's unbinding may already have passed.
    stores = api.app[STORE]
    whoami = await api.client.get("/api/v1/auth/session", headers=bearer(world.token))
    user_id = (await whoami.json())["data"]["user"]["id"]
    private = world.folder_id("private")
    read = await stores.folders.read(user_id, private)
    assert read is not None
    detached = await stores.folders.detach(user_id, read, folder_record(private, read), True)
    assert detached is Outcome.DONE
    for response in (
        await api.client.patch(
            f"{KEYS}/{world.key['id']}", json={"folder_ids": [private]}, headers=bearer(world.token)
        ),
        await api.client.post(
            KEYS,
            json={"name": "k", "permissions": ["files.read"], "folder_ids": [private]},
            headers=bearer(world.token),
        ),
    ):
        error = await assert_error(response, 404, "folder_not_found")
        assert error["details"] == {"field": "folder_ids"}
