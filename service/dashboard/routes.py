"""Serve the dashboard: ``/`` (sign in), ``/keys`` (API keys), ``/files`` (files and folders),
``/aliases`` (public links), ``/sessions`` (sessions and the password change), ``/security``
(second factors), ``/activity`` (the audit trail), ``/settings`` (the account's settings) and
their assets under ``/static/``: the style sheet, the icon and the JavaScript modules
(``static/js/``, each page's entry point in ``static/js/pages/``).

The files are read from the package once, when the routes are added, and served from memory
with exact content types. A page may hold ``{{name}}`` for one of the service's settings that
the page needs to know before any request (the password's minimum length): written in then,
from ``PAGE_VALUES``, never from anything a request carries. Only the files listed in ``PAGES``
and ``ASSETS`` are reachable: no directory is mapped to a URL. A browser's GET for a page
(``Accept`` naming ``text/html``) at any other path outside ``/api`` is answered with the "not
found" page (``NOT_FOUND_PAGE``, status 404), which shows the dashboard's navigation; anything
else unknown keeps the API's 404 envelope (a script, an asset, a scraper). ``ASSETS`` is the
package's ``static/`` folder as it is when this module is
imported, less anything that is not plainly one of ours: a file is listed only with a known
extension and a plain name, and a hidden entry or a symbolic link is never followed. The
headers every response gets (a strict Content-Security-Policy, ``frame-ancestors 'none'``,
``no-store``, ``nosniff``) come from ``service.api.headers.standard_headers``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from aiohttp import web

from service.config import Settings

PAGES: dict[str, str] = {
    "/": "index.html",
    "/keys": "keys.html",
    "/files": "files.html",
    "/aliases": "aliases.html",
    "/sessions": "sessions.html",
    "/security": "security.html",
    "/activity": "activity.html",
    "/settings": "settings.html",
}
# What a static asset may be, by its extension. The pages themselves are not assets: each is
# served at its own path only.
CONTENT_TYPES: dict[str, str] = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
STATIC_PREFIX = "/static/"
# Served, with status 404, for a browser's GET of any unknown page that is not the API's.
NOT_FOUND_PAGE = "not-found.html"
API_PREFIX = "/api"

# ``{{name}}`` in a page -> its value, from the service's settings. Numbers only: nothing here
# needs escaping, and no request can put anything in a page.
PAGE_VALUES: dict[str, Callable[[Settings], int]] = {
    "password_min_length": lambda settings: settings.password_min_length,
}
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_QUALITY = re.compile(r"\bq\s*=\s*(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)\s*$", re.IGNORECASE)

# Lower-case letters, digits, "-" and "_", so that a name is its own URL path segment.
_FOLDER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
_FILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*(\.[a-z0-9]+)")

Handler = Callable[[web.Request], Awaitable[web.Response]]


def _static() -> Traversable:
    return files("service.dashboard").joinpath("static")


def _assets(folder: Traversable, prefix: str = "") -> dict[str, str]:
    """The servable files under ``folder``, by their path below ``static/``, with their
    content types, in name order."""
    found: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if isinstance(entry, Path) and entry.is_symlink():
            continue
        if entry.is_dir():
            if _FOLDER_NAME.fullmatch(entry.name):
                found.update(_assets(entry, f"{prefix}{entry.name}/"))
            continue
        named = _FILE_NAME.fullmatch(entry.name)
        if named and named.group(1) in CONTENT_TYPES:
            found[prefix + entry.name] = CONTENT_TYPES[named.group(1)]
    return found


ASSETS: dict[str, str] = _assets(_static())


def _read(name: str) -> bytes:
    return _static().joinpath(*name.split("/")).read_bytes()


def render(name: str, settings: Settings) -> bytes:
    """The page ``name`` with each ``{{name}}`` written in from ``PAGE_VALUES`` (an unknown one
    is a bug, found when the routes are added)."""
    text = _read(name).decode("utf-8")
    return _PLACEHOLDER.sub(lambda found: str(PAGE_VALUES[found[1]](settings)), text).encode()


def _serve(body: bytes, content_type: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type=content_type, charset="utf-8")

    return handler


def _wants_a_page(accept: str) -> bool:
    """Whether an ``Accept`` header names HTML (as a browser's navigation does), not refused
    with ``q=0``; ``*/*`` alone (curl, scripts, a script or style sheet loading) does not."""
    for item in accept.split(","):
        media, _, parameters = item.partition(";")
        if media.strip().lower() == "text/html":
            quality = _QUALITY.search(parameters)
            return quality is None or float(quality[1]) > 0
    return False


def _not_found(body: bytes) -> Callable[[web.Request], web.Response | None]:
    """The answer to a request no route matched: the "not found" page for a browser's GET or
    HEAD of a page outside the API; None (the envelope's 404) for the rest, so the API, and
    anything that did not ask for HTML, always gets JSON."""

    def page(request: web.Request) -> web.Response | None:
        path = request.path
        if request.method not in ("GET", "HEAD") or path == API_PREFIX:
            return None
        if path.startswith(API_PREFIX + "/") or not _wants_a_page(
            request.headers.get("Accept", "")
        ):
            return None
        return web.Response(body=body, status=404, content_type="text/html", charset="utf-8")

    return page


def add_dashboard_routes(
    app: web.Application, settings: Settings
) -> Callable[[web.Request], web.Response | None]:
    """Add the pages and assets to ``app``'s routes, rendered for ``settings``; the answer to a
    request no route matched (``_not_found``), for the request handling to ask."""
    routes = [
        web.get(path, _serve(render(name, settings), "text/html")) for path, name in PAGES.items()
    ]
    routes += [
        web.get(STATIC_PREFIX + name, _serve(_read(name), content_type))
        for name, content_type in ASSETS.items()
    ]
    app.router.add_routes(routes)
    return _not_found(render(NOT_FOUND_PAGE, settings))
