"""An alias's entry, ``P:alias:<slug in lower case>``: what it holds, how it is read, and the
scripts that write one entry each (one key, so valid on a cluster). Which change writes which,
in which order with the account's index, is ``service.store.aliases``; the public side's use of
an entry is ``service.store.alias_views``. Knows nothing of HTTP.

Fields (``service.store.keys``): ``u`` user and ``i`` alias (their ids without ``usr_`` and
``als_``: every entry holds both, and the prefixes say nothing), ``t`` target; only when set:
``v`` views, ``m`` max views, ``e`` expiry (ms), ``p`` the password's bcrypt hash, ``x``
disabled, ``k`` the account's public aliases switched off, ``z`` moving to another slug (not
served meanwhile). Only what is set is stored: an alias without limits is four small fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from redis.asyncio import Redis

from service.domain.aliases import AliasEntry, alias_created_at
from service.domain.records import AliasRecord
from service.errors import CorruptRecord
from service.store.keys import RedisKeys

# An entry's fields, in this order wherever they are read (``HMGET``).
ENTRY_FIELDS = ("u", "i", "t", "v", "m", "e", "p", "x", "k", "z")

# Claims a slug's entry: 0 when the slug is an alias's already, else writes the fields and 1.
# KEYS: entry. ARGV: field, value, field, value, ...
_CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""

# Changes an entry's fields when it is still alias ARGV[1]'s: 1, else 0. KEYS: entry. ARGV:
# alias id (stored form), then field, value ('' to remove it), ...
_CHANGE_ENTRY = """
if redis.call('HGET', KEYS[1], 'i') ~= ARGV[1] then
  return 0
end
for i = 2, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[1], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 1
"""

# Stops an entry still alias ARGV[1]'s from serving while it moves to a new slug (``z``) and
# returns its fields, field, value, ...; nil when it is not that alias's. KEYS: entry.
_FREEZE = """
if redis.call('HGET', KEYS[1], 'i') ~= ARGV[1] then
  return nil
end
redis.call('HSET', KEYS[1], 'z', '1')
return redis.call('HGETALL', KEYS[1])
"""

# Deletes an entry when it is still user ARGV[1]'s and, unless ARGV[2] is '', alias ARGV[2]'s
# (or target ARGV[3]'s, unless ''): 1 deleted, 0 not (gone, or another's). KEYS: entry.
_DELETE_ENTRY = """
local found = redis.call('HMGET', KEYS[1], 'u', 'i', 't')
if found[1] ~= ARGV[1] then
  return 0
end
if (ARGV[2] ~= '' and found[2] ~= ARGV[2]) or (ARGV[3] ~= '' and found[3] ~= ARGV[3]) then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
"""

# Sets or clears an entry's kill switch when it is still user ARGV[1]'s. KEYS: entry.
# ARGV: user (stored form), '1' off / '0' on.
_SWITCH = """
if redis.call('HGET', KEYS[1], 'u') ~= ARGV[1] then
  return 0
end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'k', '1')
else
  redis.call('HDEL', KEYS[1], 'k')
end
return 1
"""


def stored_id(prefixed: str) -> str:
    """An id as an entry holds it: without its ``usr_`` or ``als_``."""
    return prefixed[4:]


def _number(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise CorruptRecord()
    return int(raw)


def entry_of(values: list[Any], slug: str, target_id: str, created_at: int) -> AliasEntry | None:
    """The entry's fields (``ENTRY_FIELDS``) as read for a member (its slug, target and score);
    None when there is none or it is another's (another alias, another target)."""
    user, alias, target, views, max_views, expires, password, disabled, off, moving = values
    if user is None or target != target_id or alias is None:
        return None
    alias_id = "als_" + alias
    if alias_created_at(alias_id) != created_at:
        return None
    record = AliasRecord(
        id=alias_id,
        slug=slug,
        target_id=target_id,
        created_at=created_at,
        expires_at=_number(expires),
        max_views=_number(max_views),
        views=_number(views) or 0,
        password_protected=password is not None,
        enabled=disabled is None and moving is None,
    )
    return AliasEntry("usr_" + user, record, password, off is not None)


