"""Logging in: a password checked (throttled, off the event loop, the same work for a wrong email
as for a wrong password) into a new session, recorded in the account's audit trail."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from service.auth.audit import AuditTrail
from service.auth.login_throttle import LoginThrottle
from service.auth.passwords import PasswordHasher
from service.auth.users import normalise_email
from service.clock import Clock
from service.config import SessionSettings
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.records import UserRecord
from service.errors import ApiError, Code
from service.store.errors import AccountGone
from service.store.sessions import SessionStore
from service.store.users import UserStore

log = logging.getLogger("service.auth.login")


@dataclass(frozen=True, slots=True)
class LoginResult:
    user: UserRecord
    token: str
    idle_deadline: int
    absolute_deadline: int


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
        outcomes: Callable[[str], None] | None = None,
    ) -> None:
        self._users = users
        self._sessions = sessions
        self._passwords = passwords
        self._throttle = throttle
        self._trail = trail
        self._clock = clock
        self._idle_ms = session_settings.idle_seconds * 1000
        self._max_ms = session_settings.max_seconds * 1000
        # Told how each login ended (``service.observability.metrics.LOGIN_OUTCOMES``).
        self._outcomes = outcomes or _ignored

    async def login(
        self,
        email: str,
        password: str,
        client_address: str | None = None,
        user_agent: str | None = None,
    ) -> LoginResult:
        """Check the password and open a session. Wrong email and wrong password are refused
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
        now = self._clock.now_ms()
        absolute = now + self._max_ms
        idle = min(now + self._idle_ms, absolute)
        token = credentials.generate_session_token()
        public_id = credentials.new_id("ses")
        opened = audit.session_ref(public_id, user_agent)
        events = self._trail.batch(
            now,
            audit.event(audit.LOGIN_SUCCEEDED, now, origin, actor=opened, target=opened),
        )
        try:
            await self._sessions.add(
                credentials.digest(token),
                user.id,
                now,
                idle,
                absolute,
                public_id=public_id,
                ip=client_address,
                user_agent=user_agent,
                password_hash=user.password_hash,
                events=events,
            )
        except AccountGone:
            # The user was deleted while the password was checked: as if it never existed (the
            # attempt stays counted, like any login for an email without an account). Or the
            # password was changed meanwhile: the one checked is no longer the account's.
            self._outcomes("unknown_account")
            raise ApiError(Code.INVALID_CREDENTIALS) from None
        except Exception:
            self._outcomes("error")
            await reservation.release()  # the password was right; the store failed after
            raise
        await reservation.succeeded()
        self._outcomes("succeeded")
        return LoginResult(user, token, idle, absolute)

    async def _record_failed_login(self, user_id: str, origin: audit.Origin) -> None:
        now = self._clock.now_ms()
        try:
            await self._trail.record(user_id, now, audit.event(audit.LOGIN_FAILED, now, origin))
        except Exception as error:  # best effort: the answer stays the 401 (see ``login``)
            log.warning("a failed login could not be recorded: %s", type(error).__name__)


def _ignored(outcome: str) -> None:
    pass
