"""Reauthenticating a session for the sensitive operations (step-up): the password again, and a
second factor when the account has one, checked as a login checks them (the same throttling per
email and address, bcrypt off the event loop, a factor claimed once), for a **new** session token
that replaces the caller's, with ``authenticated_at`` now and fresh deadlines; the session keeps
its public id, its device and when it was opened.

Replacing is three steps (``service.store.sessions``): (1) the old session ends and names its
replacement, (2) the new one is opened (confirmed only while the account's password and second
factors are those checked here), (3) the replacement stands only if nothing ended the old one
meanwhile. Whatever ends the old session between (1) and (3) (a logout, ending it by id, a
password or factor change, deleting the user) takes the name and ends the new one, and (3)
refuses: a reauthentication racing a logout never leaves a session behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.auth.audit import AuditTrail
from service.auth.login_throttle import LoginThrottle
from service.auth.mfa import Answer, Factors
from service.auth.passkeys import new_challenge
from service.auth.passwords import PasswordHasher
from service.auth.sessions import Sessions
from service.auth.users import Users
from service.clock import Clock
from service.config import SessionSettings
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.outcomes import AccountGone
from service.domain.principal import Principal
from service.domain.records import SessionStanding, SignInVia
from service.errors import ApiError, Code
from service.store.protocols import MfaAnswerStore, MfaStore, SessionStore

CHALLENGE_MS = 5 * 60_000


@dataclass(frozen=True, slots=True)
class Reauthenticated:
    token: str
    idle_deadline: int
    absolute_deadline: int
    authenticated_at: int
    aal: int


def _ended() -> ApiError:
    return ApiError(Code.INVALID_SESSION, "The session ended while it was reauthenticated.")


class Reauthentication:
    def __init__(
        self,
        users: Users,
        sessions: Sessions,
        session_store: SessionStore,
        factors: Factors,
        mfa: MfaStore,
        answers: MfaAnswerStore,
        passwords: PasswordHasher,
        throttle: LoginThrottle,
        trail: AuditTrail,
        clock: Clock,
        session_settings: SessionSettings,
    ) -> None:
        self._users = users
        self._sessions = sessions
        self._store = session_store
        self._factors = factors
        self._mfa = mfa
        self._answers = answers
        self._passwords = passwords
        self._throttle = throttle
        self._trail = trail
        self._clock = clock
        self._idle_ms = session_settings.idle_seconds * 1000
        self._max_ms = session_settings.max_seconds * 1000

    async def webauthn_options(
        self, principal: Principal, loopback_origin: str | None = None
    ) -> dict[str, Any]:
        """Assertion options for reauthenticating this session with a passkey; the challenge is
        kept 5 minutes for this session (a new call replaces it)."""
        standing = await self._sessions.standing(principal)
        state = await self._factors.state(principal.user_id)
        if not state.passkeys:
            raise ApiError(Code.MFA_NOT_ENABLED, "This account has no passkey.")
        challenge = new_challenge()
        options = self._factors.assertion_options(state, challenge, loopback_origin)
        now = self._clock.now_ms()
        await self._mfa.set_challenge(
            principal.user_id, f"reauth:{standing.id}", challenge, now, now + CHALLENGE_MS
        )
        return options

    async def reauthenticate(
        self,
        principal: Principal,
        password: str,
        answer: Answer | None,
        client_address: str | None,
        origin: audit.Origin,
        loopback_origin: str | None = None,
    ) -> Reauthenticated:
        """Check the password (and the second factor when the account has one: 400
        ``validation_failed`` naming the fields when none was given) and replace the caller's
        session by a new one. A wrong password is 401 ``invalid_credentials``, a wrong factor 401
        ``mfa_code_invalid``, each counted as a failed login; neither ends the session.
        ``loopback_origin``: the request's, for a passkey (``Factors.passkeys_at``)."""
        user = await self._users.get_user(principal.user_id)
        standing = await self._sessions.standing(principal)
        state = await self._factors.state(user.id)
        if state.has_factor and answer is None:
            raise ApiError(
                Code.VALIDATION_FAILED,
                "This account has a second factor: send code, recovery_code or webauthn too.",
                details={"code": "is required (or recovery_code, or webauthn)"},
            )
        reservation = await self._throttle.reserve(user.email, client_address)
        now = self._clock.now_ms()
        try:
            right = await self._passwords.verify(password, user.password_hash)
            claimed = True
            if right and state.has_factor and answer is not None:
                challenge = None
                if answer.webauthn is not None:
                    challenge = await self._mfa.take_challenge(
                        user.id, f"reauth:{standing.id}", now
                    )
                claim = self._factors.claim(user.id, state, answer, challenge, loopback_origin)
                events = None
                if answer.recovery_code is not None:
                    used = audit.event(audit.MFA_RECOVERY_CODE_USED, now, origin)
                    events = self._trail.batch(now, used)
                claimed = await self._answers.claim(user.id, claim, events)
        except Exception:
            await reservation.release()  # no verdict: the attempt counts for nothing
            raise
        if not right:  # the reserved attempt stays counted: it is the failure
            raise ApiError(Code.INVALID_CREDENTIALS, "The password is incorrect.")
        if not claimed:
            raise ApiError(Code.MFA_CODE_INVALID)
        await reservation.succeeded()
        aal = 2 if state.has_factor else 1
        return await self._replace(
            principal, standing, user.id, user.password_hash, state.generation, aal, origin
        )

    async def reauthenticated_elsewhere(
        self,
        principal: Principal,
        via: SignInVia,
        origin: audit.Origin,
        second_factor_done: bool,
    ) -> Reauthenticated:
        """A step-up the OpenID provider vouched for (``service.auth.oidc``: the person signed
        in there again, after the step-up began, as an identity linked to this account): the
        caller's session replaced as ``reauthenticate`` replaces it. 403
        ``reauthentication_required`` for an account with a second factor the provider did
        not stand in for (``second_factor_done``): that takes ``reauthenticate``."""
        user = await self._users.get_user(principal.user_id)
        standing = await self._sessions.standing(principal)
        state = await self._factors.state(user.id)
        if state.has_factor and not second_factor_done:
            raise ApiError(
                Code.REAUTHENTICATION_REQUIRED,
                "This account has a second factor: reauthenticate with it.",
            )
        aal = 2 if state.has_factor else 1
        return await self._replace(
            principal, standing, user.id, user.password_hash, state.generation, aal, origin, via
        )

    async def _replace(
        self,
        principal: Principal,
        standing: SessionStanding,
        user_id: str,
        password_hash: str,
        generation: int,
        aal: int,
        origin: audit.Origin,
        via: SignInVia | None = None,
    ) -> Reauthenticated:
        """``via``: how the new session counts as opened (a step-up through the provider:
        the provider's session); else the old session's."""
        assert principal.token_digest is not None
        via = via or standing.via
        token = credentials.generate_session_token()
        digest = credentials.digest(token)
        now = self._clock.now_ms()
        absolute = now + self._max_ms
        idle = min(now + self._idle_ms, absolute)
        if not await self._store.begin_replacement(principal.token_digest, digest):
            raise _ended()
        session = audit.session_ref(standing.id, standing.user_agent)
        event = audit.event(
            audit.SESSION_REAUTHENTICATED,
            now,
            origin,
            actor=session,
            target=session,
            changes={"aal": aal},
        )
        try:
            await self._store.add(
                digest,
                user_id,
                standing.created_at,
                idle,
                absolute,
                public_id=standing.id,
                ip=origin.ip,
                user_agent=standing.user_agent,
                password_hash=password_hash,
                events=self._trail.batch(now, event),
                factors=generation,
                aal=aal,
                authenticated_at=now,
                via=via,
            )
        except AccountGone:
            # The password or a factor changed, or the user went, since the checks: whatever
            # changed it ended the other sessions, this one among them.
            await self._store.abandon_replacement(user_id, principal.token_digest)
            raise _ended() from None
        except BaseException:
            await self._store.abandon_replacement(user_id, principal.token_digest)
            raise
        if not await self._store.finish_replacement(user_id, principal.token_digest, digest):
            raise _ended()
        return Reauthenticated(token, idle, absolute, now, aal)
