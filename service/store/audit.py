"""The accounts' audit trails in Redis: one sorted set per account, under its hash tag.

Knows nothing of HTTP or of what the events mean (``service.domain.audit_events``). Per account
(``service.store.keys``): ``P:{U}:audit`` holds one member per event, ``<type>:<JSON event>``
(the JSON carries the event's random id, so no two members are equal), scored by a sequence
number: at least the event's time in ms × 1000, and above every score already there, so the
order is the order of recording (events of one millisecond included) and a cursor, which names a
score, stays valid however many events arrive meanwhile.

Events are written by ``RECORD_EVENTS``, a Lua function the account's scripts share: on its own
(``AuditStore.record``), or inside the script that makes the change the event records
(a session's or key's confirmation, a password hash's replacement), so the change and its event
are one atomic step. Every write trims the trail: events older than the retention go, then the
oldest past the maximum, and the key expires with its newest event's retention. The function
runs before the script's own writes, so a failed event write leaves the change undone too.
"""

from __future__ import annotations

from typing import Any

import orjson
from redis.asyncio import Redis

from service.domain.audit_events import EventBatch, EventPage, StoredEvent
from service.domain.cursors import encode_event_cursor
from service.errors import CorruptRecord
from service.store.keys import RedisKeys

# record_events(key, first): appends ARGV[first + 3 ..] as events to the trail ``key``.
# ARGV[first]: the events' time (ms); ARGV[first + 1]: retention (ms); ARGV[first + 2]: maximum
# number of events. Prepended to every script that records events.
RECORD_EVENTS = """
local function record_events(key, first)
  local at = tonumber(ARGV[first])
  local keep = tonumber(ARGV[first + 1])
  local maximum = tonumber(ARGV[first + 2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%.0f', (at - keep) * 1000))
  local seq = at * 1000
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] and tonumber(last[2]) >= seq then
    seq = tonumber(last[2]) + 1
  end
  for i = first + 3, #ARGV do
    redis.call('ZADD', key, string.format('%.0f', seq), ARGV[i])
    seq = seq + 1
  end
  local size = redis.call('ZCARD', key)
  if size > maximum then
    redis.call('ZREMRANGEBYRANK', key, 0, size - maximum - 1)
  end
  redis.call('PEXPIREAT', key, string.format('%.0f', at + keep))
end
"""

_RECORD = (
    RECORD_EVENTS
    + """
record_events(KEYS[1], 1)
return 1
"""
)

# A page of the trail, newest first: up to ARGV[3] events scored below ARGV[1] (exclusive; or
# '+inf') and at least ARGV[2] (the retention's start), of the type ARGV[4] ('' for any), each
# holding every text of ARGV[5 ..] (found as plain text, not a pattern). Reads in chunks, so a
# filtered page costs one round trip however far apart its events lie (the trail holds at most
# FILEHOST_AUDIT_MAX_EVENTS). Returns member, score, member, score, ...
_PAGE = """
local want = tonumber(ARGV[3])
local prefix = ARGV[4]
local top = ARGV[1]
local found = {}
local function holds_all(event)
  for j = 5, #ARGV do
    if not string.find(event, ARGV[j], 1, true) then
      return false
    end
  end
  return true
end
while #found < want * 2 do
  local chunk = redis.call('ZRANGE', KEYS[1], top, ARGV[2], 'BYSCORE', 'REV', 'LIMIT', 0, 256,
    'WITHSCORES')
  if #chunk == 0 then
    break
  end
  for i = 1, #chunk, 2 do
    if (prefix == '' or string.sub(chunk[i], 1, #prefix) == prefix) and holds_all(chunk[i]) then
      found[#found + 1] = chunk[i]
      found[#found + 1] = chunk[i + 1]
      if #found >= want * 2 then
        break
      end
    end
  end
  top = '(' .. chunk[#chunk]
end
return found
"""


def batch_args(batch: EventBatch) -> list[str | int]:
    """A batch as ``RECORD_EVENTS`` takes it, after the script's own arguments."""
    return [batch.at, batch.retention_ms, batch.max_events, *(member(e) for e in batch.events)]


def member(event: dict[str, Any]) -> str:
    return f"{event['type']}:" + orjson.dumps(event).decode()


def _field_text(name: str, value: str) -> str:
    """A field as ``member`` writes it into an event's JSON, ``"key_id":"key_…"``: found in a
    member only where that field has that value, since a quote inside a string value is
    escaped."""
    return orjson.dumps({name: value}).decode()[1:-1]


def _decode(raw: str, score: str) -> StoredEvent:
    kind, colon, body = raw.partition(":")
    try:
        event = orjson.loads(body)
        seq = int(float(score))
    except (orjson.JSONDecodeError, ValueError):
        raise CorruptRecord() from None
    if not colon or not isinstance(event, dict) or event.get("type") != kind:
        raise CorruptRecord()
    for name in ("id", "type"):
        if not isinstance(event.get(name), str):
            raise CorruptRecord()
    if not isinstance(event.get("at"), int):
        raise CorruptRecord()
    return StoredEvent(seq, event)


class AuditStore:
    """Reading and writing the accounts' audit trails over the service's Redis client."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self._record = redis.register_script(_RECORD)
        self._page = redis.register_script(_PAGE)

    async def record(self, user_id: str, batch: EventBatch) -> None:
        """Record the batch's events (in their order, one atomic step)."""
        if batch.events:
            await self._record(keys=[self.keys.account_audit(user_id)], args=batch_args(batch))

    async def matching(self, user_id: str, kind: str, containing: str) -> list[dict[str, Any]]:
        """Every event of ``kind`` whose JSON holds ``containing`` (``ZSCAN ... MATCH``: a
        start-up step's read, never a request's)."""
        found = []
        async for member, score in self._redis.zscan_iter(
            self.keys.account_audit(user_id), match=f"{kind}:*{containing}*", count=1000
        ):
            found.append(_decode(member, str(score)).event)
        return found

    async def page(
        self,
        user_id: str,
        limit: int,
        before: int | None,
        kind: str | None,
        since: int,
        holding: dict[str, str] | None = None,
    ) -> EventPage:
        """Up to ``limit`` events, newest first, scored below ``before``, recorded at or after
        ``since`` (ms), of type ``kind`` when given, and holding each field of ``holding`` with
        its value, at any depth (a key as the event's actor or its target alike)."""
        reply = await self._page(
            keys=[self.keys.account_audit(user_id)],
            args=[
                "+inf" if before is None else f"({before}",
                since * 1000,
                limit + 1,  # one more than asked tells whether another page follows
                f"{kind}:" if kind else "",
                *(_field_text(name, value) for name, value in (holding or {}).items()),
            ],
        )
        events = [_decode(reply[i], reply[i + 1]) for i in range(0, len(reply), 2)]
        more = len(events) > limit
        events = events[:limit]
        next_cursor = encode_event_cursor(events[-1].seq) if more and events else None
        return EventPage(events, next_cursor)
