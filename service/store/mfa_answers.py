"""Answers to second-factor questions in Redis: a factor claimed once (a TOTP step, a recovery
code, a passkey's sign count) on every worker, and the second steps of logins in progress, each
counted, answered and spent in the step that claims its factor. Every key is under the account's
hash tag (``service.store.keys``), so each is one script. Holds digests only, never a code.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from service.domain.audit_events import EventBatch
from service.domain.factors import LoginStep
from service.errors import CorruptRecord
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.keys import RedisKeys

# claim(kind, a, b, c): whether this answer's factor is claimed now, once. KEYS[1] mfa,
# KEYS[2] recovery codes, KEYS[3] passkeys, KEYS[4] passkey uses.
#   totp:     a the sealed secret the code was checked against (still the account's), b its step
#             ('0': no step matched); a step is accepted only above the last one accepted.
#   recovery: a the code's digest, removed.
#   passkey:  a the passkey id, b the assertion's sign count ('-1': it did not verify), c now;
#             the count must grow unless both are 0 (authenticators that keep none).
_CLAIM = (
    RECORD_EVENTS
    + """
local function claim(kind, a, b, c)
  if kind == 'totp' then
    local step = tonumber(b)
    if step <= 0 or redis.call('HGET', KEYS[1], 't') ~= a then
      return false
    end
    if step <= (tonumber(redis.call('HGET', KEYS[1], 'ts')) or 0) then
      return false
    end
    redis.call('HSET', KEYS[1], 'ts', b)
    return true
  elseif kind == 'recovery' then
    return redis.call('SREM', KEYS[2], a) == 1
  elseif kind == 'passkey' then
    local count = tonumber(b)
    if count < 0 or redis.call('HEXISTS', KEYS[3], a) == 0 then
      return false
    end
    local stored = tonumber(string.match(redis.call('HGET', KEYS[4], a) or '', '^(%d+):')) or 0
    if (count > 0 or stored > 0) and count <= stored then
      return false
    end
    redis.call('HSET', KEYS[4], a, b .. ':' .. c)
    return true
  end
  return false
end
"""
)

# A login's second step: the mfa_token's entry (KEYS[6]) is read, counted, and spent by a right
# answer, in the step that claims the factor. ARGV: token digest, now, most answers, kind, a, b, c
# [, events recorded with a right answer (KEYS[5])]. Returns {0} for a token that is unknown,
# expired or spent; {1, '<generation>:<challenge>:<password hash>'} for a right answer; {2,
# answers left} for a wrong one.
_ANSWER_LOGIN = (
    _CLAIM
    + """
local entry = redis.call('HGET', KEYS[6], ARGV[1])
if not entry then
  return {0}
end
local expires, answers, rest = string.match(entry, '^(%d+):(%d+):(.*)$')
local most = tonumber(ARGV[3])
if not expires or tonumber(expires) <= tonumber(ARGV[2]) or tonumber(answers) >= most then
  redis.call('HDEL', KEYS[6], ARGV[1])
  return {0}
end
answers = tonumber(answers) + 1
if claim(ARGV[4], ARGV[5], ARGV[6], ARGV[7]) then
  if ARGV[8] then
    record_events(KEYS[5], 8)
  end
  redis.call('HDEL', KEYS[6], ARGV[1])
  return {1, rest}
end
if answers >= most then
  redis.call('HDEL', KEYS[6], ARGV[1])
else
  redis.call('HSET', KEYS[6], ARGV[1], expires .. ':' .. answers .. ':' .. rest)
end
return {2, most - answers}
"""
)

# A factor claimed outside a login (a reauthentication). ARGV: kind, a, b, c[, events recorded
# when it is claimed (KEYS[5])]. 1 claimed, 0 not.
_CLAIM_FACTOR = (
    _CLAIM
    + """
if claim(ARGV[1], ARGV[2], ARGV[3], ARGV[4]) then
  if ARGV[5] then
    record_events(KEYS[5], 5)
  end
  return 1
end
return 0
"""
)

# A login's second step begins: its entry is added while the user record exists (so deleting the
# user, which removes the account's keys after its record, never leaves one behind), expired ones
# pruned and at most ARGV[5] kept (the soonest to expire go first).
# KEYS: user, logins. ARGV: digest, entry, now, expires, most.
_ADD_LOGIN = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local now = tonumber(ARGV[3])
local all = redis.call('HGETALL', KEYS[2])
local live = {}
for i = 1, #all, 2 do
  local expires = tonumber(string.match(all[i + 1], '^(%d+):')) or 0
  if expires <= now then
    redis.call('HDEL', KEYS[2], all[i])
  else
    table.insert(live, {expires, all[i]})
  end
end
table.sort(live, function(x, y) return x[1] < y[1] end)
for i = 1, #live - tonumber(ARGV[5]) + 1 do
  redis.call('HDEL', KEYS[2], live[i][2])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('PEXPIREAT', KEYS[2], ARGV[4])
return 1
"""

