"""The bytes of resumable uploads so far (``service.auth.uploads``): what each blob store keeps
between an upload's requests, and how a finished one becomes a blob. The interface, and what its
two backends share; ``directory_partials`` and ``s3_partials`` implement it.

A partial blob is named by its upload's id and becomes the blob of its file id when finished.
Its backend's bookkeeping (how many bytes are where) is a small JSON-able ``state`` the caller
keeps in Redis with the offset, so any instance continues any upload: a backend holds nothing of
an upload in a process between requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from service.store.blobs import FILL_ROOM, Source

# Told the offset and state reached once the bytes before it are stored for good: the caller
# records them (a PATCH cut off keeps what it had sent).
Commit = Callable[[int, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Partial:
    """An upload's bytes so far: its id, the file id they become, how many there are, and the
    backend's state."""

    upload_id: str
    blob_id: str
    offset: int
    state: dict[str, Any]


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

    async def finish(self, partial: Partial) -> None:
        """Make the partial blob, now whole, the blob ``partial.blob_id``."""
        ...

    async def discard(self, partial: Partial) -> None:
        """Remove the partial blob's bytes (an upload terminated, or expired)."""
        ...


async def fill_keeping(
    source: Source, buffer: bytearray, start: int = 0
) -> tuple[int, bool, BaseException | None]:
    """Fill ``buffer`` from ``source``, from ``start``, while it has room: how much, whether
    the source ended, and what stopped it when it failed (the client gone): what it filled
    before failing is kept, to be stored before the failure is raised."""
    filled = start
    try:
        while len(buffer) - filled >= FILL_ROOM:
            count = await source.fill(buffer, filled, len(buffer))
            if not count:
                return filled - start, True, None
            filled += count
    except BaseException as error:
        return filled - start, False, error
    return filled - start, False, None


async def hashed(digests: list[Any], data: Any) -> None:
    """``data`` into every digest, in a thread (hashlib lets go of the GIL for large data)."""
    if digests and len(data):

        def update() -> None:
            with memoryview(data) as view:
                for digest in digests:
                    digest.update(view)

        await asyncio.to_thread(update)
