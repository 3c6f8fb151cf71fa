"""Storage of users, sessions and API keys in Redis. Knows nothing of HTTP.

Receives only digests of secrets, never a secret. Every record read back is checked; a record that
cannot be read raises ``CorruptRecord`` so callers refuse (fail closed) instead of guessing.
Redis errors propagate as ``redis.RedisError`` and are answered 503 by the HTTP layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import orjson
from redis.asyncio import Redis

from service.auth.credentials import new_id
from service.auth.permissions import ALL_PERMISSIONS_MASK
from service.clock import Clock, SystemClock
from service.errors import CorruptRecord
from service.store.audit_store import RECORD_EVENTS, AuditStore, EventBatch
from service.store.keys import RedisKeys
from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis, ScriptCall

# How long an entry is kept past its deadline. Never accepted (the authenticator compares the
# stored deadline with its clock first), only kept so that an expired credential is answered
# api_key_expired / session_expired rather than invalid_api_key / invalid_session. The account
# indexes keep naming such entries until they are gone, so deleting the user ends them too.
KEY_EXPIRED_GRACE_MS = 24 * 3600 * 1000
SESSION_EXPIRED_GRACE_MS = 3600 * 1000

# Step (a) of creating a key (see "Creating a credential" below): adds the key's listing
# metadata, which names its digest, unless the user record is gone or the account already has the
# maximum of active keys. Returns 1 added, 0 at the limit, -1 no such user. Keys past their
# expiry never count; those past it by more than the grace (their digest entries are gone) are
# pruned. All keys share the account's slot.
# KEYS: user, listing, expiry index, last use. ARGV: now, max active, key id, metadata, expiry,
# prune before.
_ADD_KEY_METADATA = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
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

# Step (c) of creating a key: 1 while the user record exists (and the key's creation is recorded
# in the audit trail when one is named, in this same step); else the listing written in step (a)
# is removed and 0 returned (the caller then deletes the digest entry).
# KEYS: user, listing, expiry index, last use[, audit trail]. ARGV: key id[, events (audit_store)].
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

# Step (a) of opening a session: adds its digest to the account's session index unless the user
# record is gone (returns 0). Members are scored by the latest moment their entry can exist
# (absolute deadline + grace); those past it are pruned. The index expires with its longest-lived
# member, never sooner, whatever lifetimes earlier sessions were given (settings change).
# KEYS: user, session index. ARGV: now, digest, score.
_ADD_SESSION_INDEX = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', tonumber(last[2])))
return 1
"""

# Step (c) of opening a session: 1 while the user record exists (and, when a password hash is
# given, still holds that hash: the password the login checked was not changed meanwhile); else
# the digest is taken out of the index and 0 returned (the caller then deletes the session entry).
# A confirmed login is recorded in the audit trail, when one is named, in this same step.
# KEYS: user, session index[, audit trail]. ARGV: digest, password hash checked ('' for none)[,
# events (audit_store)].
_CONFIRM_SESSION = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 1 and
    (ARGV[2] == '' or redis.call('HGET', KEYS[1], 'pw') == ARGV[2]) then
  if KEYS[3] then
    record_events(KEYS[3], 3)
  end
  return 1
end
redis.call('ZREM', KEYS[2], ARGV[1])
return 0
"""
)

# Forgets an email's mapping only while it still names the user being deleted (a repeated or
# late deletion must never free an email a new account has since taken).
_FORGET_EMAIL = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""

# Moves a session's idle deadline and records when it was last seen (the moment of the request
# that renewed it), but never brings back a session that was logged out or ended.
# KEYS: entry. ARGV: idle deadline, expire at, seen at.
_RENEW_SESSION = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'i', ARGV[1], 's', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
"""

# Gives a session opened before sessions had public ids one, the first time it is listed (never
# creates an entry that is gone). Returns the session's public id, or nil when it is gone.
# KEYS: entry. ARGV: a new public id.
_ASSIGN_SESSION_ID = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
redis.call('HSETNX', KEYS[1], 'id', ARGV[1])
return redis.call('HGET', KEYS[1], 'id')
"""

# Replaces a user's password hash, but never brings back a user record that was deleted; the
# change is recorded in the audit trail, when one is named, in the same step (before the write:
# a failed record leaves the hash as it was).
# KEYS: user[, audit trail]. ARGV: the new hash[, events (audit_store)].
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

# Records a key's last use only while the key is still listed (not after revocation).
_TOUCH_KEY = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
"""


