"""Serve the dashboard: ``/`` (sign in), ``/keys`` (API keys), ``/files`` (files), ``/sessions``
(sessions and the password change), ``/activity`` (the audit trail) and their assets under
``/static/``.

The files are read from the package once, when the routes are added, and served from memory
with exact content types. Only the files named here are reachable: no directory is mapped to a
URL, so every other path keeps the API's 404 envelope. The headers every response gets (a strict
Content-Security-Policy, ``frame-ancestors 'none'``, ``no-store``, ``nosniff``) come from
``service.api.middleware.standard_headers``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.resources import files

from aiohttp import web

PAGES: dict[str, str] = {
    "/": "index.html",
    "/keys": "keys.html",
    "/files": "files.html",
    "/sessions": "sessions.html",
    "/activity": "activity.html",
}
ASSETS: dict[str, str] = {
    "app.js": "text/javascript",
    "style.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
STATIC_PREFIX = "/static/"

Handler = Callable[[web.Request], Awaitable[web.Response]]


def _read(name: str) -> bytes:
    return files("service.dashboard").joinpath("static", name).read_bytes()


def _serve(body: bytes, content_type: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=content_type, charset="utf-8")

    return handler


def add_dashboard_routes(app: web.Application) -> None:
    routes = [web.get(path, _serve(_read(name), "text/html")) for path, name in PAGES.items()]
    routes += [
        web.get(STATIC_PREFIX + name, _serve(_read(name), content_type))
        for name, content_type in ASSETS.items()
    ]
    app.router.add_routes(routes)
