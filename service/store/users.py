"""Users in Redis: their records, the email index, password hashes, and deleting an account
with every credential, second factor, file and folder record, alias, setting and event it holds.
Knows nothing of HTTP.

How creating a session or key and deleting its user exclude each other is told in
``service.store.sessions`` ("Creating a credential"); deleting is its steps (1)-(4).
"""

from __future__ import annotations

from redis.asyncio import Redis

from service.clock import SystemClock
from service.domain.audit_events import EventBatch
from service.domain.folders import TOP
from service.domain.records import UserRecord
from service.errors import CorruptRecord
from service.store.aliases import AliasStore
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.fields import decode_key_metadata, named_digests
from service.store.key_usage import KeyUsageStore
from service.store.keys import RedisKeys

# Forgets an email's mapping only while it still names the user being deleted (a repeated or
# late deletion must never free an email a new account has since taken).
_FORGET_EMAIL = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""

# Replaces a user's password hash, but never brings back a user record that was deleted; the
# change is recorded in the audit trail, when one is named, in the same step (before the write:
# a failed record leaves the hash as it was).
# KEYS: user[, audit trail]. ARGV: the new hash[, events (store.audit)].
_REPLACE_USER_HASH = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if KEYS[2] then
  record_events(KEYS[2], 2)
end
redis.call('HSET', KEYS[1], 'pw', ARGV[1])
return 1
"""
)


class UserStore:
    # Writes a replica must hold before they answer (FILEHOST_REPLICA_WAIT_MS).
    WAITS_FOR_REPLICA = ("add", "set_password", "delete")

    def __init__(
        self,
        redis: Redis,
        keys: RedisKeys,
        aliases: AliasStore | None = None,
        key_usage: KeyUsageStore | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self._aliases = aliases or AliasStore(redis, keys)
        self._key_usage = key_usage or KeyUsageStore(redis, keys)
        self._forget_email = redis.register_script(_FORGET_EMAIL)
        self._set_password = redis.register_script(_REPLACE_USER_HASH)

    async def add(self, user_id: str, email: str, password_hash: str, now: int) -> bool:
        """Create a user; False when the (lower-cased) email is taken."""
        if not await self.redis.hsetnx(self.keys.users_by_email, email, user_id):
            return False
        try:
            await self.redis.hset(
                self.keys.user(user_id),
                mapping={"id": user_id, "email": email, "pw": password_hash, "c": now},
            )
        except BaseException:
            await self.redis.hdel(self.keys.users_by_email, email)
            raise
        return True

    async def set_password(
        self, user_id: str, password_hash: str, events: EventBatch | None = None
    ) -> bool:
        """Replace the user's password hash (recording ``events`` in the same step); False when
        the user record is gone."""
        if events is None:
            keys, args = [self.keys.user(user_id)], [password_hash]
        else:
            keys = [self.keys.user(user_id), self.keys.account_audit(user_id)]
            args = [password_hash, *batch_args(events)]
        return bool(await self._set_password(keys=keys, args=args))

    async def find_id(self, email: str) -> str | None:
        return await self.redis.hget(self.keys.users_by_email, email)

    async def get(self, user_id: str) -> UserRecord | None:
        raw = await self.redis.hgetall(self.keys.user(user_id))
        if not raw:
            return None
        try:
            return UserRecord(raw["id"], raw["email"], raw["pw"], int(raw["c"]))
        except (KeyError, ValueError):
            raise CorruptRecord() from None

    async def list(self) -> list[UserRecord]:
        by_email = await self.redis.hgetall(self.keys.users_by_email)
        users = []
        for user_id in by_email.values():
            user = await self.get(user_id)
            if user is not None:
                users.append(user)
        users.sort(key=lambda user: (user.created_at, user.email))
        return users

    async def delete(self, user_id: str, email: str) -> None:
        """End every session, revoke every key, then remove the account.

        Steps (1)-(4) of "Creating a credential" (``service.store.sessions``): the user record
        goes first, so that no session or key can be created for the user from then on; then
        every credential the indexes name; then the rest; the email mapping last, so that a
        deletion cut short can be found and repeated until it succeeds.
        """
        await self.redis.delete(self.keys.user(user_id))
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.account_keys(user_id))
            pipe.zrange(self.keys.account_sessions(user_id), 0, -1)
            metadata, sessions = await pipe.execute()
        digests = [
            digest
            for raw in metadata.values()
            for digest in named_digests(decode_key_metadata(raw))
        ]
        entries = [self.keys.key_entry(digest) for digest in digests]
        # A rolled-out secret's record that it was replaced: of a key that is no more.
        entries.extend(self.keys.key_gone(digest) for digest in digests)
        entries.extend(self.keys.session_entry(digest) for digest in sessions)
        # A reauthentication's record of its replacement, in the replaced session's slot.
        entries.extend(self.keys.session_replaced(digest) for digest in sessions)
        if entries:
            # One DEL per entry: entries stand alone, each in a cluster slot of its own.
            async with self.redis.pipeline(transaction=False) as pipe:
                for entry in entries:
                    pipe.delete(entry)
                await pipe.execute()
        # The aliases' entries, before the index that names them (so a deletion cut short and
        # run again still finds them): their slugs are the whole service's, no alias is left.
        await self._aliases.delete_account(user_id)
        # Each folder's indexes, before the folders' records that name them, so that a deletion
        # cut short and run again still finds them; in bounded commands (one slot: the account's).
        folder_ids = await self.redis.hkeys(self.keys.account_folders(user_id))
        indexes = [
            index
            for place in (*folder_ids, TOP)
            for index in (
                self.keys.folder_children(user_id, place),
                self.keys.folder_heights(user_id, place),
                self.keys.folder_files(user_id, place),
            )
        ]
        for start in range(0, len(indexes), 300):
            await self.redis.delete(*indexes[start : start + 300])
        # Its identities at the provider: the index entries first (a deletion cut short and run
        # again still finds them in the account's hash), each only while it names this account.
        identities = await self.redis.hkeys(self.keys.account_identities(user_id))
        for digest in identities:
            index = self.keys.oidc_identity(digest)
            if await self.redis.get(index) == user_id:
                await self.redis.delete(index)
        await self.redis.delete(
            self.keys.account_identities(user_id),
            self.keys.account_folders(user_id),
            self.keys.folder_trash(user_id),
            self.keys.account_removed(user_id),
            self.keys.top_files_placed(user_id),
            self.keys.account_settings(user_id),
            *self.keys.account_mfa_keys(user_id),
        )
        await self.redis.srem(self.keys.folder_removals, user_id)
        # What its keys did, before the listing that names them (its counters would expire).
        await self._key_usage.forget(user_id, metadata, SystemClock().now_ms())
        await self.redis.delete(
            self.keys.account_keys(user_id),
            self.keys.account_key_expiry(user_id),
            self.keys.account_key_last_used(user_id),
            self.keys.account_sessions(user_id),
            self.keys.account_files(user_id),
            self.keys.account_file_order(user_id),
            self.keys.account_audit(user_id),
        )
        await self._forget_email(keys=[self.keys.users_by_email], args=[email, user_id])
