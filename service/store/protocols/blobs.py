"""What the policy and the stores ask of the blob stores (``service.store.directory_blobs`` and
``s3_blobs``, ``directory_partials`` and ``s3_partials``): a store of whole blobs, the partial
blobs of resumable uploads, and the directory's pinning that a backup uses when it has it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from service.domain.blobs import Blob, Commit, Partial, Source, Written


class BlobStore(Protocol):
    """The storage interface every backend implements."""

    async def put(self, blob_id: str, source: Source) -> Written:
        """Store what ``source`` fills as the blob ``blob_id``, all or nothing. An exception
        raised by ``source`` (e.g. a size limit) propagates after whatever was written is
        removed; ``StorageFull`` when the backend has no room, ``StorageUnavailable`` when it
        can't be reached."""
        ...

    async def open(self, blob_id: str) -> Blob:
        """The blob, open for reading; ``BlobMissing`` when there is none."""
        ...

    async def download_url(self, blob_id: str, disposition: str, content_type: str) -> str | None:
        """Where a client may fetch the blob itself (a redirect download: a short-lived URL
        answered with this ``Content-Disposition`` and ``Content-Type``); None when the
        service streams it."""
        ...

    async def delete(self, blob_id: str) -> bool:
        """Remove the blob and its thumbnail; False when the backend knows there was no blob."""
        ...

    async def delete_all(self, blob_ids: list[str]) -> list[str]:
        """Remove these blobs and their thumbnails (in as few requests as the backend allows);
        the ids it could not remove, either of them, to be tried again (a missing blob counts
        as removed)."""
        ...

    async def put_thumbnail(self, blob_id: str, data: bytes) -> None:
        """Keep ``data`` (at most ``MAX_THUMBNAIL_BYTES``; empty for "this blob has none") as
        the thumbnail of the blob ``blob_id``, beside it, replacing any; whole or not at all.
        Never listed by ``stored``; removed with the blob."""
        ...

    async def thumbnail(self, blob_id: str) -> bytes | None:
        """What ``put_thumbnail`` kept for the blob; None when nothing was."""
        ...

    async def delete_thumbnail(self, blob_id: str) -> None:
        """Remove the blob's thumbnail alone (one kept as its blob was deleted)."""
        ...

    async def stored(self) -> list[str]:
        """The ids of every blob held (a restore's check that the target is empty, a
        migration's inventory)."""
        ...

    async def leftovers(self) -> list[str]:
        """What uploads under way, or cut short by a crash, hold besides blobs (temporary
        files, open multipart uploads): empty once every upload has finished or failed."""
        ...

    async def sweep(self, keep: frozenset[str] = frozenset()) -> int:
        """Remove what uploads a crash cut short left (older than an hour: never one under
        way, nor one of the blobs ``keep`` names: resumable uploads in progress); how many."""
        ...

    async def readiness(self) -> str | None:
        """None when the backend answers; else what is wrong, for ``/readyz`` (never a
        credential)."""
        ...

    async def close(self) -> None:
        """Let go of what it holds open (connections, threads)."""
        ...


class PartialBlobs(Protocol):
    async def append(
        self,
        partial: Partial,
        source: Source,
        digests: list[Any],
        commit: Commit | None,
    ) -> tuple[int, dict[str, Any]]:
        """Store what ``source`` fills after ``partial``'s bytes; the new offset and state.
        Each new byte goes to every digest in ``digests``, in order. With ``commit``, every
        stored stretch is committed as it is stored; a source that fails (the client gone)
        keeps what it filled: stored, committed, then the failure raised. Without it (the
        request carries a checksum of its bytes, checked before anything counts), nothing is
        committed here, and bytes stored past ``partial.offset`` are dropped by the next
        append from there."""
        ...

    async def abandon(self, partial: Partial, state: dict[str, Any]) -> None:
        """Drop what an append after ``partial`` stored and never committed (its bytes refused
        by a checksum), given the state it returned: nothing of it may outlive the request
        elsewhere than in the bytes the next append from ``partial`` replaces."""
        ...

    async def finish(self, partial: Partial) -> None:
        """Make the partial blob, now whole, the blob ``partial.blob_id``."""
        ...

    async def discard(self, partial: Partial) -> None:
        """Remove the partial blob's bytes (an upload terminated, or expired)."""
        ...


@runtime_checkable
class PinnableBlobs(Protocol):
    """A blob store of files on this machine, which a backup pins by hard links while writes
    wait (``service.store.directory_blobs``)."""

    def pinning_directory(self) -> Path: ...

    def pin(self, blob_ids: list[str], into: Path) -> list[str]: ...


class SmallBlobs(Protocol):
    async def read(self, blob_id: str, size: int, sha256: str) -> bytes | None: ...


class BlobStores(Protocol):
    """The blob store, where it keeps resumable uploads' bytes, and the small files' bytes it
    serves from memory (``service.store.blob_stores.BlobStores``)."""

    @property
    def blobs(self) -> BlobStore: ...

    @property
    def partials(self) -> PartialBlobs: ...

    @property
    def small(self) -> SmallBlobs: ...
