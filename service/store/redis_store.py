"""Storage of users, sessions and API keys in Redis. Knows nothing of HTTP.

Receives only digests of secrets, never a secret. Every record read back is checked; a record that
cannot be read raises ``CorruptRecord`` so callers refuse (fail closed) instead of guessing.
Redis errors propagate as ``redis.RedisError`` and are answered 503 by the HTTP layer.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from redis.asyncio import Redis

from service.clock import Clock, SystemClock
from service.domain.credentials import new_id
from service.domain.key_rules import address_ranges
from service.domain.permissions import ALL_PERMISSIONS_MASK
from service.domain.records import (
    ApiKeyEntry,
    KeyChanges,
    KeyRecord,
    KeyRules,
    RateLimit,
    RateVerdict,
    SessionEntry,
    SessionRecord,
    UserRecord,
)
from service.errors import CorruptRecord
from service.store.audit_store import RECORD_EVENTS, AuditStore, EventBatch
from service.store.keys import RedisKeys
from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis, ScriptCall
from service.store.slots import key_slot

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

# Changing a key (see "Changing a key" below), step (a): replaces the key's listing metadata with
# the new one only while the user record exists and the listing is still exactly the one the
# change was computed from (another change meanwhile: the caller reads again and retries). The
# change's events are recorded in this same step, before its writes.
# KEYS: user, listing, expiry index[, audit trail]. ARGV: key id, metadata read, new metadata,
# new expiry[, events (audit_store)]. Returns 1 changed, 2 changed meanwhile, 0 no such key,
# -1 no such user.
_CHANGE_KEY = (
    RECORD_EVENTS
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
if KEYS[4] then
  record_events(KEYS[4], 5)
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


# The hot-path lookups with a request-rate limit folded in, so a limited request still costs one
# round trip: read the credential's fields and, when it exists and the request will not be
# refused for what they say, take requests from its bucket (GCRA: the bucket holds the
# "theoretical arrival time" of the next request, in µs). A request refused for its credential
# (a disabled or expired key, a rolled-out secret past its grace, an address outside a key's
# allowed networks, an expired session) takes nothing: whoever holds a leaked, pinned key cannot
# spend its owner's rate. A worker may take several requests at once and use them over the next
# second (auth.rate_limits.RateLeases); it gives back those it did not use with its next take.
# Buckets are excluded from the AOF and replicas (REPL_NONE): they live seconds, and a write per
# request would put an fsync behind every gateway call. A restart forgets them, nothing else.
# Each returns nil for no entry, else the fields followed by a status (1 taken, 0 refused for
# the rate, -1 nothing taken: the credential is refused anyway, 2 nothing taken: the key's
# bucket is another one, named by its field ``b``), then remaining requests (taken) or µs to
# wait (refused for the rate), then µs until the bucket is full again, then requests taken.
_TAKE = """
local function take(values, bucket, now, interval, tolerance, wanted, given_back, usable)
  if redis.set_repl then
    redis.set_repl(redis.REPL_NONE)
  end
  local n = #values
  local tat = tonumber(redis.call('GET', bucket)) or now
  if tat < now then
    tat = now
  end
  if given_back > 0 then
    tat = math.max(tat - given_back, now)
  end
  local fit = math.floor((now + tolerance - tat) / interval)
  if not usable or fit < 1 then
    if given_back > 0 then
      if tat > now then
        redis.call('SET', bucket, string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000))
      else
        redis.call('DEL', bucket)
      end
    end
    if not usable then
      values[n + 1] = -1
      values[n + 2] = 0
      values[n + 3] = 0
    else
      values[n + 1] = 0
      values[n + 2] = tat + interval - tolerance - now
      values[n + 3] = tat - now
    end
    values[n + 4] = 0
    return values
  end
  local taken = math.min(wanted, fit)
  local next_tat = tat + taken * interval
  local ttl_ms = math.ceil((next_tat - now) / 1000)
  redis.call('SET', bucket, string.format('%.0f', next_tat), 'PX', ttl_ms)
  values[n + 1] = 1
  values[n + 2] = math.floor((tolerance - (next_tat - now)) / interval)
  values[n + 3] = next_tat - now
  values[n + 4] = taken
  return values
