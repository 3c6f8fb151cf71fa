"""The router shortcut: a route without variables found by one dict lookup, its match info made
once and shared (what aiohttp's router would find, without its per-request work)."""

from __future__ import annotations

from typing import NamedTuple

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from aiohttp.web_urldispatcher import PlainResource, UrlMappingMatchInfo

from service.api._aiohttp import names


class PlainRoute(NamedTuple):
    handler: Handler
    match_info: UrlMappingMatchInfo
    canonical: str


class PlainRoutes:
    """The application's routes without variables, by method and path: what aiohttp's router
    would find for them, found by one dict lookup.

    aiohttp resolves every request anew (two coroutines, and a match-info object made, stacked
    and frozen), a share of every gateway request worth saving. A route without
    variables always resolves to the same route of the same application, so its match-info is
    made once, frozen, and shared (nothing writes to a frozen one; handlers only read
    ``request.app``). Anything else (a route with variables, a sub-application, an application
    with middlewares, a request with ``Expect``) is resolved by aiohttp as before.
    ``tests/api/test_plain_routes.py`` checks that both ways find the same route."""

    @staticmethod
    def of(application: Handler) -> dict[tuple[str, str], PlainRoute]:
        app = getattr(application, "__self__", None)  # the application's own _handle
        if not names.FAST_PATHS or not isinstance(app, web.Application) or app.middlewares:
            return {}
        routes: dict[tuple[str, str], PlainRoute] = {}
        for resource in app.router.resources():
            if not isinstance(resource, PlainResource):
                continue
            for route in resource:
                if route.method == hdrs.METH_ANY:
                    continue
                match_info = UrlMappingMatchInfo({}, route)
                match_info.add_app(app)
                match_info.freeze()
                key = (route.method, resource.canonical)
                routes.setdefault(key, PlainRoute(route.handler, match_info, resource.canonical))
        return routes


def use_route(request: web.Request, route: PlainRoute) -> None:
    """Let the request carry the route's match info, as aiohttp's router would have set it."""
    request._match_info = route.match_info
