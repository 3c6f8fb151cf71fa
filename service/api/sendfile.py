"""A blob's bytes after a prepared answer's headers: with the kernel's ``sendfile``, straight from
the page cache to the socket, where the connection is a plain TCP socket, the blob a file and the
platform has the call; chunk by chunk through the response otherwise (TLS, another blob store).

aiohttp's own ``FileResponse`` calls ``loop.sendfile``, which uvloop (the workers' loop) does not
implement, so it would read and write in chunks too. Here ``sendfile`` runs in a thread (a file
not in the page cache is read from disk, never on the event loop), which also waits a moment
while the socket is full; past that, the event loop waits for the socket to take more. The calls
use duplicates of the socket's and the file's descriptors, which keep both open whatever the
transport and the blob do meanwhile, and are closed only once no thread uses them: bytes are
never read from, or sent to, a descriptor closed and reused for another file or connection.
Nothing else writes to the connection until the body is sent, as with any body a handler
writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor

from aiohttp import web

from service.domain.blobs import Blob

# The most one trip to a thread sends, and the longest it waits for a full socket: a reader as
# fast as the thread sends in one trip; threads are not held by clients that read slowly.
MAX_CALL = 64 * 1024 * 1024
TRIP_SECONDS = 0.05
THREADS = 8
_pool: ThreadPoolExecutor | None = None


def _threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="sendfile")
    return _pool


def _socket_fd(request: web.Request) -> int | None:
    """The connection's socket, when the body may be sent past the transport: plain TCP, and
    nothing of the answer still in the transport's buffer."""
    transport = request.transport
    if transport is None or transport.is_closing() or not hasattr(os, "sendfile"):
        return None
    if transport.get_extra_info("sslcontext") is not None:
        return None
    sock: socket.socket | None = transport.get_extra_info("socket")
    if sock is None or transport.get_write_buffer_size():
        return None
    return sock.fileno()


async def send_blob(
    request: web.Request, response: web.StreamResponse, blob: Blob, start: int, length: int
) -> None:
    """Send ``length`` bytes of ``blob`` from ``start`` as the body of ``response``, whose
    headers are sent, then end it."""
    file_fd = blob.fileno()
    socket_fd = _socket_fd(request) if file_fd is not None and length else None
    if socket_fd is None or file_fd is None:
        async for data in blob.chunks(start, length):
            await response.write(data)
    else:
        await _Sender(os.dup(socket_fd), os.dup(file_fd)).send(start, length)
    await response.write_eof()


class _Sender:
    def __init__(self, socket_fd: int, file_fd: int) -> None:
        self._socket_fd = socket_fd
        self._file_fd = file_fd
        self._in_flight: Future[tuple[int, bool]] | None = None

    async def send(self, offset: int, length: int) -> None:
        _cork(self._socket_fd, True)
        try:
            end = offset + length
            while offset < end:
                sent, full = await self._call(offset, min(end - offset, MAX_CALL))
                if not sent and not full:  # the file shrank under us: never pad, stop short
                    raise OSError("blob ended early")
                offset += sent
                if full:
                    await _writable(self._socket_fd)
        finally:
            _cork(self._socket_fd, False)  # sends the last partial segment now
            self._close()

    async def _call(self, offset: int, count: int) -> tuple[int, bool]:
        self._in_flight = _threads().submit(
            _send_some, self._socket_fd, self._file_fd, offset, count
        )
        try:
            return await asyncio.wrap_future(self._in_flight)
        except (BrokenPipeError, ConnectionResetError) as gone:
            raise ConnectionResetError("the client went away") from gone

    def _close(self) -> None:
        in_flight = self._in_flight
        if in_flight is not None and not in_flight.done():  # cancelled while a thread sends
            in_flight.add_done_callback(lambda _: self._close_both())
        else:
            self._close_both()

    def _close_both(self) -> None:
        os.close(self._socket_fd)
        os.close(self._file_fd)


def _cork(fd: int, on: bool) -> None:
    """Hold partial segments back while the body is sent, as nginx's ``tcp_nopush`` does: the
    workers' sockets have ``TCP_NODELAY``, which otherwise pushes out a short segment each time
    the socket takes a few more bytes (Linux; elsewhere nothing to do)."""
    if not hasattr(socket, "TCP_CORK"):
        return
    sock = socket.socket(fileno=fd)
    try:
        with contextlib.suppress(OSError):  # the client went away: nothing left to hold or push
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, int(on))
    finally:
        sock.detach()  # the descriptor stays ours, closed with the file's


def _send_some(socket_fd: int, file_fd: int, offset: int, count: int) -> tuple[int, bool]:
    """Send up to ``count`` bytes from ``offset``, waiting here while the socket is full for at
    most ``TRIP_SECONDS`` in all (a client that reads slowly is waited for on the event loop, not
    in a thread): how many were sent, and whether the socket is still full. 0 and False: the
    file ended."""
    deadline = time.monotonic() + TRIP_SECONDS
    poller = select.poll()
    poller.register(socket_fd, select.POLLOUT)
    sent = 0
    while sent < count:
        try:
            done = os.sendfile(socket_fd, file_fd, offset + sent, count - sent)
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                return sent, True
            continue
        if not done:
            break
        sent += done
    return sent, False


async def _writable(fd: int) -> None:
    """Until the socket ``fd`` takes more bytes."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        loop.remove_writer(fd)
