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
from typing import Any

from service.domain.blobs import FILL_ROOM, Source


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
