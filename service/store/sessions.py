"""Sessions in Redis: each session's entry (found by the digest of its token) and the account's
index of them. Knows nothing of HTTP; receives only digests of tokens, never a token.

The per-request read of a session is ``service.store.lookup``'s.
"""

from __future__ import annotations

from redis.asyncio import Redis

from service.clock import Clock
from service.domain.audit_events import EventBatch
from service.domain.credentials import new_id
from service.domain.oidc import identity_digest
from service.domain.outcomes import AccountGone
from service.domain.records import SessionRecord, SessionStanding, SignInVia
from service.errors import CorruptRecord
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.fields import SESSION_EXPIRED_GRACE_MS, SESSION_LIST_FIELDS, int_field
from service.store.keys import RedisKeys

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
# given, still holds that hash: the password the login checked was not changed meanwhile; and,
# when a generation of the account's second factors is given, they are still at it: no factor was
# enabled, changed or removed since the login read them); else the digest is taken out of the
# index and 0 returned (the caller then deletes the session entry). A confirmed login is recorded
# in the audit trail, when one is named, in this same step.
# KEYS: user, session index, second factors[, audit trail]. ARGV: digest, password hash checked
# ('' for none), factors' generation ('' for none)[, events (store.audit)].
_CONFIRM_SESSION = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 1 and
    (ARGV[2] == '' or redis.call('HGET', KEYS[1], 'pw') == ARGV[2]) and
    (ARGV[3] == '' or (redis.call('HGET', KEYS[3], 'g') or '0') == ARGV[3]) then
  if KEYS[4] then
    record_events(KEYS[4], 4)
  end
  return 1
end
redis.call('ZREM', KEYS[2], ARGV[1])
return 0
"""
)

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

# Gives a session opened before sessions had public ids one, the first time it is listed or acts
# (never creates an entry that is gone). Returns the session's public id, its User-Agent at login
# (nil when none), when it was opened, when it last authenticated and with how many factors (nil
# for a session opened before those were kept), how it was opened (single sign-on: method,
# provider, provider's session; nil for a password), or nil when it is gone.
# KEYS: entry. ARGV: a new public id.
_ASSIGN_SESSION_ID = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
redis.call('HSETNX', KEYS[1], 'id', ARGV[1])
return redis.call('HMGET', KEYS[1], 'id', 'ua', 'c', 'aa', 'l', 'm', 'pi', 'ps')
"""

# Ends a session: its entry goes (refused from then on), and so does the record of a session
# replacing it (a reauthentication in progress), whose digest is returned so that the caller ends
# that one too: a session ended while it is being replaced leaves no replacement behind.
# KEYS: entry, its replacement's record. Returns {entries deleted, replacement digest or false}.
_END_SESSION = """
local deleted = redis.call('DEL', KEYS[1])
local replacement = redis.call('GET', KEYS[2])
if replacement then
  redis.call('DEL', KEYS[2])
end
return {deleted, replacement or false}
"""

# Step (1) of a reauthentication: the session being replaced ends, and names its replacement
# while that is made (60 s at most). 0 when it had already ended.
# KEYS: entry, its replacement's record. ARGV: the replacement's digest.
_BEGIN_REPLACEMENT = """
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', 60000)
return 1
"""

