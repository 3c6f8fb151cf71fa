"""What an app's blob store holds, whichever it is (the data directory, or the object store under
``--blobs s3``): the tests that check an upload left nothing behind, or that take a file's
bytes away, ask here rather than looking at a directory."""

from __future__ import annotations

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
