"""A ZIP archive as an answer: ``application/zip``, streamed as it is made, with bounded memory
whatever the files' sizes, from either blob store.

The archive is made by ``stream-zip`` (Zip64 where a file or the archive needs it; each file
deflated, at level 0, stored blocks, for types that are compressed already). Its generator is
synchronous and pulls each file's bytes; it runs in a thread of this module's own pool and asks
the event loop for what it needs (the next file's blob opened, its next chunk), waiting for each
answer. ``async_stream_zip`` does the same on the loop's default executor, whose threads also
read the directory store's blobs (``asyncio.to_thread``): a few archives at once would hold all
of them waiting for a read that needs one, and never go on. Here the archive's threads wait
only for the loop, which never waits for them.

What is held at any moment: one chunk of one file on its way in, the compressor's window and
one 64 KiB chunk of the archive on its way out, while the socket's flow control paces the
thread. A client gone mid-archive (or a failure) stops the thread at its next request to the
loop, and every blob it had open is closed before the handler returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import hdrs, web

from service.api.downloads import content_disposition, count_download
from service.api.headers import prepare_streamed
from service.domain.archive_names import Entry
from service.domain.blobs import Blob
from service.domain.records import FileRecord

if TYPE_CHECKING:
    from stream_zip import MemberFile

ZIP_TYPE = "application/zip"
# Archives made at once by a worker: more wait for a thread (each waits mostly on the loop).
THREADS = 4
# The archive's chunks as they go out.
CHUNK = 64 * 1024
# How long the archive's thread waits for the loop to answer one request: it answers at once
# unless the loop is gone (the worker ending), and the thread must not wait for ever then.
_WAIT_SECONDS = 120
# Types whose bytes are compressed already: deflating them again costs CPU for nothing.
_COMPRESSED_PREFIXES = ("image/", "video/", "audio/")
_COMPRESSED_TYPES = frozenset(
    {
        "application/zip",
        "application/gzip",
        "application/x-7z-compressed",
        "application/x-rar-compressed",
        "application/x-bzip2",
        "application/x-xz",
        "application/zstd",
        "application/pdf",
    }
)
_FILE_MODE = stat.S_IFREG | 0o644
_FOLDER_MODE = stat.S_IFDIR | 0o755

_pool: ThreadPoolExecutor | None = None

T = TypeVar("T")
OpenBlob = Callable[[FileRecord], Awaitable[Blob | None]]


def _threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="zip")
    return _pool


class _Stopped(Exception):
    """The archive is no longer wanted: its thread stops at its next request to the loop."""


def _level(record: FileRecord) -> int:
    kind = record.content_type
    return 0 if kind.startswith(_COMPRESSED_PREFIXES) or kind in _COMPRESSED_TYPES else 6


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


async def _next_chunk(reading: AsyncIterator[bytes]) -> bytes | None:
    return await anext(reading, None)


class _Feed:
    """The archive's members, made in its thread from what the loop hands it."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, entries: list[Entry], open_blob: OpenBlob
    ) -> None:
        self._loop = loop
        self._entries = entries
        self._open_blob = open_blob
        self._stopped = False
        # Blobs open and their readers, touched only on the loop.
        self._open: dict[int, tuple[Blob, AsyncIterator[bytes]]] = {}
        # The first file's entry and its blob, opened before the headers (``open_first``).
        self._first: tuple[int, tuple[int, Blob] | None] | None = None

    async def open_first(self) -> None:
        """Open the first file's blob before the answer's headers go out: a file storage that
        can't be reached is then answered (503), not an archive cut short at its first byte."""
        for index, entry in enumerate(self._entries):
            if entry.file is not None:
                self._first = index, await self._opened(entry.file)
                return

    def _ask(self, asked: Coroutine[Any, Any, T]) -> T:
        """Run ``asked`` on the loop and wait for its answer (from the archive's thread)."""
        if self._stopped:
            asked.close()
            raise _Stopped()
        return asyncio.run_coroutine_threadsafe(asked, self._loop).result(_WAIT_SECONDS)

    async def _opened(self, record: FileRecord) -> tuple[int, Blob] | None:
        blob = await self._open_blob(record)
        if blob is None:
            return None
        self._open[id(blob)] = (blob, blob.chunks(0, blob.size))
        return id(blob), blob

    async def _read(self, handle: int) -> bytes | None:
        return await _next_chunk(self._open[handle][1])

    async def _close(self, handle: int) -> None:
        blob, reading = self._open.pop(handle)
        try:
            aclose = getattr(reading, "aclose", None)  # the stores' chunks are async generators
            if aclose is not None:
                await aclose()
        finally:
            await blob.close()

    def members(self) -> Iterator[MemberFile]:
        from stream_zip import ZIP_32, ZIP_AUTO  # imported by send_archive first

        for index, entry in enumerate(self._entries):
            when = _when(entry.modified)
            if entry.file is None:
                yield entry.path, when, _FOLDER_MODE, ZIP_32, ()
                continue
            first = self._first
            if first is not None and first[0] == index:
                opened = first[1]
            else:
                opened = self._ask(self._opened(entry.file))
            if opened is None:  # deleted since the entries were made: left out
                continue
            handle, blob = opened
            method = ZIP_AUTO(blob.size, level=_level(entry.file))
            yield entry.path, when, _FILE_MODE, method, self._chunks(handle)

    def _chunks(self, handle: int) -> Iterable[bytes]:
        while (chunk := self._ask(self._read(handle))) is not None:
            yield chunk
        self._ask(self._close(handle))

    def stop(self) -> None:
        self._stopped = True

    async def close_all(self) -> None:
        """Close whatever blobs are still open (an archive cut short)."""
        for handle in list(self._open):
            with contextlib.suppress(Exception):
                await self._close(handle)


