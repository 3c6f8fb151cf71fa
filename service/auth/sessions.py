"""The account's sessions as policy sees them: who the acting session is and how recently it
authenticated (the step-up a sensitive operation asks for), logging out, listing the live ones,
and ending one or every other. Each ending is recorded in the audit trail just before it is
carried out (a failed record fails the request with nothing done).

A sensitive operation (creating or rolling a key, widening one, changing the password or a second
factor, ending another session or every other) needs the acting session to have authenticated within
``FILEHOST_REAUTH_SECONDS``: its login, or its last ``POST /auth/reauthenticate``; otherwise
403 ``reauthentication_required``. Only such operations read when that was: a request's
credential check (the gateway's included) reads nothing more than before."""

from __future__ import annotations

from service.auth.audit import AuditTrail
from service.clock import Clock, iso
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.principal import Principal
from service.domain.records import SessionRecord, SessionStanding
from service.errors import ApiError, Code
from service.store.protocols import SessionStore


class Sessions:
    def __init__(
        self, store: SessionStore, clock: Clock, trail: AuditTrail, reauth_seconds: int = 600
    ) -> None:
        self._store = store
        self._clock = clock
        self._trail = trail
        self.reauth_seconds = reauth_seconds

    async def standing(self, principal: Principal) -> SessionStanding:
        """Who the principal's session is and when it last authenticated; 401
        ``invalid_session`` if it has ended."""
        assert principal.token_digest is not None
        standing = await self._store.standing(principal.token_digest)
        if standing is None:
            raise ApiError(Code.INVALID_SESSION, "The session is not valid.")
        return standing

    def is_recent(self, standing: SessionStanding) -> bool:
        """Whether the session authenticated recently enough for a sensitive operation."""
        return self._clock.now_ms() - standing.authenticated_at <= self.reauth_seconds * 1000

    def require_recent(self, standing: SessionStanding) -> None:
        """403 ``reauthentication_required`` unless ``is_recent``: its details say when the
        session last authenticated and how long that counts."""
        if not self.is_recent(standing):
            raise ApiError(
                Code.REAUTHENTICATION_REQUIRED,
                details={
                    "authenticated_at": iso(standing.authenticated_at),
                    "max_age_seconds": self.reauth_seconds,
                },
            )

    async def acting_session(self, principal: Principal) -> tuple[str, str | None]:
        """The public id of the principal's session and its device (the User-Agent stored at
        login, None when none); 401 ``invalid_session`` if it has ended."""
        assert principal.token_digest is not None
        identity = await self._store.identity(principal.token_digest)
        if identity is None:
            raise ApiError(Code.INVALID_SESSION, "The session is not valid.")
        return identity

    async def logout(self, principal: Principal, origin: audit.Origin = audit.NO_ORIGIN) -> int:
        """End the caller's session, recorded first as ``logout``; a session replacing it (a
        reauthentication in progress) ends too. 401 ``invalid_session`` when it had ended by
        then (a reauthentication replaced it first: the token had stopped working)."""
        assert principal.token_digest is not None
        now = self._clock.now_ms()
        target = audit.session_ref(origin.session_id, origin.device) if origin.session_id else None
        await self._trail.record(
            principal.user_id, now, audit.event(audit.LOGOUT, now, origin, target=target)
        )
        if not await self._store.remove(principal.token_digest, principal.user_id):
            raise ApiError(Code.INVALID_SESSION, "The session had ended already.")
        return now

    async def list_sessions(self, user_id: str) -> list[SessionRecord]:
        return await self._store.list(user_id, self._clock.now_ms())

    async def end_session(
        self,
        principal: Principal,
        standing: SessionStanding,
        session_id: str,
        origin: audit.Origin = audit.NO_ORIGIN,
    ) -> int:
        """End one of the account's live sessions; 404 for an unknown id, one of another shape,
        an ended or expired session, another account's. The caller's own (``standing``, its
        session's) ends as a logout does, whenever; another needs the step-up
        (``require_recent``), as ending every other does: else a stale or stolen session ends
        them all, one by one, from the list. Recorded first as ``session.ended``."""
        user_id = principal.user_id
        if credentials.is_valid_id(session_id, "ses"):
            for record in await self.list_sessions(user_id):
                if record.id == session_id:
                    if record.token_digest != principal.token_digest:
                        self.require_recent(standing)
                    now = self._clock.now_ms()
                    await self._trail.record(
                        user_id,
                        now,
                        audit.event(
                            audit.SESSION_ENDED,
                            now,
                            origin,
                            target=audit.session_ref(session_id, record.user_agent),
                        ),
                    )
                    if await self._store.remove(record.token_digest, user_id):
                        return now
                    break  # ended meanwhile by another request
        raise ApiError(Code.SESSION_NOT_FOUND)

    async def end_all_sessions(self, user_id: str) -> int:
        """End every live session of the account (not recorded: the change that ends them is,
        as for ``end_other_sessions`` without an origin); how many were ended."""
        digests = [record.token_digest for record in await self.list_sessions(user_id)]
        return await self._store.remove_many(user_id, digests)

    async def end_other_sessions(
        self, principal: Principal, origin: audit.Origin | None = audit.NO_ORIGIN
    ) -> int:
        """End every live session of the account but the caller's; how many were ended.
        Recorded first, in one step, as one ``session.ended`` event per session; with no
        ``origin``, not recorded (a password change, whose one event tells it)."""
        others = [
            record
            for record in await self.list_sessions(principal.user_id)
            if record.token_digest != principal.token_digest
        ]
        if origin is not None and others:
            now = self._clock.now_ms()
            await self._trail.record(
                principal.user_id,
                now,
                *(
                    audit.event(
                        audit.SESSION_ENDED,
                        now,
                        origin,
                        target=audit.session_ref(record.id, record.user_agent),
                    )
                    for record in others
                ),
            )
        return await self._store.remove_many(
            principal.user_id, [record.token_digest for record in others]
        )
