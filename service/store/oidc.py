"""Single sign-on in Redis (``service.domain.oidc``'s values, stored as JSON): the trips to the
provider between start and callback and the verified sign-ins waiting for their exchange, each taken
once (a read that deletes, so a state or a login code never works twice); the identities linked to
an account (in the account's slot, with an index from (issuer, subject) to the account); the
sessions a provider's session opened (written by ``service.store.sessions``); and the logout tokens
already used.

Linking is two steps in two slots: (1) the index is claimed for the account (SET NX, or taken over
when it names an account that does not hold the identity: a link cut short, an unlink cut short);
(2) a script in the account's slot adds the identity while the user record exists, recording the
link's events in the same step. The index alone never signs anyone in: ``linked_account`` reads the
account's own hash too, so a claim whose step (2) never ran (or a deletion cut short) is no link."""

from __future__ import annotations

import json

from redis.asyncio import Redis

from service.domain.audit_events import EventBatch
from service.domain.oidc import Identity
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.keys import RedisKeys

# Reads a key and deletes it in one step: each state and each login code is taken once.
_TAKE = """
local value = redis.call('GET', KEYS[1])
if value then
  redis.call('DEL', KEYS[1])
end
return value
"""

# Step (2) of linking. KEYS: user, identities[, audit]. ARGV: digest, identity JSON[, events].
# Returns 1 linked, 0 the user is gone.
_LINK = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if KEYS[3] then
  record_events(KEYS[3], 3)
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
"""
)

# Unlinking one identity by its public id, never the account's last way in: an account without a
# password keeps at least one identity. KEYS: user, identities, audit. ARGV: identity id,
# events. Returns {'gone'} (no such identity), {'last'}, or {'unlinked', digest, JSON}.
_UNLINK = (
    RECORD_EVENTS
    + """
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  if cjson.decode(all[i + 1])['id'] == ARGV[1] then
    local password = redis.call('HGET', KEYS[1], 'pw')
    if (not password or password == '') and #all <= 2 then
      return {'last'}
    end
    record_events(KEYS[3], 2)
    redis.call('HDEL', KEYS[2], all[i])
    return {'unlinked', all[i], all[i + 1]}
  end
end
return {'gone'}
"""
)

# Frees the index of an identity only while it names this account. KEYS: index. ARGV: user id.
_FREE_INDEX = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class OidcStore:
    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self.redis = redis
        self.keys = keys
        self._take = redis.register_script(_TAKE)
        self._link = redis.register_script(_LINK)
        self._unlink = redis.register_script(_UNLINK)
        self._free_index = redis.register_script(_FREE_INDEX)

    async def keep_pending(self, state_digest: str, pending: str, lasting_ms: int) -> None:
        await self.redis.set(self.keys.oidc_state(state_digest), pending, px=lasting_ms)

    async def take_pending(self, state_digest: str) -> str | None:
        """The trip begun with this state, deleted as it is read; None when unknown, expired or
        taken already."""
        found = await self._take(keys=[self.keys.oidc_state(state_digest)])
        return None if found is None else str(found)

    async def keep_signed_in(self, code_digest: str, signed_in: str, lasting_ms: int) -> None:
        await self.redis.set(self.keys.oidc_code(code_digest), signed_in, px=lasting_ms)

    async def peek_signed_in(self, code_digest: str) -> str | None:
        """The sign-in a login code stands for, left in place (see ``take_signed_in``)."""
        found = await self.redis.get(self.keys.oidc_code(code_digest))
        return None if found is None else str(found)

    async def take_signed_in(self, code_digest: str) -> str | None:
        found = await self._take(keys=[self.keys.oidc_code(code_digest)])
        return None if found is None else str(found)

    async def linked_account(self, identity_digest: str) -> str | None:
        """The account the identity is linked to: the one its index names, if that account
        holds it (see the module's docstring); else None."""
        user_id = await self.redis.get(self.keys.oidc_identity(identity_digest))
        if user_id is None:
            return None
        owner = str(user_id)
        if not await self.redis.hexists(self.keys.account_identities(owner), identity_digest):
            return None
        return owner

    async def link(
        self, user_id: str, identity_digest: str, identity: Identity, events: EventBatch | None
    ) -> str:
        """Link the identity to the account: ``linked``, ``taken`` (another account holds it)
        or ``gone`` (the user record is gone)."""
        index = self.keys.oidc_identity(identity_digest)
        if not await self.redis.set(index, user_id, nx=True):
            holder = await self.redis.get(index)
            if holder is not None and holder != user_id:
                if await self.linked_account(identity_digest) is not None:
                    return "taken"
                await self.redis.set(index, user_id)  # a claim or a link that was cut short
        keys = [self.keys.user(user_id), self.keys.account_identities(user_id)]
        args: list[str | int] = [identity_digest, identity.dump()]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        if not await self._link(keys=keys, args=args):
            await self._free_index(keys=[index], args=[user_id])
            return "gone"
        return "linked"

    async def identities(self, user_id: str) -> list[Identity]:
        raw = await self.redis.hvals(self.keys.account_identities(user_id))
        found = [Identity.load(str(value)) for value in raw]
        return sorted(found, key=lambda identity: (identity.linked_at, identity.id))

    async def unlink(
        self, user_id: str, identity_id: str, events: EventBatch
    ) -> tuple[str, Identity | None]:
        """Unlink one of the account's identities: (``unlinked``, it), (``last``, None) when it
        is the last way into an account without a password, (``gone``, None) when the account
        has no such identity. The events are recorded in the step that unlinks."""
        reply = await self._unlink(
            keys=[
                self.keys.user(user_id),
                self.keys.account_identities(user_id),
                self.keys.account_audit(user_id),
            ],
            args=[identity_id, *batch_args(events)],
        )
        if reply[0] != "unlinked":
            return str(reply[0]), None
        digest, raw = reply[1], reply[2]
        await self._free_index(keys=[self.keys.oidc_identity(digest)], args=[user_id])
        return "unlinked", Identity(**json.loads(raw))

    async def provider_sessions(self, sid_digest: str) -> list[tuple[str, str]]:
        """(user id, session digest) of each session the provider's session opened."""
        members = await self.redis.smembers(self.keys.oidc_sid(sid_digest))
        found = []
        for member in members:
            user_id, _, digest = str(member).partition(" ")
            found.append((user_id, digest))
        return found

    async def first_use(self, jti_digest: str, lasting_ms: int) -> bool:
        """True the first time a logout token's ``jti`` is seen (kept ``lasting_ms``)."""
        return bool(
            await self.redis.set(self.keys.oidc_jti(jti_digest), "1", nx=True, px=lasting_ms)
        )
