"""From credential header values to a ``Principal``, and the permission check.

Works on plain strings (the HTTP layer hands over header values and the client's address), so it
is testable without a server. The hot path for an API key: shape and checksum check, SHA-256, one
Redis round trip (an HMGET, in a script that also takes from the credential's rate bucket when
limits are on and this worker holds no lease of requests from it), then the checks of what that
read returned: a rolled-out secret's grace, expiry, disabled, the allowed networks, rate, and
(in the handler) permission. Everything a key's changes can change is in its digest entry and
read on every request, so a change is in force from the next request on every worker; the
checks of fields a key doesn't have cost a comparison with None. Key last-use and session idle
renewal are written at most once a minute per credential and worker, in the background; rate
buckets never reach the AOF. Each request with a key that exists, and its refusal, is counted
in this worker's memory (``auth.key_usage``), flushed to the store apart from the request.

Refusals name the reason in their code but never echo the credential.
"""

from __future__ import annotations

from collections.abc import Awaitable

from service.auth.key_usage import KeyUsage
from service.auth.rate_limits import KeyRates, RateLeases, RateLimitFields
from service.background import BackgroundWrites
from service.clock import Clock, iso
from service.config import SessionSettings
from service.domain import credentials
from service.domain.key_rules import AddressForms, AllowLists
from service.domain.outcomes import GONE_LEAKED, GONE_REPLACED, KeyGone
from service.domain.permissions import ALL_PERMISSIONS_MASK
from service.domain.principal import CredentialType, Principal
from service.domain.records import ApiKeyEntry, RateVerdict
from service.errors import ApiError, Code
from service.store.protocols import Stores

_KEY_TOUCH_INTERVAL_MS = 60_000
_TOUCH_MEMORY_LIMIT = 100_000


