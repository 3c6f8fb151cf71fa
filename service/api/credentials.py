"""The one credential check every route goes through, whichever way it is served: the request's
``X-API-Key`` or ``Authorization`` (a session token, or an API key sent as a Bearer token) to a
principal (``auth.authenticator``), its outcome recorded on the request's trace; and where a
request comes from, for the audit trail.

Never logs or echoes a credential.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from aiohttp import hdrs, web
from multidict import CIMultiDictProxy, istr

from service.api.client_address import client_address
from service.api.context import AUTHENTICATOR, KEY_USAGE, POLICY, SETTINGS
from service.api.envelope import as_api_error
from service.api.validation import user_agent
from service.auth.authenticator import Authenticator, carries_api_key
from service.domain.audit_events import Origin
from service.domain.credentials import API_KEY_KIND
from service.domain.principal import Principal
from service.domain.records import SessionStanding
from service.errors import ApiError, Code
from service.observability.trace import RequestTrace, current_trace

_API_KEY = istr("X-API-Key")


def single_header(headers: CIMultiDictProxy[str], name: str) -> str | None:
    values = headers.getall(name, ())
    if len(values) > 1:
        raise ApiError(Code.DUPLICATE_HEADER, f"Send the {name} header once.")
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
    and the response's RateLimit fields (``service.api.headers``)."""
    api_key = authorization = None
    if _API_KEY in headers:
        api_key = single_header(headers, _API_KEY)
    if hdrs.AUTHORIZATION in headers:
        authorization = single_header(headers, hdrs.AUTHORIZATION)
    if api_key is not None:
        trace.credential = "api_key" if authorization is None else "both"
    elif authorization is None:
        trace.credential = "none"
    elif API_KEY_KIND in authorization and carries_api_key(authorization):
        trace.credential = "api_key"  # a key sent as a Bearer token
    else:
        trace.credential = "session"
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
    trace.user_id = principal.user_id
    trace.key_id = principal.key_id
    trace.rate = principal.rate
    return principal


def count_refused_key(app: web.Application, trace: RequestTrace) -> None:
    """A request whose key was accepted and then refused (a permission it lacks, a folder it is
    not bound to: ``envelope.refusal`` put the code on the trace) is one refusal of that key;
    the check counted the request itself. Called only on a refusal's way out."""
    if trace.key_id is not None and trace.outcome != "ok":
        usage = app.get(KEY_USAGE)
        if usage is not None:
            usage.refused(trace.user_id, trace.key_id)  # type: ignore[arg-type]  # set with key_id


async def acting_with(
    request: web.Request, principal: Principal
) -> tuple[Origin, dict[str, Any] | None]:
    """Where a request comes from and who acts in it, for the audit trail: a session (its
    public id, ``acting``) or an API key (its id, name and prefix as they are now). One Redis
    read; never on the gateway's path."""
    if principal.key_id is None:
        origin = await acting(request, principal)
        return origin, origin.actor()
    origin = Origin(
        None, client_address(request, request.app[SETTINGS].trusted_proxies), user_agent(request)
    )
    return origin, await request.app[POLICY].api_keys.actor(principal.user_id, principal.key_id)


async def acting(request: web.Request, principal: Principal) -> Origin:
    """Where a session's request comes from, for the audit trail: the session's public id, the
    client's address (worked out as for login throttling) and its User-Agent (cut to 256
    characters), and the session's device (its User-Agent at login). One Redis read; never on
    the gateway's path."""
    return (await acting_standing(request, principal))[0]


async def acting_standing(
    request: web.Request, principal: Principal
) -> tuple[Origin, SessionStanding]:
    """``acting``, with the session's standing: when it last authenticated, with how many
    factors. The same one Redis read."""
    standing = await request.app[POLICY].sessions.standing(principal)
    origin = Origin(
        standing.id,
        client_address(request, request.app[SETTINGS].trusted_proxies),
        user_agent(request),
        standing.user_agent,
    )
    return origin, standing


async def acting_recently(request: web.Request, principal: Principal) -> Origin:
    """``acting`` for a sensitive operation: 403 ``reauthentication_required`` unless the session
    authenticated within ``FILEHOST_REAUTH_SECONDS`` (``Sessions.require_recent``). What calls it
    is the list of sensitive operations: creating and rolling keys (``POST /uploaders``
    included), changing the password or a second factor, ending every other session (and a
    key edit that widens it, through ``ApiKeys.edit_key``; ending another session by id,
    through ``Sessions.end_session``)."""
    origin, standing = await acting_standing(request, principal)
    request.app[POLICY].sessions.require_recent(standing)
    return origin
