"""API keys in Redis: each key's listing metadata in its account (the truth) and the digest
entries the per-request lookup reads (copies of it, one per working secret). Creating, listing,
changing (edit, roll), revoking, and finding keys by secret digest. Knows nothing of HTTP;
receives only digests of secrets, never a secret.

A key is created as "Creating a credential" (``service.store.sessions``) tells: its listing, which
names the digest, then its entry, then the check that its user still exists.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from redis.asyncio import Redis

from service.domain.audit_events import EventBatch
from service.domain.outcomes import GONE_REVOKED, AccountGone, FolderNotLive, KeyChanged
from service.domain.records import KeyChanges, KeyRecord
from service.errors import CorruptRecord
from service.store.audit import RECORD_EVENTS, AuditStore, batch_args
from service.store.fields import (
    KEY_EXPIRED_GRACE_MS,
    apply_changes,
    decode_key_metadata,
    entry_mask,
    int_field,
    key_record,
    named_digests,
    new_key_metadata,
)
from service.store.folders import FOLDERS_LUA
from service.store.key_entries import CHANGE_ATTEMPTS, KeyEntries
from service.store.key_usage import KeyUsageStore
from service.store.keys import RedisKeys
from service.store.slots import key_slot

# Step (a) of creating a key (see "Creating a credential" below): adds the key's listing
# metadata, which names its digest, unless the user record is gone, the account already has the
# maximum of active keys or a folder the key is bound to is not live (checked in this step, as
# a change of a key does: ``service.store.key_entries``). Returns 1 added, 0 at the limit, -1
# no such user, -2 a folder not live. Keys past their expiry never count; those past it by more
# than the grace (their digest entries are gone) are pruned. All keys share the account's slot.
# KEYS: user, listing, expiry index, last use, folders. ARGV: now, max active, key id, metadata,
# expiry, prune before, the folders it is bound to...
_ADD_KEY_METADATA = (
    FOLDERS_LUA
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
for i = 7, #ARGV do
  if not lineage(KEYS[5], ARGV[i]) then
    return -2
  end
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[6])
for _, key_id in ipairs(gone) do
  redis.call('HDEL', KEYS[2], key_id)
  redis.call('HDEL', KEYS[4], key_id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[6])
if redis.call('ZCOUNT', KEYS[3], '(' .. ARGV[1], '+inf') >= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3])
return 1
"""
)

# Step (c) of creating a key: 1 while the user record exists (and the key's creation is recorded
# in the audit trail when one is named, in this same step); else the listing written in step (a)
# is removed and 0 returned (the caller then deletes the digest entry).
# KEYS: user, listing, expiry index, last use[, audit trail]. ARGV: key id[, events (store.audit)].
_CONFIRM_KEY = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  if KEYS[5] then
    record_events(KEYS[5], 2)
  end
  return 1
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return 0
"""
)

# Records a key's last use only while the key is still listed (not after revocation).
_TOUCH_KEY = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
"""

# Step (c) of rolling a key: its metadata as it is now, while the user record exists and the key
# is listed; -1 no such user, 0 no such key (the caller then deletes the entry it wrote in (b)).
# KEYS: user, listing. ARGV: key id.
_CONFIRM_ROLL = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local current = redis.call('HGET', KEYS[2], ARGV[1])
if not current then
  return 0
end
return current
"""

# The last step of revoking a key: removes its listing only while it is exactly the metadata whose
# digest entries the caller has deleted (a roll meanwhile named a new one: read again, retry).
# KEYS: listing, expiry index, last use. ARGV: key id, metadata read. Returns 1 removed, 2
# changed meanwhile, 0 already gone.
_FORGET_KEY = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  return 0
end
if current ~= ARGV[2] then
  return 2
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"""


