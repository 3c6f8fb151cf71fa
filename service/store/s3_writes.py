"""How the object-store backend writes a blob (``service.store.s3_blobs``): the client's bytes
read into part buffers, hashed (SHA-256, in a thread) while the part is sent and the next one
fills, and sent as they fill, in bounded memory whatever the blob's size.

An upload holds its buffer filling from the client and at most ``PARTS_IN_FLIGHT`` parts on
their way: ``PART_BYTES`` × (1 + ``PARTS_IN_FLIGHT``) at most, and only ``FIRST_BYTES`` for a
small file. A blob that fits in its first part is one request; a larger one a multipart upload
from its first full part on, aborted (shielded from the cancellation) whatever stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from typing import Any, Protocol

from service.domain.blobs import FILL_ROOM, Source, Written

# A part of a multipart upload, and an upload's buffer: above S3's 5 MiB minimum, and what
# `aws s3 cp` uses. 10,000 parts make the largest object 78 GiB.
PART_BYTES = 8 * 1024 * 1024
# An upload's first buffer: most files are small, and an 8 MiB buffer for each would be written
# over (its pages touched) for nothing; one that fills grows to a part.
FIRST_BYTES = 256 * 1024
# Parts of one upload on their way at once (its buffer filling from the client is one more).
PARTS_IN_FLIGHT = 2


class MultipartCalls(Protocol):
    """The object store's calls an upload makes (``S3Blobs`` has them)."""

    async def create_upload(self, key: str) -> str: ...

    async def upload_part(
        self, key: str, upload_id: str, number: int, body: bytearray
    ) -> dict[str, Any]: ...

    async def complete(self, key: str, upload_id: str, parts: list[dict[str, Any]]) -> None: ...

    async def abort(self, key: str, upload_id: str) -> None: ...


class MultipartUpload:
    """One blob's multipart upload, from its first full buffer on (see the module)."""

    def __init__(self, blobs: MultipartCalls, key: str) -> None:
        self._blobs = blobs
        self._key = key
        self._in_flight: set[asyncio.Task[dict[str, Any]]] = set()
        self._parts: list[dict[str, Any]] = []

    async def run(self, source: Source, buffer: bytearray, filled: int, digest: Any) -> Written:
        blobs, key = self._blobs, self._key
        upload_id = await blobs.create_upload(key)
        size = 0
        hashing: asyncio.Future[None] | None = None
        try:
            number, ended = 0, False
            while filled:
                number += 1
                del buffer[filled:]
                size += filled
                if hashing is not None:
                    await hashing  # the parts are hashed in order
                # Hashed in a thread while the part is on its way and the next one fills.
                hashing = asyncio.ensure_future(asyncio.to_thread(digest.update, buffer))
                await self._room()
                self._send(upload_id, number, buffer)
                if ended:
                    break
                buffer = bytearray(PART_BYTES)
                filled, ended = await fill(source, buffer)
            if hashing is not None:
                await hashing
            for task in list(self._in_flight):
                self._parts.append(await task)
            self._parts.sort(key=lambda part: part["PartNumber"])
            await blobs.complete(key, upload_id, self._parts)
        except BaseException:
            for task in self._in_flight:
                task.cancel()
            await asyncio.gather(*self._in_flight, return_exceptions=True)
            if hashing is not None:
                await asyncio.gather(hashing, return_exceptions=True)
            # Shielded: an upload cancelled (its client gone) still leaves no upload behind.
            with contextlib.suppress(Exception):
                await asyncio.shield(blobs.abort(key, upload_id))
            raise
        return Written(size, digest.hexdigest())

    def _send(self, upload_id: str, number: int, body: bytearray) -> None:
        task = asyncio.create_task(self._blobs.upload_part(self._key, upload_id, number, body))
        self._in_flight.add(task)

    async def _room(self) -> None:
        """Until fewer than ``PARTS_IN_FLIGHT`` parts are on their way (a failed one raises)."""
        while len(self._in_flight) >= PARTS_IN_FLIGHT:
            done, _ = await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                self._in_flight.discard(task)
                self._parts.append(task.result())


class PartBody(io.RawIOBase):
    """A part's buffer as a file the HTTP client reads 64 KiB at a time: handed the buffer
    itself, it would hand the transport all 8 MiB at once, which keeps a copy of what the
    socket has not taken yet (docs/performance.md). Seekable, so a retry sends it again."""

    def __init__(self, buffer: bytearray) -> None:
        super().__init__()
        self._view = memoryview(buffer)
        self._at = 0

    def __len__(self) -> int:
        return len(self._view)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        start = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}[whence]
        self._at = max(0, min(len(self._view), start + offset))
        return self._at

    def readinto(self, into: Any) -> int:
        count = min(len(into), len(self._view) - self._at)
        into[:count] = self._view[self._at : self._at + count]
        self._at += count
        return count

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._view) if size is None or size < 0 else min(len(self._view), self._at + size)
        data = bytes(self._view[self._at : end])
        self._at = end
        return data


async def fill(source: Source, buffer: bytearray, start: int = 0) -> tuple[int, bool]:
    """Fill ``buffer`` from ``source``, from ``start``, while it has room: how much, and whether
    the source ended."""
    filled = start
    while len(buffer) - filled >= FILL_ROOM:
        count = await source.fill(buffer, filled, len(buffer))
        if not count:
            return filled - start, True
        filled += count
    return filled - start, False


def grown(buffer: bytearray, filled: int) -> bytearray:
    """A part's buffer holding the first ``filled`` bytes of ``buffer``."""
    grown = bytearray(PART_BYTES)
    grown[:filled] = buffer[:filled]
    return grown
