"""Where the bytes of uploaded files live: a small interface and its one backend, a directory.

Knows nothing of HTTP, accounts or Redis. A blob is named by the file's id (``fil_`` and 22
base62 characters), never by anything a client wrote, so no client input ever reaches a path.

``DirectoryBlobs`` keeps each blob as ``<root>/<id>``. ``put`` writes to a temporary file in the
same directory (``.tmp-<random>``) and renames it into place only once every byte is written and
fsynced; whatever stops it before that (the client gone, the size limit, any error, a
cancellation) removes the temporary file, so a blob is either whole or absent. Disk work runs in
threads, never on the event loop: an upload's bytes are gathered into batches of about a MiB,
each hashed and written by a thread of the uploads' own pool while the next is gathered. On
Linux each batch's writeback to disk starts once it is written, so the one fsync at the end
(then the rename, then the directory's fsync) waits for the last batch rather than the whole
file; memory held per upload is two batches.

A blob is never changed once in place, only removed: so a hard link to it (``pin``, in a
``.backup-<random>`` directory inside the root, on the same filesystem) holds its bytes as they
are, whatever happens to the blob after. A backup pins the blobs its records name.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import os
import re
import secrets
import shutil
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

# What a blob may be called: the file ids ``service.domain.credentials.new_id("fil")`` makes.
_BLOB_ID = re.compile(r"^fil_[0-9A-Za-z]{22}$")
_TEMPORARY_PREFIX = ".tmp-"
_PINNED_PREFIX = ".backup-"
READ_CHUNK = 256 * 1024
# How many bytes an upload gathers before they go to a thread to be hashed and written: a thread
# hop per batch rather than per chunk the network delivers.
WRITE_BATCH = 1024 * 1024
# Uploads written at once per process, each at most one batch at a time.
WRITING_THREADS = 16


# The directory under FILEHOST_DATA_DIR that holds the files' bytes.
FILES_DIRECTORY = "files"


class BlobMissing(Exception):
    """No blob has this id."""


@dataclass(frozen=True, slots=True)
class Written:
    """A blob that ``put`` stored: its length and SHA-256 (hex)."""

    size: int
    sha256: str


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
    """The storage interface: another backend (object storage, say) implements these three."""

    async def put(self, blob_id: str, chunks: AsyncIterable[bytes | memoryview]) -> Written:
        """Store every chunk as the blob ``blob_id``, all or nothing. An exception raised by
        ``chunks`` (e.g. a size limit) propagates after whatever was written is removed."""
        ...

    async def open(self, blob_id: str) -> Blob:
        """The blob, open for reading; ``BlobMissing`` when there is none."""
        ...

    async def delete(self, blob_id: str) -> bool:
        """Remove the blob; False when there was none."""
        ...


def _checked(blob_id: str) -> str:
    if not _BLOB_ID.match(blob_id):
        raise ValueError("not a blob id")
    return blob_id


class _FileBlob:
    def __init__(self, handle: object, size: int) -> None:
        self._handle = handle
        self.size = size

    async def chunks(self, start: int, length: int) -> AsyncIterator[bytes]:
        handle = self._handle
        left = length
        await asyncio.to_thread(handle.seek, start)  # type: ignore[attr-defined]
        while left > 0:
            data = await asyncio.to_thread(handle.read, min(READ_CHUNK, left))  # type: ignore[attr-defined]
            if not data:  # the file shrank under us: never pad, stop short
                raise OSError("blob ended early")
            left -= len(data)
            yield data

    def fileno(self) -> int:
        return self._handle.fileno()  # type: ignore[attr-defined]

    async def close(self) -> None:
        await asyncio.to_thread(self._handle.close)  # type: ignore[attr-defined]


class DirectoryBlobs:
    """Blobs as files in one directory (created, mode 0700, on the first upload)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made = False
        self._pool: ThreadPoolExecutor | None = None

    def path(self, blob_id: str) -> Path:
        return self.root / _checked(blob_id)

    def _make_root(self) -> None:
        if not self._made:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._made = True

    async def put(self, blob_id: str, chunks: AsyncIterable[bytes | memoryview]) -> Written:
        final = self.path(blob_id)
        await asyncio.to_thread(self._make_root)
        temporary = self.root / f"{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        fd = await asyncio.to_thread(
            os.open, temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600
        )
        writer = _Writer(fd, self._writing())
        try:
            try:
                async for data in chunks:
                    await writer.add(data)
                await writer.finish()
            finally:
                writer.close()
            await asyncio.to_thread(_rename_durably, temporary, final)
        except BaseException:
            # Shielded: a cancelled upload (the client went away) must still clean up.
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.to_thread(_unlink, temporary))
            raise
        return Written(writer.size, writer.digest.hexdigest())

    def _writing(self) -> ThreadPoolExecutor:
        """The threads that hash and write uploads: their own, so that fsyncs waiting on the
        disk never hold up the default pool's other work (opening blobs, backups)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(WRITING_THREADS, thread_name_prefix="blob-writer")
        return self._pool

    async def open(self, blob_id: str) -> Blob:
        path = self.path(blob_id)

        def opened() -> _FileBlob:
            try:
                handle = open(path, "rb")
            except FileNotFoundError:
                raise BlobMissing() from None
            return _FileBlob(handle, os.fstat(handle.fileno()).st_size)

        return await asyncio.to_thread(opened)

    async def delete(self, blob_id: str) -> bool:
        return await asyncio.to_thread(_unlink, self.path(blob_id))

    def stored(self) -> list[str]:
        """The ids of the blobs in the directory."""
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if _BLOB_ID.match(p.name))

    def pinning_directory(self) -> Path:
        """A new private directory to ``pin`` blobs into; its owner removes it when done."""
        self._make_root()
        path = self.root / f"{_PINNED_PREFIX}{secrets.token_hex(8)}"
        path.mkdir(mode=0o700)
        return path

    def pin(self, blob_ids: list[str], into: Path) -> list[str]:
        """Hard-link each blob into ``into`` (copied, where the filesystem refuses links); the
        ids that had no blob."""
        missing = []
        for blob_id in blob_ids:
            source, target = self.path(blob_id), into / blob_id
            try:
                os.link(source, target)
            except FileNotFoundError:
                missing.append(blob_id)
            except OSError:  # no hard links here
                try:
                    shutil.copyfile(source, target)
                except FileNotFoundError:
                    missing.append(blob_id)
        return missing

    def leftovers(self) -> list[str]:
        """Temporary files in the directory (none once every upload has finished or failed)."""
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.name.startswith(_TEMPORARY_PREFIX))


class _Writer:
    """An upload's bytes on their way to its file: gathered into batches, each hashed and
    written by a thread while the event loop gathers the next. One batch is written at a time,
    in order, so memory held is two batches at most."""

    def __init__(self, fd: int, pool: ThreadPoolExecutor) -> None:
        self._fd = fd
        self._pool = pool
        self.digest = hashlib.sha256()
        self.size = 0
        self._batch: list[bytes | memoryview] = []
        self._batched = 0
        self._in_flight: Future[None] | None = None

    async def add(self, data: bytes | memoryview) -> None:
        self.size += len(data)
        self._batch.append(data)
        self._batched += len(data)
        if self._batched >= WRITE_BATCH:
            await self._send(last=False)

    async def finish(self) -> None:
        """Write what is left, then fsync: every byte is on disk when this returns."""
        await self._send(last=True)
        await asyncio.wrap_future(self._in_flight)  # type: ignore[arg-type]

    async def _send(self, last: bool) -> None:
        if self._in_flight is not None:
            await asyncio.wrap_future(self._in_flight)
        batch, length = self._batch, self._batched
        self._batch, self._batched = [], 0
        self._in_flight = self._pool.submit(
            _write, self._fd, self.digest, batch, self.size - length, length, last
        )

    def close(self) -> None:
        """Close the file now, or, while a thread still writes to it (the upload was cancelled
        or failed meanwhile), once that thread is done: a descriptor is never closed under a
        write, which could then land in whatever file reused its number."""
        in_flight = self._in_flight
        if in_flight is not None and not in_flight.done():
            in_flight.add_done_callback(lambda _: os.close(self._fd))
        else:
            os.close(self._fd)


def _write(
    fd: int, digest: Any, pieces: list[bytes | memoryview], offset: int, length: int, last: bool
) -> None:
    """Hash and append ``pieces``, ``length`` bytes from ``offset`` (hashlib releases the GIL
    for buffers this large). The last batch is followed by an fsync, the others by the start of
    their writeback, so the fsync finds little left to do instead of the whole file."""
    for piece in pieces:
        digest.update(piece)
        view = memoryview(piece)
        while view:
            view = view[os.write(fd, view) :]
    if last:
        os.fsync(fd)
    elif _start_writeback is not None:
        _start_writeback(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def _writeback_starter() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range``, which starts writing a range of a file to disk and returns
    without waiting for it (the standard library has no wrapper); None elsewhere, where the
    final fsync writes everything."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


_SYNC_FILE_RANGE_WRITE = 2
_start_writeback = _writeback_starter()


def _rename_durably(source: Path, target: Path) -> None:
    os.rename(source, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the new name itself survives a power cut
    finally:
        os.close(directory)


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
