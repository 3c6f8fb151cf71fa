"""Counters with a window in Redis: login attempts per email and per address, and leak reports
per address. Each count is checked and made in one script, so a bound holds however many
requests race on however many workers; a counter never lives without an expiry."""

from __future__ import annotations

from redis.asyncio import Redis

from service.store.fields import int_field
from service.store.keys import RedisKeys

# Reserves one login attempt on one failure counter before any password work, or refuses it:
# the check and the count are one step, so however many logins run at once on however many
# workers, no more than the limit get past it in a window. Returns 0 when reserved, else the
# milliseconds left in the window. The window starts with the first reservation; a counter can
# never be left without an expiry (which would lock its email or address out for good).
# KEYS: counter. ARGV: limit, window ms.
_RESERVE_ATTEMPT = """
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count >= tonumber(ARGV[1]) then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    ttl = tonumber(ARGV[2])
  end
  return math.max(ttl, 1)
end
count = redis.call('INCR', KEYS[1])
if count == 1 or redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Gives one reservation back (a login that was refused elsewhere, never reached its password
# check, or succeeded). Never below zero, never creates a counter, keeps the window's expiry.
_RELEASE_ATTEMPT = """
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count <= 0 then
  return 0
end
return redis.call('DECR', KEYS[1])
"""


class CounterStore:
    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self._keys = keys
        self._reserve_attempt = redis.register_script(_RESERVE_ATTEMPT)
        self._release_attempt = redis.register_script(_RELEASE_ATTEMPT)

    # The counters' names: what the policy reserves, releases and clears.

    def login_failures_by_email(self, email_digest: str) -> str:
        return self._keys.login_failures_by_email(email_digest)

    def login_failures_by_address(self, address: str) -> str:
        return self._keys.login_failures_by_address(address)

    def leak_reports_by_address(self, address: str) -> str:
        return self._keys.leak_reports_by_address(address)

    def sso_starts_by_address(self, address: str) -> str:
        return self._keys.sso_starts_by_address(address)

    def alias_guesses_by_alias_address(self, alias_id: str, address: str) -> str:
        return self._keys.alias_guesses_by_alias_address(alias_id, address)

    def alias_guesses_by_alias(self, alias_id: str) -> str:
        return self._keys.alias_guesses_by_alias(alias_id)

    def alias_guesses_by_address(self, address: str) -> str:
        return self._keys.alias_guesses_by_address(address)

    async def reserve(self, counters: list[tuple[str, int]], window_ms: int) -> list[int]:
        """Reserve one attempt on each ``(counter, limit)``, in one round trip: for each, 0 when
        reserved, else the milliseconds left in its window (refused; nothing counted there).

        Each counter is checked and counted in one script of its own (counters of an email and
        of an address live in different cluster slots), so each bound holds on its own however
        many logins run at once; the caller gives back what it reserved when another refused."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for counter, limit in counters:
                await self._reserve_attempt(keys=[counter], args=[limit, window_ms], client=pipe)
            replies = await pipe.execute()
        return [int_field(reply) for reply in replies]

    async def reserve_one(self, counter: str, limit: int, window_ms: int) -> int:
        """Count one attempt on ``counter`` unless ``limit`` were counted in its window (which
        starts with the first): 0 when counted, else the milliseconds left in the window. The
        login throttle's reservation, for other bounds per window (leak reports)."""
        return int_field(await self._reserve_attempt(keys=[counter], args=[limit, window_ms]))

    async def release(self, counters: list[str]) -> None:
        """Give back one reserved attempt on each counter (never below zero)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for counter in counters:
                await self._release_attempt(keys=[counter], client=pipe)
            await pipe.execute()

    async def clear(self, counter: str) -> None:
        await self.redis.delete(counter)
