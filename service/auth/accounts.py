"""Account operations: users, login and logout, and the life of API keys.

Policy only: input arrives validated in shape (see ``api.validation``); this module decides what
is allowed and asks the store to record it. Secrets are generated here, returned once to the
caller, and handed to the store only as digests.

Every change a person makes to their account's credentials is recorded in its audit trail
(``service.domain.audit_events``) before it takes effect or in the same atomic step: a login's
session and a key's creation are confirmed together with their event, a password's hash is replaced
together with its event, a key's edit or roll is made in the step that records it, and a logout,
an ended session or a revoked key (by its owner, or reported leaked) is recorded just before it
is carried out. A failed record fails the request (503) with nothing done. A failed login is
the exception: its record is best effort (see ``login``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

from service.auth.login_throttle import LoginThrottle, address_bucket
from service.auth.passwords import PasswordHasher
from service.clock import Clock
from service.config import Settings
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.permissions import to_mask, to_names
from service.domain.principal import Principal
from service.domain.records import KeyChanges, KeyRecord, SessionRecord, UserRecord
from service.errors import Conflict, NotFound, TooManyRequests, Unauthorized, ValidationFailed
from service.store.audit import EventBatch, EventPage
from service.store.errors import AccountGone, KeyChanged
from service.store.stores import Stores

_DAY_MS = 86_400_000
_EMAIL_CHAR = r"[^@\s\x00-\x1f\x7f]"
_EMAIL_PATTERN = re.compile(rf"^{_EMAIL_CHAR}{{1,64}}@{_EMAIL_CHAR}+\.{_EMAIL_CHAR}+$")
MAX_EMAIL_LENGTH = 254
MAX_PASSWORD_LENGTH = 1024
MAX_USER_AGENT_LENGTH = 256
# POST /keys/leaked: reports accepted per client address (IPv6: per /64) in a window that starts
# with the first. Each report may name 100 secrets; a scanner sends a handful.
LEAK_REPORTS_PER_ADDRESS = 10
LEAK_REPORT_WINDOW_SECONDS = 60
MAX_GRACE_SECONDS = 7 * 24 * 3600

log = logging.getLogger("service.auth.accounts")


def normalise_email(email: str) -> str:
    """Emails match case-insensitively: stored and looked up lower-cased and trimmed."""
    return email.strip().lower()


def is_valid_email(email: str) -> bool:
    return len(email) <= MAX_EMAIL_LENGTH and bool(_EMAIL_PATTERN.match(email))


def _wrong_credentials() -> Unauthorized:
    return Unauthorized(
        "The email or password is incorrect.",
        code="invalid_credentials",
        headers={"WWW-Authenticate": 'Bearer realm="filehost"'},
    )


def _account_gone() -> Unauthorized:
    return Unauthorized(
        "The credential's account no longer exists.",
        code="account_gone",
        headers={"WWW-Authenticate": 'Bearer realm="filehost"'},  # RFC 9110: every 401
    )


@dataclass(frozen=True, slots=True)
class LoginResult:
    user: UserRecord
    token: str
    idle_deadline: int
    absolute_deadline: int


@dataclass(frozen=True, slots=True)
class DeletedUser:
    id: str
    email: str
    resumed: bool  # an earlier deletion had been cut short; this one finished it


@dataclass(frozen=True, slots=True)
class PasswordChange:
    changed_at: int
    sessions_ended: int  # the account's other live sessions, ended by the change


@dataclass(frozen=True, slots=True)
class CreatedKey:
    record: KeyRecord
    secret: str


@dataclass(frozen=True, slots=True)
class KeyEdit:
    """What ``PATCH /keys/{id}`` asks to change (validated in shape); None leaves a field as it
    is. ``allowed_ips`` holds canonical networks, empty for anywhere; ``rate_limit`` (per second,
    burst) is set when ``sets_rate_limit``, None for the deployment's."""

    name: str | None = None
    permissions: list[str] | None = None
    expires_days: int | None = None
    enabled: bool | None = None
    allowed_ips: tuple[str, ...] | None = None
    sets_rate_limit: bool = False
    rate_limit: tuple[int, int] | None = None


def _key_not_found() -> NotFound:
    return NotFound("No active API key has this id.", code="key_not_found")


def _key_busy() -> Conflict:
    return Conflict(
        "Other requests are changing this key at the same time. Retry.", code="key_busy"
    )