# Step (3): the replacement stands only if nothing ended the session it replaces meanwhile
# (which takes the record and ends the replacement). KEYS: the record. ARGV: replacement digest.
_FINISH_REPLACEMENT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
"""

# Adds a session to the set of those its provider's session opened (back-channel logout names
# that session); the set lasts as long as its longest-lived member. KEYS: set. ARGV: member,
# until (ms).
_REMEMBER_PROVIDER_SESSION = """
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PEXPIRETIME', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
end
return 1
"""

# How many sessions a chain of replacements may hold (each one ended while the next was made).
_MOST_REPLACEMENTS = 8


class SessionStore:
    # Writes a replica must hold before they answer (FILEHOST_REPLICA_WAIT_MS).
    WAITS_FOR_REPLICA = ("add", "remove", "remove_many", "begin_replacement")

    def __init__(self, redis: Redis, keys: RedisKeys, clock: Clock) -> None:
        self.redis = redis
        self.keys = keys
        self._clock = clock  # when a renewed session was last seen
        self._add_session_index = redis.register_script(_ADD_SESSION_INDEX)
        self._confirm_session = redis.register_script(_CONFIRM_SESSION)
        self._renew_session = redis.register_script(_RENEW_SESSION)
        self._assign_session_id = redis.register_script(_ASSIGN_SESSION_ID)
        self._end_session = redis.register_script(_END_SESSION)
        self._begin_replacement = redis.register_script(_BEGIN_REPLACEMENT)
        self._finish_replacement = redis.register_script(_FINISH_REPLACEMENT)
        self._remember_provider_session = redis.register_script(_REMEMBER_PROVIDER_SESSION)

    async def add(
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
        factors: int | None = None,
        aal: int = 1,
        authenticated_at: int | None = None,
        via: SignInVia | None = None,
    ) -> None:
        """Open a session. Raises ``AccountGone`` when the user record is gone, or went while
        the session was written (steps (a)-(c) of "Creating a credential" above), or, given
        the ``password_hash`` the login checked, no longer holds it when the session is
        confirmed: a password change that ends every other session can't miss one opened with
        the old password (the change stores the new hash, then ends the sessions the index
        names; a login confirmed before the store is already indexed, one after it fails). The
        same for ``factors``, the generation of the account's second factors the login read
        (``service.store.mfa``): a factor change moves it, then ends the other sessions.
        The entry is kept ``SESSION_EXPIRED_GRACE_MS`` past its deadline, so it can be answered
        as expired.

        Beside the four fields the per-request lookup reads, the entry holds what only the
        session list reads: the public id, when it was last seen (renewals move it), and the
        client's address and User-Agent at login, and when it last authenticated
        (``authenticated_at``, its creation unless given) with how many factors (``aal``),
        and, for a session opened by single sign-on, how (``via``: ``m``, ``pi``, ``ps``).

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
                "aa": created_at if authenticated_at is None else authenticated_at,
                "l": aal,
            }
            named = [("id", public_id), ("ip", ip), ("ua", user_agent)]
            if via is not None:
                named += [("m", via.method), ("pi", via.provider), ("ps", via.provider_sid)]
            for name, value in named:
                if value is not None:
                    fields[name] = value
            pipe.hset(entry, mapping=fields)
            pipe.pexpireat(entry, min(idle_deadline, absolute_deadline) + SESSION_EXPIRED_GRACE_MS)
            await pipe.execute()
        keys = [*account, self.keys.account_mfa(user_id)]
        args = [token_digest, password_hash or "", "" if factors is None else str(factors)]
        if events is not None:
            keys, args = [*keys, self.keys.account_audit(user_id)], [*args, *batch_args(events)]
        try:
            confirmed = await self._confirm_session(keys=keys, args=args)
        except BaseException:
            await self.redis.delete(entry)
            raise
        if not confirmed:
            await self.redis.delete(entry)
            raise AccountGone()
        if via is not None and via.provider_sid is not None:
            # Read only by a back-channel logout; a session it misses still ends with the rest.
            await self._remember_provider_session(
                keys=[self.keys.oidc_sid(identity_digest(via.provider, via.provider_sid))],
                args=[f"{user_id} {token_digest}", absolute_deadline + SESSION_EXPIRED_GRACE_MS],
            )

    async def renew(self, token_digest: str, idle_deadline: int, expire_at: int) -> None:
        """Move a session's idle deadline; ``expire_at`` is its new deadline (idle or absolute,
        whichever is nearer), and the entry is kept ``SESSION_EXPIRED_GRACE_MS`` past it. The
        same write records now as the session's last sight: ``last_seen_at`` costs no write of
        its own, and is as fresh as the renewal interval."""
        await self._renew_session(
            keys=[self.keys.session_entry(token_digest)],
            args=[idle_deadline, expire_at + SESSION_EXPIRED_GRACE_MS, self._clock.now_ms()],
        )

    async def identity(self, token_digest: str) -> tuple[str, str | None] | None:
        """The session's public id (given one now if it was opened before sessions had them)
        and its User-Agent at login (None when it sent none); None when the session is gone."""
        standing = await self.standing(token_digest)
        return None if standing is None else (standing.id, standing.user_agent)

    async def standing(self, token_digest: str) -> SessionStanding | None:
        """``identity``, with when the session was opened and last authenticated (with how many
        factors): what a sensitive operation asks of it. One round trip."""
        found = await self._assign_session_id(
            keys=[self.keys.session_entry(token_digest)], args=[new_id("ses")]
        )
        if not found:
            return None
        public_id, agent, created, authenticated, aal, method, provider, sid = found
        created_at = int_field(created)
        return SessionStanding(
            public_id,
            agent,
            created_at,
            int_field(authenticated) if authenticated is not None else created_at,
            int_field(aal) if aal is not None else 1,
            _via(method, provider, sid),
        )

    async def remove(self, token_digest: str, user_id: str) -> bool:
        """End a session: its entry goes first (refused from then on, on every worker), then
        its place in the account's index; a session replacing it (a reauthentication in
        progress) ends too. True when this call ended it (or its replacement)."""
        return await self.remove_many(user_id, [token_digest]) > 0

    async def begin_replacement(self, old_digest: str, new_digest: str) -> bool:
        """Step (1) of replacing a session by a new one (a reauthentication): the old one ends
        and names the new one until ``finish_replacement``, so that whatever ends the old one
        meanwhile ends the new one too. False when the old one had ended already."""
        return bool(
            await self._begin_replacement(
                keys=[self.keys.session_entry(old_digest), self.keys.session_replaced(old_digest)],
                args=[new_digest],
            )
        )

    async def finish_replacement(self, user_id: str, old_digest: str, new_digest: str) -> bool:
        """Step (3), once the new session is opened (step (2), ``add``): True when it stands;
        False when the old one was ended meanwhile, and the new one with it. The old digest
        leaves the account's index either way."""
        stands = await self._finish_replacement(
            keys=[self.keys.session_replaced(old_digest)], args=[new_digest]
        )
        if not stands:
            await self.remove_many(user_id, [new_digest])
        await self.redis.zrem(self.keys.account_sessions(user_id), old_digest)
        return bool(stands)

    async def list(self, user_id: str, now: int) -> list[SessionRecord]:
        """The account's live sessions (neither deadline passed), newest first.

        The account's index names every session's digest; their entries are read in one
        pipelined round trip (each stands alone, in a slot of its own). A session opened before
        sessions had public ids is given one here."""
        digests = await self.redis.zrange(self.keys.account_sessions(user_id), 0, -1)
        if not digests:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for digest in digests:
                pipe.hmget(self.keys.session_entry(digest), SESSION_LIST_FIELDS)
            rows = await pipe.execute()
        records = []
        for digest, row in zip(digests, rows, strict=True):
            owner, created, absolute, idle, public_id, seen, ip, agent, aa, aal, *via = row
            if owner is None:
                continue  # ended or expired; the index forgets it at a later login
            if owner != user_id:
                raise CorruptRecord()
            created_at, absolute_at, idle_at = (
                int_field(created),
                int_field(absolute),
                int_field(idle),
            )
            if absolute_at <= now or idle_at <= now:
                continue
            if public_id is None:
                identity = await self.identity(digest)
                if identity is None:
                    continue  # ended meanwhile
                public_id = identity[0]
            records.append(
                SessionRecord(
                    id=public_id,
                    token_digest=digest,
                    created_at=created_at,
                    last_seen_at=int_field(seen) if seen is not None else created_at,
                    idle_deadline=idle_at,
                    absolute_deadline=absolute_at,
                    ip=ip,
                    user_agent=agent,
                    authenticated_at=int_field(aa) if aa is not None else created_at,
                    aal=int_field(aal) if aal is not None else 1,
                    via=_via(*via),
                )
            )
        records.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return records

    async def abandon_replacement(self, user_id: str, old_digest: str) -> None:
        """After a step (2) that failed (it opened nothing): the old session's record of its
        replacement and its place in the index go."""
        await self.redis.delete(self.keys.session_replaced(old_digest))
        await self.redis.zrem(self.keys.account_sessions(user_id), old_digest)

    async def remove_many(self, user_id: str, token_digests: list[str]) -> int:
        """End several of the account's sessions at once: every entry is deleted first (with
        the sessions replacing any of them, ``_END_SESSION``), then their places in the index.
        Returns how many entries this call deleted."""
        ended, digests = 0, list(token_digests)
        for _ in range(_MOST_REPLACEMENTS):
            if not digests:
                break
            async with self.redis.pipeline(transaction=False) as pipe:
                for digest in digests:  # one slot each: one script each
                    await self._end_session(
                        keys=[self.keys.session_entry(digest), self.keys.session_replaced(digest)],
                        client=pipe,
                    )
                replies = await pipe.execute()
            await self.redis.zrem(self.keys.account_sessions(user_id), *digests)
            ended += sum(int(deleted) for deleted, _ in replies)
            digests = [replacement for _, replacement in replies if replacement]
        return ended


def _via(method: str | None, provider: str | None, sid: str | None) -> SignInVia | None:
    """How a session was opened, from its entry's fields; None for a password."""
    if method is None or provider is None:
        return None
    return SignInVia(method, provider, sid)
