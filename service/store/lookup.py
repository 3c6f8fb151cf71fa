"""The per-request read: one round trip from a credential's digest to its entry, with its
request-rate bucket taken from in the same script when limits are on. Knows nothing of HTTP.

Receives only digests of secrets, never a secret. Redis errors propagate as ``redis.RedisError``
(503, fail closed); an entry that cannot be read raises ``CorruptRecord``. The reads go through
the worker's auto-pipelined connection (``hot``) when there is one.
"""

from __future__ import annotations

from redis.asyncio import Redis

from service.domain.outcomes import GONE_REASONS, KeyGone
from service.domain.permissions import ENTRY_MASK_LIMIT
from service.domain.records import ApiKeyEntry, KeyRules, RateLimit, RateVerdict, SessionEntry
from service.errors import CorruptRecord
from service.store.fields import KEY_FIELD_COUNT, KEY_FIELDS, SESSION_FIELDS
from service.store.keys import RedisKeys
from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis, ScriptCall

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
# ``_lookup``'s status for an entry its script found missing (with nothing remembered of it).
_ABSENT = 4

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
  ON_MISSING
end
local now = tonumber(ARGV[1])
local now_ms = math.floor(now / 1000)
"""

# An API key's entry (fields in the order of ``KEY_FIELDS``: 4 expiry, 5 disabled, 7 own rate,
# 8 end of a rolled-out secret's grace, 9 allowed address ranges, 10 the digest whose bucket the
# key's secrets share). A key with a rate of its own (``r``, "<per second>:<burst>") replaces the
# deployment's interval and tolerance with it, so a changed rate counts from the next take on.
# Allowed networks are compared as ranges of the address forms of ``auth.key_rules``.
# A secret without an entry may be one that was revoked or rolled out: its key-gone record
# (KEYS[3], read only then) is returned alone, so that its refusal can say why.
# KEYS: entry, bucket, key-gone record. ARGV: now µs, interval µs, tolerance µs, requests wanted,
# µs given back (requests given back, each at the interval it was taken at: a rate may have
# changed since), the digest whose bucket KEYS[2] is, the client's address form ('' when
# unknown), fields...
_LOOKUP_KEY_AND_TAKE = (
    _TAKE.replace("FIRST_FIELD", "8").replace(
        "ON_MISSING",
        """local gone = redis.call('GET', KEYS[3])
  if gone then
    return {gone}
  end
  return nil""",
    )
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

# A session's entry (fields in the order of ``SESSION_FIELDS``: 3 absolute, 4 idle deadline).
# KEYS: entry, bucket. ARGV: now µs, interval µs, tolerance µs, requests wanted, µs given back,
# fields...
_LOOKUP_SESSION_AND_TAKE = (
    _TAKE.replace("FIRST_FIELD", "6").replace("ON_MISSING", "return nil")
    + """