# Puts a WebAuthn challenge into a live login's entry. KEYS: logins. ARGV: digest, now, challenge.
_SET_LOGIN_CHALLENGE = """
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if not entry then
  return 0
end
local expires, answers, generation, _, password = string.match(
  entry, '^(%d+):(%d+):(%d+):([^:]*):(.*)$')
if not expires or tonumber(expires) <= tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1],
  table.concat({expires, answers, generation, ARGV[3], password}, ':'))
return 1
"""


def _login_step(raw: str) -> LoginStep:
    try:
        expires, answers, generation, challenge, checked = raw.split(":", 4)
        # A sign-in through the provider keeps how it was made after the hash (none holds a
        # blank): see ``add_login``.
        password_hash, _, via = checked.partition(" ")
        return LoginStep(
            int(expires),
            int(answers),
            int(generation),
            challenge or None,
            password_hash,
            via or None,
        )
    except ValueError:
        raise CorruptRecord() from None


class MfaAnswerStore:
    # Writes a replica must hold before they answer (FILEHOST_REPLICA_WAIT_MS).
    WAITS_FOR_REPLICA = ("answer_login", "claim")

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys
        register = redis.register_script
        self._answer_login = register(_ANSWER_LOGIN)
        self._claim_factor = register(_CLAIM_FACTOR)
        self._add_login = register(_ADD_LOGIN)
        self._set_login_challenge = register(_SET_LOGIN_CHALLENGE)

    def _factor_keys(self, user_id: str) -> list[str]:
        keys = self.keys
        return [
            keys.account_mfa(user_id),
            keys.account_recovery_codes(user_id),
            keys.account_passkeys(user_id),
            keys.account_passkey_uses(user_id),
            keys.account_audit(user_id),
        ]

    # -- a login's second step --------------------------------------------------------------

    async def add_login(
        self, user_id: str, digest: str, step: LoginStep, now: int, most: int
    ) -> bool:
        """Keep a login's second step; False when the user is gone."""
        entry = ":".join(
            (
                str(step.expires_at),
                str(step.answers),
                str(step.generation),
                step.challenge or "",
                step.password_hash if step.via is None else f"{step.password_hash} {step.via}",
            )
        )
        return bool(
            await self._add_login(
                keys=[self.keys.user(user_id), self.keys.account_mfa_logins(user_id)],
                args=[digest, entry, now, step.expires_at, most],
            )
        )

    async def login_step(self, user_id: str, digest: str) -> LoginStep | None:
        raw = await self.redis.hget(self.keys.account_mfa_logins(user_id), digest)
        return _login_step(raw) if raw is not None else None

    async def set_login_challenge(
        self, user_id: str, digest: str, now: int, challenge: str
    ) -> bool:
        return bool(
            await self._set_login_challenge(
                keys=[self.keys.account_mfa_logins(user_id)], args=[digest, now, challenge]
            )
        )

    async def answer_login(
        self,
        user_id: str,
        digest: str,
        now: int,
        most: int,
        claim: Sequence[str | int],
        events: EventBatch | None = None,
    ) -> tuple[int, LoginStep | int | None]:
        """Count an answer to a login's second step, claim its factor (``claim``: kind, a, b,
        c as ``_CLAIM`` takes them) and spend the step when it is claimed, in one step. (0,
        None): the step is unknown, expired or spent; (1, the step): right; (2, answers left):
        wrong."""
        args = [digest, now, most, *claim]
        if events is not None:
            args += batch_args(events)
        reply = await self._answer_login(
            keys=[*self._factor_keys(user_id), self.keys.account_mfa_logins(user_id)], args=args
        )
        status = int(reply[0])
        if status == 1:
            return 1, _login_step(f"0:0:{reply[1]}")
        if status == 2:
            return 2, int(reply[1])
        return 0, None

    async def claim(
        self, user_id: str, claim: Sequence[str | int], events: EventBatch | None = None
    ) -> bool:
        """Claim a factor outside a login (``_CLAIM``), recording ``events`` when it is."""
        args = list(claim)
        if events is not None:
            args += batch_args(events)
        return bool(await self._claim_factor(keys=self._factor_keys(user_id), args=args))
