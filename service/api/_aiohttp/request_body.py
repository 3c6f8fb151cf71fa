"""A request's body filled into the caller's buffer: first what aiohttp's ``StreamReader`` holds,
then, for a large body, straight from the connection's socket.

aiohttp delivers a body through its HTTP parser into a ``StreamReader``: every piece the socket
gives is copied into a new bytes object by the event loop, again by the parser, and again by
whoever gathers the pieces. On a large upload those copies were most of the event loop's work.
Once the stream is drained, ``RequestBody`` asks the connection (``EnvelopeRequestHandler``) to
stop reading (its transport is paused) and reads the rest of the body, exactly as many bytes as
its ``Content-Length`` says are left, with ``readv`` from a duplicate of the socket's descriptor
into the caller's buffer, waiting for them on the event loop (a slow client holds no thread).

When the caller has what it wants (``put_back``), the bytes it read past that and the rest of the
body (at most ``rest_limit`` bytes; more is read, dropped and answered with ``BodyGoesOn``) go
into the ``StreamReader``, which is then ended, so aiohttp's readers (the multipart reader's next
part) go on as usual; the connection gets a new HTTP parser (the old one still expects the body's
bytes it never saw) and reads on, so a request pipelined behind the body is served as usual.
Each byte read moves the body's deadline as one arriving through aiohttp does; when the deadline
passes, the read fails with 408. A body given up half-read (``close`` before ``put_back``: an
upload refused or failed half-way) is read on and dropped for at most ``LINGER_SECONDS``, so
that the client, still sending, reads its answer rather than a reset; when that is not done in
time, or reading itself failed (a timeout, the client gone), the stream ends with an error and
the connection is closed after the answer.

Read from the socket only where that is plainly safe: the service's own protocol handler, an
uncompressed body with a ``Content-Length`` and at least ``SOCKET_READ_FROM`` bytes left, a plain
TCP connection (no TLS), nothing else queued or held on the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import warnings
from typing import Any, Protocol

from aiohttp import hdrs, web

from service.api._aiohttp import names


class SocketOwner(Protocol):
    """The connection a body is read from, as this module asks it (``protocol.py``'s
    ``EnvelopeRequestHandler``)."""

    def socket_body(self, body: Any, remaining: int) -> SocketBody | None: ...

    def body_bytes_arrived(self, count: int) -> None: ...

    def socket_body_read(self) -> None: ...

    def socket_body_abandoned(self) -> None: ...


# Below this many bytes left, a body is read through aiohttp: switching costs a few system calls.
SOCKET_READ_FROM = 256 * 1024
# How long the rest of a body given up is read and dropped, as aiohttp's lingering close.
LINGER_SECONDS = 10.0
# The most read from aiohttp's stream at once, and the piece a body's unwanted rest is
# read and dropped in.
_STREAM_PIECE = 256 * 1024
_DROP_PIECE = 64 * 1024


class BodyGoesOn(Exception):
    """More than the caller's ``rest_limit`` bytes of the body were left after what it read."""


class RequestBody:
    """The body of ``request`` as a source of bytes (``fill``), read once, in order."""

    def __init__(self, request: web.BaseRequest, rest_limit: int) -> None:
        self._content = request.content
        self._rest_limit = rest_limit
        self._socket: SocketBody | None = None
        handler = request.protocol
        length = request.content_length
        self._handler = (
            handler
            if names.FAST_PATHS
            and hasattr(handler, "socket_body")
            and length is not None
            and hdrs.CONTENT_ENCODING not in request.headers
            and hdrs.TRANSFER_ENCODING not in request.headers
            else None
        )
        self._length = length or 0

    async def fill(self, buffer: Any, start: int, end: int) -> int:
        """Write the body's next bytes into ``buffer[start:end]`` (at least one, at most
        ``end - start``); how many, 0 once the body has ended."""
        socket = self._socket
        if socket is not None:
            return await socket.fill(buffer, start, end)
        content = self._content
        # A piece at a time: the stream joins what it holds into one bytes object per read.
        wanted = min(end - start, _STREAM_PIECE)
        data = content.read_nowait(wanted)
        if not data:
            handler = self._handler
            left = self._length - content.total_bytes
            if handler is not None and left >= SOCKET_READ_FROM and not content.is_eof():
                self._socket = handler.socket_body(content, left)
                if self._socket is not None:
                    return await self._socket.fill(buffer, start, end)
            data = await content.read(wanted)
        buffer[start : start + len(data)] = data
        return len(data)

    async def put_back(self, unread: bytes) -> None:
        """Hand ``unread`` (bytes read past what the caller wants) back: aiohttp's readers get
        them next, then the rest of the body. ``BodyGoesOn`` when more than ``rest_limit`` bytes
        of the body were still to come from the socket (they are dropped)."""
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.finish(unread, self._rest_limit)
        elif unread:
            with warnings.catch_warnings():  # deprecated for applications; aiohttp's reader uses it
                warnings.simplefilter("ignore", DeprecationWarning)
                self._content.unread_data(unread)

    async def close(self) -> None:
        """Done with the body. One still being read from the socket (an upload refused or
        failed half-way) is read on and dropped, for at most ``LINGER_SECONDS``, as aiohttp's
        lingering close does: a connection closed with bytes unread is reset, and the client,
        still sending, would lose its answer. Not when the read itself failed (a timeout, the
        client gone) or the handler is being cancelled: then the connection just closes after
        the answer."""
        socket, self._socket = self._socket, None
        if socket is None:
            return
        task = asyncio.current_task()
        if not socket.failed and not (task is not None and task.cancelling()):
            with contextlib.suppress(Exception):  # not read in time: given up below
                async with asyncio.timeout(LINGER_SECONDS):
                    await socket.drop_rest()
                return
        socket.abandon(ConnectionAbortedError("the request's body was not read to its end"))


