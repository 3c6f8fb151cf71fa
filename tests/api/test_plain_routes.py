"""The request handling's shortcut for routes without variables finds what aiohttp's router
finds, and leaves everything else to the router."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from service.api._aiohttp import PlainRoutes
from service.app import create_app
from service.config import Settings
from tests.support.api import Api, bearer


async def test_every_shortcut_is_the_route_aiohttp_resolves(settings: Settings) -> None:
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()  # frozen, as when served
    try:
        routes = PlainRoutes.of(app._handle)
        assert ("GET", "/api/v1/files") in routes
        assert ("GET", "/api/v1/auth/verify") in routes
        assert not any("{" in path for _, path in routes)  # routes with variables: the router's
        for (method, path), route in routes.items():
            resolved = await app.router.resolve(make_mocked_request(method, path, app=app))
            assert resolved.route is route.match_info.route, (method, path)
            assert route.match_info.apps == (app,)
            assert route.canonical == path
    finally:
        await runner.cleanup()


def test_an_application_with_middlewares_gets_no_shortcut() -> None:
    @web.middleware
    async def passing(request: web.Request, handler: Any) -> web.StreamResponse:
        return await handler(request)

    async def plain(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application(middlewares=[passing])
    app.router.add_get("/plain", plain)
    assert PlainRoutes.of(app._handle) == {}
    assert PlainRoutes.of(plain) == {}  # not an application's handler


async def test_what_the_shortcut_leaves_to_the_router_is_answered_as_before(api: Api) -> None:
    token = await api.user_with_session()
    # An encoded slash is not the plain path: aiohttp's router does not match it, nor do we.
    response = await api.client.get("/api/v1%2Ffiles", headers=bearer(token))
    assert response.status == 404
    assert (await response.json())["error"]["code"] == "route_not_found"
    # A method the plain path does not take: 405 with Allow, from the router.
    response = await api.client.put("/api/v1/files", headers=bearer(token))
    assert response.status == 405
    assert "GET" in response.headers["Allow"]
    # The plain path, taken by the shortcut, and a route with a variable, by the router.
    assert (await api.client.get("/api/v1/files", headers=bearer(token))).status == 200
    response = await api.client.get("/api/v1/files/fil_unknown", headers=bearer(token))
    assert (await response.json())["error"]["code"] in {"file_not_found", "validation_failed"}
