"""What each key is doing, counted per worker without a round trip on the request path.

A request with a key adds one to the key's count in this worker's memory (``used``), and one to
its refusals when it is refused (``refused``); a flusher sends what was counted to the store
once a second, as one write, and once more when the worker stops (``stop``), so a clean stop
loses nothing. A flush that fails keeps its counts for the next one. Only keys that exist are
counted: an unknown or malformed secret, or a revoked key's (its counts went with it), belongs
to no key. The owner reads the last ``USAGE_DAYS`` UTC days (``usage``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from service.clock import Clock
from service.domain import credentials
from service.domain.key_usage import KeyUsageRecord, KeyUseCount, days_up_to
from service.errors import ApiError, Code
from service.store.protocols import KeyUsageStore

log = logging.getLogger("service.auth")

# Keys remembered between two flushes when the store does not answer: beyond that, counts of
# keys not yet seen are dropped rather than grow a worker's memory without bound.
_MAX_KEYS_HELD = 100_000


class KeyUsage:
    def __init__(self, store: KeyUsageStore, clock: Clock, flush_seconds: float) -> None:
        """``flush_seconds``: how often the counts go to the store
        (``FILEHOST_KEY_USAGE_FLUSH_SECONDS``)."""
        self._store = store
        self._clock = clock
        self._flush_seconds = flush_seconds
        self._requests: dict[str, int] = {}
        self._refused: dict[str, int] = {}
        self._owners: dict[str, str] = {}
        self._addresses: dict[str, str | None] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._stopping = False

    def used(self, user_id: str, key_id: str, address: str | None) -> None:
        """One request with the key, from ``address``: on the request path, so dictionary
        stores only (the owner only with the key's first request since the last flush)."""
        requests = self._requests
        count = requests.get(key_id)
        if count is None:
            requests[key_id] = 1
            self._owners[key_id] = user_id
        else:
            requests[key_id] = count + 1
        self._addresses[key_id] = address

    def refused(self, user_id: str, key_id: str) -> None:
        """One request with the key refused (it was counted as used already)."""
        refused = self._refused
        refused[key_id] = refused.get(key_id, 0) + 1
        self._owners[key_id] = user_id

    def start(self) -> None:
        """Flush every ``flush_seconds`` until ``stop``."""
        self._flusher = asyncio.get_running_loop().create_task(self._flush_every_second())

    async def stop(self) -> None:
        """Stop flushing every second, then flush what is left (the worker is stopping)."""
        self._stopping = True
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        await self.flush()

    async def _flush_every_second(self) -> None:
        # Ends on ``_stopping`` too, not only on its cancellation: one that lands while the store
        # is written may be lost inside the Redis client (a stop waited on this loop for 30 s,
        # the flusher back in its sleep), and ``stop`` awaits the loop's end.
        while not self._stopping:
            await asyncio.sleep(self._flush_seconds)
            await self.flush()

    async def flush(self) -> None:
        """Send what was counted since the last flush in one write; kept for the next one when
        the store fails (logged, never raised)."""
        if not self._requests and not self._refused:
            return
        requests, refused, owners, addresses = (
            self._requests,
            self._refused,
            self._owners,
            self._addresses,
        )
        self._requests, self._refused, self._owners, self._addresses = {}, {}, {}, {}
        counts: dict[str, list[KeyUseCount]] = {}
        for key_id, user_id in owners.items():
            counts.setdefault(user_id, []).append(
                KeyUseCount(
                    key_id,
                    requests.get(key_id, 0),
                    refused.get(key_id, 0),
                    addresses.get(key_id),
                )
            )
        try:
            await self._store.add(counts, self._clock.now_ms())
        except Exception as error:  # the store's failure: counted again with the next flush
            log.warning("could not record what keys did: %s", type(error).__name__)
            self._keep(requests, refused, owners, addresses)

    def _keep(
        self,
        requests: dict[str, int],
        refused: dict[str, int],
        owners: dict[str, str],
        addresses: dict[str, str | None],
    ) -> None:
        for key_id, user_id in owners.items():
            if key_id not in self._owners and len(self._owners) >= _MAX_KEYS_HELD:
                continue
            self._owners[key_id] = user_id
            if key_id in requests:
                self._requests[key_id] = self._requests.get(key_id, 0) + requests[key_id]
            if key_id in refused:
                self._refused[key_id] = self._refused.get(key_id, 0) + refused[key_id]
            self._addresses.setdefault(key_id, addresses.get(key_id))

    async def usage(self, user_id: str, key_id: str) -> KeyUsageRecord:
        """What one of the account's keys did over the last days; 404 ``key_not_found`` for
        an unknown id or another account's key."""
        record = None
        if credentials.is_valid_id(key_id, "key"):
            record = await self._store.read(user_id, key_id, days_up_to(self._clock.now_ms()))
        if record is None:
            raise ApiError(Code.KEY_NOT_FOUND)
        return record
