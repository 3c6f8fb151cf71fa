"""Resumable uploads' bytes in the data directory (``service.store.partial_blobs``): each upload's
bytes so far are ``<FILEHOST_DATA_DIR>/uploads/<upload id>``, appended to by each ``PATCH`` and,
once whole, renamed into ``files/`` as the file's blob (the same filesystem: the rename is atomic).

An append first cuts the file back to the offset it continues from (bytes a failed request left
past it never count), writes through two buffers (one filling from the client while a thread
hashes and writes the other), and fsyncs before it commits: a committed offset's bytes are on
disk. Its state is nothing: the file's length past the offset is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from service.store.blobs import BlobMissing, StorageFull, checked
from service.store.directory_blobs import DirectoryBlobs, rename_durably
from service.store.partial_blobs import Commit, Partial, fill_keeping

# Each of an append's two buffers.
BATCH = 4 * 1024 * 1024
# An append commits once at least this much was written since the last commit (fsync first).
COMMIT_EVERY = 32 * 1024 * 1024
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


class DirectoryPartials:
    def __init__(self, blobs: DirectoryBlobs) -> None:
        self._blobs = blobs
        self.root = blobs.root.parent / "uploads"

    def path(self, upload_id: str) -> Path:
        if not upload_id.startswith("upl_") or "/" in upload_id or len(upload_id) != 26:
            raise ValueError("not an upload id")
        return self.root / upload_id

    async def append(
        self,
        partial: Partial,
        source: Any,
        digests: list[Any],
        commit: Commit | None,
    ) -> tuple[int, dict[str, Any]]:
        fd = await asyncio.to_thread(self._open, self.path(partial.upload_id), partial.offset)
        written = committed = 0
        in_flight: asyncio.Future[None] | None = None
        buffers = (bytearray(BATCH), bytearray(BATCH))
        index = 0
        failure: BaseException | None = None
        try:
            while failure is None:
                buffer = buffers[index]
                count, ended, failure = await fill_keeping(source, buffer)
                if in_flight is not None:
                    await in_flight  # the other buffer, written in order
                in_flight = asyncio.ensure_future(
                    asyncio.to_thread(_hash_and_write, fd, buffer, count, digests)
                )
                written += count
                if commit is not None and written - committed >= COMMIT_EVERY:
                    await in_flight
                    in_flight = None
                    await asyncio.to_thread(os.fsync, fd)
                    committed = written
                    await commit(partial.offset + written, {})
                if ended:
                    break
                index = 1 - index
            if in_flight is not None:
                await in_flight
            await asyncio.to_thread(os.fsync, fd)
        except OSError as error:
            if error.errno in _NO_ROOM:
                raise StorageFull() from error
            raise
        finally:
            if in_flight is not None and not in_flight.done():
                await asyncio.gather(in_flight, return_exceptions=True)
            await asyncio.shield(asyncio.to_thread(os.close, fd))
        offset = partial.offset + written
        if commit is not None and written > committed:
            await asyncio.shield(commit(offset, {}))
        if failure is not None:
            raise failure
        return offset, {}

    def _open(self, path: Path, offset: int) -> int:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Made by an upload's first append only: later ones continue bytes that must be there.
        flags = os.O_WRONLY | os.O_CLOEXEC | (os.O_CREAT if offset == 0 else 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            raise BlobMissing(path.name) from None
        try:
            os.ftruncate(fd, offset)
            os.lseek(fd, offset, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        return fd

    async def finish(self, partial: Partial) -> None:
        path = self.path(partial.upload_id)
        target = self._blobs.root / checked(partial.blob_id)

        def place() -> None:
            self._blobs.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not path.exists() and target.exists():  # placed by an earlier finish
                if os.path.getsize(target) == partial.offset:
                    return
            if os.path.getsize(path) != partial.offset:
                raise OSError(f"the upload's bytes are not {partial.offset} long")
            rename_durably(path, target)

        await asyncio.to_thread(place)

    async def discard(self, partial: Partial) -> None:
        with contextlib.suppress(FileNotFoundError):
            await asyncio.to_thread(self.path(partial.upload_id).unlink)


def _hash_and_write(fd: int, buffer: bytearray, count: int, digests: list[Any]) -> None:
    with memoryview(buffer) as view:
        part = view[:count]
        for digest in digests:
            digest.update(part)
        while part:
            done = os.write(fd, part)
            part = part[done:]
