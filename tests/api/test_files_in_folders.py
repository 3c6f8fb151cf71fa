"""Files in folders: an upload's ``folder_id`` (before or after the file, ``root``, the account's
default folder), one folder's files (``GET /files?folder_id=``), renaming and moving a file
(``PATCH /files/{id}``), and files recorded before folders existed, which are at the top. Over
HTTP, on the fixtures' real Redis, with the blobs in a directory of the test's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import redis as redis_sync

from service.api.context import POLICY
from service.app import STORE
from service.domain.folders import Outcome
from service.domain.stored_forms import folder_record
from tests.support.api import Api, assert_error, bearer, path_of
from tests.support.clock import FakeClock
from tests.support.files import FILES_URL, upload, uploaded
from tests.support.folders import (
    SETTINGS,
    blob_names,
    folder,
    folder_files,
    patch,
)
from tests.support.openapi import validator

UNKNOWN = "fld_0000000000000000000000"


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def everything(api: Api, token: str) -> list[dict]:
    response = await api.client.get(FILES_URL, headers=bearer(token))
    assert response.status == 200
    return (await response.json())["data"]["files"]


# -- uploading into a folder -------------------------------------------------------------------


@pytest.mark.parametrize("after", [False, True], ids=["before-the-file", "after-the-file"])
async def test_an_upload_goes_into_the_folder_its_form_names(api: Api, after: bool) -> None:
    token = await api.user_with_session()
    docs = await folder(api, "docs", token=token)
    response = await upload(api, b"report", token=token, folder_id=docs["id"], folder_after=after)
    assert response.status == 201, await response.text()
    answer = await response.json()
    validator("/components/schemas/FileEnvelope").validate(answer)
    created = answer["data"]
    assert created["folder_id"] == docs["id"]
    assert await folder_files(api, token, docs["id"]) == [created]
    assert await folder_files(api, token, "root") == []
    assert await everything(api, token) == [created]  # the whole account's list holds it too


@pytest.mark.parametrize("after", [False, True], ids=["before-the-file", "after-the-file"])
async def test_an_upload_into_another_accounts_or_an_unknown_folder_keeps_nothing(
    api: Api, after: bool, redis_client: redis_sync.Redis
) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    hers = await folder(api, "hers", token=alice)
    for target in (hers["id"], UNKNOWN, "elsewhere"):
        response = await upload(api, b"x" * 1000, token=bob, folder_id=target, folder_after=after)
        error = await assert_error(response, 404, "folder_not_found")
        assert error["details"] == {"field": "folder_id"}
    assert await blob_names(api) == set()
    assert await everything(api, bob) == []
    assert await folder_files(api, alice, hers["id"]) == []


async def test_root_is_the_top_level_and_an_empty_field_is_the_default(api: Api) -> None:
    token = await api.user_with_session()
    default = await folder(api, "inbox", token=token)
    changed = await patch(api, SETTINGS, {"default_folder_id": default["id"]}, token)
    assert changed.status == 200, await changed.text()
    at_top = await uploaded(api, b"top", token=token, folder_id="root")
    by_default = await uploaded(api, b"default", token=token, folder_id="")
    without = await uploaded(api, b"default too", token=token)
    assert at_top["folder_id"] is None
    assert by_default["folder_id"] == without["folder_id"] == default["id"]
    assert await folder_files(api, token, "root") == [at_top]


async def test_a_field_twice_or_too_long_or_unknown_is_refused_and_nothing_kept(api: Api) -> None:
    token = await api.user_with_session()
    twice = b'--xXxBoundaryxXx\r\nContent-Disposition: form-data; name="folder_id"\r\n\r\nroot\r\n'
    response = await upload(
        api, b"x", token=token, folder_id="root", folder_after=True, extra=twice
    )
    error = await assert_error(response, 400, "validation_failed")
    assert error["details"] == {"folder_id": "must be sent once"}
    response = await upload(api, b"x", token=token, folder_id="f" * 65)
    error = await assert_error(response, 400, "validation_failed")
    assert error["details"] == {"folder_id": "must be at most 64 bytes"}
    assert await blob_names(api) == set()


async def test_an_upload_to_a_deleted_default_folder_lands_at_the_top(api: Api) -> None:
    token = await api.user_with_session()
    default = await folder(api, "inbox", token=token)
    await patch(api, SETTINGS, {"default_folder_id": default["id"]}, token)
    deleted = await api.client.delete(f"/api/v1/folders/{default['id']}", headers=bearer(token))
    assert deleted.status == 200
    assert (await (await api.client.get(SETTINGS, headers=bearer(token))).json())["data"][
        "default_folder_id"
    ] is None
    assert (await uploaded(api, b"x", token=token))["folder_id"] is None


async def test_a_deleted_default_folder_read_before_the_deletion_puts_the_file_at_the_top(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default is read, then its folder deleted, then the record written: the write's own
    script finds the folder gone and the file goes to the top, as the deletion reset the
    setting."""
    token = await api.user_with_session()
    default = await folder(api, "inbox", token=token)
    await patch(api, SETTINGS, {"default_folder_id": default["id"]}, token)
    policy = api.app[POLICY]
    read_default = policy.settings.default_folder

    async def read_then_deleted(user_id: str) -> str | None:
        found = await read_default(user_id)
        gone = await api.client.delete(f"/api/v1/folders/{default['id']}", headers=bearer(token))
        assert gone.status == 200
        return found

    monkeypatch.setattr(policy.settings, "default_folder", read_then_deleted)
    created = await uploaded(api, b"x", token=token)
    assert created["folder_id"] is None
    assert await folder_files(api, token, "root") == [created]