def entry_fields(user_id: str, record: AliasRecord, password_hash: str | None, off: bool) -> dict:
    """A new entry's fields (only those set)."""
    fields: dict[str, str | int] = {
        "u": stored_id(user_id),
        "i": stored_id(record.id),
        "t": record.target_id,
    }
    if record.views:
        fields["v"] = record.views
    if record.max_views is not None:
        fields["m"] = record.max_views
    if record.expires_at is not None:
        fields["e"] = record.expires_at
    if password_hash is not None:
        fields["p"] = password_hash
    if not record.enabled:
        fields["x"] = "1"
    if off:
        fields["k"] = "1"
    return fields


class AliasEntries:
    """The entries, one script per entry, over the service's Redis client."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self._claim = redis.register_script(_CLAIM)
        self._change = redis.register_script(_CHANGE_ENTRY)
        self._freeze = redis.register_script(_FREEZE)
        self._delete = redis.register_script(_DELETE_ENTRY)
        self._switch = redis.register_script(_SWITCH)

    def name(self, slug: str) -> str:
        return self.keys.alias_entry(slug.lower())

    async def claim(self, slug: str, fields: Mapping[str, str | int]) -> bool:
        """An entry under ``slug`` holding ``fields``, unless the slug (ignoring case) is an
        alias's already."""
        args = [part for pair in fields.items() for part in pair]
        return bool(await self._claim(keys=[self.name(slug)], args=args))

    async def read(self, slugs: list[str]) -> list[list[Any]]:
        """The fields (``ENTRY_FIELDS``) of each slug's entry, in one pipelined round trip (each
        entry in its own slot on a cluster)."""
        if not slugs:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for slug in slugs:
                pipe.hmget(self.name(slug), ENTRY_FIELDS)
            return await pipe.execute()

    async def change(self, slug: str, alias_id: str, changes: dict[str, str | None]) -> bool:
        """Set (or, for None, remove) fields of an entry still alias ``alias_id``'s."""
        args = [stored_id(alias_id)]
        for field, value in changes.items():
            args += [field, "" if value is None else value]
        return bool(await self._change(keys=[self.name(slug)], args=args))

    async def freeze(self, slug: str, alias_id: str) -> dict[str, str] | None:
        """Stop the entry of alias ``alias_id`` from serving (it moves to another slug) and
        return its fields; None when the entry is not that alias's."""
        found = await self._freeze(keys=[self.name(slug)], args=[stored_id(alias_id)])
        if found is None:
            return None
        return dict(zip(found[0::2], found[1::2], strict=True))

    async def delete(
        self, slug: str, user_id: str, alias_id: str | None = None, target_id: str | None = None
    ) -> bool:
        """Delete an entry still the user's (and alias ``alias_id``'s, target ``target_id``'s)."""
        args = [stored_id(user_id), stored_id(alias_id) if alias_id else "", target_id or ""]
        return bool(await self._delete(keys=[self.name(slug)], args=args))

    async def delete_many(self, slugs: list[str], user_id: str) -> None:
        """Delete the entries of these slugs that are the user's, in one pipelined round trip."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for slug in slugs:
                await self._delete(
                    keys=[self.name(slug)], args=[stored_id(user_id), "", ""], client=pipe
                )
            await pipe.execute()

    async def switch_many(self, slugs: list[str], user_id: str, off: bool) -> None:
        """Set the kill switch of the entries of these slugs that are the user's."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for slug in slugs:
                await self._switch(
                    keys=[self.name(slug)],
                    args=[stored_id(user_id), "1" if off else "0"],
                    client=pipe,
                )
            await pipe.execute()
