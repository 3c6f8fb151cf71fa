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
            [
                ticket.user_id,
                ticket.target_id,
                ticket.is_folder,
                ticket.session_digest,
                ticket.expires_at,
            ]
        )
        await self.redis.set(self.keys.download_ticket(ticket_digest), value, px=lasting_ms)

    async def find(self, ticket_digest: str) -> DownloadTicket | None:
        raw = await self.redis.get(self.keys.download_ticket(ticket_digest))
        if raw is None:
            return None
        try:
            user_id, target_id, is_folder, session_digest, expires_at = orjson.loads(raw)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            raise CorruptRecord() from None
        names = (user_id, target_id, session_digest)
        if not all(isinstance(name, str) for name in names):
            raise CorruptRecord()
        if not isinstance(is_folder, bool) or not isinstance(expires_at, int):
            raise CorruptRecord()
        return DownloadTicket(user_id, target_id, is_folder, session_digest, expires_at)
