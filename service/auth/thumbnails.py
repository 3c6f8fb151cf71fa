"""Files' thumbnails (``GET /files/{id}/thumbnail``, and a public link's preview image): made by
the service from a raster image (``domain.files.THUMBNAIL_TYPES``; ``thumbnail_images`` decodes
it), kept beside the file's bytes in the blob store (``BlobStore.put_thumbnail``), removed with
them by every deletion.

**Made lazily, on the first request for it, then kept.** Not at upload: an upload's answer and
the upload path's speed stay what they were (no image decoded while a client waits for its
upload), a file uploaded before thumbnails existed, restored from a backup or migrated to another
blob store gets one the same way, and only images someone looks at in the gallery cost a
decode. What could not be made (not an image after all, corrupt, a decompression bomb, too large)
is kept too, as an empty thumbnail: it answers 404 ``thumbnail_not_found`` at once, never
decoded again.

**Bounded.** At most ``DECODING`` images of a worker decode at once, each in a thread (never on
the event loop), each within ``thumbnail_images``' bounds of bytes, pixels and memory, and all
of them within ``MAX_DECODE_BYTES`` of memory together (each takes its estimated share, from
its header, before it decodes); the bytes of a file larger than ``MAX_SOURCE_BYTES`` are never
read. Requests for the same file while its thumbnail is being made wait for that one.

**Never left behind.** A thumbnail written just as its file was deleted could outlive it: once
written, the file's record is read again, and when it is gone the thumbnail goes too (a deletion
removes the record before the bytes, so either it sees the thumbnail or this sees no record).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from service.auth.files import Files
from service.auth.thumbnail_images import (
    MAX_DECODE_BYTES,
    MAX_SOURCE_BYTES,
    NoThumbnail,
    decoding_cost,
    make_thumbnail,
)
from service.domain.blobs import BlobMissing
from service.domain.files import THUMBNAIL_TYPES
from service.domain.principal import Principal
from service.domain.records import FileRecord
from service.errors import ApiError, Code
from service.store.protocols.blobs import BlobStore

log = logging.getLogger("service.auth.thumbnails")

# Images a worker decodes at once.
DECODING = 2
# What a file that cannot have a thumbnail keeps instead.
NONE_KEPT = b""


def has_thumbnail(content_type: str) -> bool:
    """Whether files of this stored type may have a thumbnail (raster images only)."""
    return content_type in THUMBNAIL_TYPES


class Thumbnails:
    def __init__(self, files: Files, blobs: BlobStore, decoding: int = DECODING) -> None:
        self._files = files
        self._blobs = blobs
        self._decoding = asyncio.Semaphore(decoding)
        self._memory = _Budget(MAX_DECODE_BYTES)
        self._making: dict[str, asyncio.Future[bytes]] = {}

    async def of_file(self, principal: Principal, file_id: str) -> bytes:
        """The WebP thumbnail of one of the principal's files: 404 ``file_not_found`` for a
        file it does not reach, ``thumbnail_not_found`` for one that has none."""
        record = await self._files.get(principal, file_id)
        return await self.of_record(principal.user_id, record)

    async def of_record(self, user_id: str, record: FileRecord) -> bytes:
        """The thumbnail of the account's file ``record`` (see ``of_file``)."""
        if not has_thumbnail(record.content_type):
            raise ApiError(Code.THUMBNAIL_NOT_FOUND)
        kept = await self._blobs.thumbnail(record.id)
        if kept is None:
            kept = await self._made_once(user_id, record)
        if not kept:
            raise ApiError(Code.THUMBNAIL_NOT_FOUND)
        return kept

    async def _made_once(self, user_id: str, record: FileRecord) -> bytes:
        """The thumbnail made now, once however many requests ask for it meanwhile."""
        making = self._making.get(record.id)
        if making is None:
            making = asyncio.ensure_future(self._make(user_id, record))
            self._making[record.id] = making
            making.add_done_callback(lambda done: self._made(record.id, done))
        # Shielded: a client that goes away does not stop what the others wait for.
        return await asyncio.shield(making)

    def _made(self, file_id: str, done: asyncio.Future[bytes]) -> None:
        self._making.pop(file_id, None)
        if not done.cancelled():
            done.exception()  # retrieved: every waiter may have gone, and it is theirs to tell

    async def _make(self, user_id: str, record: FileRecord) -> bytes:
        try:
            made = await self._decoded(record)
        except NoThumbnail as why:
            log.info("a file has no thumbnail: %s", why)
            made = NONE_KEPT
        try:
            await self._blobs.put_thumbnail(record.id, made)
        except OSError as error:  # the disk full, the object store away: made again next time
            log.warning("could not keep a thumbnail: %s", type(error).__name__)
            return made
        if not await self._files.listed(user_id, record.id):  # deleted meanwhile
            with contextlib.suppress(OSError):
                await self._blobs.delete_thumbnail(record.id)
            raise ApiError(Code.FILE_NOT_FOUND)
        return made

    async def _decoded(self, record: FileRecord) -> bytes:
        if record.size > MAX_SOURCE_BYTES:
            raise NoThumbnail("too many bytes")
        try:
            data = await self._read(record)
        except BlobMissing:
            raise ApiError(Code.FILE_NOT_FOUND) from None
        async with self._decoding:
            cost = await asyncio.to_thread(decoding_cost, data)
            async with self._memory.taken(cost):
                return await asyncio.to_thread(make_thumbnail, data)

    async def _read(self, record: FileRecord) -> bytearray:
        """The file's whole bytes, at most ``MAX_SOURCE_BYTES``."""
        blob = await self._blobs.open(record.id)
        try:
            if blob.size > MAX_SOURCE_BYTES:
                raise NoThumbnail("too many bytes")
            data = bytearray()
            async for chunk in blob.chunks(0, blob.size):
                data += chunk
        finally:
            await blob.close()
        return data


class _Budget:
    """Memory the worker's decodes share: each takes its share, waiting until there is room."""

    def __init__(self, total: int) -> None:
        self._left = total
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def taken(self, amount: int) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: self._left >= amount)
            self._left -= amount
        try:
            yield
        finally:
            async with self._changed:
                self._left += amount
                self._changed.notify_all()
