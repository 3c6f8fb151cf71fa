"""Resumable uploads' bytes in the data directory (``service.store.partial_blobs``): each upload's
bytes so far are ``<FILEHOST_DATA_DIR>/uploads/<upload id>``, appended to by each ``PATCH`` and,
once whole, renamed into ``files/`` as the file's blob (the same filesystem: the rename is atomic).

An append first cuts the file back to the offset it continues from (bytes a failed request left
past it never count), then writes as an upload to ``POST /files`` does (``file_writes``: two
buffers, hashed and written by threads, direct writes where the offset allows them), fsyncing
and committing every ``COMMIT_EVERY`` bytes and at its end: a committed offset's bytes are on
disk. A body cut off has what arrived written, fsynced and committed. Its state is nothing: the
file's length past the offset is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from service.domain.blobs import BlobMissing, Commit, Partial, StorageFull
from service.domain.credentials import is_valid_id
from service.store.blobs import checked
from service.store.directory_blobs import DirectoryBlobs, rename_durably
from service.store.file_writes import FileWriter, open_for_append

# An append commits its offset at least this often (each commit an fsync first), so a worker
# that dies mid-request loses at most this much of it.
COMMIT_EVERY = 256 * 1024 * 1024
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


class DirectoryPartials:
    def __init__(self, blobs: DirectoryBlobs) -> None:
        self._blobs = blobs
        self.root = blobs.root.parent / "uploads"

    def path(self, upload_id: str) -> Path:
        if not is_valid_id(upload_id, "upl"):
            raise ValueError("not an upload id")
        return self.root / upload_id

    async def append(
        self,
        partial: Partial,
        source: Any,
        digests: list[Any],
        commit: Commit | None,
    ) -> tuple[int, dict[str, Any]]:
        fd, direct = await asyncio.to_thread(self._open, partial.upload_id, partial.offset)
        writer = FileWriter(fd, direct, self._blobs.writing_pool(), digests, partial.offset)

        async def checkpoint(written: int) -> None:
            assert commit is not None
            await commit(partial.offset + written, {})

        try:
            await writer.write_all(
                source,
                keep_on_failure=True,
                checkpoint=checkpoint if commit is not None else None,
                every=COMMIT_EVERY,
            )
        except BaseException as error:
            if writer.source_failed and commit is not None:
                # The body cut off: what arrived is on disk, and counts.
                await asyncio.shield(commit(partial.offset + writer.size, {}))
            elif isinstance(error, OSError) and error.errno in _NO_ROOM:
                raise StorageFull() from error
            raise
        finally:
            writer.close()
        offset = partial.offset + writer.size
        if commit is not None:
            await asyncio.shield(commit(offset, {}))
        return offset, {}

    def _open(self, upload_id: str, offset: int) -> tuple[int, bool]:
        if offset == 0:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            return open_for_append(self.path(upload_id), offset)
        except FileNotFoundError:
            raise BlobMissing(upload_id) from None

    async def abandon(self, partial: Partial, state: dict[str, Any]) -> None:
        """Nothing to do: the bytes past ``partial``'s offset are cut off by the next append."""

    async def finish(self, partial: Partial) -> None:
        path = self.path(partial.upload_id)
        target = self._blobs.root / checked(partial.blob_id)

        def place() -> None:
            self._blobs.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not path.exists() and target.exists():  # placed by an earlier finish
                if os.path.getsize(target) == partial.offset:
                    return
            if partial.offset == 0 and not path.exists():  # empty: no append ever made it
                os.close(self._open(partial.upload_id, 0)[0])
            if os.path.getsize(path) != partial.offset:
                raise OSError(f"the upload's bytes are not {partial.offset} long")
            rename_durably(path, target)

        await asyncio.to_thread(place)

    async def discard(self, partial: Partial) -> None:
        with contextlib.suppress(FileNotFoundError):
            await asyncio.to_thread(self.path(partial.upload_id).unlink)
