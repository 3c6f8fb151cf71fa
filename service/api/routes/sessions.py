"""The account's sessions under /api/v1/auth: list them, end one, end every other; and the
password change, which ends every other session.

Session tokens only (an API key is 403 ``session_required``): these endpoints let a person see
what can act as them and end it. A session is shown by its public id (``ses_…``, random, never
the token or its digest), with when it was opened and last seen, both deadlines, and the client's
address and User-Agent at login; ``current`` marks the caller's own.

Ending a session deletes its entry, as logout does, so its token is refused from the next request
on, on every worker and instance. Ending is never refused for the caller's rate (``counted``
False), like logout and key revocation. Ending another session, one or every other, is a
sensitive operation (403 ``reauthentication_required`` from a stale session); ending the
caller's own by its id never is.

``POST /auth/password`` checks the current password as a login does (throttled, bcrypt off the
event loop), then stores the new one's hash and ends every other session of the account; the
caller's session and the account's API keys keep working.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.api.client_address import client_address
from service.api.context import POLICY, PREFIX, SETTINGS
from service.api.credentials import acting_recently, acting_standing, authenticate
from service.api.validation import parse_change_password, read_json_object
from service.api.views import ok
from service.clock import iso
from service.domain.principal import Principal
from service.domain.records import SessionRecord


def _session_view(record: SessionRecord, principal: Principal) -> dict[str, Any]:
    return {
        "id": record.id,
        "created_at": iso(record.created_at),
        "last_seen_at": iso(record.last_seen_at),
        "expires_at": iso(record.idle_deadline),
        "absolute_expires_at": iso(record.absolute_deadline),
        "ip": record.ip,
        "user_agent": record.user_agent,
        "current": record.token_digest == principal.token_digest,
        "aal": record.aal,
        "authenticated_at": iso(record.authenticated_at),
        # How it was opened: "password", or "oidc" at the provider (its issuer).
        "method": "password" if record.via is None else record.via.method,
        "provider": None if record.via is None else record.via.provider,
    }


async def list_sessions(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    records = await request.app[POLICY].sessions.list_sessions(principal.user_id)
    return ok({"sessions": [_session_view(record, principal) for record in records]})


async def end_session(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True, counted=False)
    session_id = request.match_info["session_id"]
    origin, standing = await acting_standing(request, principal)
    ended_at = await request.app[POLICY].sessions.end_session(
        principal, standing, session_id, origin
    )
    return ok({"id": session_id, "ended_at": iso(ended_at)})


async def end_other_sessions(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True, counted=False)
    ended = await request.app[POLICY].sessions.end_other_sessions(
        principal, await acting_recently(request, principal)
    )
    return ok({"ended": ended})


async def change_password(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    fields = parse_change_password(await read_json_object(request))
    address = client_address(request, request.app[SETTINGS].trusted_proxies)
    change = await request.app[POLICY].users.change_password(
        principal,
        fields.current_password,
        fields.new_password,
        address,
        await acting_recently(request, principal),
    )
    return ok({"changed_at": iso(change.changed_at), "sessions_ended": change.sessions_ended})


def add_session_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(f"{PREFIX}/auth/sessions", list_sessions, allow_head=False),
            web.delete(f"{PREFIX}/auth/sessions", end_other_sessions),
            web.delete(f"{PREFIX}/auth/sessions/{{session_id}}", end_session),
            web.post(f"{PREFIX}/auth/password", change_password),
        ]
    )