local usable = (tonumber(values[3]) or 0) > now_ms and (tonumber(values[4]) or 0) > now_ms
return take(
  values, KEYS[2], now, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5]), usable
)
"""
)

_SHARED_BUCKETS_LIMIT = 100_000
# The bits no digest entry's mask may hold: a negative number holds them all.
_NOT_IN_A_MASK = ~ENTRY_MASK_LIMIT


def key_gone(record: object) -> KeyGone:
    """The ``KeyGone`` a key-gone record (``<reason>:<ms>``) tells; ``CorruptRecord`` when it
    cannot be read."""
    if not isinstance(record, str):
        raise CorruptRecord()
    reason, _, at = record.partition(":")
    if reason not in GONE_REASONS or not at.isdigit():
        raise CorruptRecord()
    return KeyGone(reason, int(at))


class CredentialLookup:
    """``find_api_key`` and ``find_session``: the hot path's one read per request."""

    def __init__(
        self,
        redis: Redis,
        keys: RedisKeys,
        hot: PipelinedRedis | None = None,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self._hot = hot
        self.rate_limit = rate_limit
        # A secret's digest -> the digest whose bucket its key's secrets share, learnt from the
        # entries of rolled keys (bounded; forgetting costs a second lookup, nothing else).
        self._shared_buckets: dict[str, str] = {}
        # The hot connection's commands, encoded once but for the entry (and bucket, and clock).
        self._hot_lookup = {
            fields: CommandTemplate("HMGET", ARG, *fields)
            for fields in (KEY_FIELDS, SESSION_FIELDS)
        }
        self._hot_gone = CommandTemplate("GET", ARG)
        self._scripts = {
            KEY_FIELDS: redis.register_script(_LOOKUP_KEY_AND_TAKE),
            SESSION_FIELDS: redis.register_script(_LOOKUP_SESSION_AND_TAKE),
        }
        if rate_limit is not None:
            self._rate_args = (rate_limit.interval_us, rate_limit.tolerance_us)
            # A key's lookup reads a third key (its key-gone record), and takes two arguments
            # after those common to both: the key's bucket digest and the client.
            gone = {KEY_FIELDS: (ARG,), SESSION_FIELDS: ()}
            particular = {KEY_FIELDS: (ARG, ARG), SESSION_FIELDS: ()}
            self._hot_lookup_and_take = {
                fields: ScriptCall(
                    script.script,
                    script.sha,
                    2 + len(gone[fields]),
                    ARG,  # the entry
                    ARG,  # its bucket
                    *gone[fields],
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

    @property
    def pipelined(self) -> bool:
        """Whether the per-request reads go through the auto-pipelined connection."""
        return self._hot is not None

    async def _lookup(
        self,
        entry: str,
        now_ms: int,
        fields: tuple[str, ...],
        take: int,
        give_back_us: int,
        bucket_of: str,
        particular: tuple[bytes, ...] = (),
        gone: bool = False,
    ) -> tuple[list, int, RateVerdict | None]:
        """The entry's fields, the lookup's status (``_TAKE``) and ``take`` requests taken from
        the bucket of the entry named ``bucket_of`` when limits are on (``give_back_us`` of
        unused ones returned first); with ``take`` 0, the fields alone (status 1, no verdict).
        ``particular``: the arguments of a key's lookup (bucket digest, client address);
        ``gone``: whether the script reads the entry's key-gone record when the entry is
        missing (a key's), whose value is then returned alone, with status 3; a script that
        found neither answers status 4 (``_ABSENT``), so nobody reads the record again."""
        hot = self._hot
        if self.rate_limit is None or take == 0:
            if hot is not None:
                values = await hot.execute_packed(self._hot_lookup[fields].pack(entry.encode()))
            else:
                values = await self.redis.hmget(entry, fields)
            return values, 1, None
        bucket = self.keys.rate_bucket(bucket_of)
        if hot is not None:
            call = self._hot_lookup_and_take[fields]
            now_us, wanted, given_back = b"%d" % (now_ms * 1000), b"%d" % take, b"%d" % give_back_us
            if gone:  # names as plain arguments, no tuple unpacked: every keyed request comes here
                gone_name = self.keys.key_gone_of_entry(entry).encode()
                reply = await hot.run_script(
                    call,
                    entry.encode(),
                    bucket.encode(),
                    gone_name,
                    now_us,
                    wanted,
                    given_back,
                    *particular,
                )
            else:
                reply = await hot.run_script(
                    call, entry.encode(), bucket.encode(), now_us, wanted, given_back, *particular
                )
        else:
            interval, tolerance = self._rate_args
            names = (entry, bucket, self.keys.key_gone_of_entry(entry)) if gone else (entry, bucket)
            reply = await self._scripts[fields](
                keys=names,
                args=[now_ms * 1000, interval, tolerance, take, give_back_us, *particular, *fields],
            )
        n = len(fields)
        if reply is None:
            return [None] * n, _ABSENT, None
        if len(reply) == 1:
            return reply, 3, None
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
        such a secret on this worker learns it, and looks up again with that bucket.

        None for a secret without an entry; ``KeyGone`` raised for one whose key-gone record
        remembers it (revoked, or rolled out past its grace), read in the same script, or by a
        second read after a plain ``HMGET`` that found nothing."""
        entry = self.keys.key_entry(secret_digest)
        given_back_us = 0
        if give_back:
            assert self.rate_limit is not None  # only leases give back
            given_back_us = give_back * (give_back_interval_us or self.rate_limit.interval_us)
        bucket_of = self._shared_buckets.get(secret_digest, secret_digest)
        values, status, rate = await self._lookup(
            entry,
            now_ms,
            KEY_FIELDS,
            take,
            given_back_us,
            self.keys.key_entry(bucket_of),
            (bucket_of.encode(), client),
            True,
        )
        if status == 3:
            raise key_gone(values[0])
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
                KEY_FIELDS,
                take,
                given_back_us,
                self.keys.key_entry(shared),
                (shared.encode(), client),
                True,
            )
            if status == 3:  # revoked since the first lookup
                raise key_gone(values[0])
            if status == 2:  # the bucket a key's secrets share never changes
                raise CorruptRecord()
        user_id, key_id, permissions, expires_at, disabled, networks, own_rate, until, ranges, _ = (
            values
        )
        if status == _ABSENT:
            return None
        if user_id is None and values.count(None) == KEY_FIELD_COUNT:
            # A plain read found nothing: a second, for why (a miss is never a working key).
            gone = self.keys.key_gone_of_entry(entry)
            if self._hot is not None:
                why = await self._hot.execute_packed(self._hot_gone.pack(gone.encode()))
            else:
                why = await self.redis.get(gone)
            if why is not None:
                raise key_gone(why)
            return None
        if not user_id or not key_id:
            raise CorruptRecord()
        try:  # in one block, not a call per field: this is every X-API-Key request's path
            mask, expires_at = int(permissions), int(expires_at)
            if until is not None:
                until = int(until)
        except (TypeError, ValueError):  # a field missing (None) or not a number
            raise CorruptRecord() from None
        if mask & _NOT_IN_A_MASK:  # a damaged mask (or a negative one) must never widen access
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

    async def find_session(
        self, token_digest: str, now_ms: int = 0, take: int = 1, give_back: int = 0
    ) -> SessionEntry | None:
        """Like ``find_api_key``, for a session token's digest (an expired session's request
        takes nothing from its bucket)."""
        entry = self.keys.session_entry(token_digest)
        # Requests are given back only under a rate limit.
        given_back_us = give_back * self.rate_limit.interval_us if give_back else 0  # type: ignore[union-attr]
        (user_id, created, absolute, idle), _, rate = await self._lookup(
            entry, now_ms, SESSION_FIELDS, take, given_back_us, entry
        )
        if user_id is None and created is None and absolute is None and idle is None:
            return None
        if not user_id:
            raise CorruptRecord()
        try:  # in one block, not a call per field: this is every Bearer request's path
            return SessionEntry(user_id, int(created), int(absolute), int(idle), rate)
        except (TypeError, ValueError):  # a field missing (None) or not a number
            raise CorruptRecord() from None
