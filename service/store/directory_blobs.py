"""The directory backend of the blob store (``service.store.blobs``): each file's bytes as a file
in the data directory, for one host (or several on a shared volume).

``DirectoryBlobs`` keeps each blob as ``<root>/<id>``. ``put`` writes to a temporary file in the
same directory (``.tmp-<random>``) and renames it into place only once every byte is written and
fsynced; whatever stops it before that (the client gone, the size limit, any error, a
cancellation) removes the temporary file, so a blob is either whole or absent.

An upload's bytes come from a ``Source``, which fills them into one of the upload's two buffers
of ``WRITE_BATCH`` bytes; each full buffer is hashed and written by a thread of the uploads' own
pool while the source fills the other, so the event loop never waits on the disk and no byte is
copied between the source and the disk. Where the filesystem allows it, the file is written
with ``O_DIRECT``: an upload must reach the disk anyway (the fsync at the end), and through the
page cache it cost a copy of every byte and writeback competing with the next uploads; direct
writes need whole blocks from page-aligned memory, so each buffer's last partial block is
carried to the front of the next one, and the file's last bytes go through the page cache.
Elsewhere each batch's writeback starts once it is written (Linux's ``sync_file_range``), so the
fsync waits for the last batch rather than the whole file.

A blob is never changed once in place, only removed: so a hard link to it (``pin``, in a
``.backup-<random>`` directory inside the root, on the same filesystem) holds its bytes as they
are, whatever happens to the blob after. A backup pins the blobs its records name.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import mmap
import os
import secrets
import shutil
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from service.store.blobs import (
    BLOB_ID,
    FILL_ROOM,
    READ_CHUNK,
    Blob,
    BlobMissing,
    Source,
    StorageFull,
    Written,
    checked,
)

_TEMPORARY_PREFIX = ".tmp-"
_PINNED_PREFIX = ".backup-"
# The size of each of an upload's two buffers: a thread hop per batch rather than per piece the
# network delivers.
WRITE_BATCH = 4 * 1024 * 1024
# Uploads written at once per process, each at most one batch at a time.
WRITING_THREADS = 16
# How old a temporary file is before ``sweep`` takes it for a crash's leftover.
SWEEP_AFTER_SECONDS = 3600
# What the filesystem says when it is full.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


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
        return self.root / checked(blob_id)

    def _make_root(self) -> None:
        if not self._made:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._made = True

    async def put(self, blob_id: str, source: Source) -> Written:
        final = self.path(blob_id)
        await asyncio.to_thread(self._make_root)
        temporary = self.root / f"{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        try:
            fd, direct = await asyncio.to_thread(_create, temporary)
            writer = _Writer(fd, direct, self._writing())
            try:
                await writer.write_all(source)
            finally:
                writer.close()
            await asyncio.to_thread(rename_durably, temporary, final)
        except BaseException as error:
            # Shielded: a cancelled upload (the client went away) must still clean up.
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.to_thread(_unlink, temporary))
            if isinstance(error, OSError) and error.errno in _NO_ROOM:  # even at creating it
                raise StorageFull() from error
            raise
        return Written(writer.size, writer.digest.hexdigest())

    def _writing(self) -> ThreadPoolExecutor:
        """The threads that hash and write uploads: their own, so that fsyncs waiting on the
        disk never hold up the default pool's other work (opening blobs, backups)."""
        if self._pool is None:
            self._pool = _started_pool(WRITING_THREADS, "blob-writer")
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

    async def download_url(self, blob_id: str, disposition: str, content_type: str) -> None:
        return None  # the service sends the file itself (sendfile)

    async def delete(self, blob_id: str) -> bool:
        return await asyncio.to_thread(_unlink, self.path(blob_id))

    async def delete_all(self, blob_ids: list[str]) -> list[str]:
        failed = []
        for blob_id in blob_ids:
            try:
                await self.delete(blob_id)
            except OSError:
                failed.append(blob_id)
        return failed

    async def stored(self) -> list[str]:
        """The ids of the blobs in the directory."""
        return await asyncio.to_thread(self.stored_now)

    def stored_now(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if BLOB_ID.match(p.name))

    async def sweep(self, keep: frozenset[str] = frozenset()) -> int:
        return await asyncio.to_thread(self._sweep_now)  # resumable uploads are not in here

    def _sweep_now(self) -> int:
        if not self.root.exists():
            return 0
        cutoff = time.time() - SWEEP_AFTER_SECONDS
        swept = 0
        for path in self.root.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if path.name.startswith(_TEMPORARY_PREFIX) and path.stat().st_mtime < cutoff:
                    path.unlink()
                    swept += 1
        return swept

    async def readiness(self) -> str | None:
        return None  # the data directory is this host's: a write that fails says why

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

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

    async def leftovers(self) -> list[str]:
        return await asyncio.to_thread(self.leftovers_now)

    def leftovers_now(self) -> list[str]:
        """Temporary files in the directory (none once every upload has finished or failed)."""
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.name.startswith(_TEMPORARY_PREFIX))


