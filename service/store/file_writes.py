"""How an upload's bytes reach a file (``directory_blobs``' uploads, ``directory_partials``'
appends): filled by the source into one of two buffers of ``WRITE_BATCH`` bytes while a thread
of the uploads' own pool hashes and writes the other, so the event loop never waits on the disk
and no byte is copied between the source and the disk. Where the filesystem allows it, the file
is written with ``O_DIRECT``: an upload must reach the disk anyway (the fsync at the end), and
through the page cache it cost a copy of every byte and writeback competing with the next
uploads; direct writes need whole blocks from page-aligned memory, so each buffer's last partial
block is carried to the front of the next one, and the file's last bytes go through the page
cache. Elsewhere each batch's writeback starts once it is written (Linux's ``sync_file_range``),
so the fsync waits for the last batch rather than the whole file.
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
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from service.domain.blobs import FILL_ROOM, Source

# The size of each of an upload's two buffers: a thread hop per batch rather than per piece the
# network delivers.
WRITE_BATCH = 4 * 1024 * 1024
# Uploads written at once per process, each at most one batch at a time.
WRITING_THREADS = 16
# Told how many bytes are written and fsynced so far.
Checkpoint = Callable[[int], Awaitable[None]]


class FileWriter:
    """An upload's bytes on their way to its file: filled by the source into one of two
    buffers while threads hash the other and write it, both at once. One batch is hashed and
    written at a time, in order. ``digests`` take every byte written (a SHA-256 by default:
    ``digest``); ``offset``: where in the file the bytes go (a resumable upload's append)."""

    def __init__(
        self,
        fd: int,
        direct: bool,
        pool: ThreadPoolExecutor,
        digests: list[Any] | None = None,
        offset: int = 0,
    ) -> None:
        self._pool = pool
        self._fd = fd
        self._file = _File(fd, direct, offset)
        self.digests = [hashlib.sha256()] if digests is None else digests
        self.size = 0  # bytes filled by the source
        self.source_failed = False  # its failure kept: what it filled is written
        self._buffers = _take_buffers()
        self._reusable = False  # its buffers, once every byte went through them
        self._in_flight: tuple[Future[None], ...] = ()

    @property
    def digest(self) -> Any:
        return self.digests[0]

    async def write_all(
        self,
        source: Source,
        *,
        keep_on_failure: bool = False,
        checkpoint: Checkpoint | None = None,
        every: int = 0,
    ) -> None:
        """Every byte ``source`` fills, hashed and written; then the fsync: every byte is on
        disk when this returns. With ``checkpoint``, each time ``every`` more bytes are written
        they are fsynced and ``checkpoint`` is told how many there are. With
        ``keep_on_failure``, a source that fails (the client gone) has what it filled written
        and fsynced, then its failure raised."""
        carried = 0  # bytes at the buffer's start, carried from the last one: hashed already
        index = 0
        room = min(FILL_ROOM, WRITE_BATCH // 2)  # always more than a carried partial block
        failure: BaseException | None = None
        checked = 0
        while True:
            buffer = self._buffers[index]
            filled = carried
            ended = False
            while len(buffer) - filled >= room:
                try:
                    count = await source.fill(buffer, filled, len(buffer))
                except BaseException as error:
                    if not keep_on_failure:
                        raise
                    failure, count = error, 0
                    self.source_failed = True
                if not count:
                    ended = True
                    break
                filled += count
            self.size += filled - carried
            await self._written()  # the other buffer, before this one
            written = self._file.written
            if checkpoint is not None and not ended and written - checked >= every:
                await asyncio.wrap_future(self._pool.submit(os.fsync, self._fd))
                await checkpoint(written)
                checked = written
            through = filled if ended else self._file.writable(filled)
            self._in_flight = (
                self._pool.submit(_hash, self.digests, buffer, carried, filled),
                self._pool.submit(self._file.write, buffer, through, ended),
            )
            if ended:
                await self._written()
                self._reusable = True
                if failure is not None:
                    raise failure
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
        if self._reusable and len(_spare_buffers) < SPARE_BUFFERS:
            _spare_buffers.append(self._buffers)
            return
        for buffer in self._buffers:
            # A view of it held by a failed write's traceback: unmapped once that is freed.
            with contextlib.suppress(BufferError):
                buffer.close()


# The buffer pairs of finished uploads, kept for the next ones: a new mapping costs a page fault
# for each 4 KiB the first time it is written, about as long as hashing it.
SPARE_BUFFERS = 8
_spare_buffers: list[tuple[mmap.mmap, mmap.mmap]] = []


def _take_buffers() -> tuple[mmap.mmap, mmap.mmap]:
    while _spare_buffers:
        pair = _spare_buffers.pop()
        if len(pair[0]) == WRITE_BATCH:
            return pair
    return mmap.mmap(-1, WRITE_BATCH), mmap.mmap(-1, WRITE_BATCH)


def started_pool(threads: int, name: str) -> ThreadPoolExecutor:
    """A pool with all its threads started. ``ThreadPoolExecutor`` starts a thread only when it
    counts none idle, and counts each finished task as one idle thread: a pool used one task at
    a time keeps a single thread, and two tasks sent together then run one after the other."""
    pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
    all_started = threading.Barrier(threads)
    for _ in range(threads):
        pool.submit(all_started.wait)
    return pool


def _hash(digests: list[Any], buffer: mmap.mmap, start: int, end: int) -> None:
    """``buffer[start:end]`` into each digest (hashlib releases the GIL for buffers this
    large)."""
    with memoryview(buffer) as view:
        for digest in digests:
            digest.update(view[start:end])


class _File:
    """The file an upload is written to, from the writing threads, one batch at a time."""

    def __init__(self, fd: int, direct: bool, offset: int = 0) -> None:
        self._fd = fd
        self._direct = direct
        self._start = offset
        self._offset = offset

    @property
    def written(self) -> int:
        """The bytes written so far (after the batches handed over are done)."""
        return self._offset - self._start

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


def create_for_writing(path: Path) -> tuple[int, bool]:
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


def open_for_append(path: Path, offset: int) -> tuple[int, bool]:
    """``path`` (made when ``offset`` is 0) for writing from ``offset``, cut back to it: bytes
    a failed write left past it never count. Opened for direct writes where the filesystem
    allows them and ``offset`` is a whole number of blocks; whether it was."""
    flags = os.O_WRONLY | os.O_CLOEXEC | (os.O_CREAT if offset == 0 else 0)
    direct = bool(_O_DIRECT) and offset % BLOCK == 0
    try:
        fd = os.open(path, flags | (_O_DIRECT if direct else 0), 0o600)
    except OSError as error:
        if not direct or error.errno != errno.EINVAL:
            raise
        fd, direct = os.open(path, flags, 0o600), False
    try:
        os.ftruncate(fd, offset)
        os.lseek(fd, offset, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd, direct
