"""Vanity aliases in Redis: each alias's entry, found by its slug alone, and each account's index
of its aliases. Knows nothing of HTTP or of who asks (``service.auth.aliases``).

**The entry is the alias.** ``P:alias:<slug in lower case>`` (a hash, ``service.store.keys``)
holds everything the public path needs: the owner, the alias id, the target, the views and,
only when set, the view limit, the expiry, the password's bcrypt hash, whether it is disabled,
and whether the account's public aliases are switched off. So ``GET /a/{slug}`` resolves the
slug and counts its view in one script on one key (``service.store.alias_views``): one round
trip, valid on a Redis Cluster because it names one key.

**Why the entry carries the kill switch and stands for its target.** The slug namespace is the
whole service's, so an entry cannot carry its account's hash tag ``{U}``: on a cluster it lives
in a slot of its own, and no script may read it together with the account's settings or its
files and folders. Whatever decides that an alias may not be used must therefore be on the entry
itself. The account's ``public_aliases_enabled`` is copied onto every entry of the account
(``k``) when it changes, a walk of the account's index (bounded: ``FILEHOST_MAX_ALIASES_PER_
ACCOUNT``) noted in ``P:alias-switches`` before it starts and taken off once a walk found the
entries as the setting says, so a walk cut short is finished at the next start. A target's
existence is the entry's existence: deleting a file, a folder or a subtree deletes its aliases
(``Removals.purge``), and so does deleting the account. What reads the target afterwards (the
file's record for its name and type, a folder's listing) still checks it, so a deletion racing a
download never serves what is gone.

**The account's index.** ``P:{U}:aliases`` is a sorted set of ``<target id>:<slug>`` scored by
when the alias was made (the id carries that time, ``domain.aliases.alias_created_at``):
``ZRANGE … BYSCORE REV`` pages it newest first, an id finds its member by its score, a target's
aliases are the members it starts (deletions scan the index, bounded), and its size is the count
the bound holds. Costs are in ``docs/performance.md``.

**Changes that touch both.** An entry and its account's index are in different slots, so a
change is several scripts, ordered so that an entry never exists without a member of its
account's index naming it (an entry nobody could list, delete or purge with its target):

- creating: (1) the account's script checks the account, the bound and that the target is live,
  adds the member (noted in ``P:{U}:alias-pending`` while under way), reads the kill switch and
  records ``alias.created``; (2) the entry is claimed, if its slug is free (else (1) is undone
  and its event taken back: 409); (3) the account's script checks again that the member and the
  account are still there (a target deleted or an account deleted between (1) and (2) has
  already purged the member: the entry is then deleted) and reads the kill switch again (a walk
  between (1) and (2) could not see the entry: its value is set now);
- changing a slug: (1) the new member is added (pending) beside the old, with the event; (2) the
  entry is copied under the new slug, if free; (3) the old entry goes; (4) the old member;
- changing other fields: the account's script records the event while the member is there, then
  the entry is changed (compare-and-set on its alias id); refused there, the event is taken back;
- deleting (by its owner, with its target, with the account): the entry first, then the member
  (with ``alias.deleted`` in that script).

So a step cut short leaves, at worst, a member without its entry: never served, never listed,
removed by the next listing that meets it unless a change noted as pending in the last minute
may still be writing it. An audit event is recorded in the account's script of the step that
admits the change, never after it: a change cut short may leave its event, never a change
without one.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from service.domain.aliases import Listed, alias_created_at, index_member, member_parts
from service.domain.audit_events import EventBatch
from service.domain.records import AliasRecord
from service.errors import CorruptRecord
from service.store.alias_entries import AliasEntries, entry_fields, entry_of
from service.store.audit import RECORD_EVENTS, batch_args, member
from service.store.folders import FOLDERS_LUA
from service.store.keys import RedisKeys

# Step (1) of a creation: -1 the account is gone, -2 the bound is reached, -3 the target is not
# live; else {1, the kill switch (1: the account's public aliases are off)}. KEYS: user, index,
# pending, files, folders, settings[, audit trail]. ARGV: member, created ms, target, max
# aliases, now ms[, events].
_ADD = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0}
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return {-2, 0}
end
local target = ARGV[3]
if string.sub(target, 1, 4) == 'fil_' then
  if redis.call('HEXISTS', KEYS[4], target) == 0 then
    return {-3, 0}
  end
elseif not lineage(KEYS[5], target) then
  return {-3, 0}
end
if KEYS[7] then
  record_events(KEYS[7], 6)
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
local off = 0
if redis.call('HGET', KEYS[6], 'public_aliases_enabled') == '0' then
  off = 1
end
return {1, off}
"""
)

