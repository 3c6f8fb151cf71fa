"""``/api/v1/auth``: log in (a session token for an email and password), log out, and who the
caller is."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.api.client_address import client_address
from service.api.context import POLICY, PREFIX, SETTINGS
from service.api.credentials import acting, authenticate
from service.api.validation import parse_login, read_json_object, user_agent
from service.api.views import ok
from service.clock import iso
from service.domain.permissions import to_names
from service.domain.principal import CredentialType


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


def add_auth_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.post(f"{PREFIX}/auth/login", login),
            web.post(f"{PREFIX}/auth/logout", logout),
            web.get(f"{PREFIX}/auth/session", current_session, allow_head=False),
        ]
    )
