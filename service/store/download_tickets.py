"""Download tickets in Redis: one string per ticket, named by the digest of its secret, holding
what it downloads (``DownloadTicket`` as JSON) and expiring a little after the ticket does (the
policy checks the ticket's own end against its clock)."""

from __future__ import annotations

import orjson
from redis.asyncio import Redis

from service.domain.records import DownloadTicket
from service.errors import CorruptRecord
from service.store.keys import RedisKeys


class DownloadTicketStore:
    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys

    async def keep(self, ticket_digest: str, ticket: DownloadTicket, lasting_ms: int) -> None:
        value = orjson.dumps(
            [ticket.user_id, ticket.kind, ticket.ids, ticket.session_digest, ticket.expires_at]
        )
        await self.redis.set(self.keys.download_ticket(ticket_digest), value, px=lasting_ms)

    async def find(self, ticket_digest: str) -> DownloadTicket | None:
        raw = await self.redis.get(self.keys.download_ticket(ticket_digest))
        if raw is None:
            return None
        try:
            user_id, kind, ids, session_digest, expires_at = orjson.loads(raw)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            raise CorruptRecord() from None
        if not all(isinstance(name, str) for name in (user_id, kind, session_digest)):
            raise CorruptRecord()
        if not isinstance(ids, list) or not all(isinstance(one, str) for one in ids):
            raise CorruptRecord()
        if not isinstance(expires_at, int):
            raise CorruptRecord()
        return DownloadTicket(user_id, kind, tuple(ids), session_digest, expires_at)