# The hot-path lookup with a request-rate limit folded in, so a limited request still costs one
# round trip: read the credential's fields and, when it exists, take requests from its bucket
# (GCRA: the bucket holds the "theoretical arrival time" of the next request, in µs). A worker
# may take several at once and use them over the next second (auth.rate_limits.RateLeases); it
# gives back those it did not use with its next take.
# KEYS: entry, bucket. ARGV: now µs, emission interval µs, burst tolerance µs, requests wanted,
# requests given back, fields...
# Returns nil for no entry, else the fields followed by allowed (1/0), then remaining requests
# (allowed) or µs to wait (refused), then µs until the bucket is full again, then requests taken.
# Buckets are excluded from the AOF and replicas (REPL_NONE): they live seconds, and a write per
# request would put an fsync behind every gateway call. A restart forgets them, nothing else.
_LOOKUP_AND_TAKE = """
local values = redis.call('HMGET', KEYS[1], unpack(ARGV, 6))
local found = false
for i = 1, #values do
  if values[i] then found = true end
end
if not found then
  return nil
end
if redis.set_repl then
  redis.set_repl(redis.REPL_NONE)
end
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local tolerance = tonumber(ARGV[3])
local wanted = tonumber(ARGV[4])
local given_back = tonumber(ARGV[5])
local tat = tonumber(redis.call('GET', KEYS[2])) or now
if tat < now then
  tat = now
end
if given_back > 0 then
  tat = math.max(tat - given_back * interval, now)
end
local n = #values
local fit = math.floor((now + tolerance - tat) / interval)
if fit < 1 then
  if given_back > 0 and tat > now then
    redis.call('SET', KEYS[2], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000))
  end
  values[n + 1] = 0
  values[n + 2] = tat + interval - tolerance - now
  values[n + 3] = tat - now
  values[n + 4] = 0
  return values
end
local taken = math.min(wanted, fit)
local next_tat = tat + taken * interval
local ttl_ms = math.ceil((next_tat - now) / 1000)
redis.call('SET', KEYS[2], string.format('%.0f', next_tat), 'PX', ttl_ms)
values[n + 1] = 1
values[n + 2] = math.floor((tolerance - (next_tat - now)) / interval)
values[n + 3] = next_tat - now
values[n + 4] = taken
return values
"""


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


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A credential's request-rate limit: ``per_second`` sustained, bursts of up to ``burst``."""

    per_second: float
    burst: int

    @property
    def interval_us(self) -> int:
        return max(1, round(1_000_000 / self.per_second))

    @property
    def tolerance_us(self) -> int:
        return self.interval_us * self.burst


# The per-request records below are NamedTuples: immutable like the frozen dataclasses elsewhere,
# and the cheapest record Python can make, which matters once per request on the hot path.


class RateVerdict(NamedTuple):
    """One request taken from (or refused by) a credential's bucket."""

    allowed: bool
    remaining: int  # requests left in the burst after this one (0 when refused)
    wait_us: int  # until the next request is allowed (0 when allowed)
    full_in_us: int  # until the bucket has refilled completely
    taken: int = 1  # requests taken from the bucket: this one and any the worker keeps for later


class ApiKeyEntry(NamedTuple):
    """What one hot-path lookup of an API key digest returns."""

    user_id: str
    key_id: str
    permissions: int
    expires_at: int
    rate: RateVerdict | None = None


class SessionEntry(NamedTuple):
    user_id: str
    created_at: int
    absolute_deadline: int
    idle_deadline: int
    rate: RateVerdict | None = None


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A key as its owner sees it in a list: never the secret, never the digest."""

    id: str
    name: str
    key_prefix: str
    permissions: int
    created_at: int
    expires_at: int
    last_used_at: int | None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session as its owner sees it in a list, plus the digest that identifies it to the
    service (never shown)."""

    id: str
    token_digest: str
    created_at: int
    last_seen_at: int
    idle_deadline: int
    absolute_deadline: int
    ip: str | None
    user_agent: str | None


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: str
    email: str
    password_hash: str
    created_at: int


