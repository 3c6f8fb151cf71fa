"""Where the bytes of uploaded files live: the interface every backend implements, and what they
share. Knows nothing of HTTP, accounts or Redis.

A blob is named by the file's id (``fil_`` and 22 base62 characters), never by anything a client
wrote, so no client input ever reaches a path or an object key. A blob is written whole or not
at all, and never changed once in place, only removed. Two backends:
``service.store.directory_blobs`` (files in the data directory) and ``service.store.s3_blobs``
(an S3-compatible object store); ``service.store.blob_stores`` opens the one the settings name.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

# What a blob may be called: the file ids ``service.domain.credentials.new_id("fil")`` makes.
BLOB_ID = re.compile(r"^fil_[0-9A-Za-z]{22}$")
# How much a read asks for at a time.
READ_CHUNK = 256 * 1024
# The directory under FILEHOST_DATA_DIR that holds the files' bytes, with the directory backend.
FILES_DIRECTORY = "files"


class BlobMissing(Exception):
    """No blob has this id."""


class StorageFull(Exception):
    """The backend has no room for the blob (no space, or the quota used up); nothing of it
    was kept."""


class StorageUnavailable(ConnectionError):
    """The backend could not be asked, or refused to answer: the object store unreachable, too
    slow (past ``FILEHOST_S3_TIMEOUT_SECONDS``), refusing the credentials, or its bucket gone.
    Nothing of a blob being written was kept. ``reason`` says which, for logs and ``/readyz``
    (never a credential)."""

    def __init__(self, reason: str, configuration: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        # Whether it is the settings' doing (a bucket that does not exist, credentials the store
        # refuses) rather than a passing fault: start-up stops on it.
        self.configuration = configuration


@dataclass(frozen=True, slots=True)
class Written:
    """A blob that ``put`` stored: its length and SHA-256 (hex)."""

    size: int
    sha256: str


class Source(Protocol):
    """Where an upload's bytes come from."""

    async def fill(self, buffer: Any, start: int, end: int) -> int:
        """Write the next bytes into ``buffer[start:end]`` (``buffer`` is a writable bytes-like
        object with ``find``, e.g. an ``mmap``; at least ``FILL_ROOM`` bytes of room); how many,
        at least one, or 0 once there are no more. Raising (e.g. a size limit) stops the upload."""
        ...


# A source is asked to fill a buffer while at least this much of it is free.
FILL_ROOM = 64 * 1024


class ChunkSource:
    """A ``Source`` over an async iterable of chunks (a file being restored, a test's bytes)."""

    def __init__(self, chunks: AsyncIterable[bytes | memoryview]) -> None:
        self._chunks = aiter(chunks)
        self._left = memoryview(b"")

    async def fill(self, buffer: Any, start: int, end: int) -> int:
        while not self._left:
            try:
                self._left = memoryview(await anext(self._chunks)).cast("B")
            except StopAsyncIteration:
                return 0
        count = min(end - start, len(self._left))
        buffer[start : start + count] = self._left[:count]
        self._left = self._left[count:]
        return count


class Blob(Protocol):
    """An open blob: read ``length`` bytes from ``start`` as chunks, then close."""

    size: int

    def chunks(self, start: int, length: int) -> AsyncIterator[bytes]: ...

    def fileno(self) -> int | None:
        """The open file's descriptor, for sending it with ``sendfile``; None when the blob is
        not a file of this machine (it is then read as chunks)."""
        ...

    async def close(self) -> None: ...


class BlobStore(Protocol):
    """The storage interface every backend implements."""

    async def put(self, blob_id: str, source: Source) -> Written:
        """Store what ``source`` fills as the blob ``blob_id``, all or nothing. An exception
        raised by ``source`` (e.g. a size limit) propagates after whatever was written is
        removed; ``StorageFull`` when the backend has no room, ``StorageUnavailable`` when it
        can't be reached."""
        ...

    async def open(self, blob_id: str) -> Blob:
        """The blob, open for reading; ``BlobMissing`` when there is none."""
        ...

    async def download_url(self, blob_id: str, disposition: str, content_type: str) -> str | None:
        """Where a client may fetch the blob itself (a redirect download: a short-lived URL
        answered with this ``Content-Disposition`` and ``Content-Type``); None when the
        service streams it."""
        ...

    async def delete(self, blob_id: str) -> bool:
        """Remove the blob; False when the backend knows there was none."""
        ...

    async def delete_all(self, blob_ids: list[str]) -> list[str]:
        """Remove these blobs (in as few requests as the backend allows); the ids it could not
        remove, to be tried again (a missing blob counts as removed)."""
        ...

    async def stored(self) -> list[str]:
        """The ids of every blob held (a restore's check that the target is empty, a
        migration's inventory)."""
        ...

    async def leftovers(self) -> list[str]:
        """What uploads under way, or cut short by a crash, hold besides blobs (temporary
        files, open multipart uploads): empty once every upload has finished or failed."""
        ...

    async def sweep(self, keep: frozenset[str] = frozenset()) -> int:
        """Remove what uploads a crash cut short left (older than an hour: never one under
        way, nor one of the blobs ``keep`` names: resumable uploads in progress); how many."""
        ...

    async def readiness(self) -> str | None:
        """None when the backend answers; else what is wrong, for ``/readyz`` (never a
        credential)."""
        ...

    async def close(self) -> None:
        """Let go of what it holds open (connections, threads)."""
        ...


def checked(blob_id: str) -> str:
    """``blob_id``, when it may name a blob (``BLOB_ID``); ``ValueError`` otherwise."""
    if not BLOB_ID.match(blob_id):
        raise ValueError("not a blob id")
    return blob_id
