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
- ``EnvelopeRequestHandler``'s read timeouts, which aiohttp lacks (it waits for a request's
  headers up to its keep-alive timeout, and for a body as long as bytes trickle in): a request's
  headers must all arrive within ``header_timeout`` of its first byte (of the connection's
  opening, for its first request), and its body within ``body_timeout`` of its headers plus a
  second for every ``MIN_BODY_BYTES_PER_SECOND`` bytes of it that arrived (so a large upload that
  keeps coming is never cut, and a trickle gains next to nothing). Late
  headers are answered 408 ``request_timeout`` and the connection closed; a connection that sent
  nothing is closed. A late body makes the handler's read of it fail with 408, and the connection
  is closed after that answer (or at once, when the answer was already sent). Both are deadlines,
  not idle timers, so a byte now and then does not hold a connection. On the hot path this costs
  a few attribute reads per packet and no timer: a request whose headers and body come in one
  packet arms nothing, and the one timer a connection has (armed when it opens) is only moved
  when a request comes in pieces.
- ``EnvelopeRequestHandler.take_over``: a connection ``lane_connection.LaneConnection`` read
  first (the gateway lane's), served from the request it hands over on.
- ``EnvelopeRequestHandler.socket_body``: the rest of a large body read straight from the socket
  (``request_body``), and the connection handed back to aiohttp's parser afterwards.

The server that makes these handlers is ``runner``'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http import HttpRequestParser
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

from service.api._aiohttp import names
from service.api._aiohttp.request_body import SocketBody

log = logging.getLogger("service.api")

_ErrInfo: Any = names.private("aiohttp.web_protocol._ErrInfo")

# A body's deadline moves on by a second for every this many bytes that arrive: an upload of
# 100 MiB needs its time, and gets it while it keeps up this rate on average; a body trickled in
# a byte at a time gains next to nothing.
MIN_BODY_BYTES_PER_SECOND = 64 * 1024


class HeadersTimedOut(Exception):
    """A request's headers did not all arrive within the header timeout."""


# What a connection is waiting for from its client, as far as the read timeouts are concerned.
_IDLE = 0  # nothing: between requests (aiohttp's keep-alive timeout applies), or handling one
_OPENED = 1  # the first request's headers, and no byte has come yet
_HEADERS = 2  # the rest of a request's headers
_BODY = 3  # the rest of a request's body


class EnvelopeRequestHandler(RequestHandler):
    """aiohttp's protocol handler, with its error responses in the JSON error envelope and
    deadlines for a request's headers and body."""

    __slots__ = (
        "_auto_decompress",
        "_body",
        "_body_timeout",
        "_header_timeout",
        "_phase",
        "_read_by",
        "_read_timer",
        "_refusal",
        "_socket_body",
    )

    def __init__(
        self,
        manager: web.Server,
        *,
        header_timeout: float = 10.0,
        body_timeout: float = 30.0,
        refusal: Callable[[int], web.StreamResponse] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(manager, **kwargs)
        self._refusal = refusal
        self._header_timeout = header_timeout
        self._body_timeout = body_timeout
        self._phase = _IDLE
        self._read_by = 0.0
        self._read_timer: asyncio.TimerHandle | None = None
        self._body: StreamReader | None = None
        self._socket_body: SocketBody | None = None
        self._auto_decompress = kwargs.get("auto_decompress", True)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._expect(_OPENED, self._header_timeout)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._socket_body is not None:
            self._socket_body.fail(ConnectionResetError("Connection lost"))
        super().connection_lost(exc)
        self._phase = _IDLE
        self._body = None
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def data_received(self, data: bytes) -> None:
        count = self._request_count
        super().data_received(data)
        body = self._messages[-1][1] if self._request_count != count else None
        if body is not None:  # a request's headers are in: usually all of it is
            if body is EMPTY_PAYLOAD or body.is_eof():
                self._phase = _IDLE
            else:
                self._body = body
                self._expect(_BODY, self._body_timeout)
        elif self._phase == _BODY:
            if self._body is None or self._body.is_eof():
                self._phase = _IDLE
                self._body = None
            else:  # a large body that keeps coming gets time for what it sends
                self._read_by += len(data) / MIN_BODY_BYTES_PER_SECOND
        elif data and not self._upgraded:  # part of a request's headers
            if self._phase == _IDLE:
                self._expect(_HEADERS, self._header_timeout)
            else:
                self._phase = _HEADERS

    def take_over(
        self, transport: asyncio.Transport, data: bytes, head_began: float | None
    ) -> None:
        """Serve ``transport`` from now on, ``data`` read from it already (``LaneConnection``
        hands a connection over so): a head begun at ``head_began`` (the loop's time) is held
        to its deadline from then."""
        self.connection_made(transport)
        if data:
            self.data_received(data)
        if head_began is not None and self._phase == _HEADERS:
            self._expect(_HEADERS, head_began + self._header_timeout - self._loop.time())

    # -- a body read from the socket --------------------------------------------------------------

    def socket_body(self, body: StreamReader, remaining: int) -> SocketBody | None:
        """Read the ``remaining`` bytes of ``body`` (the request in hand's, its stream drained)
        from the socket from now on, the connection not reading meanwhile; None where that is
        not plainly safe (``request_body``)."""
        transport = self.transport
        if (
            transport is None
            or body is not self._body
            or self._phase != _BODY
            or self._socket_body is not None
            or self._reading_paused  # the parser may hold bytes of the body
            or self._buffer_paused
            or self._messages
            or self._upgraded
            or self._payload_parser is not None
            or self._force_close
            or self._close
            or transport.get_extra_info("sslcontext") is not None
        ):
            return None
        sock = transport.get_extra_info("socket")
        if sock is None:
            return None
        try:
            transport.pause_reading()
        except (AttributeError, NotImplementedError, RuntimeError):
            return None
        self._socket_body = reading = SocketBody(self, body, sock.fileno(), remaining)
        return reading

    def body_bytes_arrived(self, count: int) -> None:
        """``count`` bytes of the body came from the socket: its deadline moves as in
        ``data_received``."""
        if self._phase == _BODY:
            self._read_by += count / MIN_BODY_BYTES_PER_SECOND

    def socket_body_read(self) -> None:
        """The body was read to its end from the socket: a new parser for what follows it on
        the connection (the old one still counts the body's bytes it never saw), and reading
        on."""
        self._socket_body_done()
        self._parser = HttpRequestParser(
            self,
            self._loop,
            self._read_bufsize,
            max_line_size=self.max_line_size,
            max_field_size=self.max_field_size,
            max_headers=self.max_headers,
            payload_exception=RequestPayloadError,
            auto_decompress=self._auto_decompress,
            max_msg_queue_size=self._max_msg_queue_size,
        )
        # What was handed back to the body's stream may have filled it past its high-water mark,
        # which paused reading; the stream holds its whole body, so nothing is read for it now,
        # and what the connection reads next is the next request's.
        self._reading_paused = False
        transport = self.transport
        if transport is not None and not self._buffer_paused:
            transport.resume_reading()

    def socket_body_abandoned(self) -> None:
        """The body was given up half-read: the connection closes after the answer, which aiohttp
        does for a body not at its end when it may not linger to read it."""
        self._socket_body_done()
        self._lingering_time = 0.0

    def _socket_body_done(self) -> None:
        """No body is being read, from the socket or through aiohttp."""
        self._socket_body = None
        self._phase = _IDLE
        self._body = None

    def _expect(self, phase: int, seconds: float) -> None:
        """Wait for ``phase`` for at most ``seconds`` from now; the timer fires no later."""
        loop = self._loop
        self._phase = phase
        self._read_by = by = loop.time() + seconds
        timer = self._read_timer
        if timer is not None:
            if timer.when() <= by:
                return  # it fires first, and then waits on for the rest
            timer.cancel()
        self._read_timer = loop.call_at(by, self._read_timed_out)

    def _read_timed_out(self) -> None:
        self._read_timer = None
        phase = self._phase
        if phase == _IDLE or self.transport is None or self._force_close:
            return
        loop = self._loop
        if loop.time() < self._read_by:
            self._read_timer = loop.call_at(self._read_by, self._read_timed_out)
            return
        self._phase = _IDLE
        if phase == _BODY:
            body, self._body = self._body, None
            if body is None or body.is_eof():
                return
            log.info("a request body did not arrive within %gs", self._body_timeout)
            if not self._request_in_progress:  # already answered: nothing more to read it for
                self.force_close()
                return
            # The handler's read of the body fails with 408 (its answer goes out through the
            # error envelope) and the connection is closed after that answer, without first
            # reading on what is left of the body.
            self._lingering_time = 0.0
            if self._socket_body is not None:
                self._socket_body.fail(web.HTTPRequestTimeout())
            body.set_exception(web.HTTPRequestTimeout())
        elif phase == _OPENED:
            self.force_close()  # nothing was sent: closed as an idle keep-alive connection is
        else:
            # Answered 408 in turn after any request before it, through handle_error; nothing
            # more is read from this connection.
            error = _ErrInfo(status=408, exc=HeadersTimedOut(), message="")
            self._messages.append((error, EMPTY_PAYLOAD))
            self._close = True
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """A body that cannot be read (a broken gzip or chunked encoding, a client gone mid-body)
        is the client's doing: aiohttp logs it with a traceback as "Unhandled exception" when it
        drains the body after the answer. Logged at INFO, by its type only."""
        error = kw.get("exc_info")
        if isinstance(error, RequestPayloadError | ConnectionResetError):
            log.info("a request body could not be read: %s", type(error).__name__)
            return
        super().log_exception(*args, **kw)

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
        elif status == 408:
            log.info("a request's headers did not arrive within %gs", self._header_timeout)
        else:
            log.info("refused a malformed HTTP request (%d): %s", status, kind)
        if request.writer.output_size > 0:  # as aiohttp: a response has begun, nothing to fix
            raise ConnectionError("Response is sent already, cannot send another response")
        if self._refusal is None:  # an application of another kind: aiohttp's own answer
            return super().handle_error(request, status, exc, message)
        return self._refusal(status)
