"""The files' metadata (``service.store.files``) and the directory blob backend
(``service.store.blobs``), below HTTP: order and cursors, the quota and account checks done in
one script, that a page is one plain command, and that a blob is whole or absent.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis as redis_sync

from service.domain.blobs import BlobMissing, ChunkSource, StorageFull
from service.domain.credentials import new_id
from service.domain.cursors import BadCursor, decode_file_cursor, encode_file_cursor
from service.domain.outcomes import AccountGone
from service.domain.records import FileRecord
from service.store import directory_blobs as blob_store
from service.store import file_writes
from service.store.directory_blobs import DirectoryBlobs
from service.store.files import FilesStore
from service.store.stores import open_stores
from tests.support.redis import async_client

USER = "usr_0000000000000000000000"


@pytest.fixture
async def files(
    redis_url: str, redis_mode: str, redis_client: redis_sync.Redis
) -> AsyncIterator[FilesStore]:
    client = await async_client(redis_url, redis_mode)
    redis_client.hset(f"fh:{{{USER}}}:user", mapping={"id": USER})
    yield open_stores(client, "fh").files
    await client.aclose()


def record(created_at: int, name: str = "a.txt") -> FileRecord:
    return FileRecord(new_id("fil"), name, 1, "text/plain", "0" * 64, created_at)


async def test_pages_are_newest_first_and_ties_are_broken_by_id(files: FilesStore) -> None:
    stored = [record(1_700_000_000_000 + n // 3) for n in range(10)]  # three per millisecond
    for item in stored:
        assert await files.add(USER, item, 100)
    expected = sorted(stored, key=lambda r: (r.created_at, r.id), reverse=True)

    seen: list[FileRecord] = []
    after = None
    while True:
        page = await files.list_page(USER, 4, after)
        seen += page.files
        if page.next_cursor is None:
            break
        after = decode_file_cursor(page.next_cursor)
    assert seen == expected
    assert await files.count(USER) == 10


async def test_a_page_is_one_zrange_and_an_empty_account_costs_one_command(
    files: FilesStore, redis_client: redis_sync.Redis
) -> None:
    redis_client.config_resetstat()
    page = await files.list_page("usr_1111111111111111111111", 100, None)
    assert page.files == [] and page.next_cursor is None
    stats = redis_client.info("commandstats")
    connection = ("cmdstat_client", "cmdstat_config", "cmdstat_hello", "cmdstat_info")
    calls = {n: v["calls"] for n, v in stats.items() if not n.startswith(connection)}
    assert calls == {"cmdstat_zrange": 1}


async def test_the_quota_and_a_gone_user_are_checked_with_the_write(
    files: FilesStore, redis_client: redis_sync.Redis
) -> None:
    assert await files.add(USER, record(1), 2)
    assert await files.add(USER, record(2), 2)
    assert not await files.add(USER, record(3), 2)
    assert await files.count(USER) == 2
    with pytest.raises(AccountGone):
        await files.add("usr_2222222222222222222222", record(4), 2)
    assert redis_client.keys("fh:{usr_2222222222222222222222}:*") == []


async def test_remove_takes_the_record_and_its_place_in_the_order(files: FilesStore) -> None:
    kept, gone = record(1), record(2)
    await files.add(USER, kept, 10)
    await files.add(USER, gone, 10)
    stored, found = await files.read(USER, gone.id)
    assert found == gone
    assert await files.remove(USER, stored, gone) is True
    assert await files.remove(USER, stored, gone) is None
    assert await files.get(USER, gone.id) is None
    assert (await files.list_page(USER, 10, None)).files == [kept]


async def test_names_of_any_kind_survive_the_round_trip(files: FilesStore) -> None:
    odd = record(5, name='résumé 履歴書 🙂 "quoted" :colon: \\ {}')
    await files.add(USER, odd, 10)
    assert await files.get(USER, odd.id) == odd
    assert (await files.list_page(USER, 10, None)).files == [odd]


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "x",
        "A" * 65,
        "MTIzOmZpbF94",  # "123:fil_x"
        encode_file_cursor("1700000000000:fil_short"),
        encode_file_cursor("1700000000000:fil_0000000000000000000000") + "=",
        "ＭＴＩ",
    ],
)
def test_cursors_not_made_here_are_refused(cursor: str) -> None:
    with pytest.raises(BadCursor):
        decode_file_cursor(cursor)


def test_a_cursor_round_trips() -> None:
    position = "1700000000000:fil_0000000000000000000000"
    assert decode_file_cursor(encode_file_cursor(position)) == position


# -- the directory backend ---------------------------------------------------------------------


def chunks_of(*parts: bytes) -> ChunkSource:
    async def chunks() -> AsyncIterator[bytes]:
        for part in parts:
            yield part
            await asyncio.sleep(0)

    return ChunkSource(chunks())


async def test_put_open_delete(tmp_path: Path) -> None:
    blobs = DirectoryBlobs(tmp_path / "files")
    blob_id = new_id("fil")
    data = os.urandom(700_000)
    written = await blobs.put(blob_id, chunks_of(data[:1000], data[1000:]))
    assert (written.size, written.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == [blob_id]
    assert oct((tmp_path / "files").stat().st_mode & 0o777) == "0o700"

    blob = await blobs.open(blob_id)
    try:
        assert blob.size == len(data)
        assert b"".join([c async for c in blob.chunks(10, 500_000)]) == data[10:500_010]
    finally:
        await blob.close()
    assert await blobs.delete(blob_id)
    assert not await blobs.delete(blob_id)
    with pytest.raises(BlobMissing):
        await blobs.open(blob_id)


async def test_a_put_that_fails_half_way_leaves_nothing(tmp_path: Path) -> None:
    blobs = DirectoryBlobs(tmp_path / "files")

    async def failing() -> AsyncIterator[bytes]:
        yield b"x" * 100_000
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        await blobs.put(new_id("fil"), ChunkSource(failing()))
    assert list((tmp_path / "files").iterdir()) == []


async def test_a_cancelled_put_leaves_nothing(tmp_path: Path) -> None:
    blobs = DirectoryBlobs(tmp_path / "files")
    started = asyncio.Event()

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"y" * 65536
            started.set()
            await asyncio.sleep(0.001)

    task = asyncio.create_task(blobs.put(new_id("fil"), ChunkSource(endless())))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert list((tmp_path / "files").iterdir()) == []


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 65536 + 5, 700_000])
@pytest.mark.parametrize("direct", [True, False], ids=["direct writes", "page cache"])
async def test_every_length_is_stored_whole_either_way_of_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, direct: bool
) -> None:
    """Direct writes take whole blocks and carry the rest to the next batch; the file's last
    bytes go through the page cache. Small batches put many block edges inside the file."""
    monkeypatch.setattr(file_writes, "WRITE_BATCH", 3 * 65536 + 100)
    if not direct:
        monkeypatch.setattr(file_writes, "_O_DIRECT", 0)
    blobs = DirectoryBlobs(tmp_path / "files")
    data = os.urandom(size)
    pieces = [data[start : start + 50_001] for start in range(0, size, 50_001)]
    blob_id = new_id("fil")
    written = await blobs.put(blob_id, chunks_of(*pieces))
    assert (written.size, written.sha256) == (size, hashlib.sha256(data).hexdigest())
    assert (tmp_path / "files" / blob_id).read_bytes() == data


def test_a_filesystem_that_refuses_a_direct_write_gets_it_through_the_page_cache(
    tmp_path: Path,
) -> None:
    """Memory that is not page-aligned makes a direct write fail (EINVAL), as a filesystem that
    takes O_DIRECT at open but not for writing does: the bytes go through the page cache."""
    path = tmp_path / "blob"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | file_writes._O_DIRECT, 0o600)
    except OSError:
        pytest.skip("this filesystem refuses O_DIRECT")
    try:
        written = file_writes._File(fd, direct=True)
        data = bytearray(os.urandom(3 * 4096 + 10))
        written.write(memoryview(data)[1:], len(data) - 1, last=True)  # type: ignore[arg-type]
        assert not fcntl.fcntl(fd, fcntl.F_GETFL) & file_writes._O_DIRECT
    finally:
        os.close(fd)
    assert path.read_bytes() == data[1:]


@pytest.mark.parametrize("where", ["_create", "write"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
async def test_a_full_disk_is_storage_full_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, code: int
) -> None:
    def no_room(*_: object) -> None:
        raise OSError(code, os.strerror(code))

    if where == "write":
        monkeypatch.setattr(file_writes._File, "write", no_room)
    else:
        monkeypatch.setattr(blob_store, "create_for_writing", no_room)
    blobs = DirectoryBlobs(tmp_path / "files")
    with pytest.raises(StorageFull):
        await blobs.put(new_id("fil"), chunks_of(os.urandom(300_000)))
    assert not (tmp_path / "files").exists() or list((tmp_path / "files").iterdir()) == []


@pytest.mark.parametrize("blob_id", ["../x", "fil_../../../../etc/passwd", "", "fil_" + "a" * 21])
async def test_only_file_ids_name_blobs(tmp_path: Path, blob_id: str) -> None:
    blobs = DirectoryBlobs(tmp_path / "files")
    with pytest.raises(ValueError):
        await blobs.put(blob_id, chunks_of(b"x"))
    with pytest.raises(ValueError):
        await blobs.open(blob_id)
    assert not (tmp_path / "files").exists() or list((tmp_path / "files").iterdir()) == []
