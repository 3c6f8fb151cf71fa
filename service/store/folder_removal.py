"""Removing what a deletion detached, in bounded steps that a later run finishes when one is cut
short.

Why in steps: a recursive deletion may reach thousands of folders and files, more than one Lua
script should touch while Redis serves nobody else. So the deletion itself
(``FoldersStore.detach``) is one small script: it takes the subtree's top folder out of its
parent's indexes and marks it detached, which makes the whole subtree unreachable at once (every
script that reads a folder walks its parents and finds the mark) and lets nothing be added or
moved into it; and it lists the folder in the account's trash, ``P:{U}:folder-trash``.

What follows is ``remove_batch``, one script per step, each removing at most ``budget``
records: it walks down the subtree to a folder without child folders, removes up to the budget
of its files (their records, their places in the account's order and the folder's index), then
the folder itself once empty, and so on; the subtree's top goes last and leaves the trash with
it. Each record removed is added, in the same step, to ``P:{U}:removed``: its bytes (a file's)
and its aliases still have to go, which happens outside Redis (``service.auth.removals``), after
which ``forget`` takes it off. Whoever runs a step removes exactly what that step returned, so
two workers finishing one account at once share the work and never both claim a record.

What finishes an interrupted removal (a worker killed mid-way, Redis unreachable, a client gone
before the answer): the next folder change on the account (its script says whether anything is
pending), and the next start of any worker, which visits the accounts listed in the global set
``P:folder-removals`` (an account is listed before its folder is detached, and taken off once a
run finds nothing left). A record removed before its bytes is never served again, and its bytes
are removed by whichever run comes next. The subtree's folders still count towards the
account's folder limit until removed; a creation refused for the limit finishes the removal and
tries once more.

Run against the account's keys only (one hash tag), plus the global set of accounts; the keys of
a subtree's folders are named inside the script from the prefixes ``service.store.keys`` makes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from redis.asyncio import Redis

from service.store.folders import FOLDERS_LUA
from service.store.keys import RedisKeys

# One step of removing a detached subtree (see the module). KEYS: folders, trash, removed, files,
# file order. ARGV: the subtree's top, budget, children, heights and files prefixes. Returns
# {1 when the subtree is gone, then the ids removed}.
_REMOVE_BATCH = (
    FOLDERS_LUA
    + """
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  return {1}
end
local budget = tonumber(ARGV[2])
local children, heights, files = ARGV[3], ARGV[4], ARGV[5]
local removed = {0}
while budget > 0 do
  local f, parent, member = ARGV[1], nil, nil
  for _ = 1, WALK_GUARD do
    local first = redis.call('ZRANGE', children .. f, 0, 0)
    if not first[1] then
      break
    end
    parent, member = f, first[1]
    f = string.sub(member, string.find(member, NUL, 1, true) + 1)
  end
  local index = files .. f
  local positions = redis.call('ZRANGE', index, 0, budget - 1)
  for _, position in ipairs(positions) do
    local file_id = string.sub(position, 15)
    local record = redis.call('HGET', KEYS[4], file_id)
    if record then
      redis.call('HDEL', KEYS[4], file_id)
      redis.call('ZREM', KEYS[5], record)
    end
    redis.call('ZREM', index, position)
    redis.call('SADD', KEYS[3], file_id)
    removed[#removed + 1] = file_id
  end
  budget = budget - #positions
  if budget <= 0 then
    break
  end
  redis.call('HDEL', KEYS[1], f)
  redis.call('DEL', children .. f, heights .. f, index)
  redis.call('SADD', KEYS[3], f)
  removed[#removed + 1] = f
  budget = budget - 1
  if f == ARGV[1] then
    redis.call('SREM', KEYS[2], f)
    removed[1] = 1
    return removed
  end
  redis.call('ZREM', children .. parent, member)
end
return removed
"""
)


class FolderRemovalStore:
    """The trash, the removed records' leftovers and the accounts to visit, over Redis."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self._remove_batch = redis.register_script(_REMOVE_BATCH)

    async def expect(self, user_id: str) -> None:
        """List the account among those to visit at start-up: before anything is detached."""
        await self._redis.sadd(self.keys.folder_removals, user_id)

    async def trash(self, user_id: str) -> list[str]:
        """The tops of the account's detached subtrees still being removed."""
        return sorted(await self._redis.smembers(self.keys.folder_trash(user_id)))

    async def remove_batch(self, user_id: str, top: str, budget: int) -> tuple[bool, list[str]]:
        """One step of removing the detached subtree under ``top``: (whether it is gone, the
        ids of the files and folders this step removed)."""
        keys = [
            self.keys.account_folders(user_id),
            self.keys.folder_trash(user_id),
            self.keys.account_removed(user_id),
            self.keys.account_files(user_id),
            self.keys.account_file_order(user_id),
        ]
        args = [
            top,
            budget,
            self.keys.folder_children_prefix(user_id),
            self.keys.folder_heights_prefix(user_id),
            self.keys.folder_files_prefix(user_id),
        ]
        found = await self._remove_batch(keys=keys, args=args)
        return found[0] == 1, list(found[1:])

    async def leftovers(self, user_id: str, count: int) -> AsyncIterator[list[str]]:
        """The ids of removed records whose bytes or aliases may still be there, ``count`` or
        so at a time, each once (a snapshot's worth: ids added meanwhile may be left out)."""
        cursor = 0
        while True:
            cursor, ids = await self._redis.sscan(
                self.keys.account_removed(user_id), cursor, count=count
            )
            if ids:
                yield sorted(ids)
            if cursor == 0:
                return

    async def note(self, user_id: str, ids: list[str]) -> None:
        """Note these removed records' leftovers to remove later, and the account to visit."""
        if ids:
            await self._redis.sadd(self.keys.account_removed(user_id), *ids)
            await self.expect(user_id)

    async def backing_up(self) -> bool:
        """Whether a backup is copying the files' bytes now (``BackupStore.mark_backing_up``):
        then no bytes are removed, only noted."""
        return bool(await self._redis.exists(self.keys.backup_marker))

    async def forget(self, user_id: str, ids: list[str]) -> None:
        """The leftovers of these removed records are gone."""
        if ids:
            await self._redis.srem(self.keys.account_removed(user_id), *ids)

    async def pending(self, user_id: str) -> bool:
        """Whether the account has a removal to finish."""
        return bool(
            await self._redis.exists(
                self.keys.folder_trash(user_id), self.keys.account_removed(user_id)
            )
        )

    async def accounts(self) -> list[str]:
        """The accounts that may have a removal to finish."""
        return sorted(await self._redis.smembers(self.keys.folder_removals))

    async def settle(self, user_id: str) -> None:
        """Take the account off the list to visit once it has nothing pending. (Not atomic
        with a deletion starting meanwhile, which is then finished by the account's next
        folder change rather than at start-up.)"""
        if not await self.pending(user_id):
            await self._redis.srem(self.keys.folder_removals, user_id)
