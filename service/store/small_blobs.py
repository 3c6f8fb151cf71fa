"""Small files' bytes kept in each worker's memory, so that serving one costs no thread and no
open file: a vanity alias of a small file is the public path of a file host, and for a few KiB
the trips to a thread cost more than the bytes.

Only files up to ``MAX_FILE_BYTES`` are kept, at most ``MAX_TOTAL_BYTES`` of them per worker,
the least recently served dropped first. A blob never changes once in place
(``protocols.blobs``), so what is kept can't go stale; still, an entry is used only for the
record it was read for (the same id, size and SHA-256), and bytes whose length or hash don't match
their record are never kept: the caller falls back to streaming the blob, as for a large file.
A deleted file's record is gone before its blob, so its bytes are never asked for again and
age out.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from service.domain.blobs import BlobMissing
from service.store.protocols.blobs import BlobStore

MAX_FILE_BYTES = 64 * 1024
MAX_TOTAL_BYTES = 16 * 1024 * 1024


class SmallBlobs:
    def __init__(
        self,
        blobs: BlobStore,
        max_file_bytes: int = MAX_FILE_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
    ) -> None:
        self._blobs = blobs
        self._max_file = max_file_bytes
        self._max_total = max_total_bytes
        self._kept: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._total = 0

    async def read(self, blob_id: str, size: int, sha256: str) -> bytes | None:
        """The whole blob, when it is small and holds exactly what its record says; None
        otherwise (stream it instead)."""
        if size > self._max_file:
            return None
        kept = self._kept.get(blob_id)
        if kept is not None and kept[0] == sha256 and len(kept[1]) == size:
            self._kept.move_to_end(blob_id)
            return kept[1]
        try:
            data = await self._read_whole(blob_id, size)
        except (BlobMissing, OSError):
            return None
        if data is None or len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            return None
        self._keep(blob_id, sha256, data)
        return data

    async def _read_whole(self, blob_id: str, size: int) -> bytes | None:
        blob = await self._blobs.open(blob_id)
        try:
            if blob.size != size:
                return None
            return b"".join([chunk async for chunk in blob.chunks(0, size)])
        finally:
            await blob.close()

    def _keep(self, blob_id: str, sha256: str, data: bytes) -> None:
        previous = self._kept.pop(blob_id, None)
        if previous is not None:
            self._total -= len(previous[1])
        self._kept[blob_id] = (sha256, data)
        self._total += len(data)
        while self._total > self._max_total:
            _, (_, dropped) = self._kept.popitem(last=False)
            self._total -= len(dropped)
