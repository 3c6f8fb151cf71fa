"""The HTTP endpoints under /api/v1: parse the request, call the policy layer, shape the answer.

Handlers never touch Redis directly and never put a secret anywhere but the one response that
creates it (``POST /keys`` and ``POST /keys/{id}/roll`` return ``secret_key``; ``POST
/auth/login`` returns ``token``).
"""

from __future__ import annotations

from importlib import resources
from time import perf_counter
from typing import Any

import orjson
from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from multidict import CIMultiDictProxy, istr

from service.api.answers import Answer, Reply
from service.api.client_address import client_address
from service.api.context import AUTHENTICATOR, POLICY, SETTINGS
from service.api.middleware import as_api_error
from service.api.validation import (
    parse_create_key,
    parse_edit_key,
    parse_leak_report,
    parse_login,
    parse_roll_key,
    read_json_object,
    user_agent,
)
from service.auth.authenticator import Authenticator
from service.clock import iso
from service.domain.audit_events import Origin
from service.domain.permissions import to_names
from service.domain.principal import CredentialType, Principal
from service.domain.records import KeyRecord
from service.errors import BadRequest
from service.logs import RequestTrace, current_trace

PREFIX = "/api/v1"
_API_KEY = istr("X-API-Key")


def ok(data: dict[str, Any], status: int = 200) -> Answer:
    return Answer(orjson.dumps({"success": True, "data": data}), status)


def ok_reply(data: dict[str, Any]) -> Reply:
    """``ok(data)`` as a gateway route's ``Reply``."""
    return Reply(200, orjson.dumps({"success": True, "data": data}))


def single_header(headers: CIMultiDictProxy[str], name: str) -> str | None:
    values = headers.getall(name, ())
    if len(values) > 1:
        raise BadRequest(f"Send the {name} header once.", code="duplicate_header")
    return values[0] if values else None


async def authenticate(
    request: web.Request, *, session_only: bool = False, counted: bool = True
) -> Principal:
    """The request's principal, the one credential check every handler goes through
    (``check_credentials`` with the request's headers and trace)."""
    return await check_credentials(
        request.app[AUTHENTICATOR],
        request.headers,
        current_trace.get(),  # type: ignore[arg-type]  # set by request_handling
        session_only=session_only,
        counted=counted,
    )


async def check_credentials(
    authenticator: Authenticator,
    headers: CIMultiDictProxy[str],
    trace: RequestTrace,
    *,
    session_only: bool = False,
    counted: bool = True,
) -> Principal:
    """The principal of a request with ``headers``, the one credential check every route goes
    through, whichever way it was served.

    The client's address comes from the request's trace, where the request's handling worked it
    out once (trusted proxies included; for forward-auth, the address the gateway forwards): a
    key with an allow-list is checked against it. The check's credential type, outcome,
    duration, key id and rate verdict go to the trace, which feeds the access log, the metrics
    and the response's RateLimit fields (``service.api.middleware``)."""
    api_key = authorization = None
    if _API_KEY in headers:
        api_key = single_header(headers, _API_KEY)
    if hdrs.AUTHORIZATION in headers:
        authorization = single_header(headers, hdrs.AUTHORIZATION)
    if api_key is not None:
        trace.credential = "api_key" if authorization is None else "both"
    else:
        trace.credential = "session" if authorization is not None else "none"
    started = perf_counter()
    try:
        principal = await authenticator.authenticate(
            api_key, authorization, session_only=session_only, counted=counted, client=trace.remote
        )
    except Exception as error:
        trace.outcome = as_api_error(error).code
        raise
    finally:
        trace.auth_seconds = perf_counter() - started
    trace.outcome = "ok"
    trace.key_id = principal.key_id
    trace.rate = principal.rate
    return principal


async def acting(request: web.Request, principal: Principal) -> Origin:
    """Where a session's request comes from, for the audit trail: the session's public id, the
    client's address (worked out as for login throttling) and its User-Agent (cut to 256
    characters). One Redis read; never on the gateway's path."""
    session_id = await request.app[POLICY].sessions.acting_session_id(principal)
    return Origin(
        session_id,
        client_address(request, request.app[SETTINGS].trusted_proxies),
        user_agent(request),
    )


