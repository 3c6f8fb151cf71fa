"""The contract of ``service.store.protocols.blobs.BlobStore``, run on both backends: the data
directory's files and the object store (SeaweedFS). What the policy relies on, whichever holds
the bytes: a blob written whole with its length and SHA-256 and read back whole or from any
offset; a missing one is ``BlobMissing``; a write its source stops leaves nothing behind; the
inventory, single and batched deletes; a thumbnail kept beside a blob, never listed, replaced
whole, and removed with it; a store that answers is ready. (What only one backend
does, multipart parts or sendfile's descriptor, is tested beside it.)"""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from service.config import Settings
from service.domain.blobs import BlobMissing
from service.domain.credentials import new_id
from service.store.directory_blobs import DirectoryBlobs
from service.store.protocols.blobs import BlobStore
from service.store.s3_blobs import S3Blobs
from tests.support.blobs import Refused, failing_after, source_of
from tests.support.seaweedfs import SeaweedFS


@pytest.fixture(params=["directory", "s3"])
async def blobs(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BlobStore]:
    store: BlobStore
    if request.param == "directory":
        store = DirectoryBlobs(tmp_path / "files")
    else:
        server: SeaweedFS = request.getfixturevalue("seaweedfs")
        settings = replace(Settings(), **server.settings())
        # A prefix of this test's own: the inventory below is of this store alone.
        settings = replace(settings, s3_prefix=f"contract-{new_id('fil')[4:]}/")
        assert settings.object_store is not None
        store = S3Blobs(settings.object_store)
    yield store
    await store.close()


async def read(blobs: BlobStore, blob_id: str, start: int, length: int) -> bytes:
    blob = await blobs.open(blob_id)
    try:
        return b"".join([chunk async for chunk in blob.chunks(start, length)])
    finally:
        await blob.close()


@pytest.mark.parametrize("size", [0, 1, 700_000])
async def test_a_blob_is_written_whole_with_its_digest_and_read_from_any_offset(
    blobs: BlobStore, size: int
) -> None:
    data = os.urandom(size)
    blob_id = new_id("fil")

    written = await blobs.put(blob_id, source_of(data))

    assert (written.size, written.sha256) == (size, hashlib.sha256(data).hexdigest())
    opened = await blobs.open(blob_id)
    assert opened.size == size
    await opened.close()
    assert await read(blobs, blob_id, 0, size) == data
    assert (
        await read(blobs, blob_id, size // 3, size // 2) == data[size // 3 : size // 3 + size // 2]
    )


async def test_a_blob_never_written_is_missing(blobs: BlobStore) -> None:
    with pytest.raises(BlobMissing):
        await blobs.open(new_id("fil"))


async def test_a_write_its_source_stops_leaves_nothing_behind(blobs: BlobStore) -> None:
    blob_id = new_id("fil")

    with pytest.raises(Refused):
        await blobs.put(blob_id, failing_after(os.urandom(300_000), 300_000))

    with pytest.raises(BlobMissing):
        await blobs.open(blob_id)
    assert await blobs.stored() == []
    assert await blobs.leftovers() == []


async def test_the_inventory_and_deletes_one_at_a_time_and_in_batches(blobs: BlobStore) -> None:
    ids = sorted(new_id("fil") for _ in range(4))
    for blob_id in ids:
        await blobs.put(blob_id, source_of(blob_id.encode()))
    assert sorted(await blobs.stored()) == ids

    assert await blobs.delete(ids[0]) is True
    assert await blobs.delete_all([*ids[1:], new_id("fil")]) == []  # one never stored: removed

    assert await blobs.stored() == []
    with pytest.raises(BlobMissing):
        await blobs.open(ids[1])


async def test_a_thumbnail_is_kept_beside_its_blob_and_removed_with_it(blobs: BlobStore) -> None:
    ids = sorted(new_id("fil") for _ in range(3))
    for blob_id in ids:
        await blobs.put(blob_id, source_of(b"image"))
        assert await blobs.thumbnail(blob_id) is None
        await blobs.put_thumbnail(blob_id, b"none yet")
        await blobs.put_thumbnail(blob_id, blob_id.encode())  # replaced whole
    await blobs.put_thumbnail(ids[0], b"")  # "it has none" is kept too, as empty
    assert [await blobs.thumbnail(blob_id) for blob_id in ids] == [
        b"",
        *(i.encode() for i in ids[1:]),
    ]
    assert sorted(await blobs.stored()) == ids
    assert await blobs.leftovers() == []

    await blobs.delete_thumbnail(ids[1])  # alone: the blob stays
    assert await blobs.thumbnail(ids[1]) is None and await read(blobs, ids[1], 0, 5) == b"image"
    await blobs.put_thumbnail(ids[1], b"again")
    await blobs.delete(ids[0])
    assert await blobs.delete_all(ids[1:]) == []

    assert [await blobs.thumbnail(blob_id) for blob_id in ids] == [None, None, None]
    assert await blobs.stored() == []


async def test_a_store_that_answers_is_ready_and_streams_by_default(blobs: BlobStore) -> None:
    assert await blobs.readiness() is None
    assert await blobs.download_url(new_id("fil"), "attachment", "text/plain") is None