class ApiKeyStore:
    # Writes a replica must hold before they answer (FILEHOST_REPLICA_WAIT_MS).
    WAITS_FOR_REPLICA = ("add", "edit", "roll", "revoke")

    def __init__(
        self, redis: Redis, keys: RedisKeys, audit: AuditStore, usage: KeyUsageStore
    ) -> None:
        self.redis = redis
        self.keys = keys
        self._audit = audit
        self._usage = usage
        self._entries = KeyEntries(redis, keys)
        self._add_key_metadata = redis.register_script(_ADD_KEY_METADATA)
        self._confirm_key = redis.register_script(_CONFIRM_KEY)
        self._touch_key = redis.register_script(_TOUCH_KEY)
        self._confirm_roll = redis.register_script(_CONFIRM_ROLL)
        self._forget_key = redis.register_script(_FORGET_KEY)

    async def uploader_keys_marked(self) -> bool:
        """Whether the keys uploaders made before the upload-only mark were marked."""
        return bool(await self.redis.exists(self.keys.uploader_keys_marked))

    async def note_uploader_keys_marked(self) -> None:
        await self.redis.set(self.keys.uploader_keys_marked, "1")

    async def add(
        self,
        *,
        user_id: str,
        key_id: str,
        secret_digest: str,
        name: str,
        key_prefix: str,
        permissions: int,
        created_at: int,
        expires_at: int,
        max_active: int,
        events: EventBatch | None = None,
        folder_ids: tuple[str, ...] | None = None,
        uploader: str | None = None,
    ) -> bool:
        """Store a new key, bound to ``folder_ids`` (None: the whole account), upload-only when
        made for an ``uploader`` (its kind); False when the
        account already holds ``max_active`` active keys. Raises ``AccountGone`` when the user
        record is gone, or went while the key was written, ``FolderNotLive`` when one of the
        folders is not a live folder of the account.

        Steps (a)-(c) of "Creating a credential": the listing (which names the digest),
        then the digest entry, then the check that the user still exists. The secret only works
        once the entry exists, and it is returned to the client only after all three succeeded.
        """
        meta = new_key_metadata(
            name=name,
            key_prefix=key_prefix,
            permissions=permissions,
            created_at=created_at,
            expires_at=expires_at,
            secret_digest=secret_digest,
            folder_ids=folder_ids,
            uploader=uploader,
        )
        account = [
            self.keys.user(user_id),
            self.keys.account_keys(user_id),
            self.keys.account_key_expiry(user_id),
            self.keys.account_key_last_used(user_id),
        ]
        added = await self._add_key_metadata(
            keys=[*account, self.keys.account_folders(user_id)],
            args=[
                created_at,
                max_active,
                key_id,
                orjson.dumps(meta),
                expires_at,
                created_at - KEY_EXPIRED_GRACE_MS,
                *(folder_ids or ()),
            ],
        )
        if added == -1:
            raise AccountGone()
        if added == -2:
            raise FolderNotLive()
        if not added:
            return False
        entry = self.keys.key_entry(secret_digest)
        mask = entry_mask(meta)
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(entry, mapping={"u": user_id, "k": key_id, "p": mask, "e": expires_at})
                pipe.pexpireat(entry, expires_at + KEY_EXPIRED_GRACE_MS)
                await pipe.execute()
            if events is None:
                confirmed = await self._confirm_key(keys=account, args=[key_id])
            else:  # the creation is recorded in the step that confirms it
                confirmed = await self._confirm_key(
                    keys=[*account, self.keys.account_audit(user_id)],
                    args=[key_id, *batch_args(events)],
                )
        except BaseException:
            await self.redis.delete(entry)
            await self._forget_key_metadata(user_id, key_id)
            raise
        if not confirmed:
            await self.redis.delete(entry)
            raise AccountGone()
        return True

    async def _forget_key_metadata(self, user_id: str, key_id: str) -> bool:
        """Remove a key's listing; True when this call is the one that removed it."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.account_keys(user_id), key_id)
            pipe.zrem(self.keys.account_key_expiry(user_id), key_id)
            pipe.hdel(self.keys.account_key_last_used(user_id), key_id)
            removed, _, _ = await pipe.execute()
        return bool(removed)

    async def list(self, user_id: str, now: int) -> list[KeyRecord]:
        """The account's keys that have not expired, newest first."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.account_keys(user_id))
            pipe.hgetall(self.keys.account_key_last_used(user_id))
            metadata, last_used = await pipe.execute()
        records = []
        for key_id, raw in metadata.items():
            meta = decode_key_metadata(raw)
            if meta["e"] <= now:
                continue
            records.append(key_record(key_id, meta, last_used.get(key_id), now))
        records.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return records

    async def edit(
        self,
        user_id: str,
        key_id: str,
        now: int,
        changes: KeyChanges,
        events_for: Callable[[KeyRecord, KeyRecord], EventBatch | None],
    ) -> KeyRecord | None:
        """Change one of the account's active keys ("Changing a key" in
        ``service.store.key_entries``); None when it has no active key of that id.
        ``events_for(before, after)`` gives the change's audit events, recorded in the step that
        makes it. A change that changes nothing writes nothing. Raises ``AccountGone`` when the
        user record is gone, ``FolderNotLive`` when a folder it binds the key to is not live,
        ``KeyChanged`` when other changes kept overtaking this one."""
        for _ in range(CHANGE_ATTEMPTS):
            found = await self._entries.read(user_id, key_id)
            if found is None:
                return None
            read, meta, last_used = found
            if meta["e"] <= now:
                return None
            edited = apply_changes(meta, changes)
            before = key_record(key_id, meta, last_used, now)
            after = key_record(key_id, edited, last_used, now)
            if after == before:
                # Nothing to change or record; but a change that failed after its (a) (a 503)
                # may have left entries behind its version: this retry brings them up to it
                # (an entry that holds it already is not written).
                await self._entries.write(user_id, key_id, meta, now)
                return before
            binds = [f for f in edited.get("f", ()) if f not in meta.get("f", ())]
            status = await self._entries.change(
                user_id, key_id, read, edited, events_for(before, after), binds
            )
            if status == 2:
                continue
            if status == -1:
                raise AccountGone()
            if status == -2:
                raise FolderNotLive()
            if status == 0:
                return None
            await self._entries.write(user_id, key_id, edited, now)
            return after
        raise KeyChanged()

    async def unbind(
        self,
        user_id: str,
        folder_ids: set[str],
        now: int,
        events_for: Callable[[str, KeyRecord, KeyRecord], EventBatch | None],
    ) -> None:
        """Take the folders ``folder_ids`` (deleted) out of the folders of every key of the
        account bound to them, each a change of its key ("Changing a key" in
        ``service.store.key_entries``; ``events_for(key id, before, after)`` its events). A key
        left bound to none stays bound, to nothing. Raises ``KeyChanged`` when other changes
        kept overtaking one (the deletion's removal is then tried again later)."""
        listing = await self.redis.hgetall(self.keys.account_keys(user_id))
        for key_id, raw in listing.items():
            if folder_ids.isdisjoint(decode_key_metadata(raw).get("f", ())):
                continue
            for _ in range(CHANGE_ATTEMPTS):
                found = await self._entries.read(user_id, key_id)
                if found is None:
                    break
                read, meta, last_used = found
                kept = [f for f in meta.get("f", ()) if f not in folder_ids]
                if "f" not in meta or len(kept) == len(meta["f"]):
                    break
                edited = {**meta, "f": kept, "v": meta.get("v", 0) + 1}
                before = key_record(key_id, meta, last_used, now)
                after = key_record(key_id, edited, last_used, now)
                events = events_for(key_id, before, after) if meta["e"] > now else None
                status = await self._entries.change(user_id, key_id, read, edited, events)
                if status == 2:
                    continue
                if status == 1:
                    await self._entries.write(user_id, key_id, edited, now)
                break
            else:
                raise KeyChanged()

    def entry_slot(self, secret_digest: str) -> int:
        """The Redis Cluster slot of a secret's digest entry (and of its rate bucket)."""
        return key_slot(self.keys.key_entry(secret_digest).encode())

    async def new_secret_slot(self, user_id: str, key_id: str) -> int | None:
        """The slot a new secret of this key must have (``entry_slot``) so that its entry and
        the bucket its secrets share are in one slot, which one script can read and take from
        on a cluster too; None when the account has no such key."""
        found = await self._entries.read(user_id, key_id)
        if found is None:
            return None
        meta = found[1]
        current = meta["pd"] if "rolling" in meta else meta["d"]
        return self.entry_slot(meta.get("b", current))

    async def rewrite_entries(self, user_id: str, key_id: str, now: int) -> None:
        """Write the key's entries again from its metadata, as a new version of it that changes
        nothing: an entry written before the lookup read a field it reads now gains it."""
        for _ in range(CHANGE_ATTEMPTS):
            found = await self._entries.read(user_id, key_id)
            if found is None:
                return
            read, meta, _ = found
            if "rolling" in meta:  # the roll's last step writes every entry
                return
            again = {**meta, "v": meta.get("v", 0) + 1}
            status = await self._entries.change(user_id, key_id, read, again, None)
            if status == 2:
                continue
            if status == 1:
                await self._entries.write(user_id, key_id, again, now)
            return

    async def roll(
        self,
        user_id: str,
        key_id: str,
        *,
        secret_digest: str,
        key_prefix: str,
        previous_until: int,
        now: int,
        events_for: Callable[[KeyRecord, KeyRecord], EventBatch | None],
    ) -> KeyRecord | None:
        """Give one of the account's active keys a new secret (``secret_digest``); the current
        one keeps working until ``previous_until`` (ms; ``now`` for not at all), a secret still
        in the grace of an earlier roll is refused from now on. Everything else about the key
        stays; ``events_for(before, after)`` gives the roll's audit events, recorded in the step
        that makes it. None when the account has no active key of that id; raises
        ``AccountGone`` and ``KeyChanged`` like ``edit_api_key`` (also when a roll overtook this
        one before it finished: its secret was dropped). The new secret works once this returns,
        and only then may it be shown (see "Changing a key" in ``service.store.key_entries``).

        The metadata says ``rolling`` from (a) until the roll has finished: a roll that failed
        part-way (a 503) never showed its secret, so the next roll drops that one and gives the
        grace to the secret the clients still hold, and until then that secret keeps working
        without a grace, whatever later edits do."""
        for _ in range(CHANGE_ATTEMPTS):
            found = await self._entries.read(user_id, key_id)
            if found is None:
                return None
            read, meta, last_used = found
            if meta["e"] <= now:
                return None
            never_shown = None
            if "rolling" in meta:  # an unfinished roll: its secret was never shown
                current, never_shown = meta["pd"], meta["d"]
            else:
                current = meta["d"]
                if "pd" in meta:  # deleted before the metadata stops naming it
                    await self._entries.replaced(meta["pd"], min(meta["pe"], now))
            shared = meta.get("b", current)
            if self.entry_slot(secret_digest) != self.entry_slot(shared):
                raise KeyChanged()  # not drawn for this key's slot (see ``new_secret_slot``)
            rolled = {
                **meta,
                "prefix": key_prefix,
                "d": secret_digest,
                "pd": current,
                "pe": previous_until,
                "rolling": True,
                "b": shared,
                "v": meta.get("v", 0) + 1,
            }
            record = key_record(key_id, rolled, last_used, now)
            before = key_record(key_id, meta, last_used, now)
            events = events_for(before, record)
            status = await self._entries.change(user_id, key_id, read, rolled, events)
            if status == 2:
                continue
            if status == -1:
                raise AccountGone()
            if status == 0:
                return None
            break
        else:
            raise KeyChanged()
        if never_shown is not None:
            # Only now that this change is made: had that roll finished (and shown its secret)
            # since the read, this change would have been refused and the listing read again.
            # Nobody holds its secret, so a crash before this DEL leaves a harmless entry.
            await self.redis.delete(self.keys.key_entry(never_shown))
        entry = self.keys.key_entry(secret_digest)
        try:
            await self._entries.create(secret_digest, user_id, key_id, rolled)
            confirmed = await self._confirm_roll(
                keys=[self.keys.user(user_id), self.keys.account_keys(user_id)], args=[key_id]
            )
            if confirmed == -1:
                raise AccountGone()
            finished = confirmed != 0 and await self._finish_roll(
                user_id, key_id, secret_digest, now
            )
        except BaseException:
            await self.redis.delete(entry)
            raise
        if not finished:
            await self.redis.delete(entry)
            return None
        return record

    async def _finish_roll(self, user_id: str, key_id: str, secret_digest: str, now: int) -> bool:
        """The last step of a roll: its metadata no longer ``rolling`` (a new version), and the
        entries written from it, the previous secret's with the end of its grace. False when
        the key is gone; raises ``KeyChanged`` when another roll dropped this one's secret."""
        for _ in range(CHANGE_ATTEMPTS):
            found = await self._entries.read(user_id, key_id)
            if found is None:
                return False
            read, meta, _ = found
            if meta["d"] != secret_digest or "rolling" not in meta:
                raise KeyChanged()
            finished = {name: value for name, value in meta.items() if name != "rolling"}
            finished["v"] = meta.get("v", 0) + 1
            status = await self._entries.change(user_id, key_id, read, finished, None)
            if status == 2:
                continue
            if status == -1:
                raise AccountGone()
            if status == 0:
                return False
            await self._entries.write(user_id, key_id, finished, now)
            return True
        raise KeyChanged()

    async def revoke(
        self,
        user_id: str,
        key_id: str,
        now: int,
        events_for: Callable[[KeyRecord], EventBatch] | None = None,
        reason: str = GONE_REVOKED,
    ) -> bool:
        """Revoke one of the account's keys; False when it has no active key of that id.

        The revocation is recorded (``events_for``, given the key as listed) once the key is
        found active and before anything is removed: a failed record leaves the key as it was.
        The digest entries go first: from the moment their DELs return, the secrets are refused
        everywhere. Only then is the listing metadata removed, if it still names those entries,
        and they are deleted once more (see "Changing a key" in ``service.store.key_entries``).
        Each entry of an active key is remembered as revoked (``reason``: ``GONE_REVOKED``, or
        ``GONE_LEAKED`` for a key reported leaked) in the step that deletes it.
        """
        read = await self.redis.hget(self.keys.account_keys(user_id), key_id)
        if read is None:
            return False
        meta = decode_key_metadata(read)
        active = meta["e"] > now
        if events_for is not None and active:  # an expired key's removal is no event
            await self._audit.record(user_id, events_for(key_record(key_id, meta, None, now)))
        revoked = reason if active else None
        account = [
            self.keys.account_keys(user_id),
            self.keys.account_key_expiry(user_id),
            self.keys.account_key_last_used(user_id),
        ]
        for _ in range(CHANGE_ATTEMPTS):
            await self._entries.delete(named_digests(meta), revoked, now)
            status = int_field(await self._forget_key(keys=account, args=[key_id, read]))
            if status != 2:
                break
            read = await self.redis.hget(self.keys.account_keys(user_id), key_id)
            if read is None:
                status = 0
                break
            meta = decode_key_metadata(read)
        else:
            raise KeyChanged()
        await self._entries.delete(named_digests(meta), revoked, now)
        # Unlisted now, so no flush adds to what the key did: that goes with it.
        await self._usage.forget(user_id, (key_id,), now)
        # Of two concurrent revocations only the one that removes the listing reports success.
        return status == 1 and meta["e"] > now

    async def find_live(self, secret_digests: list[str], now: int) -> list[tuple[str, str]]:
        """(user id, key id) of each digest that is a working secret now: its entry exists, the
        key has not expired, and a rolled-out secret's grace has not ended. One round trip."""
        if not secret_digests:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest in secret_digests:
                pipe.hmget(self.keys.key_entry(digest), ("u", "k", "e", "g"))
            rows = await pipe.execute()
        found = []
        for user_id, key_id, expires_at, refused_from in rows:
            if user_id is None:
                continue
            if not key_id:
                raise CorruptRecord()
            if int_field(expires_at) <= now:
                continue
            if refused_from is not None and int_field(refused_from) <= now:
                continue
            found.append((user_id, key_id))
        return found

    async def describe(self, user_id: str, key_id: str) -> tuple[str, str] | None:
        """The name and display prefix of one of the account's keys as listed now; None when
        it has no such key (revoked, say). One read."""
        raw = await self.redis.hget(self.keys.account_keys(user_id), key_id)
        if raw is None:
            return None
        meta = decode_key_metadata(raw)
        return meta["name"], meta["prefix"]

    async def touch(self, user_id: str, key_id: str, used_at: int) -> None:
        await self._touch_key(
            keys=[self.keys.account_keys(user_id), self.keys.account_key_last_used(user_id)],
            args=[key_id, used_at],
        )