async def send_archive(
    request: web.Request,
    name: str,
    entries: list[Entry],
    open_blob: OpenBlob,
    admit: Callable[[], Awaitable[None]] | None = None,
) -> web.StreamResponse:
    """Answer ``entries`` as one ZIP archive named ``name``.zip, each file's bytes from
    ``open_blob`` in its turn. ``admit``, awaited just before the headers go out, may still
    refuse the request (a vanity alias's view, counted there)."""
    response = web.StreamResponse(status=200)
    response.headers[hdrs.CONTENT_TYPE] = ZIP_TYPE
    response.headers[hdrs.CONTENT_DISPOSITION] = content_disposition("attachment", f"{name}.zip")
    feed = _Feed(asyncio.get_running_loop(), entries, open_blob)
    try:
        await feed.open_first()
        if admit is not None:
            await admit()
        await prepare_streamed(request, response)
    except BaseException:
        await feed.close_all()
        raise
    # Imported by the first archive, not at start-up: with the cipher library it loads, it is
    # among the slowest imports, which every worker and command would pay (docs/development.md).
    from stream_zip import stream_zip

    zipped = iter(stream_zip(feed.members(), chunk_size=CHUNK))

    def next_chunk() -> bytes | None:
        return next(zipped, None)

    pending: Future[bytes | None] | None = None
    finished = False
    sent = 0
    try:
        while True:
            pending = _threads().submit(next_chunk)
            chunk = await asyncio.wrap_future(pending)
            if chunk is None:
                break
            await response.write(chunk)
            sent += len(chunk)
        await response.write_eof()
        finished = True
        count_download(request.app, "archive", sent)
    finally:
        feed.stop()
        if pending is not None and not pending.done():
            # Cut short while the thread works: it stops at its next ask of the loop, and the
            # generator may be closed only once it has.
            with contextlib.suppress(BaseException):
                await asyncio.wrap_future(pending)
        close = getattr(zipped, "close", None)  # a generator: its cleanup asks nothing of the loop
        if close is not None:
            close()
        await feed.close_all()
        if not finished and request.transport is not None:
            # The headers are gone: a failure can only cut the archive short, never be answered.
            request.transport.close()
    return response
