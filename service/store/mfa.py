"""An account's second factors in Redis: the TOTP secret (sealed) and its pending enrolment,
recovery code digests, passkeys and their sign counts, WebAuthn challenges. Every key is under the
account's hash tag (``service.store.keys``), so each change is one script. Claiming a factor and
the second steps of logins are ``service.store.mfa_answers``.

Every factor change moves the factors' generation (``g`` of ``P:{U}:mfa``); a session is
confirmed only while the generation is the one its login read (``service.store.sessions``), so
no session opened by a login that raced a factor change outlives it. Knows nothing of HTTP; holds
sealed secrets, digests and public keys only, never a code or a secret in clear.
"""

from __future__ import annotations

import orjson
from redis.asyncio import Redis

from service.domain.audit_events import EventBatch
from service.domain.factors import MfaState, Passkey
from service.errors import CorruptRecord
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.keys import RedisKeys

# A pending TOTP enrolment replaces any earlier one, unless TOTP is enabled (2) or the user is
# gone (0). KEYS: user, mfa, pending. ARGV: sealed secret, expires.
_START_TOTP = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if redis.call('HEXISTS', KEYS[2], 't') == 1 then
  return 2
end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 's', ARGV[1], 'e', ARGV[2])
redis.call('PEXPIREAT', KEYS[3], ARGV[2])
return 1
"""

# The pending enrolment confirmed: TOTP enabled with the step its code was accepted for, the
# recovery codes replaced, the generation moved. -1 the user is gone, 0 the enrolment is not
# (or no longer) this one, 2 TOTP is enabled already.
# KEYS: user, mfa, pending, recovery codes, audit. ARGV: sealed, now, step, n, n digests, events.
_ENABLE_TOTP = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('HGET', KEYS[3], 's') ~= ARGV[1] or
    (tonumber(redis.call('HGET', KEYS[3], 'e')) or 0) <= tonumber(ARGV[2]) then
  return 0
end
if redis.call('HEXISTS', KEYS[2], 't') == 1 then
  return 2
end
local n = tonumber(ARGV[4])
record_events(KEYS[5], 5 + n)
redis.call('HSET', KEYS[2], 't', ARGV[1], 'ta', ARGV[2], 'ts', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'g', 1)
redis.call('DEL', KEYS[3], KEYS[4])
redis.call('SADD', KEYS[4], unpack(ARGV, 5, 4 + n))
return 1
"""
)

# TOTP disabled (0: it was not enabled); recovery codes go with the last factor.
# KEYS: mfa, recovery codes, passkeys, audit. ARGV: events.
_DISABLE_TOTP = (
    RECORD_EVENTS
    + """
if redis.call('HEXISTS', KEYS[1], 't') == 0 then
  return 0
end
record_events(KEYS[4], 1)
redis.call('HDEL', KEYS[1], 't', 'ta', 'ts')
redis.call('HINCRBY', KEYS[1], 'g', 1)
if redis.call('HLEN', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[2])
end
return 1
"""
)

# New recovery codes replace the old ones, while the account has a factor (else 0).
# KEYS: mfa, recovery codes, passkeys, audit. ARGV: n, n digests, events.
_REPLACE_RECOVERY_CODES = (
    RECORD_EVENTS
    + """
if redis.call('HEXISTS', KEYS[1], 't') == 0 and redis.call('HLEN', KEYS[3]) == 0 then
  return 0
end
local n = tonumber(ARGV[1])
record_events(KEYS[4], 2 + n)
redis.call('DEL', KEYS[2])
redis.call('SADD', KEYS[2], unpack(ARGV, 2, 1 + n))
redis.call('HINCRBY', KEYS[1], 'g', 1)
return 1
"""
)

# A passkey added: -1 the user is gone, 2 the account has the most passkeys, 3 this credential
# is registered already. KEYS: user, mfa, passkeys, passkey uses, audit. ARGV: id, JSON,
# credential id, most, sign count, now, events.
_ADD_PASSKEY = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[4]) then
  return 2
end
local needle = '"cid":"' .. ARGV[3] .. '"'
for _, stored in ipairs(redis.call('HVALS', KEYS[3])) do
  if string.find(stored, needle, 1, true) then
    return 3
  end
end
record_events(KEYS[5], 7)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[5] .. ':')
redis.call('HINCRBY', KEYS[2], 'g', 1)
return 1
"""
)

# A passkey removed (0: no such passkey); recovery codes go with the last factor.
# KEYS: mfa, recovery codes, passkeys, passkey uses, audit. ARGV: id, events.
_REMOVE_PASSKEY = (
    RECORD_EVENTS
    + """
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then
  return 0
end
record_events(KEYS[5], 2)
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'g', 1)
if redis.call('HLEN', KEYS[3]) == 0 and redis.call('HEXISTS', KEYS[1], 't') == 0 then
  redis.call('DEL', KEYS[2])