# The last step of a change that added a member: whether the account (-1 gone) and the member
# scored ARGV[2] (0 gone) are still there (1), and the kill switch; the member is no longer
# pending. Returns {outcome, off}. KEYS: user, index, pending, settings. ARGV: member, created ms.
_CONFIRM = """
redis.call('HDEL', KEYS[3], ARGV[1])
local off = 0
if redis.call('HGET', KEYS[4], 'public_aliases_enabled') == '0' then
  off = 1
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, off}
end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return {0, off}
end
return {1, off}
"""

# Takes members out of the index (when each is still scored as read), recording events in the
# same step (a deletion's) or taking events back (a change refused after its event). KEYS:
# index, pending[, audit trail]. ARGV: n, then n members and their scores, then 'record' and
# events, or 'retract' and the events' members.
_REMOVE_MEMBERS = (
    RECORD_EVENTS
    + """
local n = tonumber(ARGV[1])
local first = 2 * n + 2
if KEYS[3] then
  if ARGV[first] == 'record' then
    record_events(KEYS[3], first + 1)
  else
    for i = first + 1, #ARGV do
      redis.call('ZREM', KEYS[3], ARGV[i])
    end
  end
end
for i = 2, 2 * n, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
  redis.call('HDEL', KEYS[2], ARGV[i])
end
return 1
"""
)

# Admits a change of an alias whose member is in the index (scored ARGV[2]): records its events,
# and with a new member (a new slug), adds it as pending. Returns 1, or 0 when the member is
# gone. KEYS: index, pending[, audit trail]. ARGV: member, created ms, new member ('' none), now
# ms[, events].
_ADMIT = (
    RECORD_EVENTS
    + """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
if KEYS[3] then
  record_events(KEYS[3], 5)
end
if ARGV[3] ~= '' then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
return 1
"""
)

# A page of the index, newest first: up to ARGV[3] members with their scores after the position
# (score ARGV[1], member ARGV[2]; '' for the first page): after the member itself while it is
# still there as it was, else after its score. KEYS: index.
_PAGE = """
local want = tonumber(ARGV[3])
if ARGV[2] == '' then
  return redis.call('ZRANGE', KEYS[1], '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, want,
    'WITHSCORES')
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if score and tonumber(score) == tonumber(ARGV[1]) then
  local rank = redis.call('ZREVRANK', KEYS[1], ARGV[2])
  return redis.call('ZRANGE', KEYS[1], rank + 1, rank + want, 'REV', 'WITHSCORES')
end
return redis.call('ZRANGE', KEYS[1], '(' .. ARGV[1], '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, want,
  'WITHSCORES')
"""

# The members naming any of the targets ARGV[1..], with their scores. KEYS: index.
_OF_TARGETS = """
local wanted = {}
for _, target in ipairs(ARGV) do
  wanted[target] = true
end
local found = {}
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  if wanted[string.sub(all[i], 1, 26)] then
    found[#found + 1] = all[i]
    found[#found + 1] = all[i + 1]
  end
end
return found
"""


# The members naming the target ARGV[1] (a file's or folder's id: no glob character), with
# their scores, maybe more than once. ZSCAN's MATCH walks the index in the server's own code:
# 0.9 ms for an index of 10,000 members (the default bound), 29 ms for 100,000, against 4 and
# 128 ms for _OF_TARGETS's walk in Lua. KEYS: index.
_OF_TARGET = """
local found = {}
local cursor = '0'
repeat
  local reply = redis.call('ZSCAN', KEYS[1], cursor, 'MATCH', ARGV[1] .. ':*', 'COUNT', 1000)
  cursor = reply[1]
  for _, item in ipairs(reply[2]) do
    found[#found + 1] = item
  end
until cursor == '0'
return found
"""


