"""A connection that answers the gateway lane's requests itself and hands every other to aiohttp.

Every connection the server accepts begins here. Its requests are parsed with ``httptools``
(the llhttp binding uvicorn uses) one head at a time, and a request the lane takes (``Lane``:
a keep-alive HTTP/1.1 ``GET`` without a body to one of its paths) is answered from its path and
headers, without aiohttp's parser, request, response or task. The first request the lane does
not take (any other method, path or version, a body, ``Connection: close``, ``Expect``, an
upgrade, a head the parser refuses or one over aiohttp's limits, a request its route hands back)
ends the lane's part: the connection, with every byte of that request and of what followed it,
goes to aiohttp's own protocol handler (``EnvelopeRequestHandler``), made as the server makes it,
through asyncio's public ``set_protocol``, ``connection_made`` and ``data_received``, once every
answer the lane owes has been written. From then on aiohttp serves the connection as if it had
had it from the start, so answers keep their order and nothing but the lane's requests is
answered here.

No private aiohttp name is used: this module needs nothing of aiohttp but the handler the server
makes. Its read deadlines are the handler's (``EnvelopeRequestHandler``): the first request's head
within the header timeout of the connection's opening, a head that comes in pieces within it of
its first byte (a late one is handed over, and aiohttp answers 408 at once), a connection idle
after an answer closed after the keep-alive timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from contextvars import Context, copy_context
from typing import Any, Protocol, TypeVar, cast

import httptools
from aiohttp.abc import AbstractAccessLogger
from multidict import CIMultiDict, CIMultiDictProxy

log = logging.getLogger("service.api")

Route = TypeVar("Route")


class Lane(Protocol[Route]):
    """What a lane connection asks of the gateway lane (``service.api.gateway.GatewayLane``):
    which requests it takes, and their answers. A route is the lane's own: only handed back."""

    @property
    def access_log_class(self) -> type[AbstractAccessLogger]:
        """The access logger whose lines the lane writes itself: a server that logs through
        another does not use the lane, whose requests would be missing from that log."""
        ...

    def route_for(self, path: str, headers: CIMultiDictProxy[str]) -> Route | None:
        """The route that answers a ``GET`` of ``path``, or None when the lane does not take it."""
        ...

    def answer(
        self,
        route: Route,
        path: str,
        headers: CIMultiDictProxy[str],
        remote: str | None,
        log_access: bool,
    ) -> Coroutine[Any, Any, bytes | None]:
        """The whole answer to the request as written, or None to hand it to aiohttp."""
        ...


class HandedOver(Protocol):
    """What a lane connection hands its transport to: aiohttp's handler, which reads the bytes
    handed with it as if they had just arrived, a head begun at ``head_began`` (the loop's
    time) held to its deadline from then."""

    def take_over(
        self, transport: asyncio.Transport, data: bytes, head_began: float | None
    ) -> None: ...


# aiohttp's own limits (its parser's defaults, which the service keeps): a head beyond them is
# refused by aiohttp, so the lane never takes one.
MAX_LINE = 8190
MAX_FIELD = 8190
MAX_HEADERS = 128
# A head still incomplete at this size is no gateway's: aiohttp reads it, under its limits.
MAX_PENDING_HEAD = 64 * 1024
# Requests parsed ahead of the one being answered before the connection stops reading.
MAX_QUEUED = 32

_END_OF_HEAD = b"\r\n\r\n"
_CRLF = b"\r\n"
_BLANKS = b" \t"
_GET = b"GET"
_HTTP_11 = b"HTTP/1.1"
# Headers whose presence means a request the lane does not take: a body, an expectation, an
# upgrade.
_NOT_THE_LANES = frozenset((b"content-length", b"transfer-encoding", b"expect", b"upgrade"))
# Headers aiohttp refuses to see twice (its ``SINGLETON_HEADERS``, RFC 9110): a request with one
# of them twice is aiohttp's to refuse.
_SINGLETONS = frozenset(
    (
        b"content-location",
        b"content-range",
        b"content-type",
        b"etag",
        b"host",
        b"max-forwards",
        b"server",
        b"user-agent",
    )
)