end
return 1
"""
)

# A WebAuthn challenge kept for its purpose until it expires; expired ones pruned.
# KEYS: challenges. ARGV: purpose, '<expires>:<challenge>', now, expires.
_SET_CHALLENGE = """
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if (tonumber(string.match(all[i + 1], '^(%d+):')) or 0) <= tonumber(ARGV[3]) then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1
"""

# A challenge taken: read and removed at once, so it serves one answer at most.
# KEYS: challenges. ARGV: purpose.
_TAKE_CHALLENGE = """
local value = redis.call('HGET', KEYS[1], ARGV[1])
if value then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return value
"""

# Every factor removed (an operator's reset): recorded, the generation moved, the rest deleted.
# KEYS: mfa, pending, recovery codes, passkeys, passkey uses, challenges, logins, audit.
# ARGV: events. Returns 1 when the account had a factor or recovery codes.
_RESET = (
    RECORD_EVENTS
    + """
local had = redis.call('HEXISTS', KEYS[1], 't') == 1 or redis.call('HLEN', KEYS[4]) > 0
  or redis.call('SCARD', KEYS[3]) > 0
record_events(KEYS[8], 1)
redis.call('HDEL', KEYS[1], 't', 'ta', 'ts')
redis.call('HINCRBY', KEYS[1], 'g', 1)
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
if had then
  return 1
