"""Whether the stores the policy works on answer: what ``GET /readyz`` asks before it says the
service is ready (Redis, then the blob store)."""

from __future__ import annotations

from service.store.protocols import Stores
from service.store.protocols.blobs import BlobStore


class Readiness:
    def __init__(self, stores: Stores, blobs: BlobStore) -> None:
        self._stores = stores
        self._blobs = blobs

    async def ping_store(self) -> bool:
        return await self._stores.ping()

    async def blob_problem(self) -> str | None:
        """None when the blob store answers; else what is wrong (never a credential)."""
        return await self._blobs.readiness()
