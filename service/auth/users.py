"""Users as policy sees them: creating one (the command line), listing, deleting with every
credential, reading one for a credential, and changing a password: by its user (checked like a
login, and ending the account's other sessions) or by an operator on the command line (ending
every session of the account)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.auth.audit import AuditTrail
from service.auth.login_throttle import LoginThrottle
from service.auth.passwords import PasswordHasher
from service.auth.sessions import Sessions
from service.clock import Clock
from service.config import LoginSettings
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.principal import Principal
from service.domain.records import UserRecord
from service.errors import ApiError, Code
from service.store.protocols import UserStore

_EMAIL_CHAR = r"[^@\s\x00-\x1f\x7f]"
_EMAIL_PATTERN = re.compile(rf"^{_EMAIL_CHAR}{{1,64}}@{_EMAIL_CHAR}+\.{_EMAIL_CHAR}+$")
MAX_EMAIL_LENGTH = 254
MAX_PASSWORD_LENGTH = 1024


def normalise_email(email: str) -> str:
    """Emails match case-insensitively: stored and looked up lower-cased and trimmed."""
    return email.strip().lower()


def is_valid_email(email: str) -> bool:
    return len(email) <= MAX_EMAIL_LENGTH and bool(_EMAIL_PATTERN.match(email))


@dataclass(frozen=True, slots=True)
class DeletedUser:
    id: str
    email: str
    resumed: bool  # an earlier deletion had been cut short; this one finished it


@dataclass(frozen=True, slots=True)
class PasswordChange:
    changed_at: int
    sessions_ended: int  # the account's other live sessions, ended by the change


class Users:
    def __init__(
        self,
        store: UserStore,
        passwords: PasswordHasher,
        throttle: LoginThrottle,
        sessions: Sessions,
        trail: AuditTrail,
        clock: Clock,
        login: LoginSettings,
    ) -> None:
        self._store = store
        self._passwords = passwords
        self._throttle = throttle
        self._sessions = sessions
        self._trail = trail
        self._clock = clock
        self._password_min_length = login.password_min_length

    async def create_user(self, email: str, password: str) -> UserRecord:
        email = normalise_email(email)
        problems = {}
        if not is_valid_email(email):
            problems["email"] = "must be an e-mail address of at most 254 characters"
        password_problem = self.password_problem(password)
        if password_problem:
            problems["password"] = password_problem
        if problems:
            raise ApiError(Code.VALIDATION_FAILED, details=problems)
        password_hash = await self._passwords.hash(password)
        user_id = credentials.new_id("usr")
        now = self._clock.now_ms()
        if not await self._store.add(user_id, email, password_hash, now):
            raise ApiError(Code.EMAIL_TAKEN)
        return UserRecord(user_id, email, password_hash, now)

    async def list_users(self) -> list[UserRecord]:
        return await self._store.list()

    async def find_user(self, email: str) -> UserRecord:
        """The user with ``email`` (any case); 404 ``user_not_found`` when there is none."""
        user_id = await self._store.find_id(normalise_email(email))
        user = None if user_id is None else await self._store.get(user_id)
        if user is None:
            raise ApiError(Code.USER_NOT_FOUND)
        return user

    async def set_password(self, email: str, new_password: str) -> PasswordChange:
        """An operator's reset of a forgotten password (the command line): the same rules as
        any new password, no current password asked. Recorded as ``password.changed`` by the
        command line, with the new hash in one step; then every session of the account ends
        (a login that checked the old password meanwhile is refused when it confirms its
        session, see ``service.store.sessions``). API keys are not touched."""
        problem = self.password_problem(new_password)
        if problem:
            raise ApiError(Code.VALIDATION_FAILED, details={"password": problem})
        user = await self.find_user(email)
        password_hash = await self._passwords.hash(new_password)
        now = self._clock.now_ms()
        event = audit.event(audit.PASSWORD_CHANGED, now, audit.NO_ORIGIN, actor=audit.cli_actor())
        events = self._trail.batch(now, event)
        if not await self._store.set_password(user.id, password_hash, events):
            raise ApiError(Code.USER_NOT_FOUND)  # deleted meanwhile
        ended = await self._sessions.end_all_sessions(user.id)
        return PasswordChange(now, ended)

    async def delete_user(self, email: str) -> DeletedUser:
        """Delete a user, ending their sessions and revoking their keys. A deletion cut short
        (the user record already gone, the email still mapped) is finished, not refused."""
        email = normalise_email(email)
        user_id = await self._store.find_id(email)
        if user_id is None:
            raise ApiError(Code.USER_NOT_FOUND)
        user = await self._store.get(user_id)
        await self._store.delete(user_id, email)
        return DeletedUser(user_id, email, resumed=user is None)

    def password_problem(self, password: str) -> str | None:
        """What is wrong with a new password, if anything (for a validation error's details)."""
        minimum = self._password_min_length
        if len(password) < minimum:
            return f"must be at least {minimum} characters"
        if len(password) > MAX_PASSWORD_LENGTH:
            return f"must be at most {MAX_PASSWORD_LENGTH} characters"
        return None

    async def get_user(self, user_id: str) -> UserRecord:
        user = await self._store.get(user_id)
        if user is None:
            # The credential outlived its user (deleted between lookups): refuse it.
            raise ApiError(Code.ACCOUNT_GONE)
        return user

    async def change_password(
        self,
        principal: Principal,
        current_password: str,
        new_password: str,
        client_address: str | None = None,
        origin: audit.Origin = audit.NO_ORIGIN,
    ) -> PasswordChange:
        """Replace the password of the session's user, then end every other session of the
        account (the caller's stays; API keys are not touched).

        The current password is checked like a login's (``login_throttle``): the attempt is
        reserved on the user's email and the client's address before bcrypt, a wrong password
        keeps it as a failure (401 ``invalid_credentials``), a throttled email or address is 429
        before any password work. bcrypt runs off the event loop (``PasswordHasher``).

        Recorded as one ``password.changed`` event, written with the new hash in one step; the
        sessions the change ends are part of it (``sessions_ended`` in the answer), not events of
        their own."""
        problem = self.password_problem(new_password)
        if problem:
            raise ApiError(Code.VALIDATION_FAILED, details={"new_password": problem})
        user = await self.get_user(principal.user_id)
        reservation = await self._throttle.reserve(user.email, client_address)
        try:
            ok = await self._passwords.verify(current_password, user.password_hash)
        except Exception:
            await reservation.release()  # no verdict: the attempt counts for nothing
            raise
        if not ok:
            raise ApiError(
                Code.INVALID_CREDENTIALS
            )  # the reserved attempt stays counted: it is the failure
        await reservation.succeeded()
        password_hash = await self._passwords.hash(new_password)
        now = self._clock.now_ms()
        events = self._trail.batch(now, audit.event(audit.PASSWORD_CHANGED, now, origin))
        if not await self._store.set_password(user.id, password_hash, events):
            raise ApiError(Code.ACCOUNT_GONE)
        ended = await self._sessions.end_other_sessions(principal, origin=None)
        return PasswordChange(now, ended)
