"""An account's platform settings in Redis: ``P:{U}:settings``, a hash of the settings changed from
their defaults (``service.domain.account_settings`` says how each value is written).

Knows nothing of HTTP or of what the settings mean. A change is compare-and-set on the values
the caller read, in one script that also checks a named default folder is a live folder of the
account (``service.store.folders``) and records the change's event, so what changed is exactly
what the event says. Deleting a folder resets the default folder setting in the script that
detaches it (``FoldersStore.detach``).
"""

from __future__ import annotations

from redis.asyncio import Redis

from service.domain.audit_events import EventBatch
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.folders import FOLDERS_LUA
from service.store.keys import RedisKeys

# Changes settings when every one the caller read still holds what it read: -1 the user is gone,
# 0 a value changed meanwhile, -2 the default folder named is not live, 1 done.
# KEYS: settings, folders, user[, audit trail]. ARGV: n, then n names and the values read ('' for
# unset), then m, then m names and new values ('' to unset)[, events (store.audit)].
_CHANGE = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + """
if redis.call('EXISTS', KEYS[3]) == 0 then
  return -1
end
local read = tonumber(ARGV[1])
for i = 2, 2 * read, 2 do
  if (redis.call('HGET', KEYS[1], ARGV[i]) or '') ~= ARGV[i + 1] then
    return 0
  end
end
local first = 2 * read + 2
local changes = tonumber(ARGV[first])
for i = first + 1, first + 2 * changes - 1, 2 do
  if ARGV[i] == 'default_folder_id' and ARGV[i + 1] ~= '' and
      not lineage(KEYS[2], ARGV[i + 1]) then
    return -2
  end
end
if KEYS[4] then
  record_events(KEYS[4], first + 2 * changes + 1)
end
for i = first + 1, first + 2 * changes - 1, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[1], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 1
"""
)


class AccountSettingsStore:
    """The accounts' settings over the service's Redis client."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self._change = redis.register_script(_CHANGE)

    async def read(self, user_id: str) -> dict[str, str]:
        """The stored values (the settings changed from their defaults)."""
        return await self._redis.hgetall(self.keys.account_settings(user_id))

    async def read_one(self, user_id: str, name: str) -> str | None:
        return await self._redis.hget(self.keys.account_settings(user_id), name)

    async def change(
        self,
        user_id: str,
        read: dict[str, str],
        changes: dict[str, str | None],
        names: tuple[str, ...],
        events: EventBatch | None = None,
    ) -> int:
        """Write ``changes`` (None: back to the default) if each of ``names`` still holds what
        ``read`` says (absent: unset); one of ``DONE``, ``CHANGED``, ``ACCOUNT_GONE``,
        ``FOLDER_GONE``."""
        keys = [
            self.keys.account_settings(user_id),
            self.keys.account_folders(user_id),
            self.keys.user(user_id),
        ]
        args: list[str | int] = [len(names)]
        for name in names:
            args += [name, read.get(name, "")]
        args.append(len(changes))
        for name, value in changes.items():
            args += [name, value or ""]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        return int(await self._change(keys=keys, args=args))
