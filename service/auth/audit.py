"""The account's audit trail as policy sees it: events made into the batches the store records
(bounded by the deployment's retention and size), recorded on their own or inside the change
they describe, and read back a page at a time."""

from __future__ import annotations

from typing import Any

from service.clock import Clock
from service.config import AuditSettings
from service.domain.audit_events import EventBatch, EventPage
from service.store.protocols import AuditStore

DAY_MS = 86_400_000


class AuditTrail:
    def __init__(self, store: AuditStore, clock: Clock, settings: AuditSettings) -> None:
        self._store = store
        self._clock = clock
        self._retention_ms = settings.retention_days * DAY_MS
        self._max_events = settings.max_events

    def batch(self, at: int, *events: dict[str, Any]) -> EventBatch:
        """``events`` as one batch for the store, to be recorded in the step that makes the
        change they describe (or on their own, by ``record``)."""
        return EventBatch(
            at=at, retention_ms=self._retention_ms, max_events=self._max_events, events=events
        )

    async def record(self, user_id: str, at: int, *events: dict[str, Any]) -> None:
        await self._store.record(user_id, self.batch(at, *events))

    async def matching(self, user_id: str, kind: str, containing: str) -> list[dict[str, Any]]:
        """The account's events of ``kind`` whose JSON holds ``containing``, in no order."""
        return await self._store.matching(user_id, kind, containing)

    async def page(
        self,
        user_id: str,
        limit: int,
        before: int | None,
        kind: str | None,
        naming: dict[str, str] | None = None,
    ) -> EventPage:
        """A page of the account's audit trail, newest first (``before``: a cursor's position);
        events past the retention are never shown, even before a write trims them. ``naming``
        keeps the events that name each of its ids (``key_id``, ``session_id``) as their actor
        or their target."""
        since = self._clock.now_ms() - self._retention_ms
        return await self._store.page(user_id, limit, before, kind, since, naming)