class AliasStore:
    """The accounts' indexes of their aliases, and their aliases' entries (``entries``), over
    the service's Redis client."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self.entries = AliasEntries(redis, keys)
        self._add = redis.register_script(_ADD)
        self._confirm = redis.register_script(_CONFIRM)
        self._remove_members = redis.register_script(_REMOVE_MEMBERS)
        self._admit = redis.register_script(_ADMIT)
        self._page = redis.register_script(_PAGE)
        self._of_targets = redis.register_script(_OF_TARGETS)
        self._of_target = redis.register_script(_OF_TARGET)

    # -- creating ------------------------------------------------------------------------------

    async def add(
        self,
        user_id: str,
        record: AliasRecord,
        max_aliases: int,
        now: int,
        events: EventBatch | None = None,
    ) -> tuple[int, bool]:
        """Step (1) of a creation (see the module): (1, the kill switch) when the member is
        added, else (-1 account gone | -2 bound reached | -3 target not live, False)."""
        keys = [
            self.keys.user(user_id),
            self.keys.account_aliases(user_id),
            self.keys.account_alias_pending(user_id),
            self.keys.account_files(user_id),
            self.keys.account_folders(user_id),
            self.keys.account_settings(user_id),
        ]
        args: list[str | int] = [
            index_member(record.target_id, record.slug),
            record.created_at,
            record.target_id,
            max_aliases,
            now,
        ]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        outcome, off = await self._add(keys=keys, args=args)
        return int(outcome), bool(off)

    async def claim(
        self, user_id: str, record: AliasRecord, password_hash: str | None, off: bool
    ) -> bool:
        """Step (2): the entry, unless its slug (ignoring case) is an alias's already."""
        return await self.entries.claim(
            record.slug, entry_fields(user_id, record, password_hash, off)
        )

    async def confirm(self, user_id: str, value: str, created_at: int) -> tuple[int, bool]:
        """Step (3): (1 when the account and the member are still there, -1 the account is
        gone, 0 the member is; the kill switch)."""
        keys = [
            self.keys.user(user_id),
            self.keys.account_aliases(user_id),
            self.keys.account_alias_pending(user_id),
            self.keys.account_settings(user_id),
        ]
        there, off = await self._confirm(keys=keys, args=[value, created_at])
        return int(there), bool(off)

    # -- reading -------------------------------------------------------------------------------

    async def _listed(self, members: list[tuple[str, int]]) -> list[Listed]:
        """These members (value, score), each with its entry: one pipelined round trip."""
        parts = [member_parts(value) for value, _ in members]
        found = await self.entries.read([slug for _, slug in parts])
        return [
            Listed(value, score, entry_of(values, slug, target_id, score))
            for (value, score), (target_id, slug), values in zip(members, parts, found, strict=True)
        ]

    async def page(
        self, user_id: str, limit: int, after: tuple[int, str] | None
    ) -> tuple[list[Listed], tuple[int, str] | None]:
        """Up to ``limit`` members of the index, newest first, after the position ``after``,
        each with its entry (two round trips: the page, then its entries), and the position
        of the next page's start when there is one."""
        args: list[str | int] = ["", "", limit + 1] if after is None else [*after, limit + 1]
        found = await self._page(keys=[self.keys.account_aliases(user_id)], args=args)
        members = [(found[i], _score(found[i + 1])) for i in range(0, len(found), 2)]
        more = len(members) > limit
        members = members[:limit]
        last = (members[-1][1], members[-1][0]) if more else None
        return await self._listed(members), last

    async def page_of_target(
        self, user_id: str, target_id: str, limit: int, after: tuple[int, str] | None
    ) -> tuple[list[Listed], tuple[int, str] | None]:
        """``page``, of the members naming ``target_id`` only: a walk of the index (bounded by
        the aliases an account may hold, as a deletion's ``members_of``; no index by target to
        keep in step), then the page's entries."""
        found = await self._of_target(keys=[self.keys.account_aliases(user_id)], args=[target_id])
        members = sorted(
            {(_score(found[i + 1]), found[i]) for i in range(0, len(found), 2)}, reverse=True
        )
        if after is not None:
            members = [position for position in members if position < after]
        more = len(members) > limit
        members = members[:limit]
        last = members[-1] if more else None
        return await self._listed([(value, score) for score, value in members]), last

    async def find(self, user_id: str, alias_id: str) -> Listed | None:
        """The alias with this id, as its index member and entry; None when there is none."""
        created = alias_created_at(alias_id)
        if created is None:
            return None
        found = await self._redis.zrange(
            self.keys.account_aliases(user_id), created, created, byscore=True, withscores=True
        )
        listed = await self._listed([(value, _score(score)) for value, score in found])
        for candidate in listed:
            entry = candidate.entry
            if entry is not None and entry.record.id == alias_id and entry.user_id == user_id:
                return candidate
        return None

    async def members_of(self, user_id: str, target_ids: list[str]) -> list[Listed]:
        """The members naming any of these targets, each with its entry (or None)."""
        if not target_ids:
            return []
        found = await self._of_targets(keys=[self.keys.account_aliases(user_id)], args=target_ids)
        return await self._listed(
            [(found[i], _score(found[i + 1])) for i in range(0, len(found), 2)]
        )

    async def pending_since(self, user_id: str, values: list[str]) -> list[int | None]:
        """When each member was noted as under way (None: it is not)."""
        if not values:
            return []
        found = await self._redis.hmget(self.keys.account_alias_pending(user_id), values)
        return [None if raw is None else int(raw) for raw in found]

    async def count(self, user_id: str) -> int:
        return int(await self._redis.zcard(self.keys.account_aliases(user_id)))

    # -- changing ------------------------------------------------------------------------------

    async def admit(
        self,
        user_id: str,
        value: str,
        created_at: int,
        new_value: str | None,
        now: int,
        events: EventBatch | None,
    ) -> bool:
        """The account's step of a change (see the module): False when the member is gone."""
        keys = [self.keys.account_aliases(user_id), self.keys.account_alias_pending(user_id)]
        args: list[str | int] = [value, created_at, new_value or "", now]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        return bool(await self._admit(keys=keys, args=args))

    async def remove_members(
        self,
        user_id: str,
        members: list[tuple[str, int]],
        events: EventBatch | None = None,
        *,
        retract: EventBatch | None = None,
    ) -> None:
        """Take members (value, score) out of the index, recording ``events`` in the same
        step, or taking back the events of ``retract``."""
        keys = [self.keys.account_aliases(user_id), self.keys.account_alias_pending(user_id)]
        args: list[str | int] = [len(members)]
        for value, score in members:
            args += [value, score]
        if retract is not None:
            keys.append(self.keys.account_audit(user_id))
            args += ["retract", *(member(event) for event in retract.events)]
        elif events is not None:
            keys.append(self.keys.account_audit(user_id))
            args += ["record", *batch_args(events)]
        await self._remove_members(keys=keys, args=args)

    # -- the kill switch -----------------------------------------------------------------------

    async def expect_switch(self, user_id: str) -> None:
        """Note the account among those whose entries may not carry its setting yet."""
        await self._redis.sadd(self.keys.alias_switches, user_id)

    async def switch_all(self, user_id: str, off: bool, batch: int = 500) -> None:
        """Set every entry of the account's aliases to the kill switch ``off``, a batch of
        the index at a time (entries added meanwhile are set by their own creation)."""
        index = self.keys.account_aliases(user_id)
        start = 0
        while True:
            values = await self._redis.zrange(index, start, start + batch - 1)
            if values:
                slugs = [member_parts(value)[1] for value in values]
                await self.entries.switch_many(slugs, user_id, off)
            if len(values) < batch:
                return
            start += batch

    async def switched(self, user_id: str) -> None:
        """The account's entries carry its setting."""
        await self._redis.srem(self.keys.alias_switches, user_id)

    async def switch_pending(self, user_id: str) -> bool:
        """Whether the account's entries may not carry its setting yet."""
        return bool(await self._redis.sismember(self.keys.alias_switches, user_id))

    async def switching(self) -> list[str]:
        """The accounts whose entries may not carry their setting yet."""
        return sorted(await self._redis.smembers(self.keys.alias_switches))

    async def switch_setting(self, user_id: str) -> bool:
        """Whether the account's public aliases are switched off, as its settings say."""
        value = await self._redis.hget(
            self.keys.account_settings(user_id), "public_aliases_enabled"
        )
        return value == "0"

    # -- an account's deletion -----------------------------------------------------------------

    async def delete_account(self, user_id: str, batch: int = 500) -> None:
        """Delete every entry of the account's aliases, then its index: after the user record,
        so that no alias can be made meanwhile (a creation checks the account last)."""
        index = self.keys.account_aliases(user_id)
        while True:
            values = await self._redis.zrange(index, 0, batch - 1)
            if not values:
                break
            await self.entries.delete_many([member_parts(value)[1] for value in values], user_id)
            await self._redis.zrem(index, *values)
        await self._redis.delete(index, self.keys.account_alias_pending(user_id))
        await self._redis.srem(self.keys.alias_switches, user_id)


def _score(raw: Any) -> int:
    try:
        return int(float(raw))
    except (TypeError, ValueError):
        raise CorruptRecord() from None
