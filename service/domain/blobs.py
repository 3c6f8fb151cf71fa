"""The values of stored bytes that the policy, the stores and the HTTP layer share: an open blob,
where an upload's bytes come from, what a write stored, a resumable upload's bytes so far, and
what a blob store can answer besides its value. The stores that hold them are
``service.store.protocols.BlobStore`` and ``PartialBlobs``."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

# How much a read asks for at a time.
READ_CHUNK = 256 * 1024


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


# Told the offset and state reached once the bytes before it are stored for good: the caller
# records them (a PATCH cut off keeps what it had sent).
Commit = Callable[[int, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Partial:
    """An upload's bytes so far: its id, the file id they become, how many there are, and the
    backend's state."""

    upload_id: str
    blob_id: str
    offset: int
    state: dict[str, Any]
