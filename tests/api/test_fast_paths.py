"""The service as production wires it serves through ``service.api._aiohttp``'s fast paths (the
gateway lane, the protocol handler, the router shortcut), and an ordinary aiohttp middleware or
response hook is noticed rather than turning them off in silence. With an aiohttp outside the
tested releases it serves without its speed-ups, with one warning, and keeps its protections
(the envelope for what aiohttp's parser refuses, never quoting a credential); an aiohttp
lacking the names those need is refused at start-up."""

from __future__ import annotations

import asyncio
import logging
import warnings
from typing import Any

import pytest
from aiohttp import web

from service.api._aiohttp import (
    EnvelopeAppRunner,
    EnvelopeServer,
    PlainRoutes,
    UnprotectedAiohttp,
    names,
    run_app,
)
from service.api.context import GATEWAY_LANE
from service.app import create_app
from service.config import Settings
from tests.support.api import PASSWORD, Api, EnvelopeTestServer
from tests.support.files import uploaded
from tests.support.lane import count_lane_answers
from tests.support.raw_http import raw

VERIFY = "/api/v1/auth/verify"


async def _served(aiohttp_client: Any, app: web.Application) -> Api:
    return Api(await aiohttp_client(EnvelopeTestServer(app)), app)


async def _key(api: Api) -> str:
    await api.create_user("fast@example.com")
    token = await api.login("fast@example.com", PASSWORD)
    return (await api.create_key(token))["secret_key"]


