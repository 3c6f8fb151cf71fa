"""How a key's digest entries follow its listing metadata ("Changing a key" below): reading the
metadata, changing it by compare-and-set, and writing, creating and deleting the entries it
names. ``service.store.api_keys`` builds edits, rolls and revocations on these steps.
"""

from __future__ import annotations

from typing import Any

import orjson
from redis.asyncio import Redis

from service.domain.audit_events import EventBatch
from service.domain.outcomes import GONE_REPLACED
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.fields import (
    KEY_EXPIRED_GRACE_MS,
    KEY_GONE_MS,
    decode_key_metadata,
    int_field,
    key_entry_fields,
)
from service.store.folders import FOLDERS_LUA
from service.store.keys import RedisKeys

# Changing a key: edit, roll, revoke. A key's listing metadata (in the account's slot) is the
# truth; its digest entries (the current secret's ``d``, and during a roll's grace the previous
# secret's ``pd`` until ``pe``) are copies of it for the per-request lookup, each stamped with the
# version ``v`` of the metadata it was written from. A change is
#   (a) a compare-and-set of the metadata (``_CHANGE_KEY``): from exactly what was read, else read
#       again and retry; the change's audit events are recorded in this same step;
#   (b) the entries the new metadata names written from it (``_WRITE_KEY_ENTRY``, one per entry,
#       each in a slot of its own): a write never replaces a later version and never creates an
#       entry, so writes arriving late or out of order leave the latest version in place, and an
#       entry once deleted stays deleted; a previous secret whose grace is over is deleted;
# and the change answers only after (b). So once a change has answered, the next request on any
# worker reads its version or a later one: a change whose (a) came later writes later versions,
# one whose (a) came earlier loses to them.
# A change that fails after its (a) (a 503) leaves entries behind the metadata until the next
# change of the key; retrying it is such a change, even when it finds nothing left to change (its
# (b) alone, which writes nothing to entries that are up to date).
# A roll is the one write that creates an entry: the new secret's, after its (a) (which marks the
# metadata ``rolling``), then confirmed by ``_CONFIRM_ROLL`` (the user and the key still exist),
# then finished by a second change from the metadata as it is then, which clears ``rolling`` and
# whose (b) writes every entry, the new one included: a change whose (b) came before the entry
# existed is carried into it that way. Its secret is returned only after all that. While
# ``rolling``, the previous secret stays the key's secret, without a grace: a roll that failed
# part-way never showed its new secret, so the next roll drops that one and gives its grace to the
# previous one; a roll overtaken that way before it finished finds its secret dropped, deletes its
# entry and answers 409. The dropping roll deletes that entry only once its own (a) is made, not
# before like any other dropped secret's: a roll that finishes in between changes the metadata,
# so the dropping roll's (a) fails and it reads again (then the finished roll's secret is the
# key's, and gets the grace); nobody holds a secret never shown, so a crash before that DEL leaves
# nothing usable.
# A secret is dropped from the metadata only after its entry is deleted: a roll deletes the
# previous secret still in its grace before its (a) (that grace ends at once); revocation deletes
# every entry the metadata names, then removes the listing only if it is still that metadata
# (``_FORGET_KEY``; else read again and repeat), then deletes the same entries once more, for a
# roll whose new entry was created after the first deletion and confirmed before the listing
# went (its creation came before the listing went, so before the second deletion; a roll
# confirmed after it finds no key and deletes its entry). A new entry a crash leaves unnamed is
# one whose secret was never returned.
# Changing a key: edit, roll, revoke. A key's listing metadata (in the account's slot) is the
# truth; its digest entries (the current secret's ``d``, and during a roll's grace the previous
# secret's ``pd`` until ``pe``) are copies of it for the per-request lookup, each stamped with the
# version ``v`` of the metadata it was written from. A change is
#   (a) a compare-and-set of the metadata (``_CHANGE_KEY``): from exactly what was read, else read
#       again and retry; the change's audit events are recorded in this same step;
#   (b) the entries the new metadata names written from it (``_WRITE_KEY_ENTRY``, one per entry,
#       each in a slot of its own): a write never replaces a later version and never creates an
#       entry, so writes arriving late or out of order leave the latest version in place, and an
#       entry once deleted stays deleted; a previous secret whose grace is over is deleted;
# and the change answers only after (b). So once a change has answered, the next request on any
# worker reads its version or a later one: a change whose (a) came later writes later versions,
# one whose (a) came earlier loses to them.
# A change that fails after its (a) (a 503) leaves entries behind the metadata until the next
# change of the key; retrying it is such a change, even when it finds nothing left to change (its
# (b) alone, which writes nothing to entries that are up to date).
# A roll is the one write that creates an entry: the new secret's, after its (a) (which marks the
# metadata ``rolling``), then confirmed by ``_CONFIRM_ROLL`` (the user and the key still exist),
# then finished by a second change from the metadata as it is then, which clears ``rolling`` and
# whose (b) writes every entry, the new one included: a change whose (b) came before the entry
# existed is carried into it that way. Its secret is returned only after all that. While
# ``rolling``, the previous secret stays the key's secret, without a grace: a roll that failed
# part-way never showed its new secret, so the next roll drops that one and gives its grace to the
# previous one; a roll overtaken that way before it finished finds its secret dropped, deletes its
# entry and answers 409. The dropping roll deletes that entry only once its own (a) is made, not
# before like any other dropped secret's: a roll that finishes in between changes the metadata,
# so the dropping roll's (a) fails and it reads again (then the finished roll's secret is the
# key's, and gets the grace); nobody holds a secret never shown, so a crash before that DEL leaves
# nothing usable.
# A secret is dropped from the metadata only after its entry is deleted: a roll deletes the
# previous secret still in its grace before its (a) (that grace ends at once); revocation deletes
# every entry the metadata names, then removes the listing only if it is still that metadata
# (``_FORGET_KEY``; else read again and repeat), then deletes the same entries once more, for a
# roll whose new entry was created after the first deletion and confirmed before the listing
# went (its creation came before the listing went, so before the second deletion; a roll
# confirmed after it finds no key and deletes its entry). A new entry a crash leaves unnamed is
# one whose secret was never returned.
# How many times a change is tried again when other changes of the key overtake it.
CHANGE_ATTEMPTS = 8