class _Writer:
    """An upload's bytes on their way to its file: filled by the source into one of two
    buffers while threads hash the other and write it, both at once. One batch is hashed and
    written at a time, in order."""

    def __init__(self, fd: int, direct: bool, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._file = _File(fd, direct)
        self.digest = hashlib.sha256()
        self.size = 0
        self._buffers = (mmap.mmap(-1, WRITE_BATCH), mmap.mmap(-1, WRITE_BATCH))
        self._in_flight: tuple[Future[None], ...] = ()

    async def write_all(self, source: Source) -> None:
        """Every byte ``source`` fills, hashed and written; then the fsync: every byte is on
        disk when this returns."""
        carried = 0  # bytes at the buffer's start, carried from the last one: hashed already
        index = 0
        room = min(FILL_ROOM, WRITE_BATCH // 2)  # always more than a carried partial block
        while True:
            buffer = self._buffers[index]
            filled = carried
            ended = False
            while len(buffer) - filled >= room:
                count = await source.fill(buffer, filled, len(buffer))
                if not count:
                    ended = True
                    break
                filled += count
            self.size += filled - carried
            await self._written()  # the other buffer, before this one
            through = filled if ended else self._file.writable(filled)
            self._in_flight = (
                self._pool.submit(_hash, self.digest, buffer, carried, filled),
                self._pool.submit(self._file.write, buffer, through, ended),
            )
            if ended:
                await self._written()
                return
            index = 1 - index
            carried = filled - through
            self._buffers[index][:carried] = buffer[through:filled]

    async def _written(self) -> None:
        for future in self._in_flight:
            await asyncio.wrap_future(future)

    def close(self) -> None:
        """Close the file now, or, while a thread still uses it (the upload was cancelled or
        failed meanwhile), once the threads are done: a descriptor is never closed under a
        write, which could then land in whatever file reused its number."""
        pending = [future for future in self._in_flight if not future.done()]
        if not pending:
            self._closed()
            return

        def one_done(future: Future[None]) -> None:
            pending.remove(future)
            if not pending:
                self._closed()

        for future in pending:
            future.add_done_callback(one_done)

    def _closed(self) -> None:
        self._file.close()
        for buffer in self._buffers:
            # A view of it held by a failed write's traceback: unmapped once that is freed.
            with contextlib.suppress(BufferError):
                buffer.close()


def _started_pool(threads: int, name: str) -> ThreadPoolExecutor:
    """A pool with all its threads started. ``ThreadPoolExecutor`` starts a thread only when it
    counts none idle, and counts each finished task as one idle thread: a pool used one task at
    a time keeps a single thread, and two tasks sent together then run one after the other."""
    pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
    all_started = threading.Barrier(threads)
    for _ in range(threads):
        pool.submit(all_started.wait)
    return pool


def _hash(digest: Any, buffer: mmap.mmap, start: int, end: int) -> None:
    """Hash ``buffer[start:end]`` (hashlib releases the GIL for buffers this large)."""
    with memoryview(buffer) as view:
        digest.update(view[start:end])


class _File:
    """The file an upload is written to, from the writing threads, one batch at a time."""

    def __init__(self, fd: int, direct: bool) -> None:
        self._fd = fd
        self._direct = direct
        self._offset = 0

    def writable(self, filled: int) -> int:
        """How much of a buffer filled this far to write now: direct writes take whole blocks,
        the rest waits for the next batch."""
        return filled - filled % BLOCK if self._direct else filled

    def write(self, buffer: mmap.mmap, through: int, last: bool) -> None:
        """Write ``buffer[:through]``; after the last batch, fsync. Between batches, without
        direct writes, start the batch's writeback, so the fsync finds little left to do."""
        with memoryview(buffer) as view:
            if last and self._direct:  # whole blocks directly, the rest through the page cache
                whole = through - through % BLOCK
                self._write_all(view[:whole])
                self._stop_direct()
                self._write_all(view[whole:through])
            else:
                self._write_all(view[:through])
        if last:
            os.fsync(self._fd)
        elif not self._direct and _start_writeback is not None:
            _start_writeback(self._fd, self._offset - through, through, _SYNC_FILE_RANGE_WRITE)

    def _write_all(self, view: memoryview) -> None:
        while view:
            try:
                written = os.write(self._fd, view)
            except OSError as error:
                # A filesystem that took O_DIRECT at open may still refuse the writes.
                if error.errno != errno.EINVAL or not self._direct:
                    raise
                self._stop_direct()
                continue
            self._offset += written
            view = view[written:]

    def close(self) -> None:
        os.close(self._fd)

    def _stop_direct(self) -> None:
        """Write through the page cache from now on."""
        if self._direct:
            flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~_O_DIRECT)
            self._direct = False


# The alignment direct writes need, of their memory, file offset and length: every disk's
# logical block size divides it.
BLOCK = 4096
_O_DIRECT = getattr(os, "O_DIRECT", 0)


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


def _create(path: Path) -> tuple[int, bool]:
    """A new file at ``path`` for writing, opened for direct writes where the filesystem allows
    them; whether it did."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    if _O_DIRECT:
        try:
            return os.open(path, flags | _O_DIRECT, 0o600), True
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
    return os.open(path, flags, 0o600), False


def rename_durably(source: Path, target: Path) -> None:
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