end

local values = redis.call('HMGET', KEYS[1], unpack(ARGV, FIRST_FIELD))
local found = false
for i = 1, #values do
  if values[i] then found = true end
end
if not found then
  return nil
end
local now = tonumber(ARGV[1])
local now_ms = math.floor(now / 1000)
"""

# An API key's entry (fields in the order of ``_KEY_FIELDS``: 4 expiry, 5 disabled, 7 own rate,
# 8 end of a rolled-out secret's grace, 9 allowed address ranges, 10 the digest whose bucket the
# key's secrets share). A key with a rate of its own (``r``, "<per second>:<burst>") replaces the
# deployment's interval and tolerance with it, so a changed rate counts from the next take on.
# Allowed networks are compared as ranges of the address forms of ``auth.key_rules``.
# KEYS: entry, bucket. ARGV: now µs, interval µs, tolerance µs, requests wanted, µs given back
# (requests given back, each at the interval it was taken at: a rate may have changed since), the
# digest whose bucket KEYS[2] is, the client's address form ('' when unknown), fields...
_LOOKUP_KEY_AND_TAKE = (
    _TAKE.replace("FIRST_FIELD", "8")
    + """
if values[10] and values[10] ~= ARGV[6] then
  local n = #values
  values[n + 1] = 2
  values[n + 2] = 0
  values[n + 3] = 0
  values[n + 4] = 0
  return values
end
local interval = tonumber(ARGV[2])
local tolerance = tonumber(ARGV[3])
if values[7] then
  local per_second, burst = string.match(values[7], '^(%d+):(%d+)$')
  if not per_second or tonumber(per_second) < 1 or tonumber(burst) < 1 then
    return redis.error_reply('damaged rate in a credential entry')
  end
  interval = math.max(1, math.floor(1000000 / tonumber(per_second) + 0.5))
  tolerance = interval * tonumber(burst)
end
local usable = not values[5] and (tonumber(values[4]) or 0) > now_ms
if usable and values[8] then
  usable = (tonumber(values[8]) or 0) > now_ms
end
if usable and values[9] then
  usable = false
  local address = ARGV[7]
  for low, high in string.gmatch(values[9], '(%x+)-(%x+)') do
    if #low == #address and low <= address and address <= high then
      usable = true
      break
    end
  end
end
return take(values, KEYS[2], now, interval, tolerance, tonumber(ARGV[4]), tonumber(ARGV[5]), usable)
"""
)

# A session's entry (fields in the order of ``_SESSION_FIELDS``: 3 absolute, 4 idle deadline).
# KEYS: entry, bucket. ARGV: now µs, interval µs, tolerance µs, requests wanted, µs given back,
# fields...
_LOOKUP_SESSION_AND_TAKE = (
    _TAKE.replace("FIRST_FIELD", "6")
    + """
