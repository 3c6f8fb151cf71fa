"""The account's audit trail: ``GET /api/v1/audit-events``.

Session tokens only (an API key is 403 ``session_required``, as on the other account
endpoints). A page of the account's events, newest first, ``limit`` at a time (1-1000, default
100), from the previous page's ``next_cursor`` (null on the last page), of one ``type`` when
asked, and only those naming one key (``key_id``) or one session (``session_id``), as the one
that acted or the one acted on, when asked. A bad ``limit``, ``cursor``, ``type``, ``key_id`` or
``session_id`` (or one given twice) is 400 ``validation_failed``.
Events arriving between two pages never shift the next one: a cursor names a position in the
trail's order of recording, and new events sort before it. What is recorded, and when, is in
``service.auth.audit``; the event types in ``service.domain.audit_events``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.api.context import POLICY, PREFIX
from service.api.credentials import authenticate
from service.api.paging import page_cursor, page_size
from service.api.views import ok
from service.clock import iso
from service.domain.audit_events import EVENT_TYPES, StoredEvent
from service.domain.credentials import is_valid_id
from service.domain.cursors import decode_event_cursor
from service.errors import ApiError, Code

# The fields of an event's ``changes`` that hold a moment (key.created, key.edited, key.rolled).
_MOMENTS = ("expires_at", "previous_secret_expires_at")


def _event_view(stored: StoredEvent) -> dict[str, Any]:
    event = stored.event
    changes = event.get("changes")
    if changes is not None:  # moments are stored in ms and shown as timestamps
        for moment in _MOMENTS:
            if isinstance(changes.get(moment), int):
                changes = {**changes, moment: iso(changes[moment])}
    return {
        "id": event["id"],
        "at": iso(event["at"]),
        "type": event["type"],
        "actor": event.get("actor"),
        "ip": event.get("ip"),
        "user_agent": event.get("user_agent"),
        "target": event.get("target"),
        "changes": changes,
    }


def _one(request: web.Request, name: str) -> str | None:
    values = request.query.getall(name, [])
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(Code.VALIDATION_FAILED, details={name: "must be given at most once"})
    return values[0]


def _type(request: web.Request) -> str | None:
    raw = _one(request, "type")
    if raw is None:
        return None
    if raw not in EVENT_TYPES:
        raise ApiError(
            Code.VALIDATION_FAILED, details={"type": "must be one of " + ", ".join(EVENT_TYPES)}
        )
    return raw


# The ids an event can be asked for by, with their kind (a key's and a session's public ids).
_NAMED_IDS = {"key_id": "key", "session_id": "ses"}


def _naming(request: web.Request) -> dict[str, str] | None:
    naming = {}
    for name, kind in _NAMED_IDS.items():
        raw = _one(request, name)
        if raw is None:
            continue
        if not is_valid_id(raw, kind):
            raise ApiError(
                Code.VALIDATION_FAILED, details={name: f"must be an id such as {kind}_…"}
            )
        naming[name] = raw
    return naming or None


async def list_audit_events(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    limit, before = page_size(request), page_cursor(request, decode_event_cursor)
    kind, naming = _type(request), _naming(request)
    page = await request.app[POLICY].audit.page(principal.user_id, limit, before, kind, naming)
    return ok(
        {
            "events": [_event_view(stored) for stored in page.events],
            "next_cursor": page.next_cursor,
        }
    )


def add_audit_routes(app: web.Application) -> None:
    app.router.add_routes([web.get(f"{PREFIX}/audit-events", list_audit_events, allow_head=False)])
