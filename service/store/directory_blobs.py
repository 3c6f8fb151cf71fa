"""The directory backend of the blob store (``protocols.blobs.BlobStore``): each file's bytes as
a file in the data directory, for one host (or several on a shared volume).

``DirectoryBlobs`` keeps each blob as ``<root>/<id>``. ``put`` writes to a temporary file in the
same directory (``.tmp-<random>``) and renames it into place only once every byte is written and
fsynced; whatever stops it before that (the client gone, the size limit, any error, a
cancellation) removes the temporary file, so a blob is either whole or absent.

An upload's bytes reach the file through ``file_writes`` (double buffers, hashed and written
by threads of the uploads' own pool, direct writes where the filesystem allows them).

A blob's thumbnail is the file ``<root>/<id>.thumbnail`` beside it, written to a temporary file
and renamed into place like a blob, and unlinked after the blob by ``delete``.

A blob is never changed once in place, only removed: so a hard link to it (``pin``, in a
``.backup-<random>`` directory inside the root, on the same filesystem) holds its bytes as they
are, whatever happens to the blob after. A backup pins the blobs its records name.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import shutil
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from service.domain.blobs import READ_CHUNK, Blob, BlobMissing, Source, StorageFull, Written
from service.store.blobs import BLOB_ID, MAX_THUMBNAIL_BYTES, checked, thumbnail_name
from service.store.file_writes import (
    WRITING_THREADS,
    FileWriter,
    create_for_writing,
    started_pool,
)

_TEMPORARY_PREFIX = ".tmp-"
_PINNED_PREFIX = ".backup-"
# How old a temporary file is before ``sweep`` takes it for a crash's leftover.
SWEEP_AFTER_SECONDS = 3600
# What the filesystem says when it is full.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


class _FileBlob:
    def __init__(self, handle: BinaryIO, size: int) -> None:
        self._handle = handle
        self.size = size

    async def chunks(self, start: int, length: int) -> AsyncIterator[bytes]:
        handle = self._handle
        left = length
        await asyncio.to_thread(handle.seek, start)
        while left > 0:
            data = await asyncio.to_thread(handle.read, min(READ_CHUNK, left))
            if not data:  # the file shrank under us: never pad, stop short
                raise OSError("blob ended early")
            left -= len(data)
            yield data

    def fileno(self) -> int:
        return self._handle.fileno()

    async def close(self) -> None:
        await asyncio.to_thread(self._handle.close)


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
            fd, direct = await asyncio.to_thread(create_for_writing, temporary)
            writer = FileWriter(fd, direct, self.writing_pool())
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

    def writing_pool(self) -> ThreadPoolExecutor:
        """The threads that hash and write uploads: their own, so that fsyncs waiting on the
        disk never hold up the default pool's other work (opening blobs, backups)."""
        if self._pool is None:
            self._pool = started_pool(WRITING_THREADS, "blob-writer")
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
        return await asyncio.to_thread(self._delete_now, blob_id)

    def _delete_now(self, blob_id: str) -> bool:
        removed = _unlink(self.path(blob_id))
        _unlink(self.root / thumbnail_name(blob_id))
        return removed

    async def put_thumbnail(self, blob_id: str, data: bytes) -> None:
        await asyncio.to_thread(self._put_thumbnail_now, self.root / thumbnail_name(blob_id), data)

    def _put_thumbnail_now(self, final: Path, data: bytes) -> None:
        self._make_root()
        temporary = self.root / f"{_TEMPORARY_PREFIX}{secrets.token_hex(8)}"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                # Never an empty file in its place after a power cut: empty says "none".
                os.fsync(handle.fileno())
            os.rename(temporary, final)
        except BaseException:
            _unlink(temporary)
            raise

    async def thumbnail(self, blob_id: str) -> bytes | None:
        return await asyncio.to_thread(_read_small, self.root / thumbnail_name(blob_id))

    async def delete_thumbnail(self, blob_id: str) -> None:
        await asyncio.to_thread(_unlink, self.root / thumbnail_name(blob_id))

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


def rename_durably(source: Path, target: Path) -> None:
    os.rename(source, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the new name itself survives a power cut
    finally:
        os.close(directory)


def _read_small(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_THUMBNAIL_BYTES)
    except FileNotFoundError:
        return None


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