def bearer_token(authorization: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` value (scheme case-insensitive)."""
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise ApiError(Code.UNSUPPORTED_AUTH_SCHEME)
    token = token.strip()
    if not token:
        raise ApiError(Code.INVALID_SESSION, "The session token is missing or malformed.")
    return token


def carries_api_key(authorization: str) -> bool:
    """Whether an ``Authorization`` value is an API key sent as a Bearer token (how Stripe and
    GitHub take theirs): a token that begins with the key's kind, ``fhk_``. Such a token is the
    API key it is, exactly as if it came in ``X-API-Key``."""
    scheme, _, token = authorization.strip().partition(" ")
    return scheme.lower() == "bearer" and token.strip().startswith(credentials.API_KEY_KIND)


def malformed_key(secret: str) -> ApiError:
    """The refusal of a value that is no API key, saying what it looks like when it is a mistake
    an integrator makes (a session token, a value with its scheme, the listed prefix), never
    anything of the value itself."""
    if secret.startswith(credentials.SESSION_KIND):
        message = (
            "This looks like a session token, not an API key: send it as Authorization: Bearer."
        )
    elif secret[:7].lower() == "bearer ":
        message = 'Send the API key alone in X-API-Key, without "Bearer".'
    elif secret.startswith(credentials.API_KEY_KIND) and secret.endswith(("...", "…")):
        message = (
            "This looks like a key's prefix as the keys list shows it, not its secret: a secret "
            "is shown once, when the key is made or rolled."
        )
    else:
        return ApiError(Code.INVALID_API_KEY)
    return ApiError(Code.INVALID_API_KEY, message)


def key_gone(gone: KeyGone, now: int) -> ApiError:
    """The refusal of a secret that no longer works and is still remembered: revoked (by its
    owner, or as reported leaked) or rolled out past its grace, saying when."""
    at = iso(gone.at)
    if gone.reason == GONE_REPLACED:
        if gone.at > now:  # still in its grace, but its entry went with its key (expired)
            return ApiError(Code.INVALID_API_KEY)
        return key_replaced(gone.at)
    if gone.reason == GONE_LEAKED:
        message = f"The API key was revoked at {at}, after it was reported leaked."
        reason = "reported_leaked"
    else:
        message = f"The API key was revoked at {at}."
        reason = "revoked_by_owner"
    return ApiError(
        Code.API_KEY_REVOKED, message, details={"revoked_at": at, "revoked_reason": reason}
    )


def key_replaced(grace_ended_at: int) -> ApiError:
    """The refusal of a rolled-out secret past its grace (the key works with its newer one)."""
    at = iso(grace_ended_at)
    return ApiError(
        Code.API_KEY_REPLACED,
        "This API key secret was replaced by a newer one when the key was rolled; its grace "
        f"period ended at {at}.",
        details={"grace_ended_at": at},
    )


def key_expired(expires_at: int) -> ApiError:
    """The refusal of a key past its expiry, saying when that was (``details.expired_at``)."""
    at = iso(expires_at)
    return ApiError(
        Code.API_KEY_EXPIRED, f"The API key expired at {at}.", details={"expired_at": at}
    )


class Authenticator:
    def __init__(
        self,
        stores: Stores,
        clock: Clock,
        sessions: SessionSettings,
        background: BackgroundWrites,
        rate_fields: RateLimitFields | None,
        usage: KeyUsage,
    ) -> None:
        """``rate_fields``: the RateLimit header fields of the deployment's limit (None when
        limits are off), the ones every answer of the application carries. ``usage``: where
        each request with a key that exists is counted, and its refusals."""
        self._lookup = stores.lookup
        self._api_keys = stores.api_keys
        self._sessions = stores.sessions
        self._clock = clock
        self._background = background
        self._usage = usage
        self._idle_ms = sessions.idle_seconds * 1000
        self._renew_ms = sessions.renew_seconds * 1000
        self._last_touch: dict[str, int] = {}
        limit = stores.lookup.rate_limit
        self.rate_fields = rate_fields
        self._leases = RateLeases(limit) if limit is not None else None
        self._key_rates = KeyRates()
        self._allow_lists = AllowLists()
        self._address_forms = AddressForms()

    def authenticate(
        self,
        api_key: str | None,
        authorization: str | None,
        *,
        session_only: bool = False,
        counted: bool = True,
        client: str | None = None,
    ) -> Awaitable[Principal]:
        """Resolve the request's one credential; raise 400/401/403 errors on any doubt (some
        at once, before anything is awaited). Await what it returns for the principal: the
        credential's own check, with no coroutine of its own around it (each one a request
        awaits through is paid for again on every resumption). An API key sent as a Bearer
        token is that API key, checked and refused exactly as in ``X-API-Key``.

        ``counted`` False takes nothing from the credential's rate bucket: ending a credential
        (logout, revoking a key) must work however busy the credential is. ``client`` is the
        client's address as the request's handling worked it out (trusted proxies included),
        for keys that may be used only from some networks; None when it is not known."""
        if api_key is not None and authorization is not None:
            raise ApiError(Code.AMBIGUOUS_CREDENTIALS)
        if api_key is None and authorization is not None:
            token = bearer_token(authorization)
            if not token.startswith(credentials.API_KEY_KIND):
                return self.session(token, counted)
            api_key = token  # an API key sent as a Bearer token (``carries_api_key``)
        if api_key is not None:
            if session_only:
                raise ApiError(Code.SESSION_REQUIRED)
            return self.api_key(api_key, counted, client)
        if session_only:
            raise ApiError(
                Code.CREDENTIAL_MISSING, "Send a session token in Authorization: Bearer."
            )
        raise ApiError(Code.CREDENTIAL_MISSING)

    async def api_key(
        self, secret: str, counted: bool = True, client: str | None = None
    ) -> Principal:
        secret = secret.strip()
        if not credentials.is_well_formed(secret, credentials.API_KEY_KIND):
            raise malformed_key(secret)
        now = self._clock.now_ms()
        digest = credentials.digest(secret)
        lent, take, give_back, for_lease = self._plan(digest, now, counted)
        # Requests given back are worth the interval they were taken at (a key's own rate).
        # A give-back is planned only with limits on, so with leases.
        interval = self._leases.given_back_interval_us(digest) if give_back else 0  # type: ignore[union-attr]
        address = self._address_forms.of(client)
        try:
            entry = await self._lookup.find_api_key(digest, now, take, give_back, interval, address)
            # A lease taken under a rate of the key's own (its verdicts name its policy), or
            # served to a key that has one now: was it taken under the rate the key has now?
            if lent is not None and entry is not None and (entry.own_rate or lent.policy):
                # A lease was lent: limits are on.
                stale = self._leases.stale(digest, entry.own_rate)  # type: ignore[union-attr]
                if stale is not None:  # the key's rate changed: take under the new one instead
                    lent = None
                    back, interval = stale
                    entry = await self._lookup.find_api_key(digest, now, 1, back, interval, address)
        except KeyGone as gone:  # revoked, or rolled out past its grace: refused, saying why
            self._rate(digest, lent, None, for_lease, now)  # forgets any lease of the digest
            raise key_gone(gone, now) from None
        if entry is None:
            self._rate(digest, lent, None, for_lease, now)  # forgets any lease of the digest
            raise ApiError(Code.INVALID_API_KEY)
        rules = entry.rules
        if rules is not None or entry.expires_at <= now:
            # Refused here took nothing from the bucket (the lookup checks the same); one
            # served from this worker's lease gives its request back.
            refusal = self._refusal(entry, now, client)
            if refusal is not None:
                self._count_refusal(entry, client)
                if lent is not None:
                    self._leases.give_back(digest)  # type: ignore[union-attr]  # lent: limits on
                else:
                    self._rate(digest, None, None, for_lease, now)
                try:
                    raise refusal
                finally:
                    # The error's traceback holds this frame: a local holding the error would
                    # make a reference cycle per refusal for the garbage collector.
                    del refusal
        if entry.own_rate is None:  # the common case: one call, as for a session
            rate = self._rate(digest, lent, entry.rate, for_lease, now)
        else:
            rate = self._key_rate(digest, lent, entry, for_lease, now)
        if rate is not None and not rate.allowed:
            self._count_refusal(entry, client)
            raise self._rate_refusal(rate)
        self._usage.used(entry.user_id, entry.key_id, client)
        if self._due(entry.key_id, now, _KEY_TOUCH_INTERVAL_MS):
            self._background.spawn(
                "key last use", self._api_keys.touch(entry.user_id, entry.key_id, now)
            )
        # Positional: keywords would cost a third of the record's making on the hot path.
        return Principal(
            entry.user_id,
            CredentialType.API_KEY,
            entry.permissions,
            entry.expires_at,
            entry.key_id,
            None,  # token_digest: sessions only
            rate,
        )

    def _count_refusal(self, entry: ApiKeyEntry, client: str | None) -> None:
        self._usage.used(entry.user_id, entry.key_id, client)
        self._usage.refused(entry.user_id, entry.key_id)

    def _plan(
        self, digest: str, now: int, counted: bool
    ) -> tuple[RateVerdict | None, int, int, bool]:
        """What the lookup takes from the credential's bucket (``RateLeases.plan``): nothing when
        limits are off (then the lookup is a plain read) or the request is not counted."""
        if self._leases is None or not counted:
            return None, int(counted), 0, False
        return self._leases.plan(digest, now)

    def _rate(
        self,
        digest: str,
        lent: RateVerdict | None,
        looked_up: RateVerdict | None,
        for_lease: bool,
        now: int,
    ) -> RateVerdict | None:
        """This request's verdict: from the worker's lease, or from the lookup's take (kept in
        part for the lease when it was taken for one). None when limits are off."""
        if lent is not None:
            return lent
        if for_lease:
            # Taken for a lease only with limits on.
            return self._leases.taken(digest, looked_up, now)  # type: ignore[union-attr]
        return looked_up

    def _refusal(self, entry: ApiKeyEntry, now: int, client: str | None) -> ApiError | None:
        """Why the key is refused, if it is: a rolled-out secret past its grace, then an
        expired key, a disabled one, and one used from outside its allowed networks."""
        rules = entry.rules
        if rules is not None and rules.refused_from is not None and rules.refused_from <= now:
            return key_replaced(rules.refused_from)
        if entry.expires_at <= now:
            return key_expired(entry.expires_at)
        if rules is None:
            return None
        if rules.disabled:
            return ApiError(Code.API_KEY_DISABLED)
        if rules.allowed_networks is not None:
            rewrite = "rewrite " + entry.key_id
            if rules.ranges_missing and self._due(rewrite, now, _KEY_TOUCH_INTERVAL_MS):
                self._background.spawn(
                    "key entry rewrite",
                    self._api_keys.rewrite_entries(entry.user_id, entry.key_id, now),
                )
            if not self._allow_lists.allows(rules.allowed_networks, client):
                return ApiError(Code.IP_NOT_ALLOWED)
        return None

    def _key_rate(
        self,
        digest: str,
        lent: RateVerdict | None,
        entry: ApiKeyEntry,
        for_lease: bool,
        now: int,
    ) -> RateVerdict | None:
        """``_rate`` for a key with a rate of its own: its lease is sized by it, and its verdict
        names its policy."""
        leases = self._leases
        if leases is None:
            return None  # limits are off, a key's own included
        # Asked only for a key with a rate of its own.
        own = self._key_rates.of(entry.own_rate)  # type: ignore[arg-type]
        if lent is not None:
            return lent
        if for_lease:
            return leases.taken(digest, entry.rate, now, own)
        looked_up = entry.rate
        return looked_up._replace(policy=own.policy) if looked_up is not None else None

    def _rate_refusal(self, rate: RateVerdict) -> ApiError:
        assert self.rate_fields is not None  # a verdict exists only when limits are on
        return self.rate_fields.refusal(rate)

    def _due(self, name: str, now: int, interval_ms: int) -> bool:
        """True at most once per ``interval_ms`` for ``name`` in this worker: a background write
        that keeps a last use or an idle deadline fresh is never repeated by the requests that
        arrive while it is on its way."""
        if now - self._last_touch.get(name, now - interval_ms) < interval_ms:
            return False
        if len(self._last_touch) >= _TOUCH_MEMORY_LIMIT:
            self._last_touch.clear()
        self._last_touch[name] = now
        return True

    async def session(self, token: str, counted: bool = True) -> Principal:
        if not credentials.is_well_formed(token, credentials.SESSION_KIND):
            raise ApiError(Code.INVALID_SESSION)
        token_digest = credentials.digest(token)
        now = self._clock.now_ms()
        lent, take, give_back, for_lease = self._plan(token_digest, now, counted)
        entry = await self._lookup.find_session(token_digest, now, take, give_back)
        rate = self._rate(token_digest, lent, entry and entry.rate, for_lease, now)
        if entry is None:
            raise ApiError(Code.INVALID_SESSION)
        if entry.idle_deadline <= now or entry.absolute_deadline <= now:
            raise ApiError(Code.SESSION_EXPIRED)
        if rate is not None and not rate.allowed:
            raise self._rate_refusal(rate)
        idle_deadline = entry.idle_deadline
        if now - (idle_deadline - self._idle_ms) >= self._renew_ms:
            idle_deadline = min(now + self._idle_ms, entry.absolute_deadline)
        if idle_deadline != entry.idle_deadline and self._due(token_digest, now, self._renew_ms):
            self._background.spawn(
                "session renewal",
                self._sessions.renew(token_digest, idle_deadline, idle_deadline),
            )
        return Principal(
            entry.user_id,
            CredentialType.SESSION,
            ALL_PERMISSIONS_MASK,
            idle_deadline,
            None,  # key_id: API keys only
            token_digest,
            rate,
        )


def require(principal: Principal, permission: str) -> None:
    """Refuse with 403 unless the principal holds ``permission`` (an upload-only key holds
    none: ``require_for_upload`` is the upload's own check)."""
    if not principal.may(permission):
        raise _lacks(principal, permission)


def require_for_upload(principal: Principal, permission: str) -> None:
    """``require`` for an upload and the alias asked for with it: what an upload-only key may
    do too."""
    if not principal.may_upload(permission):
        raise _lacks(principal, permission)


def _lacks(principal: Principal, permission: str) -> ApiError:
    # An upload-only key is told so whatever it asked: naming the permission alone would
    # suggest adding it to the key, which changes nothing for such a key.
    if principal.upload_only:
        message = f"This API key may only upload: it may not use {permission} for this."
        return ApiError(
            Code.INSUFFICIENT_PERMISSION,
            message,
            details={"required_permission": permission, "upload_only": True},
        )
    return ApiError(
        Code.INSUFFICIENT_PERMISSION,
        f"This API key lacks the permission {permission}.",
        details={"required_permission": permission},
    )