# -- one folder's files --------------------------------------------------------------------------


async def uploaded_in_turn(api: Api, clock: FakeClock, count: int, **kwargs: Any) -> list[dict]:
    """``count`` files uploaded a millisecond apart, the oldest first."""
    made = []
    for n in range(count):
        clock.advance(seconds=0.001)
        made.append(await uploaded(api, b"%d" % n, **kwargs))
    return made


async def test_a_folders_files_come_newest_first_a_page_at_a_time(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    docs = await folder(api, "docs", token=token)
    made = await uploaded_in_turn(api, clock, 5, token=token, folder_id=docs["id"])
    await uploaded(api, b"elsewhere", token=token)
    seen: list[dict] = []
    cursor = None
    while True:
        query = f"?folder_id={docs['id']}&limit=2" + (f"&cursor={cursor}" if cursor else "")
        response = await api.client.get(FILES_URL + query, headers=bearer(token))
        page = (await response.json())["data"]
        seen += page["files"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [f["id"] for f in seen] == [f["id"] for f in reversed(made)]


@pytest.mark.parametrize("query", ["?folder_id=", "?folder_id=root&folder_id=root"])
async def test_a_folder_query_given_empty_or_twice_is_refused(api: Api, query: str) -> None:
    token = await api.user_with_session()
    response = await api.client.get(FILES_URL + query, headers=bearer(token))
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) == {"folder_id"}


async def test_another_accounts_folder_lists_like_an_unknown_one(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    hers = await folder(api, "hers", token=alice)
    await uploaded(api, b"secret", token=alice, folder_id=hers["id"])
    for target in (hers["id"], UNKNOWN, "x"):
        response = await api.client.get(f"{FILES_URL}?folder_id={target}", headers=bearer(bob))
        error = await assert_error(response, 404, "folder_not_found")
        assert error == {
            "code": "folder_not_found",
            "message": "No such folder.",
            "details": {"field": "folder_id"},
        }


# -- renaming and moving a file ------------------------------------------------------------------


async def test_a_file_is_renamed_and_moved_keeping_its_id_bytes_and_place(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    docs = await folder(api, "docs", token=token)
    older = await uploaded(api, b"older", token=token)
    clock.advance(seconds=0.001)
    created = await uploaded(api, b"the bytes", token=token, filename="draft.txt")
    clock.advance(seconds=0.001)
    newer = await uploaded(api, b"newer", token=token)

    response = await patch(
        api, f"{FILES_URL}/{created['id']}", {"name": "final.txt", "folder_id": docs["id"]}, token
    )
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/FileEnvelope").validate(answer)
    changed = answer["data"]
    assert changed == {**created, "name": "final.txt", "folder_id": docs["id"]}
    assert await folder_files(api, token, docs["id"]) == [changed]
    assert await folder_files(api, token, "root") == [newer, older]
    assert [f["id"] for f in await everything(api, token)] == [
        newer["id"],
        created["id"],
        older["id"],
    ]
    content = await api.client.get(path_of(changed["url"]), headers=bearer(token))
    assert await content.read() == b"the bytes"
    assert "final.txt" in content.headers["Content-Disposition"]

    back = await patch(api, f"{FILES_URL}/{created['id']}", {"folder_id": None}, token)
    assert (await back.json())["data"]["folder_id"] is None
    assert await folder_files(api, token, docs["id"]) == []
    assert len(await folder_files(api, token, "root")) == 3


async def test_a_file_change_is_refused_for_bad_names_unknown_fields_and_foreign_folders(
    api: Api,
) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    hers = await folder(api, "hers", token=alice)
    mine = await uploaded(api, b"x", token=bob)
    url = f"{FILES_URL}/{mine['id']}"
    for body, field in (
        ({"name": "a/b"}, "name"),
        ({"folder_id": 3}, "folder_id"),
        ({"x": 1}, "x"),
    ):
        error = await assert_error(await patch(api, url, body, bob), 400, "validation_failed")
        assert set(error["details"]) == {field}
    for target in (hers["id"], UNKNOWN):
        response = await patch(api, url, {"folder_id": target}, bob)
        error = await assert_error(response, 404, "folder_not_found")
        assert error["details"] == {"field": "folder_id"}
    theirs = await uploaded(api, b"alice's", token=alice)
    response = await patch(api, f"{FILES_URL}/{theirs['id']}", {"name": "mine"}, bob)
    await assert_error(response, 404, "file_not_found")
    assert (await everything(api, bob)) == [mine]


async def test_changing_a_file_takes_files_write(api: Api) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"x", token=token)
    reader = (await api.create_key(token, permissions=["files.read", "folders.write"]))[
        "secret_key"
    ]
    response = await patch(api, f"{FILES_URL}/{created['id']}", {"name": "y"}, key=reader)
    error = await assert_error(response, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": "files.write"}


async def test_a_file_in_a_folder_being_deleted_can_neither_move_out_nor_be_renamed(
    api: Api,
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    docs = await folder(api, "docs", token=token)
    created = await uploaded(api, b"x", token=token, folder_id=docs["id"])
    # Detached, as the first step of a deletion does, and not yet removed.
    folders = api.app[STORE].folders
    read = await folders.read(user.id, docs["id"])
    assert read is not None
    outcome = await folders.detach(user.id, read, folder_record(docs["id"], read), recursive=True)
    assert outcome is Outcome.DONE
    for body in ({"folder_id": None}, {"name": "escaped"}):
        response = await patch(api, f"{FILES_URL}/{created['id']}", body, token)
        await assert_error(response, 404, "file_not_found")


# -- files recorded before folders existed -------------------------------------------------------


async def test_files_recorded_before_folders_are_at_the_top_and_placed_on_first_listing(
    api: Api, redis_client: redis_sync.Redis, clock: FakeClock
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    made = await uploaded_in_turn(api, clock, 3, token=token)
    # Rewrite them as the release before folders stored them: no folder_id, in no folder index.
    files_key, order_key = f"fh:{{{user.id}}}:files", f"fh:{{{user.id}}}:file-order"
    for created in made:
        member = redis_client.hget(files_key, created["id"])
        record = orjson.loads(member[41:])
        del record["folder_id"]
        old = member[:41] + orjson.dumps(record).decode()
        redis_client.zrem(order_key, member)
        redis_client.zadd(order_key, {old: 0})
        redis_client.hset(files_key, created["id"], old)
    redis_client.delete(f"fh:{{{user.id}}}:folder-files:root", f"fh:{{{user.id}}}:top-files-placed")

    listed = await everything(api, token)
    assert [f["folder_id"] for f in listed] == [None, None, None]
    # A rename of one of them, before the top level was ever listed, keeps it at the top.
    renamed = await patch(api, f"{FILES_URL}/{made[0]['id']}", {"name": "renamed"}, token)
    assert renamed.status == 200
    at_top = await folder_files(api, token, "root")
    assert [f["id"] for f in at_top] == [f["id"] for f in reversed(made)]
    assert redis_client.get(f"fh:{{{user.id}}}:top-files-placed") == "1"
    # And they move and delete like any other file.
    docs = await folder(api, "docs", token=token)
    moved = await patch(api, f"{FILES_URL}/{made[1]['id']}", {"folder_id": docs["id"]}, token)
    assert moved.status == 200
    deleted = await api.client.delete(f"{FILES_URL}/{made[2]['id']}", headers=bearer(token))
    assert deleted.status == 200
    assert [f["id"] for f in await folder_files(api, token, "root")] == [made[0]["id"]]
    assert [f["id"] for f in await folder_files(api, token, docs["id"])] == [made[1]["id"]]