_KEY_FIELDS = ("u", "k", "p", "e")
_SESSION_FIELDS = ("u", "c", "a", "i")
# Read by the session list alone, never by the per-request lookup.
_SESSION_LIST_FIELDS = ("u", "c", "a", "i", "id", "s", "ip", "ua")


def _int_field(value: object) -> int:
    if value is None:
        raise CorruptRecord()
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise CorruptRecord() from None


class AccountGone(Exception):
    """A session or key could not be created: its user record is gone (being deleted)."""


# Creating a credential and deleting its user exclude each other, without anything on the
# per-request lookup (which reads the digest entry alone). Creating a session or key is three
# steps, each one atomic in Redis:
#   (a) a script in the account's slot checks that the user record exists and adds the digest to
#       the account's index (the session index, or the key listing which names the digest);
#   (b) the digest entry is written (it stands alone, in no account's slot);
#   (c) a script in the account's slot checks that the user record still exists. If it does not,
#       the creation fails and its writes are undone (the digest entry by a separate DEL).
# The token or secret is returned to the client only after (c) succeeded. Deleting a user is
#   (1) DEL the user record, then (2) read both indexes and DEL every digest entry they name, then
#   (3) DEL the account's keys, then (4) free the email.
# Why every interleaving is safe, for a creation whose (c) succeeded: (c) saw the user record, so
# (c) ran before (1); (a) and (b) ran before (c), so before (1). Then (2), which runs after (1),
# reads an index that already names the digest (nothing but expiry, logout or revocation removes
# an index member, and each of those ends the entry too) and DELs an entry that is already
# written. So the credential dies in (2), before the deletion returns. A creation whose (a) runs
# after (1) writes nothing; one whose (c) runs after (1) fails, whatever (2) did or missed, and
# its secret is never returned: a digest entry left behind by a crash just then is one nobody
# holds the secret of. Deletion can be repeated after a crash part-way: (2)-(4) only need the user
# id, which the email mapping keeps until the very last step.


