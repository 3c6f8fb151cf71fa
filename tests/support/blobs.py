"""What an app's blob store holds, whichever it is (the data directory, or the object store under
``--blobs s3``): the tests that check an upload left nothing behind, or that take a file's
bytes away, ask here rather than looking at a directory. And the sources the blob stores' own
tests write from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from service.app import BLOBS
from service.domain.blobs import ChunkSource
from service.store.directory_blobs import DirectoryBlobs
from tests.support.api import Api


async def stored_names(api: Api) -> list[str]:
    """Every blob held, and anything an upload left (a temporary file, an open multipart
    upload): after every upload has ended, exactly the files' ids."""
    blobs = api.app[BLOBS]
    return sorted(await blobs.stored()) + sorted(await blobs.leftovers())


async def take_bytes(api: Api, file_id: str) -> bytes:
    """Remove a file's bytes from the store behind the service's back; what they were."""
    blobs = api.app[BLOBS]
    blob = await blobs.open(file_id)
    try:
        data = b"".join([chunk async for chunk in blob.chunks(0, blob.size)])
    finally:
        await blob.close()
    await blobs.delete(file_id)
    return data


async def put_back(api: Api, file_id: str, data: bytes) -> None:
    async def chunks() -> Any:
        yield data

    await api.app[BLOBS].put(file_id, ChunkSource(chunks()))


def is_directory(api: Api) -> bool:
    return isinstance(api.app[BLOBS], DirectoryBlobs)


def source_of(data: bytes, piece: int = 100_000) -> ChunkSource:
    """``data`` as a blob store's source, ``piece`` bytes at a time."""

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(data), piece):
            yield data[start : start + piece]

    return ChunkSource(chunks())


class Refused(Exception):
    """What ``failing_after``'s source raises: a client gone, a limit passed."""


def failing_after(data: bytes, limit: int) -> ChunkSource:
    """A source that gives ``limit`` bytes of ``data``, then fails with ``Refused``."""

    async def chunks() -> AsyncIterator[bytes]:
        yield data[:limit]
        raise Refused()

    return ChunkSource(chunks())