class LaneConnection(asyncio.Protocol):
    """One accepted connection while the gateway lane serves it (see the module)."""

    __slots__ = (
        "_closing",
        "_complete",
        "_connections",
        "_context",
        "_current",
        "_current_raw",
        "_done",
        "_handover",
        "_head_began",
        "_header_timeout",
        "_idle_since",
        "_keepalive_timeout",
        "_lane",
        "_log_access",
        "_loop",
        "_make_handler",
        "_parser",
        "_partial",
        "_queue",
        "_reading_paused",
        "_remote",
        "_timer",
        "_transport",
        "_writing_paused",
    )

    def __init__(
        self,
        lane: Lane[Any],
        make_handler: Callable[[], HandedOver],
        connections: set[LaneConnection],
        *,
        header_timeout: float,
        keepalive_timeout: float,
        log_access: bool,
    ) -> None:
        self._lane = lane
        self._make_handler = make_handler
        self._connections = connections
        self._header_timeout = header_timeout
        self._keepalive_timeout = keepalive_timeout
        self._log_access = log_access
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._parser: httptools.HttpRequestParser | None = None
        self._remote: str | None = None
        # Whether the parser saw the whole of the head fed to it, a keep-alive request's.
        self._complete = False
        # Requests taken and not yet answered: the one being answered, and those behind it.
        self._queue: deque[tuple[Any, str, CIMultiDictProxy[str], bytes]] = deque()
        self._current: Coroutine[Any, Any, bytes | None] | None = None
        self._current_raw = b""
        self._context: Context | None = None
        self._done: asyncio.Future[None] | None = None  # a shutdown waiting for the answer
        # Bytes of a head not yet complete, and when its first byte came.
        self._partial = b""
        self._head_began: float | None = None
        # What goes to aiohttp once the answers owed are written, when that is decided.
        self._handover: bytes | None = None
        self._closing = False
        self._reading_paused = False
        self._writing_paused = False
        self._idle_since = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # -- the connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast(asyncio.Transport, transport)  # uvloop's is none
        self._parser = httptools.HttpRequestParser(self)
        peer = transport.get_extra_info("peername")  # as aiohttp's request.remote gives it
        if peer is not None:
            self._remote = str(peer[0]) if isinstance(peer, list | tuple) else str(peer)
        self._connections.add(self)
        # The first request's head is due within the header timeout of the opening.
        self._head_began = now = self._loop.time()
        self._timer = self._loop.call_at(now + self._header_timeout, self._timed_out)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._forget()
        self._transport = None
        self._queue.clear()
        self._handover = None
        self._partial = b""

    def _forget(self) -> None:
        """No longer this protocol's connection: lost, or handed to aiohttp."""
        self._closing = True
        self._connections.discard(self)
        self._parser = None  # the parser holds this protocol's methods: a cycle until then
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._read_as_due()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._read_as_due()
        if self._current is None:
            self._next()

    def _read_as_due(self) -> None:
        """Read while the client reads its answers, too few requests wait, and nothing is
        about to go to aiohttp."""
        transport = self._transport
        if transport is None or self._parser is None:
            return
        pause = self._writing_paused or len(self._queue) >= MAX_QUEUED or self._handover is not None
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    # -- reading requests -----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._handover is not None:  # already aiohttp's, once the answers owed are out
            self._handover += data
            return
        parser = self._parser
        if parser is None:
            return
        buffer = self._partial + data if self._partial else data
        start = 0  # where the first request not yet taken begins
        search = 0
        queue = self._queue
        while True:
            end = buffer.find(_END_OF_HEAD, search)
            if end < 0:
                break
            end += 4
            head = buffer[search:end]
            if not head.strip(_CRLF):  # only the empty lines allowed between requests
                search = end
                continue
            # One head at a time: a request the lane takes has no body, so its head, which
            # ends at the first empty line, is all of it. The parser checks it; then it is read.
            self._complete = False
            try:
                parser.feed_data(head)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade):
                self._hand_over_from(buffer, start)
                return
            taken = self._complete and self._take(head)
            if not taken:  # a head the lane does not take, or one with a body after it
                self._hand_over_from(buffer, start)
                return
            route, path, headers = taken
            queue.append((route, path, headers, buffer[start:end]))
            start = search = end
        if start < len(buffer):
            if len(buffer) - start > MAX_PENDING_HEAD:
                self._hand_over_from(buffer, start)
                return
            self._partial = buffer[start:]
            if start or self._head_began is None:
                self._head_began = self._loop.time()
                self._arm(self._head_began + self._header_timeout)
        else:
            self._partial = b""
            self._head_began = None
        if self._current is None:
            self._next()
        if len(queue) >= MAX_QUEUED:
            self._read_as_due()

    def on_message_complete(self) -> None:
        # Asked here: the parser forgets the message's connection flags once it returns.
        parser = self._parser
        self._complete = parser is not None and parser.should_keep_alive()

    def _take(self, head: bytes) -> tuple[Any, str, CIMultiDictProxy[str]] | None:
        """The lane's route, path and headers for a complete ``head`` the parser accepted (so
        each of its lines is well formed: one space between the request line's parts, no
        folded or bare-CR line, no space before a colon), if the lane takes it."""
        request_line, *fields = head.lstrip(_CRLF)[:-4].split(_CRLF)
        parts = request_line.split(b" ")
        if len(parts) != 3 or len(request_line) > MAX_LINE:
            return None
        method, target, version = parts
        if method != _GET or version != _HTTP_11:
            return None
        if len(fields) > MAX_HEADERS:
            return None
        pairs = []
        seen: set[bytes] | None = None
        for field in fields:
            name, _, value = field.partition(b":")
            if len(field) > MAX_FIELD:
                return None
            lowered = name.lower()
            if lowered in _NOT_THE_LANES:
                return None
            if lowered in _SINGLETONS:
                if seen is None:
                    seen = {lowered}
                elif lowered in seen:
                    return None
                else:
                    seen.add(lowered)
            # Decoded as aiohttp's parser decodes them.
            pairs.append(
                (
                    name.decode("utf-8", "surrogateescape"),
                    value.strip(_BLANKS).decode("utf-8", "surrogateescape"),
                )
            )
        path = target.decode("utf-8", "surrogateescape")
        headers = CIMultiDictProxy(CIMultiDict(pairs))
        route = self._lane.route_for(path, headers)
        return None if route is None else (route, path, headers)

    # -- answering them -------------------------------------------------------------------------

    def _next(self) -> None:
        """Answer the next request taken, if any and if the client reads; else, with nothing
        owed, hand over what is aiohttp's or close as asked."""
        if self._writing_paused or self._transport is None:
            return
        if self._queue and not self._closing:
            route, path, headers, raw = self._queue.popleft()
            self._current_raw = raw
            self._current = self._lane.answer(route, path, headers, self._remote, self._log_access)
            # Driven here, as a task would drive it but without making one (a task would cost
            # much of what the lane saves), in a context of its own, so its trace is its own.
            self._context = context = copy_context()
            context.run(self._advance)
            return
        if self._handover is not None:
            data, self._handover = self._handover, None
            self._give_to_aiohttp(data)
        elif self._closing:
            self._transport.close()
        else:
            self._idle_since = self._loop.time()
            if self._partial == b"" and self._timer is None:
                self._arm(self._idle_since + self._keepalive_timeout)

    def _resume(self, _future: asyncio.Future[Any]) -> None:
        self._advance()  # called in the request's context

    def _advance(self) -> None:
        coroutine = self._current  # set while a request is answered, which is when this runs
        assert coroutine is not None
        try:
            awaited = coroutine.send(None)
        except StopIteration as done:
            self._finish(done.value)
            return
        except (Exception, asyncio.CancelledError):
            log.exception("could not answer a request in the gateway lane")
            self._fail()
            return
        if getattr(awaited, "_asyncio_future_blocking", None):  # a future, as a task takes it
            awaited._asyncio_future_blocking = False
            awaited.add_done_callback(self._resume, context=self._context)
        elif awaited is None:  # a bare yield: go on at the loop's next turn
            self._loop.call_soon(self._advance, context=self._context)
        else:
            coroutine.close()
            log.error("the gateway lane cannot wait for %s", type(awaited).__name__)
            self._fail()

    def _fail(self) -> None:
        self._current = self._context = None
        self._queue.clear()
        self._handover = None
        if self._transport is not None:
            self._transport.close()
        self._answered()

    def _finish(self, answer: bytes | None) -> None:
        """Write ``answer``; None hands its request, and everything after it, to aiohttp."""
        self._current = self._context = None
        transport = self._transport
        if answer is None:
            rest = b"".join(raw for *_, raw in self._queue)
            self._queue.clear()
            handover = self._handover if self._handover is not None else self._partial
            self._handover = self._current_raw + rest + handover
            self._partial = b""
        elif transport is not None and not transport.is_closing():
            transport.write(answer)
        self._current_raw = b""
        self._answered()
        if transport is not None and not transport.is_closing():
            self._next()
            if self._reading_paused:
                self._read_as_due()

    def _answered(self) -> None:
        done = self._done
        if done is not None and not done.done():
            done.set_result(None)

    # -- handing over ---------------------------------------------------------------------------

    def _hand_over_from(self, buffer: bytes, start: int) -> None:
        """The request at ``buffer[start:]`` and everything after it are aiohttp's: handed over
        now, or once the answers owed before it are written."""
        self._partial = b""
        self._handover = buffer[start:]
        if self._current is None:
            self._next()
        self._read_as_due()

    def _give_to_aiohttp(self, data: bytes) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        head_began = self._head_began if data else None
        self._forget()
        self._transport = None
        handler = self._make_handler()
        transport.set_protocol(handler)  # type: ignore[arg-type]  # an asyncio protocol
        if self._reading_paused:
            transport.resume_reading()
        handler.take_over(transport, data, head_began)

    # -- deadlines and shutdown -----------------------------------------------------------------

    def _arm(self, when: float) -> None:
        timer = self._timer
        if timer is not None:
            if timer.when() <= when:
                return  # it fires first, and then waits on for the rest
            timer.cancel()
        self._timer = self._loop.call_at(when, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or self._current is not None or self._handover is not None:
            return  # answering: the deadline is the next request's, armed after it
        now = self._loop.time()
        if self._partial:
            due = (self._head_began or now) + self._header_timeout
            if now < due:
                self._arm(due)
                return
            # Late: aiohttp answers it 408 at once, as it answers a late head.
            data, self._partial = self._partial, b""
            self._give_to_aiohttp(data)
            return
        if self._head_began is not None:  # the first request, and nothing of it came
            due = self._head_began + self._header_timeout
        else:
            due = self._idle_since + self._keepalive_timeout
        if now < due:
            self._arm(due)
            return
        transport.close()

    def close(self) -> None:
        """Close once the request being answered (if any) is; the server is stopping."""
        self._closing = True
        self._queue.clear()
        self._handover = None
        if self._current is None and self._transport is not None:
            self._transport.close()

    async def shutdown(self, timeout: float | None) -> None:  # noqa: ASYNC109  # as aiohttp calls it
        """Wait up to ``timeout`` for the request being answered, then close."""
        self.close()
        if self._current is not None:
            self._done = done = self._loop.create_future()
            try:
                await asyncio.wait_for(done, timeout)
            except TimeoutError:
                pass
        if self._transport is not None:
            self._transport.close()
