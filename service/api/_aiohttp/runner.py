"""The server and runner that serve the application through ``protocol.EnvelopeRequestHandler``:

- ``EnvelopeServer``: makes those handlers, and turns an ``HTTPException`` that escapes the
  application (aiohttp's ``Expect`` handling, which runs before it) into the envelope.
- ``EnvelopeAppRunner``: an ``AppRunner`` serving through an ``EnvelopeServer``; what tests use
  (``aiohttp.test_utils.TestServer._make_runner``) and what ``run_app`` uses.
- ``run_app``: ``aiohttp.web.run_app`` for the arguments ``service.server`` passes, with an
  ``EnvelopeAppRunner``.

What the service's application brings to its server, it hands in under the keys defined here
(``REQUEST_HANDLING``, ``LOW_LEVEL_REFUSAL``, ``GATEWAY_LANE``; ``service.api.context`` re-exports
them): this package imports nothing of the rest of the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler
from aiohttp.web_protocol import RequestHandler

from service.api._aiohttp import names
from service.api._aiohttp.protocol import EnvelopeRequestHandler, Lane

log = logging.getLogger("service.api")
_warned_parser = False


def warn_if_lenient_parser() -> None:
    """Say once, when the service starts serving, that aiohttp runs on its pure-Python HTTP
    parser (``AIOHTTP_NO_EXTENSIONS`` set, or no compiled parser for this platform): that one
    takes requests aiohttp's C parser (llhttp) refuses, so refusals this service documents (a
    request of HTTP/9.9, a TLS handshake on the plain port) do not all hold."""
    global _warned_parser
    python_parser = names.private("aiohttp.http_parser.HttpRequestParserPy")
    installed = names.private("aiohttp.http_parser.HttpRequestParser")
    if _warned_parser or python_parser is None or installed is not python_parser:
        return
    _warned_parser = True
    log.warning(
        "aiohttp is running without its C extensions (AIOHTTP_NO_EXTENSIONS is set, or they are "
        "not built for this platform): its pure-Python HTTP parser accepts some malformed "
        "requests that its C parser refuses (an HTTP/9.9 request is answered, a TLS handshake "
        "on the plain port waits for the header deadline); unset AIOHTTP_NO_EXTENSIONS, or "
        "install aiohttp's compiled wheel"
    )


# The envelope answer to a request refused before the application saw it: a status the HTTP
# parser refused it with, or an ``HTTPException`` aiohttp raised ahead of the routing.
Refusal = Callable[[int | web.HTTPException], web.StreamResponse]

# What every request of the application goes through, around its routing (``api.handling``).
REQUEST_HANDLING = web.AppKey[Callable[[Handler], Handler]]("request_handling")
# How a request refused before the application saw it is answered (the envelope).
LOW_LEVEL_REFUSAL = web.AppKey[Refusal]("low_level_refusal")
# The gateway lane (``api.gateway.GatewayLane``), made when the application starts.
GATEWAY_LANE = web.AppKey[Lane[Any]]("gateway_lane")


def _outer_envelope(handler: Handler, refusal: Refusal | None) -> Handler:
    """The application's handler, with an ``HTTPException`` raised before the application's
    own handling ran (aiohttp's ``Expect`` handling) answered by ``refusal`` (the envelope)
    instead of aiohttp's text."""
    if refusal is None:
        return handler

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return refusal(exc)

    return handle


class EnvelopeServer(web.Server):
    """A low-level server whose connections are ``EnvelopeRequestHandler``s."""

    def __init__(
        self,
        handler: Handler,
        *,
        header_timeout: float = 10.0,
        body_timeout: float = 30.0,
        wrap: Callable[[Handler], Handler] | None = None,
        refusal: Refusal | None = None,
        lane: Lane[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(wrap(handler) if wrap else _outer_envelope(handler, refusal), **kwargs)
        self._timeouts = {"header_timeout": header_timeout, "body_timeout": body_timeout}
        self._refusal = refusal
        self._lane = lane

    def __call__(self) -> RequestHandler:
        return EnvelopeRequestHandler(
            self,
            loop=self._loop,
            lane=self._lane,
            refusal=self._refusal,
            **self._timeouts,
            **self._kwargs,
        )


class EnvelopeAppRunner(web.AppRunner):
    """An ``AppRunner`` whose server answers aiohttp's own refusals with the envelope and gives
    a request's headers ``header_timeout`` and its body ``body_timeout`` seconds to arrive."""

    def __init__(
        self,
        app: web.Application,
        *,
        header_timeout: float = 10.0,
        body_timeout: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self._timeouts = {"header_timeout": header_timeout, "body_timeout": body_timeout}

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        missing = names.missing_protection_names()
        if missing:
            raise UnprotectedAiohttp(missing)
        names.warn_if_off()
        warn_if_lenient_parser()
        return EnvelopeServer(
            server.request_handler,
            # The service's application brings what every request goes through, and how a
            # request refused before it is answered (the envelope).
            wrap=self.app.get(REQUEST_HANDLING),
            refusal=self.app.get(LOW_LEVEL_REFUSAL),
            lane=self._gateway_lane() if names.FAST_PATHS else None,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **self._timeouts,
            **server._kwargs,
        )

    def _gateway_lane(self) -> Lane[Any] | None:
        """The application's gateway lane (made at its start-up), unless it has middlewares or
        response hooks that the lane would pass by."""
        app = self.app
        if REQUEST_HANDLING not in app or app.middlewares or app.on_response_prepare:
            return None
        return app.get(GATEWAY_LANE)


# How much of a request's body a connection reads ahead of its handler: it stops reading at
# twice this. aiohttp's 64 KiB stops it after every read the event loop makes (256 KiB), so an
# upload's bytes arrived in pieces too small for the multipart reader, each one a pause and a
# resume of the socket.
READ_BUFFER = 512 * 1024


class UnprotectedAiohttp(RuntimeError):
    """The installed aiohttp lacks names the protections need (``names.PROTECTION_NAMES``): the
    service does not serve on it."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__(unprotected_reason(missing))


def unprotected_reason(missing: list[str]) -> str:
    """Why the service does not serve on an aiohttp lacking ``missing``, and what to do."""
    low, high = names.TESTED_AIOHTTP
    return (
        f"aiohttp {aiohttp.__version__} lacks {', '.join(missing)}, which the JSON envelope for "
        "requests aiohttp's parser refuses and the read deadlines rely on (without them "
        "aiohttp would quote a malformed request's bytes, a credential among them); install a "
        f"tested release: pip install 'aiohttp>={low},<{high}'"
    )


class ListenError(OSError):
    """The address could not be bound (in use, not this machine's, not permitted): the
    ``OSError``'s errno and reason, with no traceback to show."""


async def _serve(
    runner: web.AppRunner,
    host: str,
    port: int,
    reuse_port: bool | None,
    on_listening: Callable[[list[Any]], None] | None,
) -> None:
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port, reuse_port=reuse_port).start()
        except OSError as error:
            raise ListenError(error.errno, error.strerror or str(error)) from None
        if on_listening is not None:
            on_listening(runner.addresses)
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
    header_timeout: float = 10.0,
    body_timeout: float = 30.0,
    print: Any = None,  # accepted as web.run_app takes it; nothing is printed either way
    on_listening: Callable[[list[Any]], None] | None = None,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM, as ``web.run_app`` does, through an
    ``EnvelopeAppRunner``, on a loop ``loop_factory`` makes. ``on_listening`` is given the bound
    addresses once the port is bound; ``ListenError`` when it cannot be."""
    runner = EnvelopeAppRunner(
        app,
        access_log_class=access_log_class,
        handle_signals=handle_signals,
        keepalive_timeout=75.0,  # web.run_app's default (the handler's own is an hour)
        read_bufsize=READ_BUFFER,
        shutdown_timeout=shutdown_timeout,  # how long requests in flight get to finish
        header_timeout=header_timeout,
        body_timeout=body_timeout,
    )
    loop = loop_factory()
    asyncio.set_event_loop(loop)
    main = loop.create_task(_serve(runner, host, port, reuse_port, on_listening))
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
