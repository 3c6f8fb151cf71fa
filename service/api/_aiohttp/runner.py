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
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.log import access_logger
from aiohttp.typedefs import Handler

from service.api._aiohttp import names
from service.api._aiohttp.lane_connection import Lane, LaneConnection
from service.api._aiohttp.protocol import EnvelopeRequestHandler

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
    """A low-level server whose connections are ``EnvelopeRequestHandler``s; with a gateway
    lane, each begins as a ``LaneConnection``, which hands it to one when a request is not the
    lane's."""

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
        self._lane_connections: set[LaneConnection] = set()
        self._keepalive_timeout = float(kwargs.get("keepalive_timeout", 3630.0))

    def __call__(self) -> Any:
        lane = self._lane
        if lane is None:
            return self._handler()
        logger = self._access_logger()
        if logger is not None and not isinstance(logger, lane.access_log_class):
            return self._handler()  # the lane writes the lines of its own logger only
        return LaneConnection(
            lane,
            self._handler,
            self._lane_connections,
            header_timeout=self._timeouts["header_timeout"],
            keepalive_timeout=self._keepalive_timeout,
            log_access=logger is not None,
        )

    def _access_logger(self) -> AbstractAccessLogger | None:
        """The access logger of a connection made now, as aiohttp's handler makes it (one per
        connection), or None when it would log nothing."""
        access_log = self._kwargs.get("access_log", access_logger)  # the handler's default
        if access_log is None:
            return None
        make = self._kwargs.get("access_log_class", web.AccessLogger)
        logger: AbstractAccessLogger = make(
            access_log, self._kwargs.get("access_log_format", web.AccessLogger.LOG_FORMAT)
        )
        return logger if logger.enabled else None

    def _handler(self) -> EnvelopeRequestHandler:
        return EnvelopeRequestHandler(
            self, loop=self._loop, refusal=self._refusal, **self._timeouts, **self._kwargs
        )

    def pre_shutdown(self) -> None:
        super().pre_shutdown()
        for connection in list(self._lane_connections):
            connection.close()

    async def shutdown(self, timeout: float | None = None) -> None:  # noqa: ASYNC109  # aiohttp's
        lanes = [connection.shutdown(timeout) for connection in list(self._lane_connections)]
        await asyncio.gather(super().shutdown(timeout), *lanes)
        self._lane_connections.clear()


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
        names.warn_if_off()
        if not names.FAST_PATHS:  # aiohttp's own server; the application's middleware handles
            return server
        return EnvelopeServer(
            server.request_handler,
            # The service's application brings what every request goes through, and how a
            # request refused before it is answered (the envelope).
            wrap=self.app.get(REQUEST_HANDLING),
            refusal=self.app.get(LOW_LEVEL_REFUSAL),
            lane=self._gateway_lane(),
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
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM, as ``web.run_app`` does, through an
    ``EnvelopeAppRunner``. ``on_listening`` is given the bound addresses once the port is
    bound; ``ListenError`` when it cannot be."""
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
    loop = asyncio.new_event_loop()
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
