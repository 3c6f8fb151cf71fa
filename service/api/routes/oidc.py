"""Single sign-on under /api/v1/auth: which ways in the login page offers (``GET
/auth/methods``), the trip to the OpenID provider and back (``GET /auth/oidc/start``, ``GET
/auth/oidc/callback``), the one-time code traded for a session, a link or a step-up (``POST
/auth/oidc/exchange``), the provider's back-channel logout, and the account's linked identities
(``GET /auth/identities``, ``DELETE /auth/identities/{id}``).

The trip is bound to the browser that started it by a cookie (``COOKIE_NAME``: HttpOnly,
SameSite=Lax, Secure under an https public URL, sent to the callback's path alone, gone after
``STATE_MS``). The callback answers a person, not a script: always a redirect to the dashboard's
login page, with the one-time code or the refusal's code in the fragment (never a session token
in a URL)."""

from __future__ import annotations

from typing import Any

from aiohttp import hdrs, web

from service.api.client_address import client_address
from service.api.context import POLICY, PREFIX, SETTINGS
from service.api.credentials import acting, acting_recently, authenticate
from service.api.routes.auth import logged_in, mfa_required, reauthenticated
from service.api.validation import read_json_object, user_agent
from service.api.views import ok
from service.auth.login import LoginResult, MfaRequired
from service.auth.oidc import STATE_MS, cookie_path
from service.auth.reauthentication import Reauthenticated
from service.clock import iso
from service.domain import audit_events as audit
from service.domain.oidc import Identity
from service.domain.principal import Principal
from service.errors import ApiError, Code

COOKIE_NAME = "filehost_oidc"
MAX_LOGOUT_TOKEN_LENGTH = 16_384


def identity_view(identity: Identity) -> dict[str, Any]:
    return {
        "id": identity.id,
        "provider": identity.issuer,
        "subject": identity.subject,
        "email": identity.email,
        "linked_at": iso(identity.linked_at),
    }


def _origin(request: web.Request) -> audit.Origin:
    address = client_address(request, request.app[SETTINGS].trusted_proxies)
    return audit.Origin(None, address, user_agent(request))


async def methods(request: web.Request) -> web.Response:
    return ok(request.app[POLICY].sso.methods())


async def start(request: web.Request) -> web.Response:
    sso = request.app[POLICY].sso
    address = client_address(request, request.app[SETTINGS].trusted_proxies)
    started = await sso.start(request.query.get("purpose", "login"), address)
    response = web.Response(status=302, headers={hdrs.LOCATION: started.url})
    settings = sso.settings
    assert settings is not None
    response.set_cookie(
        COOKIE_NAME,
        started.browser,
        max_age=STATE_MS // 1000,
        path=cookie_path(settings),
        httponly=True,
        samesite="Lax",
        secure=settings.secure_cookie,
    )
    return response


async def callback(request: web.Request) -> web.Response:
    sso = request.app[POLICY].sso
    if sso.settings is None:
        raise ApiError(Code.ROUTE_NOT_FOUND, "Single sign-on is not configured here.")
    outcome = await sso.callback(
        dict(request.query), request.cookies.get(COOKIE_NAME), _origin(request)
    )
    response = web.Response(status=302, headers={hdrs.LOCATION: sso.dashboard_location(outcome)})
    response.del_cookie(COOKIE_NAME, path=cookie_path(sso.settings))
    return response


async def exchange(request: web.Request) -> web.Response:
    body = await read_json_object(request)
    code = body.get("code")
    if not isinstance(code, str) or not code or set(body) != {"code"}:
        raise ApiError(
            Code.VALIDATION_FAILED, details={"code": "is required: the one-time sign-in code"}
        )
    principal: Principal | None = None
    origin = _origin(request)
    if hdrs.AUTHORIZATION in request.headers:
        principal = await authenticate(request, session_only=True)
        origin = await acting(request, principal)
    result = await request.app[POLICY].sso.exchange(code, principal, origin)
    if isinstance(result, LoginResult):
        return logged_in(result)
    if isinstance(result, MfaRequired):
        return mfa_required(result)
    if isinstance(result, Reauthenticated):
        return reauthenticated(result)
    return ok({"identity": identity_view(result)})


async def backchannel_logout(request: web.Request) -> web.Response:
    if request.content_type != "application/x-www-form-urlencoded":
        raise ApiError(Code.UNSUPPORTED_MEDIA_TYPE, "Send logout_token as a form.")
    form = await request.post()
    token = form.get("logout_token")
    if not isinstance(token, str) or not token or len(token) > MAX_LOGOUT_TOKEN_LENGTH:
        raise ApiError(Code.SSO_LOGOUT_TOKEN_INVALID, "Send one logout_token.")
    ended = await request.app[POLICY].sso.backchannel_logout(token)
    return ok({"sessions_ended": ended})


async def list_identities(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    policy = request.app[POLICY]
    found = await policy.identities.list_identities(principal.user_id)
    user = await policy.users.get_user(principal.user_id)
    # Whether the account has a password too: without one, its last identity stays and its
    # step-up goes through the provider (what the Security page says and offers).
    return ok(
        {
            "identities": [identity_view(identity) for identity in found],
            "password": bool(user.password_hash),
        }
    )


async def unlink_identity(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    identity_id = request.match_info["identity_id"]
    unlinked_at = await request.app[POLICY].identities.unlink(
        principal.user_id, identity_id, await acting_recently(request, principal)
    )
    return ok({"id": identity_id, "unlinked_at": iso(unlinked_at)})


def add_oidc_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(f"{PREFIX}/auth/methods", methods, allow_head=False),
            web.get(f"{PREFIX}/auth/oidc/start", start, allow_head=False),
            web.get(f"{PREFIX}/auth/oidc/callback", callback, allow_head=False),
            web.post(f"{PREFIX}/auth/oidc/exchange", exchange),
            web.post(f"{PREFIX}/auth/oidc/backchannel-logout", backchannel_logout),
            web.get(f"{PREFIX}/auth/identities", list_identities, allow_head=False),
            web.delete(f"{PREFIX}/auth/identities/{{identity_id}}", unlink_identity),
        ]
    )
