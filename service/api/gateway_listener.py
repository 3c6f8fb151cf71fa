"""The gateway listener: a port of its own that answers only the forward-auth sub-request
(``GET /api/v1/auth/verify``), served by a plain ``asyncio.Protocol`` over the public
``httptools`` parser, without aiohttp's server.

``FILEHOST_GATEWAY_PORT`` turns it on (0, the default, leaves it off); point the gateway's
``auth_request`` / ForwardAuth at that port and everything else at ``FILEHOST_PORT`` as before.
Each worker binds it once the application has started (with ``SO_REUSEPORT`` when there are
several), and stops it with the application: it stops accepting, closes idle connections, lets
the requests in hand finish (up to the shutdown grace) and then closes the rest.

The answer is the aiohttp route's, byte for byte but for ``Date`` and a generated request id,
made by the same functions (``tests/api/test_gateway_listener.py`` sends each case both ways):
``forward_auth.verify_reply``, refusals through ``middleware.refusal`` and ``error_body``, the
headers of ``middleware.trace_headers`` and the security block, ``answers.serialise_head``, and
the same metrics and access line. Anything that is not a well-formed HTTP/1.0 or 1.1 request to
that one path is refused, never passed on:

- another path: 404 ``route_not_found`` (the path must be spelled exactly; the query is
  ignored); another method: 405 with ``Allow: GET``; ``Expect: 100-continue`` is answered
  ``100 Continue`` first, any other expectation 417, as aiohttp does;
- a body (``Content-Length`` or chunked) is read and ignored, as the aiohttp route ignores it;
- keep-alive and pipelining, with the answers strictly in request order; ``Connection: close``
  and HTTP/1.0 without keep-alive are answered and the connection closed;
- ``Upgrade`` (and ``CONNECT``): answered without switching protocols, with ``Connection:
  close``, and nothing after it is read;
- a malformed request (anything the parser refuses, a request target over 8190 bytes, a header
  over 8190, more than 128 headers, a repeated ``Host`` or ``Content-Length`` and the other
  headers aiohttp takes once, HTTP/1.1 without ``Host``, another HTTP version): 400
  ``bad_request`` "Malformed HTTP request." in aiohttp's own words and the connection closed,
  after the answers to the requests before it; nothing of the request is echoed or logged but
  the error's type. A body that breaks off (a bad chunk) after its request was answered: the
  answer stands and the connection is closed;
- headers not all in within ``header_timeout`` of their first byte (of the connection's
  opening, for its first request): 408 ``request_timeout`` and closed; a connection that sent
  nothing in that time, or nothing for ``keepalive_timeout`` after its last answer, is closed;
  a body not in within ``body_timeout`` of its headers (plus a second per 64 KiB that came) is
  not waited for: the connection is closed once the answers in hand are sent;
- a client that does not read its answers: reading stops while the transport's write buffer is
  full, and while ``MAX_IN_HAND`` requests of the connection are being answered (so what is
  buffered is bounded by the high-water mark plus the answers to one read's requests);
- a client gone mid-request: its answer is still counted and logged, and dropped.

Where aiohttp answers otherwise, the listener is the stricter: a path spelled otherwise
(percent-encoded, absolute-form) is 404, HTTP/0.9 and 2.0 request lines are malformed, an
upgrade is answered with ``Connection: close``; and a request read together with a malformed one
after it is answered, where aiohttp drops it.

Never logs or echoes a credential: the headers go to the same credential check as every route,
and the access line holds what ``service.logs`` puts in every access line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from time import perf_counter

import httptools
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy, istr

from service.api.answers import EMPTY_BODY_STATUSES, JSON, serialise_head
from service.api.client_address import ClientAddresses
from service.api.forward_auth import VERIFY_PATH, verify_reply
from service.api.middleware import (
    RESOURCE_HEADERS,
    as_api_error,
    error_body,
    refusal,
    trace_headers,
)
from service.auth.rate_limits import RateLimitFields
from service.config import Settings
from service.errors import BadRequest
from service.logs import (
    ACCESS_LOGGER_NAME,
    LINES,
    UNMATCHED_ROUTE,
    RequestTrace,
    current_trace,
    request_id_from,
)
from service.metrics import Metrics

log = logging.getLogger("service.api")

GATEWAY_LISTENER = web.AppKey("gateway_listener", "GatewayListener")  # type: ignore[arg-type]

# aiohttp's parser limits, so that a request is refused here when the main port refuses it.
MAX_TARGET = 8190
MAX_FIELD = 8190  # a header's name and value together
MAX_HEADERS = 128
# What the parser may hold of one request's head before its end: aiohttp's limits allow about
# 1 MiB, and the count is coarse (whole reads), so twice that.
MAX_HEAD_BYTES = 2 * 1024 * 1024
# Requests of one connection answered at once; reading waits while that many are in hand.
MAX_IN_HAND = 64
# A body's deadline moves on by a second for every this many bytes that arrive (as the main port).
BODY_BYTES_PER_SECOND = 64 * 1024
MALFORMED_MESSAGE = "Malformed HTTP request."
# Headers aiohttp's parser refuses to see twice in a request.
SINGLETON_HEADERS = frozenset(
    b"content-length content-location content-range content-type etag host max-forwards "
    b"server transfer-encoding user-agent".split()
)

_VERIFY = VERIFY_PATH.encode()
_GET = "GET"
_CONTENT_TYPE = ("Content-Type", JSON)
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_EXPECT = istr("Expect")  # multidict's case-insensitive string: its lower case worked out once
# Refusals the parser makes, as aiohttp's protocol handler writes them (service.api.low_level).
_LOW_LEVEL_HEADERS = (
    _CONTENT_TYPE,
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
)

# What a connection is waiting for, as far as its deadlines are concerned.
_OPENED = 0  # its first request's first byte
_HEAD = 1  # the rest of a request's head
_BODY = 2  # the rest of a request's body
_IDLE = 3  # its next request, or the answers in hand


class _Malformed(Exception):
    """A request refused as malformed beyond what the parser refuses itself."""


class _Slot:
    """One request's place in its connection's queue of answers."""

    __slots__ = ("answer", "expects_continue", "task")

    def __init__(self, answer: bytes | None = None) -> None:
        self.answer = answer  # None while it is being answered
        self.expects_continue = False  # a 100 Continue to send when its turn comes
        self.task: asyncio.Task[None] | None = None


def _http10(head: bytes, keep_alive: bool) -> bytes:
    """An HTTP/1.1 head made for an HTTP/1.0 request, as aiohttp answers one: its own status
    line, no ``Connection: close`` (1.0's default) and ``Connection: keep-alive`` if asked."""
    head = b"HTTP/1.0" + head[8:]
    return head[:-2] + b"Connection: keep-alive\r\n\r\n" if keep_alive else head


def low_level_refusal(status: int) -> bytes:
    """The answer to a request refused before it could be routed, 400 (malformed) or 408 (late
    headers), as aiohttp's protocol handler answers it on the main port."""
    if status == 408:
        error = as_api_error(web.HTTPRequestTimeout())
    else:
        error = BadRequest(MALFORMED_MESSAGE, code="bad_request")
    body = error_body(error)
    head = serialise_head(
        status, None, _LOW_LEVEL_HEADERS, len(_LOW_LEVEL_HEADERS), len(body), True
    )
    return _http10(head, False) + body


class GatewayListener:
    """The listener of one worker: its server, its connections, and how it answers."""

    def __init__(
        self,
        app: web.Application,
        addresses: ClientAddresses,
        metrics: Metrics | None,
        rate_fields: RateLimitFields | None,
        *,
        header_timeout: float = 10.0,
        body_timeout: float = 30.0,
        keepalive_timeout: float = 75.0,  # the main port's (service.api.low_level.run_app)
    ) -> None:
        self.app = app
        self.addresses = addresses
        self.metrics = metrics
        self.rate_fields = rate_fields
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.keepalive_timeout = keepalive_timeout
        self.log_access = False
        self.port = 0  # the port it listens on, once started
        self.connections: set[_Connection] = set()
        self._all_closed: asyncio.Event | None = None  # set when stopping and the last one closes
        self._server: asyncio.AbstractServer | None = None

    async def start(self, host: str, port: int, reuse_port: bool) -> None:
        # The access line is written when aiohttp's would be: when its logger takes INFO.
        self.log_access = logging.getLogger(ACCESS_LOGGER_NAME).isEnabledFor(logging.INFO)
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _Connection(self), host, port, reuse_port=reuse_port or None
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self, grace: float) -> None:
        """Stop accepting, close idle connections, give the requests in hand ``grace`` seconds
        to be answered, then close whatever is left."""
        if self._server is None:
            return
        self._server.close()
        for connection in list(self.connections):
            connection.stop()
        if self.connections:
            self._all_closed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_closed.wait(), grace)
        for connection in list(self.connections):
            connection.abort()
        await self._server.wait_closed()

    def closed(self, connection: _Connection) -> None:
        self.connections.discard(connection)
        if not self.connections and self._all_closed is not None:
            self._all_closed.set()

    def answer(
        self,
        trace: RequestTrace,
        method: str,
        path: str,
        reply: tuple[int, bytes | None, tuple[tuple[str, str], ...]],
        keep_alive: bool,
        http10: bool,
    ) -> bytes:
        """The bytes of a reply, as ``answers.Answer`` writes them; counted and logged."""
        status, body, own = reply
        pairs = [_CONTENT_TYPE, *own] if body is not None else [*own]
        pairs += trace_headers(trace, self.rate_fields)
        if status in EMPTY_BODY_STATUSES or status < 200:
            length, body = None, None
        else:
            length = 0 if body is None else len(body)
            if method == "HEAD":  # the length of what GET would send, unless that is none
                length, body = length or None, None
        if http10:  # through aiohttp's own serialiser, which adds the security block last
            pairs += RESOURCE_HEADERS.pairs
            head = _http10(
                serialise_head(status, None, pairs, len(pairs), length, True), keep_alive
            )
        else:
            head = serialise_head(status, RESOURCE_HEADERS, pairs, len(pairs), length, keep_alive)
        answered = perf_counter()  # one clock read for the metrics and the access line
        if self.metrics is not None:
            self.metrics.answered(trace, method, status, answered)
        if self.log_access:
            LINES.add_access(trace, method, path, status, answered)
        return head + body if body else head

    def log_low_level(self, status: int, remote: str | None) -> None:
        """The access line of a request refused before it was understood, as aiohttp's."""
        if self.log_access:
            trace = RequestTrace(None, UNMATCHED_ROUTE, remote)  # type: ignore[arg-type]
            LINES.add_access(trace, "UNKNOWN", "/", status)


