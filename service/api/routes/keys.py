"""``/api/v1/keys``: an account's API keys, with a session only (a key can never mint, change or
revoke keys): create (the secret shown once), list, edit, roll, revoke, what one did over the
last days; and ``/keys/leaked``, which takes no credential."""

from __future__ import annotations

from aiohttp import web

from service.api.context import KEY_USAGE, POLICY, PREFIX
from service.api.credentials import acting, acting_recently, acting_standing, authenticate
from service.api.validation import (
    parse_create_key,
    parse_edit_key,
    parse_leak_report,
    parse_roll_key,
    read_json_object,
    user_agent,
)
from service.api.views import created_key_view, key_usage_view, key_view, ok
from service.clock import iso
from service.observability.trace import RequestTrace, current_trace


async def create_key(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    fields = parse_create_key(await read_json_object(request))
    created = await request.app[POLICY].api_keys.create_key(
        principal.user_id,
        fields.name,
        fields.permissions,
        fields.expires_days,
        await acting_recently(request, principal),
        fields.folder_ids,
    )
    return ok(created_key_view(created.record, created.secret), status=201)


async def list_keys(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    records = await request.app[POLICY].api_keys.list_keys(principal.user_id)
    return ok({"keys": [key_view(record) for record in records]})


async def key_usage(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    record = await request.app[KEY_USAGE].usage(principal.user_id, request.match_info["key_id"])
    return ok(key_usage_view(record))


async def revoke_key(request: web.Request) -> web.Response:
    # Like logout: revoking a key (a leaked one, say) never waits for the session's rate.
    principal = await authenticate(request, session_only=True, counted=False)
    key_id = request.match_info["key_id"]
    revoked_at = await request.app[POLICY].api_keys.revoke_key(
        principal.user_id, key_id, await acting(request, principal)
    )
    return ok({"id": key_id, "revoked_at": iso(revoked_at)})


async def edit_key(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    edit = parse_edit_key(await read_json_object(request))
    policy = request.app[POLICY]
    origin, standing = await acting_standing(request, principal)
    record = await policy.api_keys.edit_key(
        principal.user_id,
        request.match_info["key_id"],
        edit,
        origin,
        # Only an edit that widens the key needs a recent authentication.
        require_recent=lambda: policy.sessions.require_recent(standing),
    )
    return ok(key_view(record))


async def roll_key(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    # The body is optional: a roll without one has no grace.
    grace_seconds = parse_roll_key(await read_json_object(request) if request.body_exists else {})
    rolled = await request.app[POLICY].api_keys.roll_key(
        principal.user_id,
        request.match_info["key_id"],
        grace_seconds,
        await acting_recently(request, principal),
    )
    view = key_view(rolled.record)
    view["secret_key"] = rolled.secret
    return ok(view, status=201)


async def report_leaked_keys(request: web.Request) -> web.Response:
    """No credential: whoever found a secret of ours (a person, a secret scanner) reports it.
    202 with the same answer whatever was found. The client's address (from the request's
    trace, trusted proxies included) bounds the reports and names the reporter in the owner's
    audit trail."""
    secrets = parse_leak_report(await read_json_object(request))
    trace: RequestTrace = current_trace.get()  # type: ignore[assignment]  # set by request_handling
    received = await request.app[POLICY].leak_reports.report_leaked(
        secrets, trace.remote, user_agent(request)
    )
    return ok({"received": received}, status=202)


def add_key_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(f"{PREFIX}/keys", list_keys, allow_head=False),
            web.post(f"{PREFIX}/keys", create_key),
            web.post(f"{PREFIX}/keys/leaked", report_leaked_keys),
            web.delete(f"{PREFIX}/keys/{{key_id}}", revoke_key),
            web.patch(f"{PREFIX}/keys/{{key_id}}", edit_key),
            web.post(f"{PREFIX}/keys/{{key_id}}/roll", roll_key),
            web.get(f"{PREFIX}/keys/{{key_id}}/usage", key_usage, allow_head=False),
        ]
    )