class RedisStore:
    """Async storage operations over a ``redis.asyncio.Redis`` client.

    The per-request reads (a key or session lookup, the files list) go through ``hot`` when
    given: one auto-pipelined connection that costs a fraction of redis-py's CPU per command.
    Everything else uses redis-py.
    """

    def __init__(
        self,
        redis: Redis,
        prefix: str,
        hot: PipelinedRedis | None = None,
        rate_limit: RateLimit | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.redis = redis
        self._clock = clock or SystemClock()  # when a renewed session was last seen
        self.keys = RedisKeys(prefix)
        self._hot = hot
        self.rate_limit = rate_limit
        if rate_limit is not None:
            self._rate_args = (str(rate_limit.interval_us), str(rate_limit.tolerance_us))
        self._lookup_and_take = redis.register_script(_LOOKUP_AND_TAKE)
        # The hot connection's commands, encoded once but for the entry (and bucket, and clock).
        self._hot_lookup = {
            fields: CommandTemplate("HMGET", ARG, *fields)
            for fields in (_KEY_FIELDS, _SESSION_FIELDS)
        }
        if rate_limit is not None:
            self._hot_lookup_and_take = {
                fields: ScriptCall(
                    _LOOKUP_AND_TAKE,
                    self._lookup_and_take.sha,
                    2,
                    ARG,  # the entry
                    ARG,  # its bucket
                    ARG,  # now, µs
                    rate_limit.interval_us,
                    rate_limit.tolerance_us,
                    ARG,  # requests wanted
                    ARG,  # requests given back
                    *fields,
                )
                for fields in (_KEY_FIELDS, _SESSION_FIELDS)
            }
        self._add_key_metadata = redis.register_script(_ADD_KEY_METADATA)
        self._confirm_key = redis.register_script(_CONFIRM_KEY)
        self._add_session_index = redis.register_script(_ADD_SESSION_INDEX)
        self._confirm_session = redis.register_script(_CONFIRM_SESSION)
        self._forget_email = redis.register_script(_FORGET_EMAIL)
        self._set_password = redis.register_script(_REPLACE_USER_HASH)
        self._renew_session = redis.register_script(_RENEW_SESSION)
        self._assign_session_id = redis.register_script(_ASSIGN_SESSION_ID)
        self._touch_key = redis.register_script(_TOUCH_KEY)
        self._reserve_attempt = redis.register_script(_RESERVE_ATTEMPT)
        self._release_attempt = redis.register_script(_RELEASE_ATTEMPT)
        self.audit = AuditStore(redis, self.keys)

    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    async def _lookup(
        self, entry: str, now_ms: int, fields: tuple[str, ...], take: int, give_back: int
    ) -> tuple[list, RateVerdict | None]:
        """The entry's fields, and ``take`` requests taken from its bucket when limits are on
        (``give_back`` unused ones returned first); with ``take`` 0, the fields alone."""
        hot = self._hot
        if self.rate_limit is None or take == 0:
            if hot is not None:
                return await hot.execute_packed(self._hot_lookup[fields].pack(entry.encode())), None
            return await self.redis.hmget(entry, fields), None
        bucket = self.keys.rate_bucket(entry)
        if hot is not None:
            reply = await hot.run_script(
                self._hot_lookup_and_take[fields],
                entry.encode(),
                bucket.encode(),
                b"%d" % (now_ms * 1000),
                b"%d" % take,
                b"%d" % give_back,
            )
        else:
            interval, tolerance = self._rate_args
            reply = await self._lookup_and_take(
                keys=(entry, bucket),
                args=[now_ms * 1000, interval, tolerance, take, give_back, *fields],
            )
        if reply is None:
            return [None] * len(fields), None
        n = len(fields)
        if len(reply) != n + 4:
            raise CorruptRecord()
        allowed, count, full_in, taken = reply[n], reply[n + 1], reply[n + 2], reply[n + 3]
        verdict = (
            RateVerdict(True, count, 0, full_in, taken)
            if allowed == 1
            else RateVerdict(False, 0, count, full_in, 0)
        )
        return reply[:n], verdict

    # -- API keys ---------------------------------------------------------------------------

    async def find_api_key(
        self, secret_digest: str, now_ms: int = 0, take: int = 1, give_back: int = 0
    ) -> ApiKeyEntry | None:
        """The hot path: one round trip, an HMGET on the digest entry (in a script that also
        takes ``take`` requests from the key's rate bucket when limits are on and ``take`` is
        not 0, after returning ``give_back`` unused ones; ``now_ms`` is the bucket's clock)."""
        (user_id, key_id, permissions, expires_at), rate = await self._lookup(
            self.keys.key_entry(secret_digest), now_ms, _KEY_FIELDS, take, give_back
        )
        if user_id is None and key_id is None and permissions is None and expires_at is None:
            return None
        if not user_id or not key_id:
            raise CorruptRecord()
        mask = _int_field(permissions)
        if not 0 <= mask <= ALL_PERMISSIONS_MASK:  # a damaged mask must never widen access
            raise CorruptRecord()
        return ApiKeyEntry(user_id, key_id, mask, _int_field(expires_at), rate)

    async def add_api_key(
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
    ) -> bool:
        """Store a new key; False when the account already holds ``max_active`` active keys.
        Raises ``AccountGone`` when the user record is gone, or went while the key was written.

        Steps (a)-(c) of "Creating a credential" above: the listing (which names the digest),
        then the digest entry, then the check that the user still exists. The secret only works
        once the entry exists, and it is returned to the client only after all three succeeded.
        """
        metadata = orjson.dumps(
            {
                "name": name,
                "prefix": key_prefix,
                "p": permissions,
                "c": created_at,
                "e": expires_at,
                "d": secret_digest,
            }
        )
        account = [
            self.keys.user(user_id),
            self.keys.account_keys(user_id),
            self.keys.account_key_expiry(user_id),
            self.keys.account_key_last_used(user_id),
        ]
        added = await self._add_key_metadata(
            keys=account,
            args=[
                created_at,
                max_active,
                key_id,
                metadata,
                expires_at,
                created_at - KEY_EXPIRED_GRACE_MS,
            ],
        )
        if added == -1:
            raise AccountGone()
        if not added:
            return False
        entry = self.keys.key_entry(secret_digest)
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(
                    entry, mapping={"u": user_id, "k": key_id, "p": permissions, "e": expires_at}
                )
                pipe.pexpireat(entry, expires_at + KEY_EXPIRED_GRACE_MS)
                await pipe.execute()
            if events is None:
                confirmed = await self._confirm_key(keys=account, args=[key_id])
            else:  # the creation is recorded in the step that confirms it
                confirmed = await self._confirm_key(
                    keys=[*account, self.keys.account_audit(user_id)],
                    args=[key_id, *events.args()],
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

    async def list_api_keys(self, user_id: str, now: int) -> list[KeyRecord]:
        """The account's keys that have not expired, newest first."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.account_keys(user_id))
            pipe.hgetall(self.keys.account_key_last_used(user_id))
            metadata, last_used = await pipe.execute()
        records = []
        for key_id, raw in metadata.items():
            meta = self._decode_metadata(raw)
            if meta["e"] <= now:
                continue
            used = last_used.get(key_id)
            records.append(
                KeyRecord(
                    id=key_id,
                    name=meta["name"],
                    key_prefix=meta["prefix"],
                    permissions=meta["p"],
                    created_at=meta["c"],
                    expires_at=meta["e"],
                    last_used_at=int(used) if used is not None else None,
                )
            )
        records.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return records

    @staticmethod
    def _decode_metadata(raw: str) -> dict:
        try:
            meta = orjson.loads(raw)
            for field in ("name", "prefix", "d"):
                if not isinstance(meta[field], str):
                    raise CorruptRecord()
            for field in ("p", "c", "e"):
                if not isinstance(meta[field], int):
                    raise CorruptRecord()
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise CorruptRecord() from None
        return meta

    async def revoke_api_key(
        self, user_id: str, key_id: str, now: int, events: EventBatch | None = None
    ) -> bool:
        """Revoke one of the account's keys; False when it has no active key of that id.

        The revocation is recorded (``events``) once the key is found active and before
        anything is removed: a failed record leaves the key as it was. The digest entry goes
        first: from the moment that DEL returns, the secret is refused everywhere. Only then is
        the listing metadata removed.
        """
        raw = await self.redis.hget(self.keys.account_keys(user_id), key_id)
        if raw is None:
            return False
        meta = self._decode_metadata(raw)
        if events is not None and meta["e"] > now:  # an expired key's removal is no event
            await self.audit.record(user_id, events)
        await self.redis.delete(self.keys.key_entry(meta["d"]))
        # Of two concurrent revocations only the one that removes the listing reports success.
        removed = await self._forget_key_metadata(user_id, key_id)
        return removed and meta["e"] > now

    async def touch_api_key(self, user_id: str, key_id: str, used_at: int) -> None:
        await self._touch_key(
            keys=[self.keys.account_keys(user_id), self.keys.account_key_last_used(user_id)],
            args=[key_id, used_at],
        )

    # -- sessions ---------------------------------------------------------------------------

    async def add_session(
        self,
        token_digest: str,
        user_id: str,
        created_at: int,
        idle_deadline: int,
        absolute_deadline: int,
        public_id: str | None = None,
        ip: str | None = None,
        user_agent: str | None = None,
        password_hash: str | None = None,
        events: EventBatch | None = None,
    ) -> None:
        """Open a session. Raises ``AccountGone`` when the user record is gone, or went while
        the session was written (steps (a)-(c) of "Creating a credential" above), or, given
        the ``password_hash`` the login checked, no longer holds it when the session is
        confirmed: a password change that ends every other session can't miss one opened with
        the old password (the change stores the new hash, then ends the sessions the index
        names; a login confirmed before the store is already indexed, one after it fails).
        The entry is kept ``SESSION_EXPIRED_GRACE_MS`` past its deadline, so it can be answered
        as expired.

        Beside the four fields the per-request lookup reads, the entry holds what only the
        session list reads: the public id, when it was last seen (renewals move it), and the
        client's address and User-Agent at login.

        ``events`` (the login's) are recorded in the step that confirms the session, so no
        session opens unrecorded: if that step fails, the entry is deleted."""
        account = [self.keys.user(user_id), self.keys.account_sessions(user_id)]
        # The account index is written before the entry, so a session that exists can always be
        # found and ended when its user is deleted.
        if not await self._add_session_index(
            keys=account,
            args=[created_at, token_digest, absolute_deadline + SESSION_EXPIRED_GRACE_MS],
        ):
            raise AccountGone()
        entry = self.keys.session_entry(token_digest)
        async with self.redis.pipeline(transaction=True) as pipe:
            fields: dict[str, str | int] = {
                "u": user_id,
                "c": created_at,
                "a": absolute_deadline,
                "i": idle_deadline,
                "s": created_at,
            }
            for name, value in (("id", public_id), ("ip", ip), ("ua", user_agent)):
                if value is not None:
                    fields[name] = value
            pipe.hset(entry, mapping=fields)
            pipe.pexpireat(entry, min(idle_deadline, absolute_deadline) + SESSION_EXPIRED_GRACE_MS)
            await pipe.execute()
        keys, args = account, [token_digest, password_hash or ""]
        if events is not None:
            keys, args = [*account, self.keys.account_audit(user_id)], [*args, *events.args()]
        try:
            confirmed = await self._confirm_session(keys=keys, args=args)
        except BaseException:
            await self.redis.delete(entry)
            raise
        if not confirmed:
            await self.redis.delete(entry)
            raise AccountGone()

    async def find_session(
        self, token_digest: str, now_ms: int = 0, take: int = 1, give_back: int = 0
    ) -> SessionEntry | None:
        """Like ``find_api_key``, for a session token's digest."""
        (user_id, created, absolute, idle), rate = await self._lookup(
            self.keys.session_entry(token_digest), now_ms, _SESSION_FIELDS, take, give_back
        )
        if user_id is None and created is None and absolute is None and idle is None:
            return None
        if not user_id:
            raise CorruptRecord()
        return SessionEntry(
            user_id, _int_field(created), _int_field(absolute), _int_field(idle), rate
        )

    async def renew_session(self, token_digest: str, idle_deadline: int, expire_at: int) -> None:
        """Move a session's idle deadline; ``expire_at`` is its new deadline (idle or absolute,
        whichever is nearer), and the entry is kept ``SESSION_EXPIRED_GRACE_MS`` past it. The
        same write records now as the session's last sight: ``last_seen_at`` costs no write of
        its own, and is as fresh as the renewal interval."""
        await self._renew_session(
            keys=[self.keys.session_entry(token_digest)],
            args=[idle_deadline, expire_at + SESSION_EXPIRED_GRACE_MS, self._clock.now_ms()],
        )

    async def session_public_id(self, token_digest: str) -> str | None:
        """The session's public id (given one now if it was opened before sessions had them);
        None when the session is gone."""
        return await self._assign_session_id(
            keys=[self.keys.session_entry(token_digest)], args=[new_id("ses")]
        )

    async def remove_session(self, token_digest: str, user_id: str) -> bool:
        """End a session: its entry goes first (refused from then on, on every worker), then
        its place in the account's index. True when this call deleted the entry."""
        deleted = await self.redis.delete(self.keys.session_entry(token_digest))
        await self.redis.zrem(self.keys.account_sessions(user_id), token_digest)
        return bool(deleted)

    async def list_sessions(self, user_id: str, now: int) -> list[SessionRecord]:
        """The account's live sessions (neither deadline passed), newest first.

        The account's index names every session's digest; their entries are read in one
        pipelined round trip (each stands alone, in a slot of its own). A session opened before
        sessions had public ids is given one here."""
        digests = await self.redis.zrange(self.keys.account_sessions(user_id), 0, -1)
        if not digests:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest in digests:
                pipe.hmget(self.keys.session_entry(digest), _SESSION_LIST_FIELDS)
            rows = await pipe.execute()
        records = []
        for digest, (owner, created, absolute, idle, public_id, seen, ip, agent) in zip(
            digests, rows, strict=True
        ):
            if owner is None:
                continue  # ended or expired; the index forgets it at a later login
            if owner != user_id:
                raise CorruptRecord()
            created_at, absolute_at, idle_at = (
                _int_field(created),
                _int_field(absolute),
                _int_field(idle),
            )
            if absolute_at <= now or idle_at <= now:
                continue
            if public_id is None:
                public_id = await self._assign_session_id(
                    keys=[self.keys.session_entry(digest)], args=[new_id("ses")]
                )
                if public_id is None:
                    continue  # ended meanwhile
            records.append(
                SessionRecord(
                    id=public_id,
                    token_digest=digest,
                    created_at=created_at,
                    last_seen_at=_int_field(seen) if seen is not None else created_at,
                    idle_deadline=idle_at,
                    absolute_deadline=absolute_at,
                    ip=ip,
                    user_agent=agent,
                )
            )
        records.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return records

    async def remove_sessions(self, user_id: str, token_digests: list[str]) -> int:
        """End several of the account's sessions at once: every entry is deleted first, then
        their places in the index. Returns how many entries this call deleted."""
        if not token_digests:
            return 0
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest in token_digests:
                pipe.delete(self.keys.session_entry(digest))  # one slot each: one DEL each
            deleted = await pipe.execute()
        await self.redis.zrem(self.keys.account_sessions(user_id), *token_digests)
        return sum(deleted)

    # -- login failures ---------------------------------------------------------------------

    async def reserve_login_attempt(
        self, counters: list[tuple[str, int]], window_ms: int
    ) -> list[int]:
        """Reserve one attempt on each ``(counter, limit)``, in one round trip: for each, 0 when
        reserved, else the milliseconds left in its window (refused; nothing counted there).

        Each counter is checked and counted in one script of its own (counters of an email and
        of an address live in different cluster slots), so each bound holds on its own however
        many logins run at once; the caller gives back what it reserved when another refused."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for counter, limit in counters:
                await self._reserve_attempt(keys=[counter], args=[limit, window_ms], client=pipe)
            replies = await pipe.execute()
        return [_int_field(reply) for reply in replies]

    async def release_login_attempt(self, counters: list[str]) -> None:
        """Give back one reserved attempt on each counter (never below zero)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for counter in counters:
                await self._release_attempt(keys=[counter], client=pipe)
            await pipe.execute()

    async def clear_login_failures(self, counter: str) -> None:
        await self.redis.delete(counter)

    # -- users ------------------------------------------------------------------------------

    async def add_user(self, user_id: str, email: str, password_hash: str, now: int) -> bool:
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
            args = [password_hash, *events.args()]
        return bool(await self._set_password(keys=keys, args=args))

    async def find_user_id(self, email: str) -> str | None:
        return await self.redis.hget(self.keys.users_by_email, email)

    async def get_user(self, user_id: str) -> UserRecord | None:
        raw = await self.redis.hgetall(self.keys.user(user_id))
        if not raw:
            return None
        try:
            return UserRecord(raw["id"], raw["email"], raw["pw"], int(raw["c"]))
        except (KeyError, ValueError):
            raise CorruptRecord() from None

    async def list_users(self) -> list[UserRecord]:
        by_email = await self.redis.hgetall(self.keys.users_by_email)
        users = []
        for user_id in by_email.values():
            user = await self.get_user(user_id)
            if user is not None:
                users.append(user)
        users.sort(key=lambda user: (user.created_at, user.email))
        return users

    async def delete_user(self, user_id: str, email: str) -> None:
        """End every session, revoke every key, then remove the account.

        Steps (1)-(4) of "Creating a credential" above: the user record goes first, so that no
        session or key can be created for the user from then on; then every credential the
        indexes name; then the rest; the email mapping last, so that a deletion cut short can
        be found and repeated until it succeeds.
        """
        await self.redis.delete(self.keys.user(user_id))
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.account_keys(user_id))
            pipe.zrange(self.keys.account_sessions(user_id), 0, -1)
            metadata, sessions = await pipe.execute()
        digests = [self._decode_metadata(raw)["d"] for raw in metadata.values()]
        entries = [self.keys.key_entry(digest) for digest in digests]
        entries.extend(self.keys.session_entry(digest) for digest in sessions)
        if entries:
            # One DEL per entry: entries stand alone, each in a cluster slot of its own.
            async with self.redis.pipeline(transaction=False) as pipe:
                for entry in entries:
                    pipe.delete(entry)
                await pipe.execute()
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
