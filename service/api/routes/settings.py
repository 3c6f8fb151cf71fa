"""The account's platform settings under /api/v1/settings: ``GET`` (``settings.read``) answers
every setting with its value, ``PATCH`` (``settings.write``) changes any of them, all or
nothing; never for a key bound to folders (the settings are the whole account's). What each
setting changes is ``service.domain.account_settings``; how a change is made and recorded,
``service.auth.account_settings``."""

from __future__ import annotations

from aiohttp import web

from service.api.context import POLICY, PREFIX
from service.api.credentials import acting_with, authenticate
from service.api.settings_requests import parse_settings
from service.api.validation import read_json_object
from service.api.views import ok
from service.auth.authenticator import require

SETTINGS_PATH = f"{PREFIX}/settings"


async def get_settings(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "settings.read")
    request.app[POLICY].reach.whole_account(principal)
    return ok(await request.app[POLICY].settings.read(principal.user_id))


async def change_settings(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "settings.write")
    request.app[POLICY].reach.whole_account(principal)
    changes = parse_settings(await read_json_object(request))
    origin, actor = await acting_with(request, principal)
    values = await request.app[POLICY].settings.change(principal.user_id, changes, origin, actor)
    return ok(values)


def add_settings_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(SETTINGS_PATH, get_settings, allow_head=False),
            web.patch(SETTINGS_PATH, change_settings),
        ]
    )
