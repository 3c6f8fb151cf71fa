"""What each key is doing: its requests and refusals per UTC day, and its last use, as the
workers' flushes add them up (``service.auth.key_usage``). Off the request path: a flush is one
pipeline a second per worker, a script per account in it (an account's keys share its slot).

A flush writes only for a key that is still listed, in the same script that checks it, so a
key revoked meanwhile gets no counts back; revoking a key deletes what was counted
(``forget``), and whatever a flush raced in before that expires with the counters' TTL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from redis.asyncio import Redis

from service.domain.key_usage import (
    KEPT_DAYS,
    KEPT_MS,
    KeyUsageRecord,
    KeyUseCount,
    UsageDay,
    day_of,
    days_up_to,
)
from service.errors import CorruptRecord
from service.store.fields import int_field
from service.store.keys import RedisKeys

# One account's counts of one flush. KEYS: the account's key listing, then per key its day's
# counters and its last use. ARGV: TTL ms, now ms, then per key: key id, requests, refused,
# address ('' when not known: the last address is left as it was).
_ADD_USAGE = """
local ttl = ARGV[1]
for i = 0, (#KEYS - 1) / 2 - 1 do
  local at = 3 + i * 4
  local key_id = ARGV[at]
  if redis.call('HEXISTS', KEYS[1], key_id) == 1 then
    local day = KEYS[2 + i * 2]
    if ARGV[at + 1] ~= '0' then
      redis.call('HINCRBY', day, 'r', ARGV[at + 1])
    end
    if ARGV[at + 2] ~= '0' then
      redis.call('HINCRBY', day, 'x', ARGV[at + 2])
    end
    redis.call('PEXPIRE', day, ttl)
    local address = ARGV[at + 3]
    if address == '' then
      local last = redis.call('GET', KEYS[3 + i * 2])
      if last then
        address = string.match(last, ' (.*)$') or ''
      end
    end
    redis.call('SET', KEYS[3 + i * 2], ARGV[2] .. ' ' .. address, 'PX', ttl)
  end
end
return 1
"""


class KeyUsageStore:
    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys
        self._add_usage = redis.register_script(_ADD_USAGE)

    async def add(self, counts: Mapping[str, Iterable[KeyUseCount]], now: int) -> None:
        """Add one flush's counts (user id -> its keys' counts) to the day ``now`` falls on,
        in one round trip; a key no longer listed is left out."""
        day = day_of(now)
        async with self.redis.pipeline(transaction=False) as pipe:
            for user_id, of_keys in counts.items():
                names = [self.keys.account_keys(user_id)]
                args: list[str | int] = [KEPT_MS, now]
                for key_id, requests, refused, address in of_keys:
                    names.append(self.keys.key_usage_day(user_id, key_id, day))
                    names.append(self.keys.key_usage_last(user_id, key_id))
                    args += [key_id, requests, refused, address or ""]
                await self._add_usage(keys=names, args=args, client=pipe)
            await pipe.execute()

    async def read(self, user_id: str, key_id: str, days: list[str]) -> KeyUsageRecord | None:
        """The key's counts on each of ``days`` (zeros for a day without any), its last use;
        None when the account has no such key. One round trip."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hexists(self.keys.account_keys(user_id), key_id)
            pipe.hget(self.keys.account_key_last_used(user_id), key_id)
            pipe.get(self.keys.key_usage_last(user_id, key_id))
            for day in days:
                pipe.hmget(self.keys.key_usage_day(user_id, key_id, day), ("r", "x"))
            listed, touched, last, *counts = await pipe.execute()
        if not listed:
            return None
        last_at, last_ip = _last_use(last)
        if touched is not None:  # written a minute apart; the later of the two is the truth
            last_at = max(last_at or 0, int_field(touched))
        return KeyUsageRecord(
            tuple(
                UsageDay(day, int(requests or 0), int(refused or 0))
                for day, (requests, refused) in zip(days, counts, strict=True)
            ),
            last_at,
            last_ip,
        )

    async def forget(self, user_id: str, key_ids: Iterable[str], now: int) -> None:
        """Delete what was counted for the keys: every day that may still be kept, and their
        last use."""
        days = days_up_to(now, KEPT_DAYS + 1)
        names = [
            name
            for key_id in key_ids
            for name in (
                self.keys.key_usage_last(user_id, key_id),
                *(self.keys.key_usage_day(user_id, key_id, day) for day in days),
            )
        ]
        # Bounded commands, all in the account's slot.
        for start in range(0, len(names), 300):
            await self.redis.delete(*names[start : start + 300])


def _last_use(value: object) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    text = value.decode() if isinstance(value, bytes) else str(value)
    at, _, address = text.partition(" ")
    if not at.isdigit():
        raise CorruptRecord()
    return int(at), address or None
