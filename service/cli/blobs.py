"""``blobs migrate --to s3``: copy the bytes of every file a ``directory`` deployment holds into the
object store ``FILEHOST_S3_*`` names, so the deployment can run with ``FILEHOST_BLOB_STORE=s3``
(docs/operating.md#moving-a-deployment-to-object-storage).

What is copied is what the records name: every file of every account, each read from the data
directory, written create-only to the bucket and checked against its record (size and SHA-256)
as it goes; a copy that does not match is removed again and reported. It only reads the
directory and the store, so it is safe while ``serve`` runs, and it resumes: an object already
there with its record's size (a copy is whole or absent) is left as it is. Run it once while
serving, then again once ``serve`` is stopped (it copies only what was uploaded meanwhile), and
start with ``FILEHOST_BLOB_STORE=s3``. ``--prune`` then removes the objects no record names any
more (files deleted after they were copied)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from service.cli.prompts import Refused, counted
from service.cli.store import opened
from service.config import Settings
from service.domain.blobs import BlobMissing, ChunkSource
from service.domain.cursors import decode_file_cursor
from service.domain.records import FileRecord
from service.store.blob_stores import open_object_store
from service.store.blobs import FILES_DIRECTORY
from service.store.directory_blobs import DirectoryBlobs
from service.store.protocols.blobs import BlobStore
from service.store.stores import Stores

if TYPE_CHECKING:
    from service.store.s3_blobs import S3Blobs

# Files copied at once.
COPYING = 4


async def _records(store: Stores, user_ids: list[str]) -> AsyncIterator[FileRecord]:
    for user_id in user_ids:
        after = None
        while True:
            page = await store.files.list_page(user_id, 1000, after)
            for record in page.files:
                yield record
            if page.next_cursor is None:
                break
            after = decode_file_cursor(page.next_cursor)


@dataclasses.dataclass
class _Tally:
    copied: int = 0
    copied_bytes: int = 0
    present: int = 0
    missing: list[str] = dataclasses.field(default_factory=list)
    damaged: list[str] = dataclasses.field(default_factory=list)


async def _copy(source: BlobStore, target: S3Blobs, record: FileRecord, tally: _Tally) -> None:
    """One file's bytes into the bucket, checked against its record."""
    held = await target.size_of(record.id)
    if held == record.size:
        tally.present += 1
        return
    if held is not None:  # not what its record says: copied again
        await target.delete(record.id)
    try:
        blob = await source.open(record.id)
    except BlobMissing:
        tally.missing.append(record.id)
        return

    async def chunks() -> AsyncIterator[bytes]:
        async for data in blob.chunks(0, blob.size):
            yield data

    try:
        written = await target.put(record.id, ChunkSource(chunks()))
    finally:
        await blob.close()
    if (written.size, written.sha256) != (record.size, record.sha256):
        await target.delete(record.id)
        tally.damaged.append(record.id)
        return
    tally.copied += 1
    tally.copied_bytes += written.size


async def run(settings: Settings, args: argparse.Namespace) -> int:
    object_store = dataclasses.replace(settings, blob_store="s3").object_store
    if object_store is None:
        raise Refused("set FILEHOST_S3_BUCKET (and the other FILEHOST_S3_* settings) to migrate")
    source = DirectoryBlobs(settings.data_dir / FILES_DIRECTORY)
    target = open_object_store(object_store)
    try:
        problem = await target.probe()
        if problem is not None:
            raise Refused(f"cannot use the object store: {problem.reason}")
        async with opened(settings) as (accounts, store):
            users = [user.id for user in await accounts.users.list_users()]
            tally, named = _Tally(), set()
            copying = asyncio.Semaphore(COPYING)
            tasks = []

            async def one(record: FileRecord) -> None:
                async with copying:
                    await _copy(source, target, record, tally)

            async for record in _records(store, users):
                named.add(record.id)
                tasks.append(asyncio.create_task(one(record)))
                if len(tasks) >= 64:
                    await asyncio.gather(*tasks)
                    tasks = []
            await asyncio.gather(*tasks)
            unnamed = [blob_id async for blob_id in target.listed() if blob_id not in named]
            if args.prune and unnamed:
                failed = await target.delete_all(unnamed)
                pruned = len(unnamed) - len(failed)
                unnamed = failed
                print(f"removed {counted(pruned, 'object')} no record names any more")
    finally:
        await target.close()
        await source.close()
    size = tally.copied_bytes / (1024 * 1024)
    print(
        f"copied {counted(tally.copied, 'file')} ({size:.1f} MiB) into the bucket; "
        f"{tally.present} already there"
    )
    if unnamed:
        print(
            f"{counted(len(unnamed), 'object')} in the bucket no record names (files deleted "
            "since they were copied): run again with --prune once serve is stopped"
        )
    status = 0
    for ids, what in (
        (tally.missing, "had no bytes in the data directory (kept as they are)"),
        (tally.damaged, "had bytes that do not match their record (not copied)"),
    ):
        if ids:
            shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
            print(f"error: {counted(len(ids), 'file')} {what}: {shown}", file=sys.stderr)
            status = 1
    if status == 0:
        print(
            "every file's bytes are in the bucket: stop serve, run this once more for what was "
            "uploaded meanwhile, then start with FILEHOST_BLOB_STORE=s3"
        )
    return status