def _key_view(record: KeyRecord) -> dict[str, Any]:
    """A key as its owner sees it (the list, an edit's and a roll's answer); never a secret."""
    rate_limit = record.rate_limit
    return {
        "id": record.id,
        "name": record.name,
        "key_prefix": record.key_prefix,
        "permissions": to_names(record.permissions),
        "created_at": iso(record.created_at),
        "expires_at": iso(record.expires_at),
        "last_used_at": iso(record.last_used_at),
        "enabled": record.enabled,
        "allowed_ips": list(record.allowed_ips),
        "rate_limit": (
            None if rate_limit is None else {"per_second": rate_limit[0], "burst": rate_limit[1]}
        ),
        "previous_secret_expires_at": iso(record.previous_secret_expires_at),
    }


# -- auth --------------------------------------------------------------------------------------


async def login(request: web.Request) -> web.Response:
    fields = parse_login(await read_json_object(request))
    address = client_address(request, request.app[SETTINGS].trusted_proxies)
    result = await request.app[POLICY].login.login(
        fields.email, fields.password, address, user_agent(request)
    )
    return ok(
        {
            "user": {"id": result.user.id, "email": result.user.email},
            "token": result.token,
            "expires_at": iso(result.idle_deadline),
            "absolute_expires_at": iso(result.absolute_deadline),
        }
    )


async def logout(request: web.Request) -> web.Response:
    # Ending a credential is never refused for its rate: a busy session can always log out.
    principal = await authenticate(request, session_only=True, counted=False)
    logged_out_at = await request.app[POLICY].sessions.logout(
        principal, await acting(request, principal)
    )
    return ok({"logged_out_at": iso(logged_out_at)})


async def current_session(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    user = await request.app[POLICY].users.get_user(principal.user_id)
    credential: dict[str, Any] = {"type": principal.credential.value}
    if principal.credential is CredentialType.API_KEY:
        credential["key_id"] = principal.key_id
    return ok(
        {
            "user": {"id": user.id, "email": user.email},
            "credential": credential,
            "permissions": to_names(principal.permissions),
            "expires_at": iso(principal.expires_at),
        }
    )


# -- API keys ----------------------------------------------------------------------------------


async def create_key(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    fields = parse_create_key(await read_json_object(request))
    created = await request.app[POLICY].api_keys.create_key(
        principal.user_id,
        fields.name,
        fields.permissions,
        fields.expires_days,
        await acting(request, principal),
    )
    record = created.record
    return ok(
        {
            "id": record.id,
            "name": record.name,
            "key_prefix": record.key_prefix,
            "secret_key": created.secret,
            "permissions": to_names(record.permissions),
            "created_at": iso(record.created_at),
            "expires_at": iso(record.expires_at),
        },
        status=201,
    )


async def list_keys(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    records = await request.app[POLICY].api_keys.list_keys(principal.user_id)
    return ok({"keys": [_key_view(record) for record in records]})


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
    record = await request.app[POLICY].api_keys.edit_key(
        principal.user_id, request.match_info["key_id"], edit, await acting(request, principal)
    )
    return ok(_key_view(record))


async def roll_key(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    # The body is optional: a roll without one has no grace.
    grace_seconds = parse_roll_key(await read_json_object(request) if request.body_exists else {})
    rolled = await request.app[POLICY].api_keys.roll_key(
        principal.user_id,
        request.match_info["key_id"],
        grace_seconds,
        await acting(request, principal),
    )
    view = _key_view(rolled.record)
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


# -- the API's description ----------------------------------------------------------------------


def openapi_document() -> Handler:
    """``GET /openapi.json``: the hand-written ``openapi.json`` beside this module, read and
    parsed once when the routes are added (a broken document stops start-up), served as is."""
    body = resources.files("service.api").joinpath("openapi.json").read_bytes()
    orjson.loads(body)

    async def handler(request: web.Request) -> web.Response:
        return Answer(body)

    return handler


def add_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.post(f"{PREFIX}/auth/login", login),
            web.post(f"{PREFIX}/auth/logout", logout),
            web.get(f"{PREFIX}/auth/session", current_session, allow_head=False),
            web.get(f"{PREFIX}/keys", list_keys, allow_head=False),
            web.post(f"{PREFIX}/keys", create_key),
            web.post(f"{PREFIX}/keys/leaked", report_leaked_keys),
            web.delete(f"{PREFIX}/keys/{{key_id}}", revoke_key),
            web.patch(f"{PREFIX}/keys/{{key_id}}", edit_key),
            web.post(f"{PREFIX}/keys/{{key_id}}/roll", roll_key),
            web.get(f"{PREFIX}/openapi.json", openapi_document(), allow_head=False),
        ]
    )
