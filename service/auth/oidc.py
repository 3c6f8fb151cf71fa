"""Single sign-on with an OpenID provider (the authorization code flow with PKCE): a trip to the
provider begins at ``start``, comes back at ``callback``, and ends in ``exchange``, where the
dashboard trades a one-time login code for what the trip was for.

- ``start`` keeps the trip under the digest of a random ``state`` for ``STATE_MS`` with its
  nonce, its PKCE verifier and the digest of a random browser secret that the HTTP layer sets as
  a cookie, and answers the provider's authorization URL (S256 challenge, nonce; for a step-up
  ``prompt=login`` and ``max_age=0``).
- ``callback`` takes the trip once (a state never works twice, even refused), checks the
  browser's cookie, redeems the code at the token endpoint and checks the ID token
  (``service.auth.oidc_provider``). For a sign-in it finds the account (``Identities``); then it
  keeps what was verified under the digest of a one-time login code for ``LOGIN_CODE_MS``. No
  session is made here: the code goes to the dashboard in a URL fragment, never a token.
- ``exchange`` takes the code once: a sign-in's session (or the second step of a login, for an
  account with a second factor the provider did not stand in for), a link of the identity to the
  signed-in account (after a step-up), or a step-up of the signed-in session.

Back-channel logout ends the sessions a provider's session opened (``sid``), or every session
the identity opened through the provider (``sub``), from the next request on."""

from __future__ import annotations

import hmac
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from service.auth.identities import Identities, claimed_email
from service.auth.login import Login, LoginResult, MfaRequired
from service.auth.login_throttle import address_bucket
from service.auth.oidc_provider import LEEWAY_MS, MAX_TOKEN_AGE_MS, OidcProvider
from service.auth.reauthentication import Reauthenticated, Reauthentication
from service.auth.sessions import Sessions
from service.clock import Clock
from service.config import OidcSettings
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.oidc import (
    PURPOSES,
    Identity,
    PendingSignIn,
    SignedIn,
    code_challenge,
    identity_digest,
    provider_did_mfa,
    random_piece,
)
from service.domain.principal import Principal
from service.domain.records import SignInVia
from service.errors import ApiError, Code
from service.store.protocols import CounterStore, OidcStore, SessionStore, UserStore

STATE_MS = 10 * 60_000  # a trip to the provider must come back within this
# Trips begun per client address (IPv6: its /64) in a window: each keeps a state in the store
# until it comes back or expires, so an address cannot fill the store with them.
STARTS_PER_ADDRESS = 30
STARTS_WINDOW_MS = 60_000
LOGIN_CODE_MS = 60_000  # the dashboard trades the one-time login code within this
# A step-up's sign-in at the provider must be this recent, measured from the trip's start.
STEP_UP_SKEW_MS = 30_000
# A logout token's jti is remembered while a token with it could still be accepted.
LOGOUT_JTI_MS = MAX_TOKEN_AGE_MS + 2 * LEEWAY_MS
MAX_PIECE_LENGTH = 512  # longer state, code or cookie values are refused unread


@dataclass(frozen=True, slots=True)
class Started:
    url: str  # the provider's authorization URL
    browser: str  # the secret the browser keeps in a cookie until the callback


@dataclass(frozen=True, slots=True)
class CameBack:
    code: str | None  # the one-time login code, for the dashboard's fragment
    purpose: str | None  # None when the trip is unknown
    refused: ApiError | None  # why there is no code


def _digest(piece: str) -> str:
    return credentials.digest(piece)


def _piece(value: str | None) -> str | None:
    return value if value and len(value) <= MAX_PIECE_LENGTH else None


