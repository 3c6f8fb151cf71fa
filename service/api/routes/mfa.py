"""``/api/v1/auth/mfa``: the account's second factors, with a session only (an API key is 403
``session_required``): read them, enrol and disable TOTP (with its QR code), regenerate the
recovery codes, add and remove passkeys.

Every change needs a recent authentication (``acting_recently``: 403
``reauthentication_required`` otherwise), is recorded as an ``mfa.*`` event and ends every other
session of the account (``sessions_ended`` in the answer). A TOTP secret and the recovery codes are
shown once, in the answer that makes them. The enrolment's QR code comes in the same answer as
an SVG document (no script, no ``data:`` URL), which a page inserts as it is under its
Content-Security-Policy.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.api.context import POLICY, PREFIX, SECRETS_KEY_SOURCE, SETTINGS
from service.api.credentials import acting_recently, authenticate
from service.api.mfa_requests import loopback_origin, parse_code, parse_new_passkey
from service.api.validation import read_json_object
from service.api.views import ok
from service.clock import iso
from service.domain import credentials
from service.domain.factors import MfaState, Passkey
from service.errors import ApiError, Code

MFA = f"{PREFIX}/auth/mfa"


def passkey_view(passkey: Passkey) -> dict[str, Any]:
    return {
        "id": passkey.id,
        "name": passkey.name,
        "created_at": iso(passkey.created_at),
        "last_used_at": iso(passkey.last_used_at),
    }


def _status_view(
    state: MfaState, totp_available: bool, webauthn_available: bool, setup: dict[str, str]
) -> dict[str, Any]:
    return {
        "totp": {
            "enabled": state.totp_sealed is not None,
            "enabled_at": iso(state.totp_enabled_at),
            "pending_expires_at": iso(state.pending_expires_at),
        },
        "webauthn": [passkey_view(passkey) for passkey in state.passkeys],
        "recovery_codes_left": state.recovery_codes_left,
        "available": {"totp": totp_available, "webauthn": webauthn_available},
        "setup": setup,
    }


async def mfa_status(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    factors = request.app[POLICY].factors
    state = await factors.state(principal.user_id)
    here = loopback_origin(request)
    settings = request.app[SETTINGS]
    # What the deployment set for second factors, so the page can say what is still to set.
    setup = {
        "public_url": (
            "configured"
            if settings.public_url is not None
            else ("loopback" if here is not None else "missing")
        ),
        "secrets_key": request.app[SECRETS_KEY_SOURCE],
    }
    passkeys = factors.passkeys_at(here) is not None
    return ok(_status_view(state, factors.totp_available, passkeys, setup))


async def start_totp(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    await acting_recently(request, principal)
    policy = request.app[POLICY]
    user = await policy.users.get_user(principal.user_id)
    enrollment = await policy.factors.start_totp(user)
    return ok(
        {
            "secret": enrollment.secret,
            "otpauth_uri": enrollment.uri,
            "expires_at": iso(enrollment.expires_at),
            "qr_svg": enrollment.qr_svg,
        },
        status=201,
    )


async def confirm_totp(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    origin = await acting_recently(request, principal)
    code = parse_code(await read_json_object(request))
    policy = request.app[POLICY]
    user = await policy.users.get_user(principal.user_id)
    enabled = await policy.factors.confirm_totp(principal, user, code, origin)
    return ok(
        {
            "enabled_at": iso(enabled.at),
            "recovery_codes": enabled.recovery_codes,
            "sessions_ended": enabled.sessions_ended,
        }
    )


async def disable_totp(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    origin = await acting_recently(request, principal)
    policy = request.app[POLICY]
    disabled_at, ended = await policy.factors.disable_totp(principal, origin)
    return ok({"disabled_at": iso(disabled_at), "sessions_ended": ended})


async def regenerate_recovery_codes(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    origin = await acting_recently(request, principal)
    codes, ended = await request.app[POLICY].factors.regenerate_recovery_codes(principal, origin)
    return ok({"recovery_codes": codes, "sessions_ended": ended}, status=201)


async def passkey_options(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    origin = await acting_recently(request, principal)
    policy = request.app[POLICY]
    user = await policy.users.get_user(principal.user_id)
    assert origin.session_id is not None
    return ok(
        await policy.factors.passkey_options(user, origin.session_id, loopback_origin(request))
    )


async def add_passkey(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    origin = await acting_recently(request, principal)
    name, credential = parse_new_passkey(await read_json_object(request))
    assert origin.session_id is not None
    passkey, ended = await request.app[POLICY].factors.add_passkey(
        principal, origin.session_id, name, credential, origin, loopback_origin(request)
    )
    return ok({**passkey_view(passkey), "sessions_ended": ended}, status=201)


async def remove_passkey(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    origin = await acting_recently(request, principal)
    passkey_id = request.match_info["passkey_id"]
    if not credentials.is_valid_id(passkey_id, "pk"):
        raise ApiError(Code.PASSKEY_NOT_FOUND)
    policy = request.app[POLICY]
    removed_at, ended = await policy.factors.remove_passkey(principal, passkey_id, origin)
    return ok({"id": passkey_id, "removed_at": iso(removed_at), "sessions_ended": ended})


def add_mfa_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(MFA, mfa_status, allow_head=False),
            web.post(f"{MFA}/totp", start_totp),
            web.post(f"{MFA}/totp/confirm", confirm_totp),
            web.delete(f"{MFA}/totp", disable_totp),
            web.post(f"{MFA}/recovery-codes", regenerate_recovery_codes),
            web.post(f"{MFA}/webauthn/options", passkey_options),
            web.post(f"{MFA}/webauthn", add_passkey),
            web.delete(f"{MFA}/webauthn/{{passkey_id}}", remove_passkey),
        ]
    )