def _refused(
    exc: Exception, trace: RequestTrace, method: str, path: str
) -> tuple[int, bytes, tuple[tuple[str, str], ...]]:
    # A function of its own, so that no frame of an answer holds the exception (and with it a
    # reference cycle through its traceback).
    error = refusal(exc, trace, method, path)
    return error.status, error_body(error), tuple(error.headers.items())


class _Connection(asyncio.Protocol):
    """One client connection: the parser's callbacks gather a request, its answer takes its
    place in the connection's queue, and the answers are written in that order."""

    def __init__(self, listener: GatewayListener) -> None:
        self._listener = listener
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._remote: str | None = None
        self._queue: deque[_Slot] = deque()
        self._closing = False  # nothing more is read: closed once the answers in hand are out
        self._write_blocked = False
        self._reading = True
        # The request being parsed.
        self._url = b""
        self._headers: list[tuple[str, str]] = []
        self._singletons: list[bytes] = []
        self._in_head = False
        self._in_body = False
        self._began = False  # a request began in the bytes being parsed
        self._head_bytes = 0
        # The one deadline a connection has, and its timer (moved only when it must fire sooner).
        self._phase = _OPENED
        self._read_by = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # -- the transport ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")  # as aiohttp's request.remote gives it
        if peer is not None:
            self._remote = str(peer[0]) if isinstance(peer, list | tuple) else str(peer)
        self._listener.connections.add(self)
        self._expect(_OPENED, self._listener.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        # The parser holds this protocol's methods: without it the pair is no cycle to collect.
        self._parser = None  # type: ignore[assignment]
        self._queue.clear()  # answers still being made are dropped when they are
        self._listener.closed(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def eof_received(self) -> bool:
        # The client sent all it will: the answers in hand still go out, then it is closed.
        self._stop_reading()
        self._close_when_answered()
        return True

    def pause_writing(self) -> None:
        self._write_blocked = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_blocked = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._began = False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # answered with Connection: close; nothing after it is HTTP
        except httptools.HttpParserError as error:
            if self._in_body:  # as aiohttp: the answer stands, and the connection is closed
                log.info("a request body could not be read: %s", type(error).__name__)
                self._stop_reading()
            elif not self._closing:  # else bytes after a request that closes the connection
                self._refuse(400, type(error).__name__)
        if self._closing:
            self._close_when_answered()
            return
        if self._in_head:
            self._head_bytes = len(data) if self._began else self._head_bytes + len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(400, "head too large")
                return
            if self._phase == _OPENED:
                self._phase = _HEAD  # the first request's deadline runs from the opening
            elif self._began or self._phase != _HEAD:
                self._expect(_HEAD, self._listener.header_timeout)
        elif self._in_body:
            if self._began or self._phase != _BODY:
                self._expect(_BODY, self._listener.body_timeout)
            else:  # a body that keeps coming gets time for what it sends
                self._read_by += len(data) / BODY_BYTES_PER_SECOND
        elif self._phase != _IDLE:
            self._phase = _IDLE
            if not self._queue:
                self._expect(_IDLE, self._listener.keepalive_timeout)
        if len(self._queue) >= MAX_IN_HAND:
            self._update_reading()

    # -- the parser's callbacks ------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._began = self._in_head = True
        self._url = b""
        self._headers = []
        self._singletons = []

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_TARGET:
            raise _Malformed("request target too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > MAX_FIELD or len(self._headers) >= MAX_HEADERS:
            raise _Malformed("a header too long, or too many")
        if b"\x00" in value:
            raise _Malformed("NUL in a header")
        folded = name.lower()
        if folded in SINGLETON_HEADERS:
            if folded in self._singletons:
                raise _Malformed("a header repeated")
            self._singletons.append(folded)
        elif folded == b"sec-websocket-key1":  # the old WebSocket handshake, refused by aiohttp
            raise _Malformed("Sec-WebSocket-Key1")
        value = value.rstrip(b" \t")  # the parser strips the whitespace before a value only
        self._headers.append((name.decode("latin-1"), value.decode("utf-8", "surrogateescape")))

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser = self._parser
        version = parser.get_http_version()
        if version != "1.1" and version != "1.0":
            raise _Malformed("HTTP version")
        if version == "1.1" and b"host" not in self._singletons:
            raise _Malformed("no Host")
        http10 = version == "1.0"
        keep_alive = parser.should_keep_alive() and not parser.should_upgrade()
        if not keep_alive:
            self._closing = True  # nothing after this request is read
        headers = CIMultiDictProxy(CIMultiDict(self._headers))
        url = self._url
        path = url if url == _VERIFY else url.partition(b"?")[0].partition(b"#")[0]
        method = parser.get_method().decode("ascii")
        slot = _Slot()
        self._queue.append(slot)
        self._in_body = True  # until the message's end, which may be now
        # As aiohttp: an expectation of an HTTP/1.1 request is met (100 Continue) or refused.
        expect = None if http10 else headers.get(_EXPECT)
        if expect and expect.lower() == "100-continue":
            slot.expects_continue = True
            expect = None
        if path == _VERIFY and method == _GET and not expect:
            slot.task = self._loop.create_task(self._verify(slot, headers, keep_alive, http10))
        else:
            if expect:
                error: Exception = web.HTTPExpectationFailed()
            elif path != _VERIFY:
                error = web.HTTPNotFound()
            else:
                error = web.HTTPMethodNotAllowed(method, [_GET])
            # The route of the access line and metrics: the route aiohttp's router matched.
            route = VERIFY_PATH if path == _VERIFY and method == _GET else UNMATCHED_ROUTE
            text = path.decode("utf-8", "surrogateescape")
            listener = self._listener
            trace = RequestTrace(
                request_id_from(headers), route, listener.addresses.of_peer(self._remote, headers)
            )
            reply = _refused(error, trace, method, text)
            slot.answer = listener.answer(trace, method, text, reply, keep_alive, http10)
        if self._queue[0] is slot and (slot.answer is not None or slot.expects_continue):
            self._write_answers()

    def on_message_complete(self) -> None:
        self._in_body = False

    # -- answers ---------------------------------------------------------------------------------

    async def _verify(
        self, slot: _Slot, headers: CIMultiDictProxy[str], keep_alive: bool, http10: bool
    ) -> None:
        """Answer a verify sub-request in a task of its own (so its trace is its own: log records
        made meanwhile carry its id), as ``middleware.request_handling`` answers it."""
        listener = self._listener
        trace = RequestTrace(
            request_id_from(headers), VERIFY_PATH, listener.addresses.of_peer(self._remote, headers)
        )
        current_trace.set(trace)
        try:
            reply = await verify_reply(listener.app, headers, trace)
        except Exception as exc:
            reply = _refused(exc, trace, _GET, VERIFY_PATH)
        slot.answer = listener.answer(trace, _GET, VERIFY_PATH, reply, keep_alive, http10)
        slot.task = None
        queue = self._queue
        if queue and queue[0] is slot:
            self._write_answers()

    def _write_answers(self) -> None:
        """Write what can be written from the head of the queue, in one piece."""
        queue = self._queue
        out = []
        while queue:
            slot = queue[0]
            if slot.expects_continue:
                slot.expects_continue = False
                out.append(_CONTINUE)
            if slot.answer is None:
                break
            out.append(slot.answer)
            queue.popleft()
        if out and self._transport is not None:
            self._transport.write(b"".join(out))
        if not queue:
            if self._closing:
                self._close_when_answered()
            elif self._phase == _IDLE:
                self._expect(_IDLE, self._listener.keepalive_timeout)
        if not self._reading:  # paused while too many were in hand, maybe no longer
            self._update_reading()

    def _refuse(self, status: int, why: str) -> None:
        """Answer 400 or 408 after the answers in hand, and read nothing more."""
        if status == 408:
            log.info("a request's headers did not arrive within %gs", self._listener.header_timeout)
        else:
            log.info("refused a malformed HTTP request (%d): %s", status, why)
        self._listener.log_low_level(status, self._remote)
        self._stop_reading()
        self._queue.append(_Slot(low_level_refusal(status)))
        self._write_answers()

    def _stop_reading(self) -> None:
        self._closing = True
        self._in_head = self._in_body = False
        self._update_reading()

    def _close_when_answered(self) -> None:
        if not self._queue and self._transport is not None:
            self._transport.close()

    def _update_reading(self) -> None:
        """Read while the client reads its answers and few of its requests are in hand."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        reading = not (self._closing or self._write_blocked or len(self._queue) >= MAX_IN_HAND)
        if reading != self._reading:
            self._reading = reading
            if reading:
                transport.resume_reading()
            else:
                transport.pause_reading()

    # -- deadlines and shutdown ------------------------------------------------------------------

    def _expect(self, phase: int, seconds: float) -> None:
        """Wait for ``phase`` for at most ``seconds`` from now; the timer fires no later."""
        self._phase = phase
        self._read_by = by = self._loop.time() + seconds
        timer = self._timer
        if timer is not None:
            if timer.when() <= by:
                return  # it fires first, and then waits on for the rest
            timer.cancel()
        self._timer = self._loop.call_at(by, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        if self._transport is None or self._closing:
            return
        if self._loop.time() < self._read_by:
            self._timer = self._loop.call_at(self._read_by, self._timed_out)
            return
        if self._phase == _HEAD:
            self._refuse(408, "")
        elif self._phase == _BODY:
            log.info("a request body did not arrive within %gs", self._listener.body_timeout)
            self._stop_reading()
            self._close_when_answered()
        elif not self._queue:  # nothing came in time, and nothing is in hand
            self._transport.close()

    def stop(self) -> None:
        """The listener stops: read no more requests; close once the answers in hand are out."""
        self._stop_reading()
        self._close_when_answered()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


def add_gateway_listener(
    app: web.Application,
    settings: Settings,
    addresses: ClientAddresses,
    metrics: Metrics | None,
    rate_fields: RateLimitFields | None,
) -> None:
    """Serve the verify sub-request on ``settings.gateway_port`` too, from the application's
    start (after its store and authenticator are there) to its shutdown."""
    listener = GatewayListener(
        app,
        addresses,
        metrics,
        rate_fields,
        header_timeout=settings.header_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
    )
    app[GATEWAY_LISTENER] = listener

    async def start(app: web.Application) -> None:
        await listener.start(settings.host, settings.gateway_port, settings.workers > 1)

    async def stop(app: web.Application) -> None:
        # on_shutdown: before the store's connections close (on_cleanup).
        await listener.stop(settings.shutdown_grace_seconds)

    app.on_startup.append(start)
    app.on_shutdown.append(stop)
