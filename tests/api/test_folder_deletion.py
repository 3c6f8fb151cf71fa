"""Deleting a folder with everything in it leaves nothing behind, in Redis or on disk, even when
its removal is cut short: the subtree is unreachable at once, removed in bounded steps, and
what a cut-short removal left is removed by the account's next folder change or by the next
start of the service. Over HTTP, on the fixtures' real Redis, the blobs in a directory of the
test's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync
from redis.exceptions import ConnectionError as RedisConnectionError

from service.api.context import POLICY, REMOVALS_AT_START
from service.app import BLOBS
from service.auth.removals import Removals
from service.store.folder_removal import FolderRemovalStore
from tests.support.api import Api, assert_error, bearer
from tests.support.files import FILES_URL, uploaded
from tests.support.folders import (
    FOLDERS,
    blob_names,
    children,
    create_folder,
    folder,
    folder_traces,
)
from tests.support.keys import audit_events


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    api = await make_api(data_dir=tmp_path)
    await api.app[REMOVALS_AT_START]  # nothing to finish on an empty store: out of the way
    return api


async def tree(api: Api, token: str) -> tuple[dict, list[dict], list[dict]]:
    """A folder holding three levels of folders with files at each: (its top, the folders
    below it, the files in them)."""
    top = await folder(api, "doomed", token=token)
    folders, files = [], [await uploaded(api, b"top file", token=token, folder_id=top["id"])]
    for branch in range(3):
        parent = top
        for level in range(3):
            made = await folder(api, f"b{branch} l{level}", parent["id"], token=token)
            folders.append(made)
            for n in range(2):
                files.append(await uploaded(api, b"%d" % n, token=token, folder_id=made["id"]))
            parent = made
    return top, folders, files


async def listed_ids(api: Api, token: str) -> set[str]:
    response = await api.client.get(f"{FILES_URL}?limit=1000", headers=bearer(token))
    return {f["id"] for f in (await response.json())["data"]["files"]}


async def test_a_recursive_deletion_in_many_steps_leaves_nothing_of_the_subtree(
    api: Api, redis_client: redis_sync.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    kept_folder = await folder(api, "kept", token=token)
    kept_file = await uploaded(api, b"kept", token=token, folder_id=kept_folder["id"])
    top, below, files = await tree(api, token)
    monkeypatch.setattr(api.app[POLICY].removals, "_batch", 3)  # many steps for this tree

    response = await api.client.delete(
        f"{FOLDERS}/{top['id']}?recursive=true", headers=bearer(token)
    )
    assert response.status == 200, await response.text()

    for made in [top, *below]:
        answer = await api.client.get(f"{FOLDERS}/{made['id']}", headers=bearer(token))
        await assert_error(answer, 404, "folder_not_found")
    for gone in files:
        answer = await api.client.get(f"{FILES_URL}/{gone['id']}", headers=bearer(token))
        await assert_error(answer, 404, "file_not_found")
    assert await listed_ids(api, token) == {kept_file["id"]}
    assert await blob_names(api) == {kept_file["id"]}
    assert (await children(api, token))["folders"] == [kept_folder]
    # In Redis, the kept folder's record and indexes only.
    folders_hash = redis_client.hgetall(f"fh:{{{user.id}}}:folders")
    assert set(folders_hash) == {kept_folder["id"]}
    assert folder_traces(redis_client, user.id) == sorted(
        [
            f"fh:{{{user.id}}}:folder-children:root",
            f"fh:{{{user.id}}}:folder-files:{kept_folder['id']}",
            f"fh:{{{user.id}}}:folder-heights:root",
            f"fh:{{{user.id}}}:folders",
        ]
    )
    deleted = await audit_events(api, token, "folder.deleted")
    assert [(e["target"]["folder_id"], e["changes"]) for e in deleted] == [
        (top["id"], {"recursive": True})
    ]


@pytest.mark.parametrize("where", ["a-step", "the-bytes"])
async def test_a_removal_cut_short_is_finished_by_the_accounts_next_folder_change(
    api: Api, redis_client: redis_sync.Redis, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    top, _below, files = await tree(api, token)
    removals = api.app[POLICY].removals
    monkeypatch.setattr(removals, "_batch", 4)
    cut_short = _cut_short_after_one_step(monkeypatch, where)

    response = await api.client.delete(
        f"{FOLDERS}/{top['id']}?recursive=true", headers=bearer(token)
    )
    assert response.status == 200, await response.text()  # deleted as far as the client sees
    assert cut_short.happened
    await assert_error(
        await api.client.get(f"{FOLDERS}/{top['id']}", headers=bearer(token)),
        404,
        "folder_not_found",
    )
    # Some of the subtree is still there, in Redis and on disk.
    left_behind = {f["id"] for f in files} & (await blob_names(api))
    assert left_behind
    assert folder_traces(redis_client, user.id)

    monkeypatch.undo()
    made = await folder(api, "next change", token=token)  # any folder change of the account
    assert await blob_names(api) == set()
    assert await listed_ids(api, token) == set()
    assert sorted(redis_client.hkeys(f"fh:{{{user.id}}}:folders")) == [made["id"]]
    assert [key for key in folder_traces(redis_client, user.id) if not key.endswith(":root")] == [
        f"fh:{{{user.id}}}:folders"
    ]
    assert not redis_client.sismember("fh:folder-removals", user.id)


async def test_a_removal_cut_short_is_finished_by_the_next_start(
    api: Api,
    make_api: Any,
    tmp_path: Path,
    redis_client: redis_sync.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    top, _below, files = await tree(api, token)
    monkeypatch.setattr(api.app[POLICY].removals, "_batch", 4)
    _cut_short_after_one_step(monkeypatch, "the-bytes")
    response = await api.client.delete(
        f"{FOLDERS}/{top['id']}?recursive=true", headers=bearer(token)
    )
    assert response.status == 200
    assert (await blob_names(api)) & {f["id"] for f in files}
    assert redis_client.sismember("fh:folder-removals", user.id)
    monkeypatch.undo()

    restarted = await make_api(data_dir=tmp_path)  # a new start over the same store and disk
    await restarted.app[REMOVALS_AT_START]
    assert await blob_names(restarted) == set()
    assert folder_traces(redis_client, user.id) == []
    assert await listed_ids(restarted, token) == set()


async def test_bytes_that_could_not_be_removed_are_removed_by_a_later_run(
    api: Api, redis_client: redis_sync.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    created = await uploaded(api, b"stuck", token=token)
    blobs = api.app[BLOBS]

    async def failing(blob_ids: list[str]) -> list[str]:
        raise OSError("the disk said no")

    monkeypatch.setattr(blobs, "delete_all", failing)
    response = await api.client.delete(f"{FILES_URL}/{created['id']}", headers=bearer(token))
    assert response.status == 200  # the file is gone: its record was removed first
    assert await blob_names(api) == {created["id"]}
    assert redis_client.smembers(f"fh:{{{user.id}}}:removed") == {created["id"]}
    monkeypatch.undo()

    await api.app[POLICY].removals.finish(user.id)
    assert await blob_names(api) == set()
    assert not redis_client.exists(f"fh:{{{user.id}}}:removed")


async def test_a_creation_refused_for_the_limit_finishes_a_removal_and_tries_again(
    make_api: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = await make_api(data_dir=tmp_path, max_folders_per_account=4)
    token = await api.user_with_session()
    top = await folder(api, "top", token=token)
    for n in range(3):
        await folder(api, f"inner {n}", top["id"], token=token)
    _cut_short_after_one_step(monkeypatch, "a-step", steps=0)
    response = await api.client.delete(
        f"{FOLDERS}/{top['id']}?recursive=true", headers=bearer(token)
    )
    assert response.status == 200
    monkeypatch.undo()
    # Three of the four folders still count until removed: the creation finishes the removal.
    made = await create_folder(api, "fresh", token=token)
    assert made.status == 201, await made.text()


class _Cut:
    happened = False


def _cut_short_after_one_step(monkeypatch: pytest.MonkeyPatch, where: str, steps: int = 1) -> _Cut:
    """Make a removal stop after its first step (``steps`` of them), as a worker's end would:
    at the next step (``a-step``), or between a step's records and its bytes
    (``the-bytes``)."""
    cut = _Cut()
    step = FolderRemovalStore.remove_batch
    purge = Removals.purge
    calls = {"steps": 0}

    async def one_step_only(self: FolderRemovalStore, *args: Any) -> Any:
        calls["steps"] += 1
        if calls["steps"] > steps:
            cut.happened = True
            raise RedisConnectionError("cut short")
        return await step(self, *args)

    async def records_then_gone(self: Removals, user_id: str, ids: list[str]) -> None:
        if calls["steps"] >= 1 and len(ids) > 1:
            cut.happened = True
            raise RedisConnectionError("cut short")
        await purge(self, user_id, ids)

    if where == "a-step":
        monkeypatch.setattr(FolderRemovalStore, "remove_batch", one_step_only)
    else:
        monkeypatch.setattr(FolderRemovalStore, "remove_batch", one_step_only)
        monkeypatch.setattr(Removals, "purge", records_then_gone)
    return cut