# Changing a key (see "Changing a key" below), step (a): replaces the key's listing metadata with
# the new one only while the user record exists and the listing is still exactly the one the
# change was computed from (another change meanwhile: the caller reads again and retries), and
# while each folder the change binds the key to is live, checked in this step so that a folder
# deleted meanwhile is never left named by the key (its deletion unbinds the keys listed by
# then: ``service.auth.removals``). The change's events are recorded in this same step, before
# its writes.
# KEYS: user, listing, expiry index, folders[, audit trail]. ARGV: key id, metadata read, new
# metadata, new expiry, n, the n folders newly bound[, events (store.audit)]. Returns 1
# changed, 2 changed meanwhile, 0 no such key, -1 no such user, -2 a folder not live.
_CHANGE_KEY = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local current = redis.call('HGET', KEYS[2], ARGV[1])
if not current then
  return 0
end
if current ~= ARGV[2] then
  return 2
end
local bound = tonumber(ARGV[5])
for i = 6, 5 + bound do
  if not lineage(KEYS[4], ARGV[i]) then
    return -2
  end
end
if KEYS[5] then
  record_events(KEYS[5], 6 + bound)
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
"""
)

# Writes one digest entry of a key as its listing metadata of version ARGV[2] describes it, whole
# (fields the version no longer has are dropped), unless the entry already holds that version or a
# later one: writes of one key's entries may arrive in any order, the latest version stays. Only
# the roll that made a digest may create its entry (ARGV[1] '1'); every other write replaces an
# entry that exists, so a deleted (revoked, rolled-out) entry is never brought back.
# KEYS: entry. ARGV: may create ('1'/'0'), version, expire at (ms), field, value, ...
_WRITE_KEY_ENTRY = """
local exists = redis.call('EXISTS', KEYS[1]) == 1
if not exists and ARGV[1] ~= '1' then
  return 0
end
if exists then
  local held = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
  if not held then
    return redis.error_reply('damaged version in a key entry')
  end
  if held >= tonumber(ARGV[2]) then
    return 0
  end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'v', ARGV[2], unpack(ARGV, 4))
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
"""


# Remembers why a secret stopped working, in its key-gone record (``P:key-gone:{entry}``, the
# entry's slot), deleting its entry in the same step when asked: a revocation's record replaces
# any other; a rolled-out secret's (``replaced:…``) never replaces a revocation's, so a secret
# whose key was revoked during or after its grace is answered revoked.
# KEYS: entry, key-gone record. ARGV: delete the entry ('1'/'0'), the record, remembered until
# (ms), keep a revocation ('1'/'0').
_MARK_GONE = """
if ARGV[1] == '1' then
  redis.call('DEL', KEYS[1])
end
if ARGV[4] == '1' then
  local held = redis.call('GET', KEYS[2])
  if held and string.sub(held, 1, 9) ~= 'replaced:' then
    return 0
  end