async def test_production_wiring_serves_through_every_fast_path(
    aiohttp_client: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered = count_lane_answers(monkeypatch)
    app = create_app(settings)
    api = await _served(aiohttp_client, app)
    key = await _key(api)

    response = await api.client.get(
        VERIFY, headers={"X-API-Key": key, "X-Required-Permission": "files.read"}
    )

    assert response.status == 200
    assert answered == [VERIFY]  # the gateway lane answered it
    assert isinstance(api.client.server.runner.server, EnvelopeServer)
    assert not app.middlewares and not app.on_response_prepare
    assert GATEWAY_LANE in app
    assert PlainRoutes.of(app._handle)  # the router shortcut has the plain routes


async def test_an_ordinary_middleware_is_refused_by_the_wiring_test(
    aiohttp_client: Any, settings: Settings
) -> None:
    # What the test above guards: a middleware turns the lane and the shortcut off.
    app = create_app(settings)

    @web.middleware
    async def ordinary(request: web.Request, handler: Any) -> web.StreamResponse:
        return await handler(request)

    app.middlewares.append(ordinary)
    await _served(aiohttp_client, app)
    assert PlainRoutes.of(app._handle) == {}


async def test_outside_the_tested_aiohttp_the_service_serves_without_speed_ups_but_protected(
    aiohttp_client: Any,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(names, "FAST_PATHS", False)
    monkeypatch.setattr(names, "_warned", False)
    caplog.set_level(logging.WARNING, logger="service.api")
    app = create_app(settings)
    api = await _served(aiohttp_client, app)
    key = await _key(api)

    verify = await api.client.get(
        VERIFY, headers={"X-API-Key": key, "X-Required-Permission": "files.read"}
    )
    files = await api.files(key=key)
    refused = await api.files(key="fhk_nonsense")
    missing = await api.client.get("/api/v1/nope")

    assert verify.status == 200 and verify.headers["X-Auth-Credential"] == "api_key"
    assert files.status == 200 and (await files.json())["data"] == {
        "files": [],
        "next_cursor": None,
    }
    assert refused.status == 401 and (await refused.json())["error"]["code"] == "invalid_api_key"
    assert missing.status == 404 and (await missing.json())["error"]["code"] == "route_not_found"
    for response in (verify, files, refused, missing):
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "X-Request-ID" in response.headers
        assert response.headers["Server"] == "filehost-auth"
    assert GATEWAY_LANE not in app and not app.middlewares
    assert PlainRoutes.of(app._handle) == {}  # no router shortcut
    # The protocol handler stays: a malformed header holding a key is the envelope, which
    # quotes nothing of it (aiohttp's own answer would).
    assert isinstance(api.client.server.runner.server, EnvelopeServer)
    malformed = (
        b"GET /api/v1/files HTTP/1.1\r\nHost: x\r\nX-API-Key: " + key.encode() + b"\x01\r\n\r\n"
    )
    answer = await raw(api.client.port, malformed)
    assert answer.status == 400 and answer.json()["error"]["code"] == "bad_request"
    assert key.encode() not in answer.body + repr(answer.headers).encode()
    assert key not in caplog.text
    warnings = [r.getMessage() for r in caplog.records if "tested releases" in r.getMessage()]
    assert len(warnings) == 1


async def test_outside_the_tested_aiohttp_headers_that_do_not_all_come_get_a_408(
    aiohttp_client: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read deadlines stay with the speed-ups gone (aiohttp's own server has none).
    monkeypatch.setattr(names, "FAST_PATHS", False)
    monkeypatch.setattr(names, "_warned", True)
    server = EnvelopeTestServer(create_app(settings))
    await server.start_server(header_timeout=0.3)
    client = await aiohttp_client(server)
    loop = asyncio.get_running_loop()
    started = loop.time()
    # The headers' end never comes.
    answer = await raw(client.port, b"GET /api/v1/files HTTP/1.1\r\nHost: x\r\nX-API-Key: fhk_")
    assert answer.status == 408 and answer.json()["error"]["code"] == "request_timeout"
    assert loop.time() - started < 5  # aiohttp alone would wait for its keep-alive timeout


async def test_a_runner_on_an_aiohttp_without_the_names_the_protections_need_refuses(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # serve says so before it starts anything (tests/system/test_serve.py).
    lacking = ["aiohttp.web_protocol._ErrInfo"]
    monkeypatch.setattr(names, "missing_protection_names", lambda: lacking)
    with pytest.raises(UnprotectedAiohttp, match=r"_ErrInfo.*pip install 'aiohttp>="):
        await EnvelopeAppRunner(create_app(settings)).setup()


def test_the_runner_used_in_production_is_the_fences(settings: Settings) -> None:
    from service import server

    assert server.run_app.__module__ == "service.api._aiohttp.runner"
    assert issubclass(EnvelopeAppRunner, web.AppRunner)


def test_a_worker_runs_on_uvloop_without_installing_it_as_the_policy() -> None:
    # Python 3.12+ deprecates asyncio's event-loop policies (uvloop.install() warns there), and
    # later releases remove them: the runner is handed uvloop's loop factory instead.
    import uvloop

    from service.server import event_loop_factory

    loops = []

    async def started(app: web.Application) -> None:
        loops.append(type(asyncio.get_running_loop()))
        raise web.GracefulExit()  # as SIGTERM would, once started

    app = web.Application()
    app.on_startup.append(started)
    policy = asyncio.get_event_loop_policy()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            run_app(
                app,
                host="127.0.0.1",
                port=0,
                handle_signals=False,
                loop_factory=event_loop_factory(),
            )
    finally:
        asyncio.set_event_loop(None)
    assert loops == [uvloop.Loop]
    assert asyncio.get_event_loop_policy() is policy


async def test_outside_the_tested_aiohttp_a_large_upload_is_taken_whole(
    aiohttp_client: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp's own path reads a file part with its reader, which may hand back more than the
    # room asked for (what it held back looking for the delimiter): a 100 MiB upload was a 500.
    monkeypatch.setattr(names, "FAST_PATHS", False)
    monkeypatch.setattr(names, "_warned", True)
    api = await _served(aiohttp_client, create_app(settings))
    await _key(api)  # the account
    token = await api.login("fast@example.com", PASSWORD)
    data = bytes(range(256)) * (36 * 1024)  # 9 MiB, more than the writer's two 4 MiB buffers
    made = await uploaded(api, data, token=token)
    response = await api.client.get(
        f"/api/v1/files/{made['id']}/content", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status == 200 and await response.read() == data