class SingleSignOn:
    def __init__(
        self,
        settings: OidcSettings | None,
        provider: OidcProvider | None,
        store: OidcStore,
        identities: Identities,
        login: Login,
        reauthentication: Reauthentication,
        sessions: Sessions,
        session_store: SessionStore,
        users: UserStore,
        clock: Clock,
        counters: CounterStore,
        password_login: bool = True,
    ) -> None:
        self.settings = settings
        self._counters = counters
        self._provider = provider
        self._store = store
        self._identities = identities
        self._login = login
        self._reauthentication = reauthentication
        self._sessions = sessions
        self._session_store = session_store
        self._users = users
        self._clock = clock
        self.password_login = password_login

    def methods(self) -> dict[str, Any]:
        """How people may sign in here, for the login page (``GET /auth/methods``)."""
        oidc = None if self.settings is None else {"label": self.settings.label}
        return {"password": self.password_login, "oidc": oidc}

    def _ready(self) -> tuple[OidcSettings, OidcProvider]:
        if self.settings is None or self._provider is None:
            raise ApiError(Code.ROUTE_NOT_FOUND, "Single sign-on is not configured here.")
        return self.settings, self._provider

    async def start(self, purpose: str, client_address: str | None) -> Started:
        """Begin a trip to the provider for ``purpose`` (``login``, ``link``,
        ``reauthenticate``); 503 ``sso_unavailable`` when the provider cannot be read, 429
        ``rate_limited`` past ``STARTS_PER_ADDRESS`` trips from the address in a window."""
        settings, provider = self._ready()
        if purpose not in PURPOSES:
            raise ApiError(
                Code.VALIDATION_FAILED, details={"purpose": "must be one of " + ", ".join(PURPOSES)}
            )
        bucket = address_bucket(client_address) or "unknown"
        wait_ms = await self._counters.reserve_one(
            self._counters.sso_starts_by_address(bucket), STARTS_PER_ADDRESS, STARTS_WINDOW_MS
        )
        if wait_ms:
            retry_after = max(1, -(-wait_ms // 1000))
            raise ApiError(
                Code.RATE_LIMITED,
                f"Too many sign-ins begun from this address. Retry in {retry_after} s.",
                details={"retry_after_seconds": retry_after},
                headers={"Retry-After": str(retry_after)},
            )
        state, nonce, verifier, browser = (random_piece() for _ in range(4))
        params = {
            "response_type": "code",
            "client_id": settings.client_id,
            "redirect_uri": settings.redirect_uri,
            "scope": settings.scopes,
            "state": state,
            "nonce": nonce,
            "code_challenge": code_challenge(verifier),
            "code_challenge_method": "S256",
        }
        if purpose != "login":
            # A step-up proves the person is at the keyboard now; a link lets them choose the
            # identity to link rather than the one the provider remembers.
            params["prompt"] = "login"
        if purpose == "reauthenticate":
            params["max_age"] = "0"
        url = await provider.authorization_url(params)
        pending = PendingSignIn(nonce, verifier, _digest(browser), purpose, self._clock.now_ms())
        await self._store.keep_pending(_digest(state), pending.dump(), STATE_MS)
        return Started(url, browser)

    async def callback(
        self, params: Mapping[str, str], browser: str | None, origin: audit.Origin
    ) -> CameBack:
        """Check the trip back from the provider (see the module's docstring): its one-time
        login code, or its refusal (each its own code; no session), with the trip's purpose
        once it is known. A store that fails is raised as it is."""
        trip: list[str] = []
        try:
            return await self._came_back(params, browser, origin, trip)
        except ApiError as refused:
            if refused.code.status >= 500 and refused.code is not Code.SSO_UNAVAILABLE:
                raise
            return CameBack(None, trip[0] if trip else None, refused)

    async def _came_back(
        self,
        params: Mapping[str, str],
        browser: str | None,
        origin: audit.Origin,
        trip: list[str],
    ) -> CameBack:
        settings, provider = self._ready()
        state = _piece(params.get("state"))
        raw = await self._store.take_pending(_digest(state)) if state else None
        if raw is None:
            raise ApiError(Code.SSO_STATE_INVALID)
        pending = PendingSignIn.load(raw)
        trip.append(pending.purpose)
        now = self._clock.now_ms()
        if now - pending.started_at > STATE_MS:
            raise ApiError(Code.SSO_STATE_INVALID)
        cookie = _piece(browser)
        if cookie is None or not hmac.compare_digest(_digest(cookie), pending.browser):
            raise ApiError(Code.SSO_BROWSER_MISMATCH)
        if "error" in params:
            raise ApiError(Code.SSO_PROVIDER_REFUSED, details={"error": params["error"][:100]})
        if "iss" in params and params["iss"] != settings.issuer:  # RFC 9207
            raise ApiError(Code.SSO_TOKEN_ISSUER_INVALID)
        code = _piece(params.get("code"))
        if code is None:
            raise ApiError(Code.SSO_PROVIDER_REFUSED)
        token = await provider.redeem(code, pending.verifier)
        claims = await provider.check_id_token(token, pending.nonce)
        auth_time = claims.get("auth_time")
        auth_time_ms = int(auth_time * 1000) if isinstance(auth_time, int | float) else None
        if pending.purpose == "reauthenticate" and (
            auth_time_ms is None or auth_time_ms < pending.started_at - STEP_UP_SKEW_MS
        ):
            raise ApiError(
                Code.REAUTHENTICATION_REQUIRED,
                "The identity provider did not ask you to sign in again: try again.",
            )
        user_id = None
        if pending.purpose == "login":
            user_id = (await self._identities.account_for(claims, origin)).id
        sid = claims.get("sid")
        signed_in = SignedIn(
            purpose=pending.purpose,
            issuer=str(claims["iss"]),
            subject=str(claims["sub"]),
            email=claimed_email(claims)[0],
            user_id=user_id,
            provider_sid=sid if isinstance(sid, str) and sid else None,
            provider_mfa=provider_did_mfa(claims),
            auth_time=auth_time_ms,
            started_at=pending.started_at,
            verified_at=now,
        )
        login_code = random_piece()
        await self._store.keep_signed_in(_digest(login_code), signed_in.dump(), LOGIN_CODE_MS)
        return CameBack(login_code, pending.purpose, None)

    def dashboard_location(self, outcome: CameBack) -> str:
        """Where the browser goes after the callback: the dashboard's login page, with the
        one-time code (``oidc_code``) or the refusal's code (``oidc_error``) in the fragment,
        and the trip's purpose when it is known."""
        settings, _ = self._ready()
        if outcome.refused is None:
            fragment = f"oidc_code={outcome.code}"
        else:
            fragment = f"oidc_error={outcome.refused.code.value}"
        if outcome.purpose:
            fragment += f"&purpose={outcome.purpose}"
        return f"{settings.dashboard_url}#{fragment}"

    async def exchange(
        self, code: str, principal: Principal | None, origin: audit.Origin
    ) -> LoginResult | MfaRequired | Identity | Reauthenticated:
        """Trade a one-time login code, once (401 ``sso_login_code_invalid`` after): a
        sign-in's session or second step; a link (``Identity``) or a step-up
        (``Reauthenticated``) of the caller's session, which must be given for those."""
        settings, _ = self._ready()
        piece = _piece(code)
        if piece and principal is not None:
            # A link needs a recent sign-in: refused before the code is spent, so the page
            # can send the same code again after the step-up.
            kept = await self._store.peek_signed_in(_digest(piece))
            if kept is not None and SignedIn.load(kept).purpose == "link":
                self._sessions.require_recent(await self._sessions.standing(principal))
        raw = await self._store.take_signed_in(_digest(piece)) if piece else None
        if raw is None:
            raise ApiError(Code.SSO_LOGIN_CODE_INVALID)
        signed_in = SignedIn.load(raw)
        if self._clock.now_ms() - signed_in.verified_at > LOGIN_CODE_MS:
            raise ApiError(Code.SSO_LOGIN_CODE_INVALID)
        via = SignInVia("oidc", signed_in.issuer, signed_in.provider_sid)
        trusted = settings.trust_provider_mfa and signed_in.provider_mfa
        if signed_in.purpose == "login":
            assert signed_in.user_id is not None
            user = await self._users.get(signed_in.user_id)
            if user is None:
                raise ApiError(Code.ACCOUNT_GONE)
            return await self._login.signed_in_elsewhere(user, via, origin, trusted)
        if principal is None:
            raise ApiError(Code.SESSION_REQUIRED)
        if signed_in.purpose == "link":
            standing = await self._sessions.standing(principal)
            self._sessions.require_recent(standing)
            return await self._identities.link(
                principal.user_id, signed_in.issuer, signed_in.subject, signed_in.email, origin
            )
        linked = await self._identities.linked_account(signed_in.issuer, signed_in.subject)
        if linked != principal.user_id:
            raise ApiError(Code.SSO_IDENTITY_MISMATCH)
        return await self._reauthentication.reauthenticated_elsewhere(
            principal, via, origin, trusted
        )

    async def provider_logout_url(self, via: SignInVia | None) -> str | None:
        """For a logout of a session opened ``via`` so (None: with the password): where the
        browser ends the person's session at the provider too, when ``provider_logout`` is on,
        the session was opened through this provider and the provider names an
        ``end_session_endpoint``. None otherwise, and when the provider cannot be read: the
        logout itself never waits on it."""
        if self.settings is None or self._provider is None or not self.settings.provider_logout:
            return None
        if via is None or via.method != "oidc" or via.provider != self.settings.issuer:
            return None
        params = {
            "client_id": self.settings.client_id,
            "post_logout_redirect_uri": self.settings.dashboard_url,
        }
        try:
            return await self._provider.end_session_url(params)
        except ApiError:  # sso_unavailable: logged by the provider's discovery
            return None

    async def backchannel_logout(self, token: str) -> int:
        """End the sessions a logout token names (its ``sid``'s, else every session its
        ``sub`` opened through this provider); how many ended. 400
        ``sso_logout_token_invalid`` for a token that fails a check or was used already."""
        _, provider = self._ready()
        claims = await provider.check_logout_token(token)
        issuer = str(claims["iss"])
        if not await self._store.first_use(identity_digest(issuer, claims["jti"]), LOGOUT_JTI_MS):
            raise ApiError(Code.SSO_LOGOUT_TOKEN_INVALID, "This logout token was used already.")
        by_account: dict[str, list[str]] = defaultdict(list)
        sid, sub = claims.get("sid"), claims.get("sub")
        if isinstance(sid, str) and sid:
            for user_id, digest in await self._store.provider_sessions(
                identity_digest(issuer, sid)
            ):
                by_account[user_id].append(digest)
        elif isinstance(sub, str):
            owner = await self._identities.linked_account(issuer, sub)
            if owner is not None:
                for record in await self._sessions.list_sessions(owner):
                    if record.via is not None and record.via.provider == issuer:
                        by_account[owner].append(record.token_digest)
        ended = 0
        for user_id, digests in by_account.items():
            ended += await self._session_store.remove_many(user_id, digests)
        return ended


def cookie_path(settings: OidcSettings) -> str:
    """The path the browser cookie is sent to: the callback's alone."""
    return urlsplit(settings.redirect_uri).path