local usable = (tonumber(values[3]) or 0) > now_ms and (tonumber(values[4]) or 0) > now_ms
return take(
  values, KEYS[2], now, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), usable
)
"""
)


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


# The per-request lookup of a key reads these: user, key id, permission mask, expiry; and, present
# only when set, disabled ``x``, allowed networks ``n`` (as the authenticator checks them) and
# ``a`` (the same as address ranges, as the lookup script checks them), own rate ``r``, on a
# rolled-out secret's entry the end of its grace ``g``, and on a rolled key's entries ``b``, the
# digest whose bucket its secrets share. ``v``, the version of the metadata the entry was
# written from, is read by writes only. The lookup script knows these positions.
_KEY_FIELDS = ("u", "k", "p", "e", "x", "n", "r", "g", "a", "b")
_KEY_FIELD_COUNT = len(_KEY_FIELDS)
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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _apply(meta: dict, changes: KeyChanges) -> dict:
    """The listing metadata with ``changes`` made, as a new dict."""
    edited = dict(meta)
    if changes.name is not None:
        edited["name"] = changes.name
    if changes.permissions is not None:
        edited["p"] = changes.permissions
    if changes.expires_at is not None:
        edited["e"] = changes.expires_at
    if changes.enabled is True:
        edited.pop("off", None)
    elif changes.enabled is False:
        edited["off"] = True
    if changes.allowed_ips is not None:
        if changes.allowed_ips:
            edited["ips"] = list(changes.allowed_ips)
        else:
            edited.pop("ips", None)
    if changes.sets_rate_limit:
        if changes.rate_limit is not None:
            edited["rl"] = list(changes.rate_limit)
        else:
            edited.pop("rl", None)
    edited["v"] = meta.get("v", 0) + 1
    return edited


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
#
# A rolled key keeps its previous secret through the grace: the metadata names both digests (``d``
# and ``pd``, until ``pe``), and (2) deletes the entries of both. Its roll is a creation too: its
# new entry is confirmed like (c) before the secret is returned.


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
_CHANGE_ATTEMPTS = 8
_SHARED_BUCKETS_LIMIT = 100_000


class KeyChanged(Exception):
    """A key changed under ``_CHANGE_ATTEMPTS`` changes in a row: other requests keep changing
    it. Nothing of this change was made."""


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
        # A secret's digest -> the digest whose bucket its key's secrets share, learnt from the
        # entries of rolled keys (bounded; forgetting costs a second lookup, nothing else).
        self._shared_buckets: dict[str, str] = {}
        # The hot connection's commands, encoded once but for the entry (and bucket, and clock).
        self._hot_lookup = {
            fields: CommandTemplate("HMGET", ARG, *fields)
            for fields in (_KEY_FIELDS, _SESSION_FIELDS)
        }
        self._scripts = {
            _KEY_FIELDS: redis.register_script(_LOOKUP_KEY_AND_TAKE),
            _SESSION_FIELDS: redis.register_script(_LOOKUP_SESSION_AND_TAKE),
        }
        if rate_limit is not None:
            self._rate_args = (rate_limit.interval_us, rate_limit.tolerance_us)
            # What follows the fields common to both: the key's bucket digest and the client.
            particular = {_KEY_FIELDS: (ARG, ARG), _SESSION_FIELDS: ()}
            self._hot_lookup_and_take = {
                fields: ScriptCall(
                    script.script,
                    script.sha,
                    2,
                    ARG,  # the entry
                    ARG,  # its bucket
                    ARG,  # now, µs
                    rate_limit.interval_us,
                    rate_limit.tolerance_us,
                    ARG,  # requests wanted
                    ARG,  # µs given back
                    *particular[fields],
                    *fields,
                )
                for fields, script in self._scripts.items()
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
        self._change_key = redis.register_script(_CHANGE_KEY)
        self._write_key_entry = redis.register_script(_WRITE_KEY_ENTRY)
        self._confirm_roll = redis.register_script(_CONFIRM_ROLL)
        self._forget_key = redis.register_script(_FORGET_KEY)
        self._reserve_attempt = redis.register_script(_RESERVE_ATTEMPT)
        self._release_attempt = redis.register_script(_RELEASE_ATTEMPT)
        self.audit = AuditStore(redis, self.keys)

    @property
    def pipelined(self) -> bool:
        """Whether the per-request reads go through the auto-pipelined connection."""
        return self._hot is not None

    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    async def _lookup(
        self,
        entry: str,
        now_ms: int,
        fields: tuple[str, ...],
        take: int,
        give_back_us: int,
        bucket_of: str,
        particular: tuple[bytes, ...] = (),
    ) -> tuple[list, int, RateVerdict | None]:
        """The entry's fields, the lookup's status (``_TAKE``) and ``take`` requests taken from
        the bucket of the entry named ``bucket_of`` when limits are on (``give_back_us`` of
        unused ones returned first); with ``take`` 0, the fields alone (status 1, no verdict).
        ``particular``: the arguments of a key's lookup (bucket digest, client address)."""
        hot = self._hot
        if self.rate_limit is None or take == 0:
            if hot is not None:
                values = await hot.execute_packed(self._hot_lookup[fields].pack(entry.encode()))
            else:
                values = await self.redis.hmget(entry, fields)
            return values, 1, None
        bucket = self.keys.rate_bucket(bucket_of)
        if hot is not None:
            reply = await hot.run_script(
                self._hot_lookup_and_take[fields],
                entry.encode(),
                bucket.encode(),
                b"%d" % (now_ms * 1000),
                b"%d" % take,
                b"%d" % give_back_us,
                *particular,
            )
        else:
            interval, tolerance = self._rate_args
            reply = await self._scripts[fields](
                keys=(entry, bucket),
                args=[now_ms * 1000, interval, tolerance, take, give_back_us, *particular, *fields],
            )
        n = len(fields)
        if reply is None:
            return [None] * n, 1, None
        if len(reply) != n + 4:
            raise CorruptRecord()
        status, count, full_in, taken = reply[n], reply[n + 1], reply[n + 2], reply[n + 3]
        if status == 1:
            verdict = RateVerdict(True, count, 0, full_in, taken)
        elif status == 0:
            verdict = RateVerdict(False, 0, count, full_in, 0)
        else:  # nothing taken: refused anyway (-1), or another bucket is the key's (2)
            verdict = None
        return reply[:n], status, verdict

    # -- API keys ---------------------------------------------------------------------------

    async def find_api_key(
        self,
        secret_digest: str,
        now_ms: int = 0,
        take: int = 1,
        give_back: int = 0,
        give_back_interval_us: int = 0,
        client: bytes = b"",
    ) -> ApiKeyEntry | None:
        """The hot path: one round trip, an HMGET on the digest entry (in a script that also
        takes ``take`` requests from the key's rate bucket when limits are on and ``take`` is
        not 0, after returning ``give_back`` unused ones taken at ``give_back_interval_us``
        each, 0 for the deployment's interval; ``now_ms`` is the bucket's clock). ``client``:
        the client's address form (``auth.key_rules.address_form``); a request from outside a
        key's allowed networks takes nothing, nor does one for a disabled or expired key or a
        rolled-out secret past its grace (their entry's ``rate`` is None).

        A rolled key's secrets share one bucket (the digest ``b`` names): the first lookup of
        such a secret on this worker learns it, and looks up again with that bucket."""
        entry = self.keys.key_entry(secret_digest)
        given_back_us = 0
        if give_back:
            assert self.rate_limit is not None  # only leases give back
            given_back_us = give_back * (give_back_interval_us or self.rate_limit.interval_us)
        bucket_of = self._shared_buckets.get(secret_digest, secret_digest)
        values, status, rate = await self._lookup(
            entry,
            now_ms,
            _KEY_FIELDS,
            take,
            given_back_us,
            self.keys.key_entry(bucket_of),
            (bucket_of.encode(), client),
        )
        if status == 2:
            shared = values[9]
            if not isinstance(shared, str) or shared == bucket_of:
                raise CorruptRecord()
            if len(self._shared_buckets) >= _SHARED_BUCKETS_LIMIT:
                self._shared_buckets.clear()
            self._shared_buckets[secret_digest] = shared
            values, status, rate = await self._lookup(
                entry,
                now_ms,
                _KEY_FIELDS,
                take,
                given_back_us,
                self.keys.key_entry(shared),
                (shared.encode(), client),
            )
            if status == 2:  # the bucket a key's secrets share never changes
                raise CorruptRecord()
        user_id, key_id, permissions, expires_at, disabled, networks, own_rate, until, ranges, _ = (
            values
        )
        if user_id is None and values.count(None) == _KEY_FIELD_COUNT:
            return None
        if not user_id or not key_id:
            raise CorruptRecord()
        try:  # in one block, not a call per field: this is every X-API-Key request's path
            mask, expires_at = int(permissions), int(expires_at)
            if until is not None:
                until = int(until)
        except (TypeError, ValueError):  # a field missing (None) or not a number
            raise CorruptRecord() from None
        if not 0 <= mask <= ALL_PERMISSIONS_MASK:  # a damaged mask must never widen access
            raise CorruptRecord()
        rules = None
        if disabled is not None or networks is not None or until is not None:
            rules = KeyRules(
                disabled is not None,  # whatever it holds: a damaged flag still disables
                networks,
                until,
                networks is not None and ranges is None,
            )
        return ApiKeyEntry(user_id, key_id, mask, expires_at, rules, own_rate, rate)

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
            records.append(self._key_record(key_id, meta, last_used.get(key_id), now))
        records.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return records

    @staticmethod
    def _key_record(key_id: str, meta: dict, last_used: str | None, now: int) -> KeyRecord:
        previous_until = meta["pe"] if "pd" in meta else None
        return KeyRecord(
            id=key_id,
            name=meta["name"],
            key_prefix=meta["prefix"],
            permissions=meta["p"],
            created_at=meta["c"],
            expires_at=meta["e"],
            last_used_at=int(last_used) if last_used is not None else None,
            enabled="off" not in meta,
            allowed_ips=tuple(meta.get("ips", ())),
            rate_limit=(meta["rl"][0], meta["rl"][1]) if "rl" in meta else None,
            previous_secret_expires_at=(
                previous_until if previous_until is not None and previous_until > now else None
            ),
        )

    @staticmethod
    def _decode_metadata(raw: str) -> dict:
        """A key's listing metadata: ``name``, ``prefix``, ``d`` (the secret's digest), ``p``,
        ``c``, ``e``; once changed, ``v`` (its version); when set, ``off`` (disabled), ``ips``
        (allowed networks), ``rl`` ([per second, burst]); after a roll, ``pd`` and ``pe`` (the
        previous secret's digest and the end of its grace), ``rolling`` until the roll has
        finished, and ``b`` (the digest whose bucket the key's secrets share; none: the
        secret's own). Anything else refuses it whole."""
        try:
            meta = orjson.loads(raw)
            for field in ("name", "prefix", "d"):
                if not isinstance(meta[field], str):
                    raise CorruptRecord()
            for field in ("p", "c", "e"):
                if not _is_int(meta[field]):
                    raise CorruptRecord()
            if not _is_int(meta.get("v", 0)) or meta.get("off", True) is not True:
                raise CorruptRecord()
            ips = meta.get("ips", ["-"])
            if not isinstance(ips, list) or not ips or not all(isinstance(i, str) for i in ips):
                raise CorruptRecord()
            rate = meta.get("rl", [1, 1])
            if not isinstance(rate, list) or len(rate) != 2 or not all(map(_is_int, rate)):
                raise CorruptRecord()
            if ("pd" in meta) != ("pe" in meta) or not isinstance(meta.get("pd", ""), str):
                raise CorruptRecord()
            if meta.get("rolling", True) is not True or ("rolling" in meta and "pd" not in meta):
                raise CorruptRecord()
            if not _is_int(meta.get("pe", 0)) or not isinstance(meta.get("b", ""), str):
                raise CorruptRecord()
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise CorruptRecord() from None
        return meta

    @staticmethod
    def _named_digests(meta: dict) -> list[str]:
        """Every digest the metadata names: the secret's, and a rolled-out one's."""
        return [meta["d"], meta["pd"]] if "pd" in meta else [meta["d"]]

    async def _delete_entries(self, digests: list[str]) -> None:
        # One DEL per entry: entries stand alone, each in a cluster slot of its own.
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest in digests:
                pipe.delete(self.keys.key_entry(digest))
            await pipe.execute()

    async def _read_key(self, user_id: str, key_id: str) -> tuple[str, dict, str | None] | None:
        """A key's listing metadata as stored, decoded, and its last use; None when unlisted."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.account_keys(user_id), key_id)
            pipe.hget(self.keys.account_key_last_used(user_id), key_id)
            raw, last_used = await pipe.execute()
        if raw is None:
            return None
        return raw, self._decode_metadata(raw), last_used

    async def _change(
        self, user_id: str, key_id: str, read: str, meta: dict, events: EventBatch | None
    ) -> int:
        """Step (a) of "Changing a key": 1 changed, 2 changed meanwhile, 0 gone, -1 no user."""
        keys = [
            self.keys.user(user_id),
            self.keys.account_keys(user_id),
            self.keys.account_key_expiry(user_id),
        ]
        args: list[str | int | bytes] = [key_id, read, orjson.dumps(meta), meta["e"]]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(events.args())
        return _int_field(await self._change_key(keys=keys, args=args))

    @staticmethod
    def _entry_fields(user_id: str, key_id: str, meta: dict) -> list[str | int]:
        """The fields of a digest entry of the key the metadata describes (version apart)."""
        fields: list[str | int] = ["u", user_id, "k", key_id, "p", meta["p"], "e", meta["e"]]
        if "off" in meta:
            fields += ("x", "1")
        if "ips" in meta:
            fields += ("n", ",".join(meta["ips"]), "a", address_ranges(meta["ips"]))
        if "rl" in meta:
            fields += ("r", f"{meta['rl'][0]}:{meta['rl'][1]}")
        if "b" in meta:
            fields += ("b", meta["b"])
        return fields

    async def _write_entries(self, user_id: str, key_id: str, meta: dict, now: int) -> None:
        """Step (b) of "Changing a key", in one round trip: each entry the metadata names
        rewritten from it unless it holds a later version, a previous secret past its grace
        deleted."""
        fields = self._entry_fields(user_id, key_id, meta)
        gone_at = meta["e"] + KEY_EXPIRED_GRACE_MS
        writes = [(meta["d"], fields, gone_at)]
        deletions = []
        if "pd" in meta:
            if "rolling" in meta:  # until the roll has finished, still the key's secret
                writes.append((meta["pd"], fields, gone_at))
            elif meta["pe"] > now:
                writes.append((meta["pd"], [*fields, "g", meta["pe"]], min(meta["pe"], gone_at)))
            else:
                deletions.append(meta["pd"])
        version = meta.get("v", 0)
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest, entry_fields, expire_at in writes:
                await self._write_key_entry(
                    keys=[self.keys.key_entry(digest)],
                    args=["0", version, expire_at, *entry_fields],
                    client=pipe,
                )
            for digest in deletions:
                pipe.delete(self.keys.key_entry(digest))
            await pipe.execute()

    async def edit_api_key(
        self,
        user_id: str,
        key_id: str,
        now: int,
        changes: KeyChanges,
        events_for: Callable[[KeyRecord, KeyRecord], EventBatch | None],
    ) -> KeyRecord | None:
        """Change one of the account's active keys ("Changing a key"); None when it has no
        active key of that id. ``events_for(before, after)`` gives the change's audit events,
        recorded in the step that makes it. A change that changes nothing writes nothing.
        Raises ``AccountGone`` when the user record is gone, ``KeyChanged`` when other changes
        kept overtaking this one."""
        for _ in range(_CHANGE_ATTEMPTS):
            found = await self._read_key(user_id, key_id)
            if found is None:
                return None
            read, meta, last_used = found
            if meta["e"] <= now:
                return None
            edited = _apply(meta, changes)
            before = self._key_record(key_id, meta, last_used, now)
            after = self._key_record(key_id, edited, last_used, now)
            if after == before:
                # Nothing to change or record; but a change that failed after its (a) (a 503)
                # may have left entries behind its version: this retry brings them up to it
                # (an entry that holds it already is not written).
                await self._write_entries(user_id, key_id, meta, now)
                return before
            status = await self._change(user_id, key_id, read, edited, events_for(before, after))
            if status == 2:
                continue
            if status == -1:
                raise AccountGone()
            if status == 0:
                return None
            await self._write_entries(user_id, key_id, edited, now)
            return after
        raise KeyChanged()

    def entry_slot(self, secret_digest: str) -> int:
        """The Redis Cluster slot of a secret's digest entry (and of its rate bucket)."""
        return key_slot(self.keys.key_entry(secret_digest).encode())

    async def api_key_slot(self, user_id: str, key_id: str) -> int | None:
        """The slot a new secret of this key must have (``entry_slot``) so that its entry and
        the bucket its secrets share are in one slot, which one script can read and take from
        on a cluster too; None when the account has no such key."""
        found = await self._read_key(user_id, key_id)
        if found is None:
            return None
        meta = found[1]
        current = meta["pd"] if "rolling" in meta else meta["d"]
        return self.entry_slot(meta.get("b", current))

    async def rewrite_key_entries(self, user_id: str, key_id: str, now: int) -> None:
        """Write the key's entries again from its metadata, as a new version of it that changes
        nothing: an entry written before the lookup read a field it reads now gains it."""
        for _ in range(_CHANGE_ATTEMPTS):
            found = await self._read_key(user_id, key_id)
            if found is None:
                return
            read, meta, _ = found
            if "rolling" in meta:  # the roll's last step writes every entry
                return
            again = {**meta, "v": meta.get("v", 0) + 1}
            status = await self._change(user_id, key_id, read, again, None)
            if status == 2:
                continue
            if status == 1:
                await self._write_entries(user_id, key_id, again, now)
            return

    async def roll_api_key(
        self,
        user_id: str,
        key_id: str,
        *,
        secret_digest: str,
        key_prefix: str,
        previous_until: int,
        now: int,
        events_for: Callable[[KeyRecord], EventBatch | None],
    ) -> KeyRecord | None:
        """Give one of the account's active keys a new secret (``secret_digest``); the current
        one keeps working until ``previous_until`` (ms; ``now`` for not at all), a secret still
        in the grace of an earlier roll is refused from now on. Everything else about the key
        stays. None when the account has no active key of that id; raises ``AccountGone`` and
        ``KeyChanged`` like ``edit_api_key`` (also when a roll overtook this one before it
        finished: its secret was dropped). The new secret works once this returns, and only
        then may it be shown (see "Changing a key").

        The metadata says ``rolling`` from (a) until the roll has finished: a roll that failed
        part-way (a 503) never showed its secret, so the next roll drops that one and gives the
        grace to the secret the clients still hold, and until then that secret keeps working
        without a grace, whatever later edits do."""
        for _ in range(_CHANGE_ATTEMPTS):
            found = await self._read_key(user_id, key_id)
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
                    await self.redis.delete(self.keys.key_entry(meta["pd"]))
            shared = meta.get("b", current)
            if self.entry_slot(secret_digest) != self.entry_slot(shared):
                raise KeyChanged()  # not drawn for this key's slot (see ``api_key_slot``)
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
            record = self._key_record(key_id, rolled, last_used, now)
            status = await self._change(user_id, key_id, read, rolled, events_for(record))
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
            await self._write_key_entry(
                keys=[entry],
                args=[
                    "1",
                    rolled["v"],
                    rolled["e"] + KEY_EXPIRED_GRACE_MS,
                    *self._entry_fields(user_id, key_id, rolled),
                ],
            )
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
        for _ in range(_CHANGE_ATTEMPTS):
            found = await self._read_key(user_id, key_id)
            if found is None:
                return False
            read, meta, _ = found
            if meta["d"] != secret_digest or "rolling" not in meta:
                raise KeyChanged()
            finished = {name: value for name, value in meta.items() if name != "rolling"}
            finished["v"] = meta.get("v", 0) + 1
            status = await self._change(user_id, key_id, read, finished, None)
            if status == 2:
                continue
            if status == -1:
                raise AccountGone()
            if status == 0:
                return False
            await self._write_entries(user_id, key_id, finished, now)
            return True
        raise KeyChanged()

    async def revoke_api_key(
        self, user_id: str, key_id: str, now: int, events: EventBatch | None = None
    ) -> bool:
        """Revoke one of the account's keys; False when it has no active key of that id.

        The revocation is recorded (``events``) once the key is found active and before
        anything is removed: a failed record leaves the key as it was. The digest entries go
        first: from the moment their DELs return, the secrets are refused everywhere. Only then
        is the listing metadata removed, if it still names those entries, and they are deleted
        once more (see "Changing a key").
        """
        read = await self.redis.hget(self.keys.account_keys(user_id), key_id)
        if read is None:
            return False
        meta = self._decode_metadata(read)
        if events is not None and meta["e"] > now:  # an expired key's removal is no event
            await self.audit.record(user_id, events)
        account = [
            self.keys.account_keys(user_id),
            self.keys.account_key_expiry(user_id),
            self.keys.account_key_last_used(user_id),
        ]
        for _ in range(_CHANGE_ATTEMPTS):
            await self._delete_entries(self._named_digests(meta))
            status = _int_field(await self._forget_key(keys=account, args=[key_id, read]))
            if status != 2:
                break
            read = await self.redis.hget(self.keys.account_keys(user_id), key_id)
            if read is None:
                status = 0
                break
            meta = self._decode_metadata(read)
        else:
            raise KeyChanged()
        await self._delete_entries(self._named_digests(meta))
        # Of two concurrent revocations only the one that removes the listing reports success.
        return status == 1 and meta["e"] > now

    async def find_live_keys(self, secret_digests: list[str], now: int) -> list[tuple[str, str]]:
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
            if _int_field(expires_at) <= now:
                continue
            if refused_from is not None and _int_field(refused_from) <= now:
                continue
            found.append((user_id, key_id))
        return found

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
        """Like ``find_api_key``, for a session token's digest (an expired session's request
        takes nothing from its bucket)."""
        entry = self.keys.session_entry(token_digest)
        given_back_us = give_back * self.rate_limit.interval_us if give_back else 0  # type: ignore[union-attr]
        (user_id, created, absolute, idle), _, rate = await self._lookup(
            entry, now_ms, _SESSION_FIELDS, take, given_back_us, entry
        )
        if user_id is None and created is None and absolute is None and idle is None:
            return None
        if not user_id:
            raise CorruptRecord()
        try:  # in one block, not a call per field: this is every Bearer request's path
            return SessionEntry(user_id, int(created), int(absolute), int(idle), rate)
        except (TypeError, ValueError):  # a field missing (None) or not a number
            raise CorruptRecord() from None

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

    async def reserve_in_window(self, counter: str, limit: int, window_ms: int) -> int:
        """Count one attempt on ``counter`` unless ``limit`` were counted in its window (which
        starts with the first): 0 when counted, else the milliseconds left in the window. The
        login throttle's reservation, for other bounds per window (leak reports)."""
        return _int_field(await self._reserve_attempt(keys=[counter], args=[limit, window_ms]))

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
        digests = [
            digest
            for raw in metadata.values()
            for digest in self._named_digests(self._decode_metadata(raw))
        ]
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