end
return 0
"""
)

# A sealed secret replaced by the same secret sealed with another key, unless it changed.
# KEYS: the hash. ARGV: field, as read, sealed again.
_RESEAL = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


def _passkey(passkey_id: str, raw: str, use: str | None) -> Passkey:
    try:
        meta = orjson.loads(raw)
        count, _, last = (use or "0:").partition(":")
        return Passkey(
            passkey_id,
            meta["name"],
            meta["cid"],
            meta["pk"],
            int(meta["c"]),
            tuple(meta.get("tr", ())),
            int(count),
            int(last) if last else None,
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise CorruptRecord() from None


class MfaStore:
    # Writes a replica must hold before they answer (FILEHOST_REPLICA_WAIT_MS).
    WAITS_FOR_REPLICA = (
        "enable_totp",
        "disable_totp",
        "replace_recovery_codes",
        "add_passkey",
        "remove_passkey",
        "reset",
    )

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys
        register = redis.register_script
        self._start_totp = register(_START_TOTP)
        self._enable_totp = register(_ENABLE_TOTP)
        self._disable_totp = register(_DISABLE_TOTP)
        self._replace_recovery_codes = register(_REPLACE_RECOVERY_CODES)
        self._add_passkey = register(_ADD_PASSKEY)
        self._remove_passkey = register(_REMOVE_PASSKEY)
        self._set_challenge = register(_SET_CHALLENGE)
        self._take_challenge = register(_TAKE_CHALLENGE)
        self._reset = register(_RESET)
        self._reseal = register(_RESEAL)

    async def state(self, user_id: str) -> MfaState:
        """The account's factors in one round trip (one slot)."""
        keys = self.keys
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.account_mfa(user_id), ("g", "t", "ta", "ts"))
            pipe.hgetall(keys.account_passkeys(user_id))
            pipe.hgetall(keys.account_passkey_uses(user_id))
            pipe.scard(keys.account_recovery_codes(user_id))
            pipe.hget(keys.account_totp_pending(user_id), "e")
            (
                (generation, sealed, enabled_at, step),
                stored,
                uses,
                left,
                pending,
            ) = await pipe.execute()
        try:
            passkeys = [_passkey(pid, raw, uses.get(pid)) for pid, raw in stored.items()]
            passkeys.sort(key=lambda passkey: (passkey.created_at, passkey.id))
            return MfaState(
                int(generation or 0),
                sealed,
                int(enabled_at) if enabled_at is not None else None,
                int(step or 0),
                passkeys,
                int(left),
                int(pending) if pending is not None else None,
            )
        except ValueError:
            raise CorruptRecord() from None

    # -- enrolling --------------------------------------------------------------------------

    async def start_totp(self, user_id: str, sealed: str, expires: int) -> int:
        """1 started, 2 TOTP is enabled already, 0 the user is gone."""
        keys = self.keys
        return int(
            await self._start_totp(
                keys=[
                    keys.user(user_id),
                    keys.account_mfa(user_id),
                    keys.account_totp_pending(user_id),
                ],
                args=[sealed, expires],
            )
        )

    async def pending_totp(self, user_id: str, now: int) -> str | None:
        """The pending enrolment's sealed secret, while it lasts."""
        sealed, expires = await self.redis.hmget(
            self.keys.account_totp_pending(user_id), ("s", "e")
        )
        if sealed is None or expires is None:
            return None
        try:
            return sealed if int(expires) > now else None
        except ValueError:
            raise CorruptRecord() from None

    async def enable_totp(
        self, user_id: str, sealed: str, now: int, step: int, codes: list[str], events: EventBatch
    ) -> int:
        """-1 the user is gone, 0 the enrolment is gone or another, 2 enabled already, 1 done."""
        keys = self.keys
        return int(
            await self._enable_totp(
                keys=[
                    keys.user(user_id),
                    keys.account_mfa(user_id),
                    keys.account_totp_pending(user_id),
                    keys.account_recovery_codes(user_id),
                    keys.account_audit(user_id),
                ],
                args=[sealed, now, step, len(codes), *codes, *batch_args(events)],
            )
        )

    async def disable_totp(self, user_id: str, events: EventBatch) -> bool:
        keys = self.keys
        return bool(
            await self._disable_totp(
                keys=[
                    keys.account_mfa(user_id),
                    keys.account_recovery_codes(user_id),
                    keys.account_passkeys(user_id),
                    keys.account_audit(user_id),
                ],
                args=batch_args(events),
            )
        )

    async def replace_recovery_codes(
        self, user_id: str, codes: list[str], events: EventBatch
    ) -> bool:
        """False when the account has no factor."""
        keys = self.keys
        return bool(
            await self._replace_recovery_codes(
                keys=[
                    keys.account_mfa(user_id),
                    keys.account_recovery_codes(user_id),
                    keys.account_passkeys(user_id),
                    keys.account_audit(user_id),
                ],
                args=[len(codes), *codes, *batch_args(events)],
            )
        )

    async def add_passkey(
        self, user_id: str, passkey: Passkey, most: int, events: EventBatch
    ) -> int:
        """1 added, -1 the user is gone, 2 the account has ``most``, 3 registered already."""
        keys = self.keys
        meta = {
            "name": passkey.name,
            "cid": passkey.credential_id,
            "pk": passkey.public_key,
            "c": passkey.created_at,
            "tr": list(passkey.transports),
        }
        return int(
            await self._add_passkey(
                keys=[
                    keys.user(user_id),
                    keys.account_mfa(user_id),
                    keys.account_passkeys(user_id),
                    keys.account_passkey_uses(user_id),
                    keys.account_audit(user_id),
                ],
                args=[
                    passkey.id,
                    orjson.dumps(meta),
                    passkey.credential_id,
                    most,
                    passkey.sign_count,
                    passkey.created_at,
                    *batch_args(events),
                ],
            )
        )

    async def remove_passkey(self, user_id: str, passkey_id: str, events: EventBatch) -> bool:
        return bool(
            await self._remove_passkey(
                keys=[
                    self.keys.account_mfa(user_id),
                    self.keys.account_recovery_codes(user_id),
                    self.keys.account_passkeys(user_id),
                    self.keys.account_passkey_uses(user_id),
                    self.keys.account_audit(user_id),
                ],
                args=[passkey_id, *batch_args(events)],
            )
        )

    async def set_challenge(
        self, user_id: str, purpose: str, challenge: str, now: int, expires: int
    ) -> None:
        await self._set_challenge(
            keys=[self.keys.account_webauthn_challenges(user_id)],
            args=[purpose, f"{expires}:{challenge}", now, expires],
        )

    async def take_challenge(self, user_id: str, purpose: str, now: int) -> str | None:
        """The purpose's challenge, removed; None when there is none or it expired."""
        value = await self._take_challenge(
            keys=[self.keys.account_webauthn_challenges(user_id)], args=[purpose]
        )
        if value is None:
            return None
        expires, _, challenge = value.partition(":")
        if not expires.isdigit():
            raise CorruptRecord()
        return challenge if int(expires) > now else None

    async def reset(self, user_id: str, events: EventBatch) -> bool:
        """Remove every factor, recovery code, pending enrolment and login step; True when
        there was a factor or a recovery code."""
        return bool(
            await self._reset(
                keys=[
                    *self.keys.account_mfa_keys(user_id),
                    self.keys.account_audit(user_id),
                ],
                args=batch_args(events),
            )
        )

    async def sealed_secrets(self, user_id: str) -> list[tuple[str, str, str]]:
        """(key, field, sealed value) of every sealed secret the account holds."""
        mfa, pending = self.keys.account_mfa(user_id), self.keys.account_totp_pending(user_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(mfa, "t")
            pipe.hget(pending, "s")
            enabled, waiting = await pipe.execute()
        found = []
        if enabled is not None:
            found.append((mfa, "t", enabled))
        if waiting is not None:
            found.append((pending, "s", waiting))
        return found

    async def reseal(self, key: str, field: str, read: str, sealed: str) -> bool:
        """Replace a sealed value as read by ``sealed``; False when it changed meanwhile."""
        return bool(await self._reseal(keys=[key], args=[field, read, sealed]))