def _edited_fields(before: KeyRecord, after: KeyRecord) -> dict[str, Any]:
    """The fields an edit changed, with their new values as the API shows them (the expiry in
    ms, shown ISO 8601 by the audit endpoint); never a secret."""
    edited: dict[str, Any] = {}
    if after.name != before.name:
        edited["name"] = after.name
    if after.permissions != before.permissions:
        edited["permissions"] = to_names(after.permissions)
    if after.expires_at != before.expires_at:
        edited["expires_at"] = after.expires_at
    if after.allowed_ips != before.allowed_ips:
        edited["allowed_ips"] = list(after.allowed_ips)
    if after.rate_limit != before.rate_limit:
        edited["rate_limit"] = (
            None
            if after.rate_limit is None
            else {"per_second": after.rate_limit[0], "burst": after.rate_limit[1]}
        )
    return edited


def _origin(origin: audit.Origin | None) -> audit.Origin:
    return origin if origin is not None else audit.Origin(None, None, None)


class Accounts:
    def __init__(
        self, store: Stores, passwords: PasswordHasher, clock: Clock, settings: Settings
    ) -> None:
        self._store = store
        self._passwords = passwords
        self._clock = clock
        self._settings = settings
        self._throttle = LoginThrottle(store, settings)

    # -- users ------------------------------------------------------------------------------

    async def create_user(self, email: str, password: str) -> UserRecord:
        email = normalise_email(email)
        problems = {}
        if not is_valid_email(email):
            problems["email"] = "must be an e-mail address of at most 254 characters"
        password_problem = self._password_problem(password)
        if password_problem:
            problems["password"] = password_problem
        if problems:
            raise ValidationFailed(details=problems)
        password_hash = await self._passwords.hash(password)
        user_id = credentials.new_id("usr")
        now = self._clock.now_ms()
        if not await self._store.users.add(user_id, email, password_hash, now):
            raise Conflict("A user with this email already exists.", code="email_taken")
        return UserRecord(user_id, email, password_hash, now)

    async def list_users(self) -> list[UserRecord]:
        return await self._store.users.list()

    async def delete_user(self, email: str) -> DeletedUser:
        """Delete a user, ending their sessions and revoking their keys. A deletion cut short
        (the user record already gone, the email still mapped) is finished, not refused."""
        email = normalise_email(email)
        user_id = await self._store.users.find_id(email)
        if user_id is None:
            raise NotFound("No user has this email.", code="user_not_found")
        user = await self._store.users.get(user_id)
        await self._store.users.delete(user_id, email)
        return DeletedUser(user_id, email, resumed=user is None)

    def _password_problem(self, password: str) -> str | None:
        minimum = self._settings.password_min_length
        if len(password) < minimum:
            return f"must be at least {minimum} characters"
        if len(password) > MAX_PASSWORD_LENGTH:
            return f"must be at most {MAX_PASSWORD_LENGTH} characters"
        return None

    async def change_password(
        self,
        principal: Principal,
        current_password: str,
        new_password: str,
        client_address: str | None = None,
        origin: audit.Origin | None = None,
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
        problem = self._password_problem(new_password)
        if problem:
            raise ValidationFailed(details={"new_password": problem})
        user = await self.get_user(principal.user_id)
        reservation = await self._throttle.reserve(user.email, client_address)
        try:
            ok = await self._passwords.verify(current_password, user.password_hash)
        except Exception:
            await reservation.release()  # no verdict: the attempt counts for nothing
            raise
        if not ok:
            raise _wrong_credentials()  # the reserved attempt stays counted: it is the failure
        await reservation.succeeded()
        password_hash = await self._passwords.hash(new_password)
        now = self._clock.now_ms()
        events = self._events(now, audit.event(audit.PASSWORD_CHANGED, now, _origin(origin)))
        if not await self._store.users.set_password(user.id, password_hash, events):
            raise _account_gone()
        ended = await self._end_others(principal)
        return PasswordChange(now, ended)

    async def get_user(self, user_id: str) -> UserRecord:
        user = await self._store.users.get(user_id)
        if user is None:
            # The credential outlived its user (deleted between lookups): refuse it.
            raise _account_gone()
        return user

    # -- sessions ---------------------------------------------------------------------------

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
        user_agent = user_agent[:MAX_USER_AGENT_LENGTH] if user_agent else None
        origin = audit.Origin(None, client_address, user_agent)
        reservation = await self._throttle.reserve(email, client_address)
        try:
            user_id = await self._store.users.find_id(email)
            user = await self._store.users.get(user_id) if user_id else None
            if user is None:
                await self._passwords.verify_unknown_user(password)
                ok = False
            else:
                ok = await self._passwords.verify(password, user.password_hash)
        except Exception:
            # No verdict (login_busy, a store error): the attempt counts for nothing.
            await reservation.release()
            raise
        if not ok or user is None:
            if user is not None:
                await self._record_failed_login(user.id, origin)
            raise _wrong_credentials()  # the reserved attempt stays counted: it is the failure
        now = self._clock.now_ms()
        absolute = now + self._settings.session_max_seconds * 1000
        idle = min(now + self._settings.session_idle_seconds * 1000, absolute)
        token = credentials.generate_session_token()
        public_id = credentials.new_id("ses")
        opened = {"session_id": public_id}
        events = self._events(
            now,
            audit.event(
                audit.LOGIN_SUCCEEDED,
                now,
                origin,
                actor={"type": "session", **opened},
                target=opened,
            ),
        )
        try:
            await self._store.sessions.add(
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
            raise _wrong_credentials() from None
        except Exception:
            await reservation.release()  # the password was right; the store failed after
            raise
        await reservation.succeeded()
        return LoginResult(user, token, idle, absolute)

    async def _record_failed_login(self, user_id: str, origin: audit.Origin) -> None:
        now = self._clock.now_ms()
        try:
            await self._store.audit.record(
                user_id, self._events(now, audit.event(audit.LOGIN_FAILED, now, origin))
            )
        except Exception as error:  # best effort: the answer stays the 401 (see ``login``)
            log.warning("a failed login could not be recorded: %s", type(error).__name__)

    async def acting_session_id(self, principal: Principal) -> str:
        """The public id of the principal's session (401 ``invalid_session`` if it has ended)."""
        assert principal.token_digest is not None
        session_id = await self._store.sessions.public_id(principal.token_digest)
        if session_id is None:
            raise Unauthorized(
                "The session is not valid.",
                code="invalid_session",
                headers={"WWW-Authenticate": 'Bearer realm="filehost"'},
            )
        return session_id

    async def logout(self, principal: Principal, origin: audit.Origin | None = None) -> int:
        """End the caller's session, recorded first as ``logout``."""
        assert principal.token_digest is not None
        origin = _origin(origin)
        now = self._clock.now_ms()
        target = {"session_id": origin.session_id} if origin.session_id else None
        await self._record(
            principal.user_id, now, audit.event(audit.LOGOUT, now, origin, target=target)
        )
        await self._store.sessions.remove(principal.token_digest, principal.user_id)
        return now

    async def list_sessions(self, user_id: str) -> list[SessionRecord]:
        return await self._store.sessions.list(user_id, self._clock.now_ms())

    async def end_session(
        self, user_id: str, session_id: str, origin: audit.Origin | None = None
    ) -> int:
        """End one of the account's live sessions (the caller's own included); 404 for an
        unknown id, one of another shape, an ended or expired session, another account's.
        Recorded first as ``session.ended``."""
        if credentials.is_valid_id(session_id, "ses"):
            for record in await self.list_sessions(user_id):
                if record.id == session_id:
                    now = self._clock.now_ms()
                    await self._record(
                        user_id,
                        now,
                        audit.event(
                            audit.SESSION_ENDED,
                            now,
                            _origin(origin),
                            target={"session_id": session_id},
                        ),
                    )
                    if await self._store.sessions.remove(record.token_digest, user_id):
                        return now
                    break  # ended meanwhile by another request
        raise NotFound("No live session of this account has this id.", code="session_not_found")

    async def end_other_sessions(
        self, principal: Principal, origin: audit.Origin | None = None
    ) -> int:
        """End every live session of the account but the caller's; how many were ended.
        Recorded first, in one step, as one ``session.ended`` event per session."""
        return await self._end_others(principal, _origin(origin))

    async def _end_others(self, principal: Principal, origin: audit.Origin | None = None) -> int:
        others = [
            record
            for record in await self.list_sessions(principal.user_id)
            if record.token_digest != principal.token_digest
        ]
        if origin is not None and others:
            now = self._clock.now_ms()
            await self._record(
                principal.user_id,
                now,
                *(
                    audit.event(audit.SESSION_ENDED, now, origin, target={"session_id": record.id})
                    for record in others
                ),
            )
        return await self._store.sessions.remove_many(
            principal.user_id, [record.token_digest for record in others]
        )

    # -- API keys ---------------------------------------------------------------------------

    async def create_key(
        self,
        user_id: str,
        name: str,
        permissions: list[str],
        expires_days: int,
        origin: audit.Origin | None = None,
    ) -> CreatedKey:
        """Create a key; recorded as ``key.created`` (its name, permissions and expiry) in the
        step that confirms it."""
        secret = credentials.generate_api_key()
        now = self._clock.now_ms()
        record = KeyRecord(
            id=credentials.new_id("key"),
            name=name,
            key_prefix=credentials.display_prefix(secret),
            permissions=to_mask(permissions),
            created_at=now,
            expires_at=now + expires_days * _DAY_MS,
            last_used_at=None,
        )
        limit = self._settings.max_keys_per_account
        events = self._events(
            now,
            audit.event(
                audit.KEY_CREATED,
                now,
                _origin(origin),
                target={"key_id": record.id},
                changes={
                    "name": name,
                    "permissions": list(permissions),
                    "expires_at": record.expires_at,
                },
            ),
        )
        try:
            added = await self._store.api_keys.add(
                user_id=user_id,
                key_id=record.id,
                secret_digest=credentials.digest(secret),
                name=record.name,
                key_prefix=record.key_prefix,
                permissions=record.permissions,
                created_at=record.created_at,
                expires_at=record.expires_at,
                max_active=limit,
                events=events,
            )
        except AccountGone:
            # The session was checked, then its user deleted before the key was made.
            raise _account_gone() from None
        if not added:
            raise Conflict(
                f"This account already has the maximum of {limit} active API keys. "
                "Revoke one before creating another.",
                code="key_limit_reached",
                details={"limit": limit},
            )
        return CreatedKey(record, secret)

    async def list_keys(self, user_id: str) -> list[KeyRecord]:
        return await self._store.api_keys.list(user_id, self._clock.now_ms())

    async def edit_key(
        self, user_id: str, key_id: str, edit: KeyEdit, origin: audit.Origin | None = None
    ) -> KeyRecord:
        """Change one of the user's active keys; 404 for an unknown id or another account's
        key. In force from the next request on every worker (``ApiKeyStore.edit``).
        Recorded in the step that makes it: ``key.edited`` with the changed fields and their
        new values, ``key.disabled`` / ``key.enabled`` when that changed; nothing when nothing
        changed."""
        if not credentials.is_valid_id(key_id, "key"):
            raise _key_not_found()
        now = self._clock.now_ms()
        origin = _origin(origin)
        changes = KeyChanges(
            name=edit.name,
            permissions=to_mask(edit.permissions) if edit.permissions is not None else None,
            expires_at=now + edit.expires_days * _DAY_MS if edit.expires_days is not None else None,
            enabled=edit.enabled,
            allowed_ips=edit.allowed_ips,
            sets_rate_limit=edit.sets_rate_limit,
            rate_limit=edit.rate_limit,
        )
        target = {"key_id": key_id}

        def events_for(before: KeyRecord, after: KeyRecord) -> EventBatch | None:
            events = []
            edited = _edited_fields(before, after)
            if edited:
                events.append(
                    audit.event(audit.KEY_EDITED, now, origin, target=target, changes=edited)
                )
            if after.enabled != before.enabled:
                kind = audit.KEY_ENABLED if after.enabled else audit.KEY_DISABLED
                events.append(audit.event(kind, now, origin, target=target))
            return self._events(now, *events) if events else None

        try:
            record = await self._store.api_keys.edit(user_id, key_id, now, changes, events_for)
        except AccountGone:
            raise _account_gone() from None
        except KeyChanged:
            raise _key_busy() from None
        if record is None:
            raise _key_not_found()
        return record

    async def roll_key(
        self,
        user_id: str,
        key_id: str,
        grace_seconds: int,
        origin: audit.Origin | None = None,
    ) -> CreatedKey:
        """Give one of the user's active keys a new secret, returned here once; the current
        secret keeps working for ``grace_seconds`` (0: refused from now on), and a secret still
        in the grace of an earlier roll is refused from now on. Id, name, permissions, expiry
        and settings stay. 404 for an unknown id or another account's key. Recorded as
        ``key.rolled`` (the grace, and when the previous secret stops working) in the step
        that makes it."""
        if not credentials.is_valid_id(key_id, "key"):
            raise _key_not_found()
        if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
            raise ValidationFailed(
                details={"grace_seconds": f"must be a whole number from 0 to {MAX_GRACE_SECONDS}"}
            )
        # Every secret of a key has its entry in one Redis Cluster slot, that of the bucket its
        # secrets share, so that one script reads either and takes from that bucket.
        slot = await self._store.api_keys.new_secret_slot(user_id, key_id)
        if slot is None:
            raise _key_not_found()
        entry_slot = self._store.api_keys.entry_slot
        secret = await asyncio.to_thread(
            credentials.generate_api_key_where,
            lambda candidate: entry_slot(credentials.digest(candidate)) == slot,
        )
        now = self._clock.now_ms()
        origin = _origin(origin)

        def events_for(record: KeyRecord) -> EventBatch:
            return self._events(
                now,
                audit.event(
                    audit.KEY_ROLLED,
                    now,
                    origin,
                    target={"key_id": key_id},
                    changes={
                        "grace_seconds": grace_seconds,
                        "previous_secret_expires_at": record.previous_secret_expires_at,
                    },
                ),
            )

        try:
            record = await self._store.api_keys.roll(
                user_id,
                key_id,
                secret_digest=credentials.digest(secret),
                key_prefix=credentials.display_prefix(secret),
                previous_until=now + grace_seconds * 1000,
                now=now,
                events_for=events_for,
            )
        except AccountGone:
            raise _account_gone() from None
        except KeyChanged:
            raise _key_busy() from None
        if record is None:
            raise _key_not_found()
        return CreatedKey(record, secret)

    async def report_leaked(
        self, secrets: list[str], client_address: str | None, user_agent: str | None = None
    ) -> int:
        """Revoke every key one of ``secrets`` opens now (any account's; a secret still in its
        grace after a roll revokes its key too), each recorded for its owner as
        ``key.revoked_as_leaked`` with a ``leak_report`` actor just before it is revoked.
        Returns how many values were received, whatever was found, so the answer can't tell
        which were live. Limited per client address (``LEAK_REPORTS_PER_ADDRESS`` in
        ``LEAK_REPORT_WINDOW_SECONDS``, IPv6 per /64): 429 ``leak_reports_throttled`` past it,
        before anything is looked up."""
        await self._count_leak_report(client_address)
        digests = list(
            dict.fromkeys(
                credentials.digest(secret)
                for secret in secrets
                if credentials.is_well_formed(secret, credentials.API_KEY_KIND)
            )
        )
        now = self._clock.now_ms()
        origin = audit.Origin(
            None, client_address, user_agent[:MAX_USER_AGENT_LENGTH] if user_agent else None
        )
        for user_id, key_id in dict.fromkeys(await self._store.api_keys.find_live(digests, now)):
            events = self._events(
                now,
                audit.event(
                    audit.KEY_REVOKED_AS_LEAKED,
                    now,
                    origin,
                    actor=audit.leak_report_actor(client_address),
                    target={"key_id": key_id},
                    changes={"revoked_reason": "reported_leaked"},
                ),
            )
            await self._store.api_keys.revoke(user_id, key_id, now, events)
        return len(secrets)

    async def _count_leak_report(self, client_address: str | None) -> None:
        bucket = address_bucket(client_address) or "unknown"
        window_ms = LEAK_REPORT_WINDOW_SECONDS * 1000
        wait_ms = await self._store.counters.reserve_one(
            self._store.keys.leak_reports_by_address(bucket), LEAK_REPORTS_PER_ADDRESS, window_ms
        )
        if wait_ms:
            retry_after = max(1, -(-wait_ms // 1000))
            raise TooManyRequests(
                f"Too many leak reports from this address. Retry in {retry_after} s.",
                code="leak_reports_throttled",
                details={"retry_after_seconds": retry_after},
                headers={"Retry-After": str(retry_after)},
            )

    async def revoke_key(
        self, user_id: str, key_id: str, origin: audit.Origin | None = None
    ) -> int:
        """Revoke one of the user's keys; 404 for an unknown id or another account's key.
        Recorded as ``key.revoked`` once the key is found active, before it is removed."""
        now = self._clock.now_ms()
        events = self._events(
            now, audit.event(audit.KEY_REVOKED, now, _origin(origin), target={"key_id": key_id})
        )
        try:
            revoked = credentials.is_valid_id(key_id, "key") and await self._store.api_keys.revoke(
                user_id, key_id, now, events
            )
        except KeyChanged:
            raise _key_busy() from None
        if not revoked:
            raise _key_not_found()
        return now

    # -- the audit trail ----------------------------------------------------------------------

    def _events(self, at: int, *events: dict[str, Any]) -> EventBatch:
        return EventBatch(
            at=at,
            retention_ms=self._settings.audit_retention_days * _DAY_MS,
            max_events=self._settings.audit_max_events,
            events=events,
        )

    async def _record(self, user_id: str, at: int, *events: dict[str, Any]) -> None:
        await self._store.audit.record(user_id, self._events(at, *events))

    async def audit_events(
        self, user_id: str, limit: int, before: int | None, kind: str | None
    ) -> EventPage:
        """A page of the account's audit trail, newest first (``before``: a cursor's position);
        events past the retention are never shown, even before a write trims them."""
        since = self._clock.now_ms() - self._settings.audit_retention_days * _DAY_MS
        return await self._store.audit.page(user_id, limit, before, kind, since)
