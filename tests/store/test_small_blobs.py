"""Small files' bytes in a worker's memory (``service.store.small_blobs``): read once, kept only
when they are what their record says, bounded, and never used for another record."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

from service.domain.blobs import ChunkSource
from service.domain.credentials import new_id
from service.store.directory_blobs import DirectoryBlobs
from service.store.small_blobs import SmallBlobs


async def one_chunk(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def stored(blobs: DirectoryBlobs, data: bytes) -> tuple[str, str]:
    blob_id = new_id("fil")
    written = await blobs.put(blob_id, ChunkSource(one_chunk(data)))
    return blob_id, written.sha256


async def test_a_small_blob_is_read_once_then_served_from_memory(tmp_path: Path) -> None:
    blobs = DirectoryBlobs(tmp_path)
    small = SmallBlobs(blobs, max_file_bytes=100, max_total_bytes=1000)
    blob_id, sha = await stored(blobs, b"kept")
    assert await small.read(blob_id, 4, sha) == b"kept"

    blobs.path(blob_id).unlink()  # gone from disk: only memory can answer now
    assert await small.read(blob_id, 4, sha) == b"kept"
    # Asked for by a record that says otherwise: never the kept bytes.
    assert await small.read(blob_id, 4, hashlib.sha256(b"else").hexdigest()) is None


async def test_bytes_that_are_not_what_the_record_says_are_never_kept(tmp_path: Path) -> None:
    blobs = DirectoryBlobs(tmp_path)
    small = SmallBlobs(blobs, max_file_bytes=100, max_total_bytes=1000)
    blob_id, sha = await stored(blobs, b"as uploaded")
    blobs.path(blob_id).chmod(0o600)
    blobs.path(blob_id).write_bytes(b"as changed!")  # the same length, other bytes

    assert await small.read(blob_id, 11, sha) is None
    assert await small.read(blob_id, 12, sha) is None
    assert await small.read(new_id("fil"), 3, sha) is None  # no blob at all


async def test_large_blobs_are_left_to_streaming_and_memory_is_bounded(tmp_path: Path) -> None:
    blobs = DirectoryBlobs(tmp_path)
    small = SmallBlobs(blobs, max_file_bytes=100, max_total_bytes=250)
    large_id, large_sha = await stored(blobs, b"x" * 101)
    assert await small.read(large_id, 101, large_sha) is None

    kept = [await stored(blobs, bytes([n]) * 100) for n in range(3)]
    for blob_id, sha in kept:
        assert await small.read(blob_id, 100, sha) is not None
    for blob_id, _ in kept:
        blobs.path(blob_id).unlink()
    # 250 bytes hold two of the three: the least recently served went first.
    assert [await small.read(blob_id, 100, sha) is not None for blob_id, sha in kept] == [
        False,
        True,
        True,
    ]