end
redis.call('SET', KEYS[2], ARGV[2], 'PXAT', ARGV[3])
return 1
"""


class KeyEntries:
    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys
        self._change_key = redis.register_script(_CHANGE_KEY)
        self._write_key_entry = redis.register_script(_WRITE_KEY_ENTRY)
        self._mark_gone = redis.register_script(_MARK_GONE)

    async def delete(self, digests: list[str], revoked: str | None = None, at: int = 0) -> None:
        """Delete the entries of ``digests``; with ``revoked`` (``GONE_REVOKED`` or
        ``GONE_LEAKED``), each remembered as revoked ``at`` (ms) in the same step."""
        # One command per entry: entries stand alone, each in a cluster slot of its own.
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest in digests:
                if revoked is None:
                    pipe.delete(self.keys.key_entry(digest))
                else:
                    await self._gone(pipe, digest, f"{revoked}:{at}", at, True, False)
            await pipe.execute()

    async def replaced(self, digest: str, at: int) -> None:
        """Delete a rolled-out secret's entry, remembered as replaced ``at`` (ms), unless it
        is remembered as revoked."""
        await self._gone(self.redis, digest, f"{GONE_REPLACED}:{at}", at, True, True)

    async def _gone(
        self, client: Any, digest: str, record: str, at: int, delete: bool, keep_revocation: bool
    ) -> None:
        await self._mark_gone(
            keys=[self.keys.key_entry(digest), self.keys.key_gone(digest)],
            args=[int(delete), record, at + KEY_GONE_MS, int(keep_revocation)],
            client=client,
        )

    async def read(self, user_id: str, key_id: str) -> tuple[str, dict, str | None] | None:
        """A key's listing metadata as stored, decoded, and its last use; None when unlisted."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.account_keys(user_id), key_id)
            pipe.hget(self.keys.account_key_last_used(user_id), key_id)
            raw, last_used = await pipe.execute()
        if raw is None:
            return None
        return raw, decode_key_metadata(raw), last_used

    async def change(
        self,
        user_id: str,
        key_id: str,
        read: str,
        meta: dict,
        events: EventBatch | None,
        binds: list[str] | tuple[str, ...] = (),
    ) -> int:
        """Step (a) of "Changing a key": 1 changed, 2 changed meanwhile, 0 gone, -1 no user,
        -2 one of the folders ``binds`` names (newly bound) is not live."""
        keys = [
            self.keys.user(user_id),
            self.keys.account_keys(user_id),
            self.keys.account_key_expiry(user_id),
            self.keys.account_folders(user_id),
        ]
        args: list[str | int | bytes] = [key_id, read, orjson.dumps(meta), meta["e"]]
        args += [len(binds), *binds]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        return int_field(await self._change_key(keys=keys, args=args))

    async def write(self, user_id: str, key_id: str, meta: dict, now: int) -> None:
        """Step (b) of "Changing a key", in one round trip: each entry the metadata names
        rewritten from it unless it holds a later version, a previous secret past its grace
        deleted."""
        fields = key_entry_fields(user_id, key_id, meta)
        gone_at = meta["e"] + KEY_EXPIRED_GRACE_MS
        writes = [(meta["d"], fields, gone_at)]
        # The previous secret once the roll has finished: remembered as replaced when its grace
        # ends (its entry expires then, by itself), or deleted now if it has ended.
        replaced = None
        if "pd" in meta:
            if "rolling" in meta:  # until the roll has finished, still the key's secret
                writes.append((meta["pd"], fields, gone_at))
            else:
                replaced = meta["pd"], meta["pe"] <= now
                if meta["pe"] > now:
                    entry_fields = [*fields, "g", meta["pe"]]
                    writes.append((meta["pd"], entry_fields, min(meta["pe"], gone_at)))
        version = meta.get("v", 0)
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest, entry_fields, expire_at in writes:
                await self._write_key_entry(
                    keys=[self.keys.key_entry(digest)],
                    args=["0", version, expire_at, *entry_fields],
                    client=pipe,
                )
            if replaced is not None:
                digest, ended = replaced
                record = f"{GONE_REPLACED}:{meta['pe']}"
                await self._gone(pipe, digest, record, meta["pe"], ended, True)
            await pipe.execute()

    async def create(self, secret_digest: str, user_id: str, key_id: str, meta: dict) -> None:
        """Write a new secret's entry from the metadata (a roll's, the one write that creates
        an entry), unless an entry of that version or a later one exists."""
        await self._write_key_entry(
            keys=[self.keys.key_entry(secret_digest)],
            args=[
                "1",
                meta["v"],
                meta["e"] + KEY_EXPIRED_GRACE_MS,
                *key_entry_fields(user_id, key_id, meta),
            ],
        )
