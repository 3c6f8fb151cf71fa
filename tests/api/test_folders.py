"""The folders resource: create, list by name with cursor pages, read with its path, rename and
move (no cycles, within the depth bound), delete (refused when not empty unless recursive), the
bounds, names unique among siblings ignoring case, who may do what, and another account's
folder answering exactly like an unknown one. Over HTTP, on the fixtures' real Redis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync

from tests.support.api import Api, assert_error, bearer
from tests.support.files import uploaded
from tests.support.folders import (
    FOLDERS,
    chain,
    children,
    create_folder,
    folder,
    folder_files,
    folder_traces,
    patch,
)
from tests.support.openapi import validator

UNKNOWN = "fld_0000000000000000000000"


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def get(api: Api, folder_id: str, token: str) -> Any:
    return await api.client.get(f"{FOLDERS}/{folder_id}", headers=bearer(token))


async def delete(api: Api, folder_id: str, token: str, query: str = "") -> Any:
    return await api.client.delete(f"{FOLDERS}/{folder_id}{query}", headers=bearer(token))


# -- the whole story ---------------------------------------------------------------------------


async def test_folders_nest_and_a_folder_is_read_with_its_path_from_the_top(api: Api) -> None:
    token = await api.user_with_session()
    top, middle, leaf = await chain(api, 3, token)
    assert top["parent_id"] is None and middle["parent_id"] == top["id"]
    assert top["created_at"] == top["updated_at"]

    response = await get(api, leaf["id"], token)
    assert response.status == 200
    answer = await response.json()
    validator("/components/schemas/FolderWithPathEnvelope").validate(answer)
    assert answer["data"] == {
        **leaf,
        "path": [{"id": top["id"], "name": top["name"]}, {"id": middle["id"], "name": "level 2"}],
    }
    assert (await (await get(api, top["id"], token)).json())["data"]["path"] == []
    assert (await children(api, token))["folders"] == [top]
    assert (await children(api, token, top["id"]))["folders"] == [middle]
    assert (await children(api, token, "root"))["folders"] == [top]


async def test_rename_and_move_answer_the_folder_as_it_now_is(api: Api) -> None:
    token = await api.user_with_session()
    left, right = await folder(api, "left", token=token), await folder(api, "right", token=token)
    inner = await folder(api, "inner", left["id"], token=token)

    response = await patch(
        api, f"{FOLDERS}/{inner['id']}", {"name": "moved", "parent_id": right["id"]}, token
    )
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/FolderEnvelope").validate(answer)
    moved = answer["data"]
    assert (moved["id"], moved["name"], moved["parent_id"]) == (inner["id"], "moved", right["id"])
    assert (await children(api, token, left["id"]))["folders"] == []
    assert (await children(api, token, right["id"]))["folders"] == [moved]

    to_top = await patch(api, f"{FOLDERS}/{inner['id']}", {"parent_id": None}, token)
    assert (await to_top.json())["data"]["parent_id"] is None
    names = [f["name"] for f in (await children(api, token))["folders"]]
    assert names == ["left", "moved", "right"]


async def test_a_change_that_changes_nothing_answers_the_folder_unchanged(api: Api) -> None:
    token = await api.user_with_session()
    made = await folder(api, "same", token=token)
    for body in ({}, {"name": "same"}, {"parent_id": None}):
        response = await patch(api, f"{FOLDERS}/{made['id']}", body, token)
        assert (await response.json())["data"] == made


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [("Invoices", "invoices"), ("Straße", "STRASSE"), ("Café", "cafe\u0301"), ("x", "X")],
)
async def test_a_name_is_unique_among_its_siblings_ignoring_case(
    api: Api, first: str, second: str
) -> None:
    token = await api.user_with_session()
    parent = await folder(api, "parent", token=token)
    await folder(api, first, parent["id"], token=token)
    clash = await create_folder(api, second, parent["id"], token=token)
    await assert_error(clash, 409, "folder_name_taken")
    # Elsewhere the name is free.
    await folder(api, second, token=token)


async def test_a_folder_may_take_another_case_of_its_own_name_but_not_a_siblings(
    api: Api,
) -> None:
    token = await api.user_with_session()
    made = await folder(api, "reports", token=token)
    other = await folder(api, "drafts", token=token)
    renamed = await patch(api, f"{FOLDERS}/{made['id']}", {"name": "REPORTS"}, token)
    assert (await renamed.json())["data"]["name"] == "REPORTS"
    taken = await patch(api, f"{FOLDERS}/{other['id']}", {"name": "Reports"}, token)
    await assert_error(taken, 409, "folder_name_taken")
    # Moving into a place where the name is taken is refused the same way.
    inside = await folder(api, "inside", token=token)
    await folder(api, "DRAFTS", inside["id"], token=token)
    moved = await patch(api, f"{FOLDERS}/{other['id']}", {"parent_id": inside["id"]}, token)
    await assert_error(moved, 409, "folder_name_taken")


@pytest.mark.parametrize(
    "name",
    ["", "   ", ".", "..", "a/b", "a\\b", "tab\there", "nul\x00", "x" * 256, 7, None, ["a"]],
)
async def test_a_name_that_breaks_the_rules_is_refused_not_cleaned(api: Api, name: Any) -> None:
    token = await api.user_with_session()
    response = await api.client.post(FOLDERS, json={"name": name}, headers=bearer(token))
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) == {"name"}
    assert (await children(api, token))["folders"] == []


async def test_names_are_trimmed_and_kept_as_typed(api: Api) -> None:
    token = await api.user_with_session()
    made = await folder(api, "  Résumé 履歴書 🙂 : 'x' ", token=token)
    assert made["name"] == "Résumé 履歴書 🙂 : 'x'"
    assert (await folder(api, "y" * 255, token=token))["name"] == "y" * 255


async def test_unknown_fields_and_a_parent_of_the_wrong_type_are_refused(api: Api) -> None:
    token = await api.user_with_session()
    body = {"name": "x", "parent_id": 5, "colour": "red"}
    error = await assert_error(
        await api.client.post(FOLDERS, json=body, headers=bearer(token)), 400, "validation_failed"
    )
    assert set(error["details"]) == {"parent_id", "colour"}
    error = await assert_error(
        await api.client.post(FOLDERS, json={}, headers=bearer(token)), 400, "validation_failed"
    )
    assert set(error["details"]) == {"name"}


# -- listing -----------------------------------------------------------------------------------


async def test_a_folders_folders_are_listed_by_name_a_page_at_a_time(api: Api) -> None:
    token = await api.user_with_session()
    names = ["beta", "Alpha", "gamma", "Delta", "epsilon", "Zeta", "eta", "ä-umlaut"]
    for name in names:
        await folder(api, name, token=token)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query: dict[str, Any] = {"limit": 3}
        if cursor is not None:
            query["cursor"] = cursor
        page = await children(api, token, **query)
        seen += [f["name"] for f in page["folders"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(names, key=str.casefold)
    assert pages == 3


async def test_a_page_after_a_folder_that_was_renamed_meanwhile_skips_nothing(api: Api) -> None:
    token = await api.user_with_session()
    made = {name: await folder(api, name, token=token) for name in ("a", "b", "c", "d")}
    first = await children(api, token, limit=2)
    assert [f["name"] for f in first["folders"]] == ["a", "b"]
    await patch(api, f"{FOLDERS}/{made['b']['id']}", {"name": "zz"}, token)
    rest = await children(api, token, limit=10, cursor=first["next_cursor"])
    assert [f["name"] for f in rest["folders"]] == ["c", "d", "zz"]


@pytest.mark.parametrize(
    "query",
    ["?limit=0", "?limit=1001", "?limit=x", "?cursor=nope", "?parent_id=", "?cursor=" + "A" * 5000],
)
async def test_a_bad_limit_cursor_or_parent_is_refused(api: Api, query: str) -> None:
    token = await api.user_with_session()
    response = await api.client.get(FOLDERS + query, headers=bearer(token))
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) <= {"limit", "cursor", "parent_id"}


# -- another account's, unknown and gone ---------------------------------------------------------


async def test_another_accounts_folder_answers_exactly_like_an_unknown_one(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    hers = await folder(api, "private", token=alice)
    for folder_id in (hers["id"], UNKNOWN, "not-an-id"):
        answers = [
            await get(api, folder_id, bob),
            await patch(api, f"{FOLDERS}/{folder_id}", {"name": "mine"}, bob),
            await delete(api, folder_id, bob, "?recursive=true"),
        ]
        for response in answers:
            error = await assert_error(response, 404, "folder_not_found")
            assert error == {"code": "folder_not_found", "message": "No such folder."}
        for parent in (folder_id, "root" if folder_id == UNKNOWN else folder_id):
            if parent == "root":
                continue
            listed = await api.client.get(f"{FOLDERS}?parent_id={parent}", headers=bearer(bob))
            error = await assert_error(listed, 404, "folder_not_found")
            assert error["details"] == {"field": "parent_id"}
            made = await create_folder(api, "inside", parent, token=bob)
            error = await assert_error(made, 404, "folder_not_found")
            assert error["details"] == {"field": "parent_id"}
        mine = await folder(api, f"mine {folder_id}", token=bob)
        moved = await patch(api, f"{FOLDERS}/{mine['id']}", {"parent_id": folder_id}, bob)
        assert (await assert_error(moved, 404, "folder_not_found"))["details"] == {
            "field": "parent_id"
        }
    # Alice's folder is untouched.
    assert (await (await get(api, hers["id"], alice)).json())["data"]["name"] == "private"


# -- cycles and bounds -------------------------------------------------------------------------


async def test_a_folder_cannot_move_into_itself_or_its_own_subtree(api: Api) -> None:
    token = await api.user_with_session()
    top, middle, leaf = await chain(api, 3, token)
    for target in (top, middle, leaf):
        response = await patch(api, f"{FOLDERS}/{top['id']}", {"parent_id": target["id"]}, token)
        await assert_error(response, 409, "folder_cycle")
    response = await patch(api, f"{FOLDERS}/{middle['id']}", {"parent_id": leaf["id"]}, token)
    await assert_error(response, 409, "folder_cycle")
    # Nothing moved.
    assert (await children(api, token))["folders"] == [top]
    assert (await children(api, token, top["id"]))["folders"] == [middle]


async def test_folders_nest_32_levels_and_no_deeper(api: Api) -> None:
    token = await api.user_with_session()
    levels = await chain(api, 32, token)
    too_deep = await create_folder(api, "level 33", levels[-1]["id"], token=token)
    error = await assert_error(too_deep, 409, "folder_too_deep")
    assert error["details"] == {"max_depth": 32}
    path = (await (await get(api, levels[-1]["id"], token)).json())["data"]["path"]
    assert [item["id"] for item in path] == [level["id"] for level in levels[:-1]]


async def test_a_move_that_would_put_the_subtree_too_deep_is_refused(make_api: Any) -> None:
    api = await make_api(max_folder_depth=32)
    token = await api.user_with_session()
    deep = await chain(api, 30, token, "deep")
    subtree = await chain(api, 3, token, "sub")  # three levels: 30 + 3 > 32
    response = await patch(
        api, f"{FOLDERS}/{subtree[0]['id']}", {"parent_id": deep[-1]["id"]}, token
    )
    await assert_error(response, 409, "folder_too_deep")
    # With its deepest folder gone, the subtree fits exactly: heights follow deletions too.
    assert (await delete(api, subtree[2]["id"], token)).status == 200
    moved = await patch(api, f"{FOLDERS}/{subtree[0]['id']}", {"parent_id": deep[-1]["id"]}, token)
    assert moved.status == 200, await moved.text()
    below = await create_folder(api, "level 33", subtree[1]["id"], token=token)
    await assert_error(below, 409, "folder_too_deep")


async def test_the_folder_limit_is_checked_with_the_write(make_api: Any) -> None:
    api = await make_api(max_folders_per_account=3)
    token = await api.user_with_session()
    made = [await folder(api, f"f{n}", token=token) for n in range(3)]
    error = await assert_error(
        await create_folder(api, "f3", token=token), 409, "folder_limit_reached"
    )
    assert error["details"] == {"max_folders": 3}
    assert (await delete(api, made[0]["id"], token)).status == 200
    await folder(api, "f3", token=token)


# -- deleting ----------------------------------------------------------------------------------


async def test_a_folder_holding_anything_is_deleted_only_recursively(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    holds_folder = await folder(api, "holds a folder", token=token)
    await folder(api, "inner", holds_folder["id"], token=token)
    holds_file = await folder(api, "holds a file", token=token)
    await uploaded(api, b"x", token=token, folder_id=holds_file["id"])
    for parent in (holds_folder, holds_file):
        await assert_error(await delete(api, parent["id"], token), 409, "folder_not_empty")
        await assert_error(
            await delete(api, parent["id"], token, "?recursive=false"), 409, "folder_not_empty"
        )
        response = await delete(api, parent["id"], token, "?recursive=true")
        assert response.status == 200, await response.text()
        answer = await response.json()
        validator("/components/schemas/DeletedFolderEnvelope").validate(answer)
        assert answer["data"]["id"] == parent["id"]
        await assert_error(await get(api, parent["id"], token), 404, "folder_not_found")
    assert (await children(api, token))["folders"] == []
    assert folder_traces(redis_client, user.id) == []


async def test_an_empty_folder_is_deleted_and_nothing_of_it_is_left(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    made = await folder(api, "empty", token=token)
    response = await delete(api, made["id"], token)
    assert response.status == 200
    await assert_error(await delete(api, made["id"], token), 404, "folder_not_found")
    assert folder_traces(redis_client, user.id) == []


@pytest.mark.parametrize(
    "query", ["?recursive=yes", "?recursive=1", "?recursive=true&recursive=true"]
)
async def test_recursive_is_true_or_false_once(api: Api, query: str) -> None:
    token = await api.user_with_session()
    made = await folder(api, "x", token=token)
    error = await assert_error(
        await delete(api, made["id"], token, query), 400, "validation_failed"
    )
    assert set(error["details"]) == {"recursive"}


# -- who may do what ---------------------------------------------------------------------------


async def test_each_permission_guards_its_operations(api: Api) -> None:
    token = await api.user_with_session()
    reader = (await api.create_key(token, permissions=["folders.read"]))["secret_key"]
    writer = (await api.create_key(token, permissions=["folders.write"]))["secret_key"]
    both = (await api.create_key(token, permissions=["folders.write", "files.write"]))["secret_key"]
    made = await folder(api, "by the writer", key=writer)
    inner = await folder(api, "inner", made["id"], key=writer)

    def headers(key: str) -> dict[str, str]:
        return {"X-API-Key": key}

    listed = await api.client.get(FOLDERS, headers=headers(reader))
    assert listed.status == 200
    assert (await api.client.get(f"{FOLDERS}/{inner['id']}", headers=headers(reader))).status == 200
    refused = [
        (await create_folder(api, "no", key=reader), "folders.write"),
        (await patch(api, f"{FOLDERS}/{made['id']}", {"name": "no"}, key=reader), "folders.write"),
        (
            await api.client.delete(f"{FOLDERS}/{inner['id']}", headers=headers(reader)),
            "folders.write",
        ),
        (await api.client.get(FOLDERS, headers=headers(writer)), "folders.read"),
        # Deleting a subtree deletes files too.
        (
            await api.client.delete(
                f"{FOLDERS}/{made['id']}?recursive=true", headers=headers(writer)
            ),
            "files.write",
        ),
    ]
    for response, permission in refused:
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"] == {"required_permission": permission}
    deleted = await api.client.delete(
        f"{FOLDERS}/{made['id']}?recursive=true", headers=headers(both)
    )
    assert deleted.status == 200, await deleted.text()


async def test_a_folders_files_are_listed_with_files_read(api: Api) -> None:
    token = await api.user_with_session()
    made = await folder(api, "docs", token=token)
    inside = await uploaded(api, b"in", token=token, folder_id=made["id"])
    assert await folder_files(api, token, made["id"]) == [inside]


async def test_root_names_the_top_level_in_a_body_as_in_a_query(api: Api) -> None:
    # A client that lists the top level with folder_id=root writes "root" back when it moves.
    token = await api.user_with_session()
    outer = await folder(api, "outer", token=token)
    made = await api.client.post(
        FOLDERS, json={"name": "made", "parent_id": "root"}, headers=bearer(token)
    )
    assert made.status == 201, await made.text()
    assert (await made.json())["data"]["parent_id"] is None
    inner = await folder(api, "inner", outer["id"], token=token)
    moved = await patch(api, f"{FOLDERS}/{inner['id']}", {"parent_id": "root"}, token)
    assert (await moved.json())["data"]["parent_id"] is None
    first = await uploaded(api, b"1", token=token, folder_id=outer["id"])
    second = await uploaded(api, b"2", token=token, folder_id=outer["id"])
    edited = await patch(api, f"/api/v1/files/{first['id']}", {"folder_id": "root"}, token)
    assert (await edited.json())["data"]["folder_id"] is None
    bulk = await api.client.post(
        "/api/v1/files/bulk",
        json={"action": "move", "ids": [second["id"]], "folder_id": "root"},
        headers=bearer(token),
    )
    assert bulk.status == 200, await bulk.text()
    top = await api.client.get("/api/v1/files?folder_id=root", headers=bearer(token))
    assert {f["id"] for f in (await top.json())["data"]["files"]} == {first["id"], second["id"]}
