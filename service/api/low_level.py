"""Requests the application never sees, answered with the JSON error envelope too.

aiohttp answers a request its HTTP parser cannot read (a malformed request line, a control
character or a bare CR inside a header, a line or header over 8190 bytes, more than 128 headers,
a broken chunked body) from inside its protocol handler, before the application and its
middlewares run: ``RequestHandler.handle_error`` sends a ``text/plain`` body with the parser's
message, which quotes the offending bytes (``X-API-Key: fhk_…`` included), and logs that message
with a traceback. Its default ``Expect`` handler, which also runs before the middlewares, answers
an unknown expectation with a 417 quoting the header value.

aiohttp has no documented hook for either, so this module subclasses the pieces that build them:

- ``EnvelopeRequestHandler.handle_error``: the envelope ``{"success": false, "error": {"code":
  "bad_request", "message": "Malformed HTTP request."}}`` with aiohttp's status (400), or
  ``internal_error`` for a 5xx; nothing of the request in the body, only the error's type in the
  log; the connection is closed, as aiohttp does.
- ``EnvelopeServer``: makes those handlers, and turns an ``HTTPException`` that escapes the
  application (the 417) into the envelope.
- ``EnvelopeAppRunner``: an ``AppRunner`` serving through an ``EnvelopeServer``; what tests use
  (``aiohttp.test_utils.TestServer._make_runner``) and what ``run_app`` uses.
- ``run_app``: ``aiohttp.web.run_app`` for the arguments ``service.server`` passes, with an
  ``EnvelopeAppRunner``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler
from aiohttp.web_protocol import RequestHandler

from service.api.middleware import _from_http_exception, error_response
from service.errors import ApiError, BadRequest

log = logging.getLogger("service.api")

MALFORMED_MESSAGE = "Malformed HTTP request."


def _with_security_headers(response: web.Response) -> web.Response:
    # on_response_prepare does not run for these (no route was matched), so the two headers every
    # response carries are set here.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def low_level_error(status: int) -> ApiError:
    """The envelope's error for a request aiohttp refused itself with ``status``."""
    error = ApiError() if status >= 500 else BadRequest(MALFORMED_MESSAGE, code="bad_request")
    error.status = status
    return error


class EnvelopeRequestHandler(RequestHandler):
    """aiohttp's protocol handler, with its error responses in the JSON error envelope."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # ``message`` and ``str(exc)`` quote the request's bytes: neither is sent nor logged.
        kind = type(exc).__name__ if exc is not None else "no exception"
        if status >= 500:
            log.error("low-level %d answering a request: %s", status, kind, exc_info=exc)
        else:
            log.info("refused a malformed HTTP request (%d): %s", status, kind)
        if request.writer.output_size > 0:  # as aiohttp: a response has begun, nothing to fix
            raise ConnectionError("Response is sent already, cannot send another response")
        response = _with_security_headers(error_response(low_level_error(status)))
        response.force_close()
        return response


def _outer_envelope(handler: Handler) -> Handler:
    """The application's handler, with an ``HTTPException`` raised before the middlewares ran
    (aiohttp's ``Expect`` handling) answered as the envelope instead of aiohttp's text."""

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _with_security_headers(error_response(_from_http_exception(exc)))

    return handle


class EnvelopeServer(web.Server):
    """A low-level server whose connections are ``EnvelopeRequestHandler``s."""

    def __init__(self, handler: Handler, **kwargs: Any) -> None:
        super().__init__(_outer_envelope(handler), **kwargs)

    def __call__(self) -> RequestHandler:
        return EnvelopeRequestHandler(self, loop=self._loop, **self._kwargs)


class EnvelopeAppRunner(web.AppRunner):
    """An ``AppRunner`` whose server answers aiohttp's own refusals with the envelope."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return EnvelopeServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **server._kwargs,
        )


async def _serve(runner: web.AppRunner, host: str, port: int, reuse_port: bool | None) -> None:
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_port=reuse_port).start()
        await asyncio.Event().wait()  # until a signal (GracefulExit) or cancellation
    finally:
        await runner.cleanup()


def run_app(
    app: web.Application,
    *,
    host: str,
    port: int,
    reuse_port: bool | None = None,
    access_log_class: type[AbstractAccessLogger] = web.AccessLogger,
    handle_signals: bool = True,
    shutdown_timeout: float = 60.0,
    print: Any = None,  # accepted as web.run_app takes it; nothing is printed either way
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM, as ``web.run_app`` does, through an
    ``EnvelopeAppRunner``."""
    runner = EnvelopeAppRunner(
        app,
        access_log_class=access_log_class,
        handle_signals=handle_signals,
        keepalive_timeout=75.0,  # web.run_app's default (the handler's own is an hour)
        shutdown_timeout=shutdown_timeout,  # how long requests in flight get to finish
    )
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    main = loop.create_task(_serve(runner, host, port, reuse_port))
    try:
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)  # runs runner.cleanup()
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
