"""``/api/v1/auth``: log in (a session token for an email and password, and for an account with
a second factor a second step answering it), reauthenticate a session for a sensitive operation
(a new token replacing the caller's), log out, and who the caller is (to any credential but an
uploader's upload-only key)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.api.client_address import client_address
from service.api.context import POLICY, PREFIX, SETTINGS
from service.api.credentials import acting, acting_standing, authenticate
from service.api.mfa_requests import (
    loopback_origin,
    parse_mfa_token,
    parse_reauthenticate,
    parse_second_step,
)
from service.api.validation import parse_login, read_json_object, user_agent
from service.api.views import ok
from service.auth.login import LoginResult, MfaRequired
from service.auth.reauthentication import Reauthenticated
from service.clock import iso
from service.domain.permissions import to_names
from service.domain.principal import CredentialType
from service.errors import ApiError, Code


async def login(request: web.Request) -> web.Response:
    fields = parse_login(await read_json_object(request))
    address = client_address(request, request.app[SETTINGS].trusted_proxies)
    result = await request.app[POLICY].login.login(
        fields.email, fields.password, address, user_agent(request)
    )
    if isinstance(result, MfaRequired):
        return mfa_required(result)
    return logged_in(result)


def mfa_required(result: MfaRequired) -> web.Response:
    # No token: the mfa_token is good for the second step only.
    return ok(
        {
            "mfa_required": True,
            "mfa_token": result.mfa_token,
            "methods": result.methods,
            "expires_at": iso(result.expires_at),
        }
    )


def logged_in(result: LoginResult) -> web.Response:
    return ok(
        {
            "user": {"id": result.user.id, "email": result.user.email},
            "token": result.token,
            "expires_at": iso(result.idle_deadline),
            "absolute_expires_at": iso(result.absolute_deadline),
        }
    )


async def login_second_step(request: web.Request) -> web.Response:
    mfa_token, answer = parse_second_step(await read_json_object(request))
    address = client_address(request, request.app[SETTINGS].trusted_proxies)
    result = await request.app[POLICY].login.second_step(
        mfa_token, answer, address, user_agent(request), loopback_origin(request)
    )
    return logged_in(result)


async def login_webauthn_options(request: web.Request) -> web.Response:
    mfa_token = parse_mfa_token(await read_json_object(request))
    return ok(await request.app[POLICY].login.webauthn_options(mfa_token, loopback_origin(request)))


async def reauthenticate(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    password, answer = parse_reauthenticate(await read_json_object(request))
    address = client_address(request, request.app[SETTINGS].trusted_proxies)
    done = await request.app[POLICY].reauthentication.reauthenticate(
        principal,
        password,
        answer,
        address,
        await acting(request, principal),
        loopback_origin(request),
    )
    return reauthenticated(done)


def reauthenticated(done: Reauthenticated) -> web.Response:
    return ok(
        {
            "token": done.token,
            "expires_at": iso(done.idle_deadline),
            "absolute_expires_at": iso(done.absolute_deadline),
            "authenticated_at": iso(done.authenticated_at),
            "aal": done.aal,
        }
    )


async def reauthenticate_webauthn_options(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    reauthentication = request.app[POLICY].reauthentication
    return ok(await reauthentication.webauthn_options(principal, loopback_origin(request)))


async def logout(request: web.Request) -> web.Response:
    # Ending a credential is never refused for its rate: a busy session can always log out.
    principal = await authenticate(request, session_only=True, counted=False)
    policy = request.app[POLICY]
    # The session's record, read once before it ends: the audit trail's origin, and how the
    # session was opened (through the provider or not).
    origin, standing = await acting_standing(request, principal)
    provider_logout_url = await policy.sso.provider_logout_url(standing.via)
    logged_out_at = await policy.sessions.logout(principal, origin)
    answer = {"logged_out_at": iso(logged_out_at)}
    if provider_logout_url is not None:
        answer["provider_logout_url"] = provider_logout_url
    return ok(answer)


async def current_session(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    if principal.upload_only:
        # An uploader's key travels in ShareX and curl configurations, and neither asks who it
        # is: refused here as everywhere but an upload, so a leaked one names no account.
        raise ApiError(
            Code.INSUFFICIENT_PERMISSION,
            "This API key may only upload: it may not ask whose it is.",
            details={"upload_only": True},
        )
    user = await request.app[POLICY].users.get_user(principal.user_id)
    credential: dict[str, Any] = {"type": principal.credential.value}
    answer: dict[str, Any] = {
        "user": {"id": user.id, "email": user.email},
        "credential": credential,
        "permissions": to_names(principal.permissions),
        "expires_at": iso(principal.expires_at),
    }
    if principal.credential is CredentialType.API_KEY:
        credential["key_id"] = principal.key_id
    else:
        # How the session was opened, and whether a sensitive operation would need a
        # reauthentication first: the one extra read is for sessions only.
        _, standing = await acting_standing(request, principal)
        sessions = request.app[POLICY].sessions
        answer["aal"] = standing.aal
        answer["authenticated_at"] = iso(standing.authenticated_at)
        answer["authenticated_recently"] = sessions.is_recent(standing)
        # How it was opened, and whether a step-up can ask for a password at all (an account
        # single sign-on made has none: its step-up goes through the provider).
        answer["method"] = "password" if standing.via is None else standing.via.method
        answer["provider"] = None if standing.via is None else standing.via.provider
        answer["has_password"] = bool(user.password_hash)
    return ok(answer)


def add_auth_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.post(f"{PREFIX}/auth/login", login),
            web.post(f"{PREFIX}/auth/login/mfa", login_second_step),
            web.post(f"{PREFIX}/auth/login/mfa/webauthn-options", login_webauthn_options),
            web.post(f"{PREFIX}/auth/reauthenticate", reauthenticate),
            web.post(
                f"{PREFIX}/auth/reauthenticate/webauthn-options", reauthenticate_webauthn_options
            ),
            web.post(f"{PREFIX}/auth/logout", logout),
            web.get(f"{PREFIX}/auth/session", current_session, allow_head=False),
        ]
    )