class SocketBody:
    """The rest of a body read from a duplicate of the connection's socket descriptor, while the
    connection itself does not read; made by ``EnvelopeRequestHandler.socket_body``."""

    __slots__ = ("_content", "_error", "_fd", "_handler", "_loop", "_remaining", "_waiter")

    def __init__(self, handler: SocketOwner, content: Any, fileno: int, remaining: int) -> None:
        self._handler: SocketOwner | None = handler
        self._content = content
        self._loop = asyncio.get_running_loop()
        self._fd = os.dup(fileno)
        os.set_inheritable(self._fd, False)
        self._remaining = remaining
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None

    async def fill(self, buffer: Any, start: int, end: int) -> int:
        want = min(end - start, self._remaining)
        if want <= 0:
            return 0
        got = 0
        view = memoryview(buffer)[start : start + want]
        try:
            while got < want:
                if self._error is not None:
                    raise self._error
                try:
                    count = os.readv(self._fd, [view[got:]])
                except BlockingIOError:
                    if got:  # what was there: the caller hashes and writes it meanwhile
                        break
                    await self._readable()
                    continue
                except OSError as error:
                    failed = ConnectionResetError(f"reading the body failed: {error}")
                    raise self.fail(failed) from None
                if not count:
                    raise self.fail(ConnectionResetError("the client ended the body early"))
                got += count
        finally:
            view.release()  # else a traceback holding it would keep the buffer from closing
        self._remaining -= got
        if self._handler is not None:
            self._handler.body_bytes_arrived(got)
        return got

    async def _readable(self) -> None:
        """Wait until the socket has bytes (or the body failed)."""
        loop, fd = self._loop, self._fd
        self._waiter = waiter = loop.create_future()
        loop.add_reader(fd, self._wake)
        try:
            await waiter
        finally:
            self._waiter = None
            if self._fd == fd:  # else released meanwhile, the reader with it
                loop.remove_reader(fd)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, error: BaseException) -> BaseException:
        """Make every read from now on raise ``error`` (a timeout, the connection lost); wake
        a read waiting for bytes. Returns ``error``."""
        if self._error is None:
            self._error = error
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(self._error)
        return self._error

    @property
    def remaining(self) -> int:
        return self._remaining

    @property
    def failed(self) -> bool:
        """Whether reading failed (a timeout, the connection lost): nothing more can be read."""
        return self._error is not None

    async def finish(self, unread: bytes, rest_limit: int) -> None:
        """``unread`` and the rest of the body into the stream, the stream ended, and the
        connection back to aiohttp's reading. When more than ``rest_limit`` bytes were left,
        they are read and dropped instead (the connection stays usable, the client reads its
        answer), and ``BodyGoesOn`` is raised."""
        if self._remaining > rest_limit:
            await self.drop_rest()
            raise BodyGoesOn()
        rest = bytearray(self._remaining)
        filled = 0
        try:
            while filled < len(rest):
                filled += await self.fill(rest, filled, len(rest))
        except BaseException as error:
            self.abandon(error)
            raise
        self._hand_back(unread + rest)

    async def drop_rest(self) -> None:
        """Read what is left of the body and drop it; then the stream ended, and the connection
        back to aiohttp's reading."""
        dropped = bytearray(_DROP_PIECE)
        try:
            while self._remaining:
                await self.fill(dropped, 0, len(dropped))
        except BaseException as error:
            self.abandon(error)
            raise
        self._hand_back(b"")

    def _hand_back(self, data: bytes | bytearray) -> None:
        self._release()
        content = self._content
        if data:
            content.feed_data(bytes(data))
        content.feed_eof()
        handler, self._handler = self._handler, None
        if handler is not None:
            handler.socket_body_read()

    def abandon(self, error: BaseException) -> None:
        """Stop reading from the socket: the stream fails with ``error``, and the connection
        closes once its answer is sent (the rest of the body was never read)."""
        self._release()
        if not self._content.is_eof() and self._content.exception() is None:
            self._content.set_exception(error)
        handler, self._handler = self._handler, None
        if handler is not None:
            handler.socket_body_abandoned()

    def _release(self) -> None:
        if self._fd >= 0:
            if self._waiter is not None:
                self._loop.remove_reader(self._fd)
            self.fail(ConnectionAbortedError("the body is no longer read from the socket"))
            os.close(self._fd)
            self._fd = -1
