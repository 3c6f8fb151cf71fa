"""Logging in: a password checked (throttled, off the event loop, the same work for a wrong email
as for a wrong password) into a new session, recorded in the account's audit trail; for an
account with a second factor, in two steps.

The first step of such a login answers an ``mfa_token`` instead of a session: good for 5 minutes,
for ``MAX_ANSWERS`` answers, and for nothing but the second step (it is a credential of its own
kind, ``fhm_``, kept in the account's second factors, never a session). Its right password
counts for nothing in login throttling until the second step: every answer takes its place in
the email's and the address's counts before it is checked, exactly like a password, and only a
right answer clears the email's count. So a second factor is guessed no faster than a password,
on however many workers; a right password does not reset the count. A right answer spends the
token in the step that claims the factor (``service.store.mfa``), and the session it opens is
confirmed only while the account's factors and password are those the first step saw."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from service.auth.audit import AuditTrail
from service.auth.login_throttle import LoginThrottle, Reservation
from service.auth.mfa import Answer, Factors, methods
from service.auth.passkeys import new_challenge
from service.auth.passwords import PasswordHasher
from service.auth.users import normalise_email
from service.clock import Clock
from service.config import SessionSettings
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.factors import LoginStep
from service.domain.outcomes import AccountGone
from service.domain.records import SignInVia, UserRecord
from service.errors import ApiError, Code
from service.store.protocols import MfaAnswerStore, SessionStore, UserStore

log = logging.getLogger("service.auth.login")

MFA_TOKEN_MS = 5 * 60_000
MAX_ANSWERS = 5  # answers to one second step; the token dies with the last wrong one
MAX_PENDING_STEPS = 10  # second steps kept per account (the soonest to expire go first)


@dataclass(frozen=True, slots=True)
class LoginResult:
    user: UserRecord
    token: str
    idle_deadline: int
    absolute_deadline: int


@dataclass(frozen=True, slots=True)
class MfaRequired:
    """The first step of a login to an account with a second factor."""

    mfa_token: str
    methods: list[str]
    expires_at: int


def mfa_token_parts(mfa_token: str) -> tuple[str, str]:
    """(user id, digest of the token's secret) of ``<fhm_ token>.<user id>``; 401
    ``mfa_token_invalid`` for anything else. The user id says where the step is kept (the
    account's slot), and tells nothing its holder does not know: its password was right."""
    secret, _, user_id = mfa_token.partition(".")
    if not credentials.is_well_formed(secret, credentials.MFA_TOKEN_KIND) or not (
        credentials.is_valid_id(user_id, "usr")
    ):
        raise ApiError(Code.MFA_TOKEN_INVALID)
    return user_id, credentials.digest(secret)


class Login:
    def __init__(
        self,
        users: UserStore,
        sessions: SessionStore,
        passwords: PasswordHasher,
        throttle: LoginThrottle,
        trail: AuditTrail,
        clock: Clock,
        session_settings: SessionSettings,
        factors: Factors,
        mfa: MfaAnswerStore,
        outcomes: Callable[[str], None] | None = None,
        password_login: bool = True,
    ) -> None:
        self._users = users
        self._sessions = sessions
        self._passwords = passwords
        self._throttle = throttle
        self._trail = trail
        self._clock = clock
        self._idle_ms = session_settings.idle_seconds * 1000
        self._max_ms = session_settings.max_seconds * 1000
        self._factors = factors
        self._mfa = mfa
        # Told how each login ended (``service.observability.metrics.LOGIN_OUTCOMES``).
        self._outcomes = outcomes or _ignored
        # FILEHOST_PASSWORD_LOGIN: off, only single sign-on opens sessions (the CLI is not a login).
        self._password_login = password_login

    async def login(
        self,
        email: str,
        password: str,
        client_address: str | None = None,
        user_agent: str | None = None,
    ) -> LoginResult | MfaRequired:
        """Check the password and open a session (or, for an account with a second factor,
        begin the second step: ``MfaRequired``). Wrong email and wrong password are refused
        with the same message after the same bcrypt work, so accounts can't be enumerated.
        Throttled logins (see ``login_throttle``) are refused before any password work.

        The session records the client's address (as throttling works it out) and its
        User-Agent (the first ``MAX_USER_AGENT_LENGTH`` characters), for its owner's list.

        A login is recorded in the account's audit trail: ``login.succeeded`` in the step that
        confirms the session (no session opens unrecorded; a failed record is a 503), and
        ``login.failed`` when the email names an account and the password was wrong. That record
        is best effort: if it cannot be written the answer is still the 401 (logged as a
        warning), because a 503 there would tell a guesser which emails have accounts, and the
        attempt is counted by login throttling whatever happens to its record."""
        if not self._password_login:
            raise ApiError(Code.PASSWORD_LOGIN_DISABLED)
        email = normalise_email(email)
        user_agent = user_agent[: audit.MAX_USER_AGENT_LENGTH] if user_agent else None
        origin = audit.Origin(None, client_address, user_agent)
        try:
            reservation = await self._throttle.reserve(email, client_address)
        except ApiError as refused:
            self._outcomes("throttled" if refused.code is Code.LOGIN_THROTTLED else "error")
            raise
        except Exception:
            self._outcomes("error")
            raise
        try:
            user_id = await self._users.find_id(email)
            user = await self._users.get(user_id) if user_id else None
            if user is None:
                await self._passwords.verify_unknown_user(password)
                ok = False
            else:
                ok = await self._passwords.verify(password, user.password_hash)
        except Exception as failed:
            # No verdict (login_busy, a store error): the attempt counts for nothing.
            busy = isinstance(failed, ApiError) and failed.code is Code.LOGIN_BUSY
            self._outcomes("busy" if busy else "error")
            await reservation.release()
            raise
        if not ok or user is None:
            self._outcomes("unknown_account" if user is None else "wrong_password")
            if user is not None:
                await self._record_failed_login(user.id, origin)
            raise ApiError(
                Code.INVALID_CREDENTIALS
            )  # the reserved attempt stays counted: it is the failure
        try:
            state = await self._factors.state(user.id)
        except Exception:
            self._outcomes("error")
            await reservation.release()
            raise
        if state.has_factor:
            return await self._first_step(user, state.generation, methods(state), reservation)
        opened = await self._open(user, origin, reservation, state.generation, user.password_hash)
        self._outcomes("succeeded")
        return opened

    async def signed_in_elsewhere(
        self, user: UserRecord, via: SignInVia, origin: audit.Origin, second_factor_done: bool
    ) -> LoginResult | MfaRequired:
        """A person the provider vouched for (``service.auth.oidc``): a session, or, for an
        account with a second factor the provider did not stand in for
        (``second_factor_done``), the same second step as a password login's, whose session
        counts as opened ``via`` the provider. No password is checked, so nothing is throttled
        here: the provider's own sign-in was."""
        state = await self._factors.state(user.id)
        if state.has_factor and not second_factor_done:
            return await self._first_step(user, state.generation, methods(state), None, via)
        method = "provider" if state.has_factor else None
        opened = await self._open(
            user, origin, None, state.generation, user.password_hash, method, via
        )
        self._outcomes("succeeded")
        return opened

    async def _first_step(
        self,
        user: UserRecord,
        generation: int,
        methods_: list[str],
        reservation: Reservation | None,
        via: SignInVia | None = None,
    ) -> MfaRequired:
        # The right password counts for nothing until the second step has answered.
        if reservation is not None:
            await reservation.release()
        secret = credentials.generate_mfa_token()
        now = self._clock.now_ms()
        kept_via = None if via is None else json.dumps(asdict(via), separators=(",", ":"))
        step = LoginStep(now + MFA_TOKEN_MS, 0, generation, None, user.password_hash, kept_via)
        try:
            kept = await self._mfa.add_login(
                user.id, credentials.digest(secret), step, now, MAX_PENDING_STEPS
            )
        except Exception:
            self._outcomes("error")
            raise
        if not kept:  # deleted while the password was checked
            self._outcomes("unknown_account")
            raise ApiError(Code.INVALID_CREDENTIALS)
        self._outcomes("second_factor_required")
        return MfaRequired(f"{secret}.{user.id}", methods_, step.expires_at)

    async def _open(
        self,
        user: UserRecord,
        origin: audit.Origin,
        reservation: Reservation | None,
        generation: int,
        password_hash: str,
        method: str | None = None,
        via: SignInVia | None = None,
    ) -> LoginResult:
        """A session for ``user`` whose login read the factors at ``generation`` and checked
        ``password_hash``; with ``method``, opened by that second factor (aal 2); ``via``: by
        single sign-on (the provider, recorded in the session and its event)."""
        now = self._clock.now_ms()
        absolute = now + self._max_ms
        idle = min(now + self._idle_ms, absolute)
        token = credentials.generate_session_token()
        public_id = credentials.new_id("ses")
        opened = audit.session_ref(public_id, origin.user_agent)
        changes: dict[str, object] | None = None
        if method is not None:
            changes = {"method": method, "aal": 2}
        if via is not None:
            changes = {**(changes or {}), "via": via.method, "provider": via.provider}
        events = self._trail.batch(
            now,
            audit.event(
                audit.LOGIN_SUCCEEDED, now, origin, actor=opened, target=opened, changes=changes
            ),
        )
        try:
            await self._sessions.add(
                credentials.digest(token),
                user.id,
                now,
                idle,
                absolute,
                public_id=public_id,
                ip=origin.ip,
                user_agent=origin.user_agent,
                password_hash=password_hash,
                events=events,
                factors=generation,
                aal=1 if method is None else 2,
                via=via,
            )
        except AccountGone:
            # The user was deleted while the password was checked: as if it never existed (the
            # attempt stays counted, like any login for an email without an account). Or the
            # password or a second factor was changed meanwhile: what was checked is no longer
            # the account's.
            self._outcomes("unknown_account")
            if method is not None:
                raise ApiError(Code.MFA_TOKEN_INVALID) from None
            raise ApiError(Code.INVALID_CREDENTIALS) from None
        except Exception:
            self._outcomes("error")
            if reservation is not None:
                await reservation.release()  # the password was right; the store failed after
            raise
        if reservation is not None:
            await reservation.succeeded()
        return LoginResult(user, token, idle, absolute)

    async def second_step(
        self,
        mfa_token: str,
        answer: Answer,
        client_address: str | None = None,
        user_agent: str | None = None,
        loopback_origin: str | None = None,
    ) -> LoginResult:
        """Answer a login's second step with a TOTP code, a recovery code or a passkey's
        assertion: a session (aal 2), or 401 ``mfa_code_invalid`` (``details.attempts_left``)
        counted in the login throttling of the account's email and the client's address, or
        401 ``mfa_token_invalid`` for a token unknown, expired or spent (no more answers).
        ``loopback_origin``: the request's, for a passkey (``Factors.passkeys_at``)."""
        user_id, digest = mfa_token_parts(mfa_token)
        user_agent = user_agent[: audit.MAX_USER_AGENT_LENGTH] if user_agent else None
        origin = audit.Origin(None, client_address, user_agent)
        user = await self._users.get(user_id)
        step = await self._mfa.login_step(user_id, digest) if user is not None else None
        now = self._clock.now_ms()
        if user is None or step is None or step.expires_at <= now or step.answers >= MAX_ANSWERS:
            raise ApiError(Code.MFA_TOKEN_INVALID)
        try:
            reservation = await self._throttle.reserve(user.email, client_address)
        except ApiError as refused:
            self._outcomes("throttled" if refused.code is Code.LOGIN_THROTTLED else "error")
            raise
        try:
            state = await self._factors.state(user_id)
            claim = self._factors.claim(user_id, state, answer, step.challenge, loopback_origin)
            events = None
            if answer.recovery_code is not None:
                used = audit.event(audit.MFA_RECOVERY_CODE_USED, now, origin)
                events = self._trail.batch(now, used)
            status, found = await self._mfa.answer_login(
                user_id, digest, now, MAX_ANSWERS, claim, events
            )
        except Exception:
            self._outcomes("error")
            await reservation.release()  # no verdict: the answer counts for nothing
            raise
        if status == 0:  # spent or expired meanwhile
            await reservation.release()
            raise ApiError(Code.MFA_TOKEN_INVALID)
        if status == 2:  # wrong: its reserved attempt stays counted
            self._outcomes("wrong_second_factor")
            await self._record_failed_login(user_id, origin, answer.method)
            raise ApiError(Code.MFA_CODE_INVALID, details={"attempts_left": found})
        assert isinstance(found, LoginStep)
        via = None if found.via is None else SignInVia(**json.loads(found.via))
        opened = await self._open(
            user, origin, reservation, found.generation, found.password_hash, answer.method, via
        )
        self._outcomes("succeeded")
        return opened

    async def webauthn_options(
        self, mfa_token: str, loopback_origin: str | None = None
    ) -> dict[str, Any]:
        """The assertion options for a login's second step by passkey; their challenge is kept
        in the step (a new call replaces it). 401 ``mfa_token_invalid`` as for an answer; 409
        ``mfa_not_enabled`` when the account has no passkey."""
        user_id, digest = mfa_token_parts(mfa_token)
        state = await self._factors.state(user_id)
        if not state.passkeys:
            step = await self._mfa.login_step(user_id, digest)
            if step is None or step.expires_at <= self._clock.now_ms():
                raise ApiError(Code.MFA_TOKEN_INVALID)
            raise ApiError(Code.MFA_NOT_ENABLED, "This account has no passkey.")
        challenge = new_challenge()
        options = self._factors.assertion_options(state, challenge, loopback_origin)
        if not await self._mfa.set_login_challenge(
            user_id, digest, self._clock.now_ms(), challenge
        ):
            raise ApiError(Code.MFA_TOKEN_INVALID)
        return options

    async def _record_failed_login(
        self, user_id: str, origin: audit.Origin, method: str | None = None
    ) -> None:
        now = self._clock.now_ms()
        changes = None if method is None else {"method": method}
        try:
            await self._trail.record(
                user_id, now, audit.event(audit.LOGIN_FAILED, now, origin, changes=changes)
            )
        except Exception as error:  # best effort: the answer stays the 401 (see ``login``)
            log.warning("a failed login could not be recorded: %s", type(error).__name__)


def _ignored(outcome: str) -> None:
    pass
