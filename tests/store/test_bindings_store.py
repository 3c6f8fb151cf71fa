"""The store of what a key bound to folders reaches (``service.store.bindings``), below HTTP: a
file's folder read from its record whatever its name holds, a page of files across a tree with
a detached subtree matching what walking each file's parents says, a key reaching nothing when
its metadata is gone, damaged or names no folder, its top level and where its uploads go.

Each test runs on the fixtures' real Redis (a 3-master cluster under ``--redis cluster``) and on
fakeredis; the real run is the one that counts.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import fakeredis
import orjson
import pytest
from redis.asyncio import Redis

from service.config import Settings
from service.domain.credentials import new_id
from service.domain.cursors import decode_file_cursor
from service.domain.folders import Outcome
from service.domain.records import FileRecord, FolderRecord
from service.domain.stored_forms import folder_record
from service.store import bindings
from service.store.stores import Stores, open_stores
from tests.support.redis import STORE_TIMEOUT_SECONDS

NOW = 1_800_000_000_000
USER = "usr_0000000000000000000000"
KEY = "key_0000000000000000000000"


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


async def make(store: Stores, name: str, parent: FolderRecord | None = None) -> FolderRecord:
    record = FolderRecord(new_id("fld"), name, None if parent is None else parent.id, NOW, NOW)
    changed = await store.folders.create(USER, record, 1000, 32)
    assert changed.outcome is Outcome.DONE, changed
    return record


async def make_file(
    store: Stores, folder: FolderRecord | None, at: int, name: str = "f.txt"
) -> FileRecord:
    record = FileRecord(new_id("fil"), name, 1, "text/plain", "0" * 64, at, folder and folder.id)
    assert await store.files.add(USER, record, 100_000)
    return record


async def bind(store: Stores, folder_ids: list[str] | None, key_id: str = KEY) -> None:
    assert await store.api_keys.add(
        user_id=USER,
        key_id=key_id,
        secret_digest=new_id("dig"),
        name="bound",
        key_prefix="fhk_00000000...",
        permissions=1,
        created_at=NOW,
        expires_at=NOW + 10**9,
        max_active=100,
        folder_ids=None if folder_ids is None else tuple(folder_ids),
    )


async def detach(store: Stores, folder: FolderRecord) -> None:
    read = await store.folders.read(USER, folder.id)
    assert read is not None
    outcome = await store.folders.detach(USER, read, folder_record(folder.id, read), True)
    assert outcome is Outcome.DONE


async def test_a_files_folder_is_its_records_whatever_its_name_holds(store: Stores) -> None:
    inside = await make(store, "Inside")
    await bind(store, [inside.id])
    # Names that spell the record's own field, at the top level: never read as in the folder.
    tricks = [
        f'x","folder_id":"{inside.id}"}}',
        f'","folder_id":"{inside.id}"}}',
        f'\\","folder_id":"{inside.id}"}}',
        f"{inside.id}",
    ]
    for at, name in enumerate(tricks, NOW):
        top = await make_file(store, None, at, name)
        assert await store.bindings.file(USER, KEY, top.id) == (0, None)
    placed = await make_file(store, inside, NOW + 100, tricks[0])
    status, member = await store.bindings.file(USER, KEY, placed.id)
    assert status == 1 and member == await store.folders._redis.hget(  # type: ignore[attr-defined]
        f"fh:{{{USER}}}:files", placed.id
    )
    assert await store.bindings.file(USER, KEY, new_id("fil")) == (0, None)


async def test_a_page_of_files_is_what_walking_each_files_parents_says(store: Stores) -> None:
    # A tree three levels deep, the key bound to two folders of it, one of which lies inside
    # a subtree then detached: files everywhere, in a random order of folders.
    rng = random.Random(7)
    tops = [await make(store, f"top {n}") for n in range(3)]
    middles = [await make(store, f"mid {n}", tops[n % 3]) for n in range(6)]
    leaves = [await make(store, f"leaf {n}", middles[n % 6]) for n in range(12)]
    every = [None, *tops, *middles, *leaves]
    parent_of = {f.id: f.parent_id for f in [*tops, *middles, *leaves]}
    bound = [tops[0].id, middles[1].id]  # middles[1] is under tops[1]
    await bind(store, bound)
    files = []
    for at in range(NOW, NOW + 300):
        files.append(await make_file(store, rng.choice(every), at))
    await detach(store, middles[4])  # under tops[1], beside middles[1]
    dead = {middles[4].id, *(leaf.id for leaf in leaves if leaf.parent_id == middles[4].id)}

    def inside(folder_id: str | None) -> bool:
        while folder_id is not None:
            if folder_id in dead:
                return False
            if folder_id in bound:
                return True
            folder_id = parent_of[folder_id]
        return False

    expected = [f.id for f in sorted(files, key=lambda f: f.created_at, reverse=True)]
    expected = [
        file_id
        for file_id in expected
        if inside(next(f for f in files if f.id == file_id).folder_id)
    ]
    assert 0 < len(expected) < len(files)
    for limit in (1, 7, 1000):
        found, after = [], None
        while True:
            status, page = await store.bindings.files_page(USER, KEY, limit, after)
            assert status == 1 and len(page.files) <= limit
            found += [f.id for f in page.files]
            if page.next_cursor is None:
                break
            after = decode_file_cursor(page.next_cursor)
        assert found == expected, limit


async def test_a_page_examines_no_more_than_its_bound(
    store: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = await make(store, "Inside")
    await bind(store, [inside.id])
    for at in range(NOW, NOW + 30):
        await make_file(store, None, at)
    monkeypatch.setattr(bindings, "SCAN_BOUND", 10)
    status, page = await store.bindings.files_page(USER, KEY, 5, None)
    assert status == 1 and page.files == [] and page.next_cursor is not None
    assert decode_file_cursor(page.next_cursor).startswith(f"{NOW + 20:013d}:")


@pytest.mark.parametrize("metadata", ["gone", "damaged", "unbound", "bound to none"])
async def test_a_key_reaches_nothing_unless_its_metadata_names_folders(
    store: Stores, metadata: str
) -> None:
    inside = await make(store, "Inside")
    placed = await make_file(store, inside, NOW)
    await bind(store, [inside.id])
    listing = f"fh:{{{USER}}}:keys"
    redis = store.folders._redis  # type: ignore[attr-defined]
    if metadata == "gone":
        await redis.hdel(listing, KEY)
    elif metadata == "damaged":
        await redis.hset(listing, KEY, "{not json")
    else:
        meta = orjson.loads(await redis.hget(listing, KEY))
        if metadata == "unbound":
            del meta["f"]
        else:
            meta["f"] = []
        await redis.hset(listing, KEY, orjson.dumps(meta))
    assert await store.bindings.file(USER, KEY, placed.id) == (-1, None)
    assert (await store.bindings.folder(USER, KEY, inside.id))[0] == -1
    assert await store.bindings.place(USER, KEY, None) == (-1, None)
    assert (await store.bindings.tops(USER, KEY))[0] == -1
    assert (await store.bindings.files_page(USER, KEY, 10, None))[0] == -1


async def test_the_keys_top_level_and_where_its_uploads_go(store: Stores) -> None:
    outer = await make(store, "Outer")
    inner = await make(store, "Inner", outer)
    elsewhere = await make(store, "Elsewhere")
    doomed = await make(store, "Doomed")
    await bind(store, [doomed.id, inner.id, outer.id])
    status, tops = await store.bindings.tops(USER, KEY)
    assert status == 1 and {t.id for t in tops} == {outer.id, doomed.id}
    assert await store.bindings.place(USER, KEY, None) == (1, doomed.id)
    await detach(store, doomed)
    assert {t.id for t in (await store.bindings.tops(USER, KEY))[1]} == {outer.id}
    assert await store.bindings.place(USER, KEY, None) == (1, inner.id)  # the first live
    assert await store.bindings.place(USER, KEY, elsewhere.id) == (1, inner.id)
    assert await store.bindings.place(USER, KEY, inner.id) == (1, inner.id)
    status, lineage = await store.bindings.folder(USER, KEY, inner.id)
    assert status == 1 and [found_id for found_id, _ in lineage] == [inner.id, outer.id]
    await detach(store, outer)
    assert await store.bindings.place(USER, KEY, None) == (0, None)
    assert await store.bindings.tops(USER, KEY) == (1, [])


async def test_binding_a_folder_that_is_not_live_writes_nothing(store: Stores) -> None:
    from service.domain.outcomes import FolderNotLive

    live = await make(store, "Live")
    doomed = await make(store, "Doomed")
    await detach(store, doomed)
    for folder_ids in ([live.id, doomed.id], [new_id("fld")]):
        with pytest.raises(FolderNotLive):
            await bind(store, folder_ids, key_id=new_id("key"))
    assert await store.api_keys.list(USER, NOW) == []


async def test_which_of_a_batch_of_targets_lie_inside(store: Stores) -> None:
    inside = await make(store, "Inside")
    below = await make(store, "Below", inside)
    outside = await make(store, "Outside")
    doomed = await make(store, "Doomed", inside)
    files = [await make_file(store, folder, NOW) for folder in (below, outside, None, doomed)]
    await detach(store, doomed)
    await bind(store, [inside.id])
    targets = [
        ("folder", inside.id),
        ("folder", below.id),
        ("folder", outside.id),
        ("folder", doomed.id),
        ("folder", new_id("fld")),
        *(("file", f.id) for f in files),
        ("file", new_id("fil")),
    ]
    status, found = await store.bindings.targets(USER, KEY, targets)
    assert status == 1
    assert found == [True, True, False, False, False, True, False, False, False, False]
    assert await store.bindings.targets(USER, KEY, []) == (1, [])
