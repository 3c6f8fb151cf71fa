"""The folders' store (``service.store.folders``), its removal in steps
(``service.store.folder_removal``), files in folders (``service.store.files``) and the settings'
store, below HTTP: names among siblings, heights and the depth bound, compare-and-set, a
detached subtree, bounded removal steps shared by two finishers, one round trip per page, and an
account's deletion leaving nothing.

Each test runs on the fixtures' real Redis (a 3-master cluster under ``--redis cluster``) and on
fakeredis; the real run is the one that counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import fakeredis
import pytest
from redis.asyncio import Redis

from service.config import Settings
from service.domain import account_settings as settings_outcomes
from service.domain.credentials import new_id
from service.domain.folders import Outcome
from service.domain.outcomes import FolderGone
from service.domain.records import FileRecord, FolderRecord
from service.domain.stored_forms import file_member, folder_record
from service.store import files as files_module
from service.store.stores import Stores, open_stores
from tests.support.redis import STORE_TIMEOUT_SECONDS

NOW = 1_800_000_000_000
USER = "usr_0000000000000000000000"
DEPTH = 32


@pytest.fixture(params=["real-redis", "fakeredis"])
async def store(request: pytest.FixtureRequest, redis_mode: str) -> AsyncIterator[Stores]:
    client: Any
    if request.param == "fakeredis":
        client = fakeredis.FakeAsyncRedis(decode_responses=True)
    elif redis_mode == "cluster":
        from service.store.cluster import connect_cluster_client

        url = request.getfixturevalue("redis_url")
        client = connect_cluster_client(
            Settings(
                redis_url=url, redis_mode="cluster", redis_timeout_seconds=STORE_TIMEOUT_SECONDS
            )
        )
    else:
        client = Redis.from_url(request.getfixturevalue("redis_url"), decode_responses=True)
    stores = open_stores(client, "fh")
    assert await stores.users.add(USER, "alice@example.com", "hash", NOW)
    yield stores
    await client.aclose()


def new_folder(name: str, parent: FolderRecord | None = None) -> FolderRecord:
    return FolderRecord(new_id("fld"), name, None if parent is None else parent.id, NOW, NOW)


async def make(store: Stores, name: str, parent: FolderRecord | None = None) -> FolderRecord:
    record = new_folder(name, parent)
    changed = await store.folders.create(USER, record, 1000, DEPTH)
    assert changed.outcome is Outcome.DONE, changed
    return record


async def make_file(store: Stores, folder: FolderRecord | None, at: int = NOW) -> FileRecord:
    record = FileRecord(
        new_id("fil"), "f.txt", 1, "text/plain", "0" * 64, at, None if folder is None else folder.id
    )
    assert await store.files.add(USER, record, 10_000)
    return record


async def move(store: Stores, record: FolderRecord, parent: FolderRecord | None) -> Outcome:
    read = await store.folders.read(USER, record.id)
    assert read is not None
    before = folder_record(record.id, read)
    after = replace(before, parent_id=None if parent is None else parent.id)
    return (await store.folders.change(USER, read, before, after, DEPTH)).outcome


async def detach(store: Stores, record: FolderRecord, recursive: bool = True) -> Outcome:
    read = await store.folders.read(USER, record.id)
    assert read is not None
    return await store.folders.detach(USER, read, folder_record(record.id, read), recursive)


# -- names, pages, paths -----------------------------------------------------------------------


async def test_of_concurrent_creations_of_one_name_exactly_one_is_made(store: Stores) -> None:
    parent = await make(store, "parent")
    spellings = ["Report", "REPORT", "report", "rePort"] * 5
    records = [new_folder(name, parent) for name in spellings]
    outcomes = await asyncio.gather(
        *(store.folders.create(USER, record, 1000, DEPTH) for record in records)
    )
    assert sorted(o.outcome for o in outcomes).count(Outcome.DONE) == 1
    assert {o.outcome for o in outcomes} == {Outcome.DONE, Outcome.NAME_TAKEN}
    page = await store.folders.children_page(USER, parent.id, 100, None)
    assert page is not None and len(page.folders) == 1


async def test_children_come_by_name_then_id_in_pages_that_resume_after_a_name(
    store: Stores,
) -> None:
    names = ["b", "A", "c", "Ä", "a2", "B2"]
    made = {name: await make(store, name) for name in names}
    seen: list[str] = []
    after = None
    while True:
        page = await store.folders.children_page(USER, None, 2, after)
        assert page is not None
        seen += [record.name for record in page.folders]
        if page.next_cursor is None:
            break
        from service.domain.cursors import decode_folder_cursor

        after = decode_folder_cursor(page.next_cursor)
    assert seen == sorted(names, key=str.casefold)
    assert set(made) == set(seen)


async def test_a_lineage_is_the_folder_and_its_parents_and_none_once_detached(
    store: Stores,
) -> None:
    top = await make(store, "top")
    middle = await make(store, "middle", top)
    leaf = await make(store, "leaf", middle)
    lineage = await store.folders.lineage(USER, leaf.id)
    assert [record.id for record in lineage or []] == [leaf.id, middle.id, top.id]
    assert await store.folders.inside(USER, leaf.id, top.id)
    assert await store.folders.inside(USER, leaf.id, None)
    assert not await store.folders.inside(USER, top.id, leaf.id)
    assert await detach(store, middle) is Outcome.DONE
    assert await store.folders.lineage(USER, leaf.id) is None
    assert not await store.folders.inside(USER, leaf.id, top.id)
    assert await store.folders.children_page(USER, middle.id, 10, None) is None
    assert (await store.folders.children_page(USER, top.id, 10, None)).folders == []  # type: ignore[union-attr]


# -- heights and the depth bound ---------------------------------------------------------------


async def test_a_moves_depth_check_follows_the_subtrees_height_through_every_change(
    store: Stores,
) -> None:
    deep = [await make(store, "d0")]
    for n in range(1, 29):
        deep.append(await make(store, f"d{n}", deep[-1]))  # 29 levels
    sub = [await make(store, "s0")]
    for n in range(1, 4):
        sub.append(await make(store, f"s{n}", sub[-1]))  # 4 levels: 29 + 4 > 32
    assert await move(store, sub[0], deep[-1]) is Outcome.TOO_DEEP
    assert await detach(store, sub[3]) is Outcome.DONE  # 3 levels: fits exactly
    assert await move(store, sub[0], deep[-1]) is Outcome.DONE
    # Moved there, nothing may grow below it, and no deeper subtree may join.
    too_deep = await store.folders.create(USER, new_folder("x", sub[2]), 1000, DEPTH)
    assert too_deep.outcome is Outcome.TOO_DEEP
    # Moved back to the top, the deep chain's height drops again: a 3-level subtree fits there.
    assert await move(store, sub[0], None) is Outcome.DONE
    other = [await make(store, "o0")]
    other.append(await make(store, "o1", other[-1]))
    other.append(await make(store, "o2", other[-1]))
    assert await move(store, other[0], deep[-1]) is Outcome.DONE


async def test_a_cycle_and_a_detached_destination_are_refused(store: Stores) -> None:
    top = await make(store, "top")
    child = await make(store, "child", top)
    gone = await make(store, "gone")
    assert await move(store, top, child) is Outcome.CYCLE
    assert await move(store, top, top) is Outcome.CYCLE
    assert await detach(store, gone) is Outcome.DONE
    assert await move(store, child, gone) is Outcome.DESTINATION_NOT_FOUND
    assert (await store.folders.create(USER, new_folder("x", gone), 1000, DEPTH)).outcome is (
        Outcome.NOT_FOUND
    )


async def test_a_change_from_a_stale_read_changes_nothing(store: Stores) -> None:
    made = await make(store, "before")
    read = await store.folders.read(USER, made.id)
    assert read is not None
    renamed = replace(made, name="first", updated_at=NOW + 1)
    assert (await store.folders.change(USER, read, made, renamed, DEPTH)).outcome is Outcome.DONE
    stale = replace(made, name="second")
    outcome = (await store.folders.change(USER, read, made, stale, DEPTH)).outcome
    assert outcome is Outcome.CHANGED
    assert (await store.folders.lineage(USER, made.id))[0].name == "first"  # type: ignore[index]


async def test_the_folder_limit_counts_with_the_write_and_says_when_a_removal_is_pending(
    store: Stores,
) -> None:
    first = await make(store, "first")
    await make_file(store, first)
    changed = await store.folders.create(USER, new_folder("second"), 1, DEPTH)
    assert (changed.outcome, changed.pending) == (Outcome.LIMIT_REACHED, False)
    assert await detach(store, first) is Outcome.DONE
    changed = await store.folders.create(USER, new_folder("second"), 1, DEPTH)
    assert (changed.outcome, changed.pending) == (Outcome.LIMIT_REACHED, True)


# -- deletion: detach, then bounded steps ----------------------------------------------------------


async def build(store: Stores, branches: int, depth: int, files_each: int) -> tuple:
    top = await make(store, "top")
    folders, files = [top], [await make_file(store, top)]
    for branch in range(branches):
        parent = top
        for level in range(depth):
            made = await make(store, f"b{branch}l{level}", parent)
            folders.append(made)
            for n in range(files_each):
                files.append(await make_file(store, made, NOW + n))
            parent = made
    return top, folders, files


async def test_a_detached_subtree_goes_in_steps_of_at_most_the_budget_and_leaves_nothing(
    store: Stores,
) -> None:
    kept = await make(store, "kept")
    kept_file = await make_file(store, kept)
    top, folders, files = await build(store, branches=3, depth=3, files_each=3)
    assert await detach(store, top, recursive=False) is Outcome.NOT_EMPTY
    assert await detach(store, top) is Outcome.DONE
    assert await store.folder_removal.trash(USER) == [top.id]

    removed: list[str] = []
    done = False
    steps = 0
    while not done:
        done, ids = await store.folder_removal.remove_batch(USER, top.id, 4)
        assert len(ids) <= 4
        removed += ids
        steps += 1
    assert sorted(removed) == sorted(record.id for record in [*folders, *files])
    assert steps >= len(removed) // 4
    assert await store.folder_removal.trash(USER) == []
    assert (await store.files.list_page(USER, 100, None)).files == [kept_file]
    leftovers = [i async for ids in store.folder_removal.leftovers(USER, 1000) for i in ids]
    assert sorted(leftovers) == sorted(removed)
    await store.folder_removal.forget(USER, removed)
    assert not await store.folder_removal.pending(USER)
    assert await store.folders.count(USER) == 1


async def test_two_finishers_share_a_removal_and_never_both_take_a_record(store: Stores) -> None:
    top, folders, files = await build(store, branches=4, depth=2, files_each=4)
    assert await detach(store, top) is Outcome.DONE

    async def finisher() -> list[str]:
        taken: list[str] = []
        done = False
        while not done:
            done, ids = await store.folder_removal.remove_batch(USER, top.id, 3)
            taken += ids
            await asyncio.sleep(0)  # let the other finisher step in between
        return taken

    first, second = await asyncio.gather(finisher(), finisher())
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted(record.id for record in [*folders, *files])


async def test_detaching_resets_the_default_folder_when_it_was_in_the_subtree(
    store: Stores,
) -> None:
    top = await make(store, "top")
    inner = await make(store, "inner", top)
    other = await make(store, "other")
    names = ("default_folder_id",)
    for default, reset in ((other, False), (inner, True)):
        read = await store.account_settings.read(USER)
        outcome = await store.account_settings.change(
            USER, read, {"default_folder_id": default.id}, names
        )
        assert outcome == settings_outcomes.DONE
        if reset:
            assert await detach(store, top) is Outcome.DONE
        expected = None if reset else default.id
        assert await store.account_settings.read_one(USER, "default_folder_id") == expected


async def test_a_settings_change_from_a_stale_read_or_to_a_gone_folder_changes_nothing(
    store: Stores,
) -> None:
    names = ("default_key_expires_days", "default_folder_id")
    read = await store.account_settings.read(USER)
    assert await store.account_settings.change(
        USER, read, {"default_key_expires_days": "5"}, names
    ) == (settings_outcomes.DONE)
    stale = await store.account_settings.change(
        USER, read, {"default_key_expires_days": "6"}, names
    )
    assert stale == settings_outcomes.CHANGED
    gone = await make(store, "gone")
    assert await detach(store, gone) is Outcome.DONE
    fresh = await store.account_settings.read(USER)
    outcome = await store.account_settings.change(
        USER, fresh, {"default_folder_id": gone.id}, names
    )
    assert outcome == settings_outcomes.FOLDER_GONE
    assert await store.account_settings.read(USER) == {"default_key_expires_days": "5"}


# -- files in folders --------------------------------------------------------------------------


async def test_a_file_goes_only_into_a_live_folder_and_moves_by_compare_and_set(
    store: Stores,
) -> None:
    docs = await make(store, "docs")
    gone = await make(store, "gone")
    assert await detach(store, gone) is Outcome.DONE
    with pytest.raises(FolderGone):
        await make_file(store, gone)
    created = await make_file(store, None)
    stored, before = await store.files.read(USER, created.id)  # type: ignore[misc]
    after = replace(before, folder_id=docs.id, name="moved.txt")
    assert await store.files.change(USER, stored, before, after) is True
    assert await store.files.change(USER, stored, before, after) is False  # stale
    with pytest.raises(FolderGone):
        stored2, now = await store.files.read(USER, created.id)  # type: ignore[misc]
        await store.files.change(USER, stored2, now, replace(now, folder_id=gone.id))
    page = await store.files.folder_page(USER, docs.id, 10, None)
    assert page is not None and page.files == [after]
    assert (await store.files.folder_page(USER, None, 10, None)).files == []  # type: ignore[union-attr]
    assert await store.files.folder_page(USER, gone.id, 10, None) is None


async def test_older_files_are_placed_at_the_top_in_batches_once(
    store: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files_module, "_PLACING_BATCH", 2)
    made = [await make_file(store, None, NOW + n) for n in range(5)]
    keys = store.keys
    # As the release before folders wrote them: no folder_id, no top-level index, no mark.
    for record in made:
        old = file_member(record).replace(',"folder_id":null', "")
        new = file_member(record)
        await store.redis.zrem(keys.account_file_order(USER), new)
        await store.redis.zadd(keys.account_file_order(USER), {old: 0})
        await store.redis.hset(keys.account_files(USER), record.id, old)
    await store.redis.delete(keys.folder_files(USER, "root"), keys.top_files_placed(USER))
    page = await store.files.folder_page(USER, None, 10, None)
    assert page is not None
    assert [record.id for record in page.files] == [record.id for record in reversed(made)]
    assert all(record.folder_id is None for record in page.files)
    assert await store.redis.get(keys.top_files_placed(USER)) == "1"


async def test_a_page_of_a_folder_or_of_folders_is_one_round_trip(
    store: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = await make(store, "docs")
    for n in range(3):
        await make_file(store, docs, NOW + n)
    await make_file(store, None)  # the account's first file: its top level needs no placing
    await store.files.folder_page(USER, docs.id, 1, None)  # each script loaded once
    await store.folders.children_page(USER, None, 1, None)
    await store.folders.lineage(USER, docs.id)
    sent: list[Any] = []
    execute = store.redis.execute_command

    async def counted(*args: Any, **kwargs: Any) -> Any:
        sent.append(args[0])
        return await execute(*args, **kwargs)

    monkeypatch.setattr(store.redis, "execute_command", counted)
    assert len((await store.files.folder_page(USER, docs.id, 2, None)).files) == 2  # type: ignore[union-attr]
    assert len((await store.files.folder_page(USER, None, 2, None)).files) == 1  # type: ignore[union-attr]
    assert len((await store.folders.children_page(USER, None, 2, None)).folders) == 1  # type: ignore[union-attr]
    assert len(await store.folders.lineage(USER, docs.id) or []) == 1
    assert len(sent) == 4, sent


# -- an account's deletion ---------------------------------------------------------------------


async def test_deleting_the_account_leaves_no_folder_file_or_setting_behind(
    store: Stores,
) -> None:
    top, folders, _files = await build(store, branches=2, depth=2, files_each=2)
    half = await make(store, "half removed")
    await make_file(store, half)
    assert await detach(store, half) is Outcome.DONE
    await store.folder_removal.remove_batch(USER, half.id, 1)  # cut short: a file noted
    read = await store.account_settings.read(USER)
    await store.account_settings.change(
        USER, read, {"default_folder_id": top.id}, ("default_folder_id",)
    )
    await store.folder_removal.expect(USER)
    keys = store.keys
    places = [*(record.id for record in [*folders, half]), "root"]
    named = [
        keys.account_folders(USER),
        keys.folder_trash(USER),
        keys.account_removed(USER),
        keys.account_settings(USER),
        keys.top_files_placed(USER),
        keys.account_files(USER),
        keys.account_file_order(USER),
        *(keys.folder_children(USER, place) for place in places),
        *(keys.folder_heights(USER, place) for place in places),
        *(keys.folder_files(USER, place) for place in places),
    ]
    assert await store.redis.exists(*named) >= 10  # one slot: a cluster answers this too
    await store.users.delete(USER, "alice@example.com")
    assert await store.redis.exists(*named) == 0
    assert not await store.redis.sismember(keys.folder_removals, USER)
