"""``GET /api/v1/openapi.json``: the API's description."""

from __future__ import annotations

from importlib import resources

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from service.api._aiohttp import Answer
from service.api.context import PREFIX


def openapi_document() -> Handler:
    """``GET /openapi.json``: the hand-written ``openapi.json`` beside this module, read and
    parsed once when the routes are added (a broken document stops start-up), served as is."""
    body = resources.files("service.api").joinpath("openapi.json").read_bytes()
    orjson.loads(body)

    async def handler(request: web.Request) -> web.Response:
        return Answer(body)

    return handler


def add_openapi_route(app: web.Application) -> None:
    app.router.add_get(f"{PREFIX}/openapi.json", openapi_document(), allow_head=False)
