"""An auto-pipelining Redis connection for the one hot-path lookup per request.

redis-py's asyncio client spends most of a request's CPU in its own machinery (connection pool,
per-command parsing objects). Here all concurrent requests of a worker share one connection:
commands issued in the same event-loop turn are written in one ``write()``, and replies are parsed
by hiredis's C reader and handed back in order. Used only for the one lookup per request on the hot
path; everything else stays on redis-py.

Fails fast and closed: a lost connection fails every pending command with ``ConnectionError``, a
command unanswered for longer than the timeout aborts the connection (``TimeoutError`` for the
waiters), and the next command reconnects. Callers map these to 503. Never logs arguments: they
contain digests.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

import hiredis
from redis.connection import SSLConnection, UnixDomainSocketConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

ARG = None  # marks, in a CommandTemplate, an argument given to each ``pack``

# Error replies that mean the server is not (or no longer) a writable master.
_NOT_A_MASTER = ("READONLY", "MASTERDOWN")
_ASKING = b"*1\r\n$6\r\nASKING\r\n"


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


class CommandTemplate:
    """A command whose arguments are fixed except those marked ``ARG``.

    The fixed arguments are encoded once; ``pack`` encodes only the others, where
    ``hiredis.pack_command`` converts and measures every argument of every command."""

    __slots__ = ("_format", "arity")

    def __init__(self, *args: str | int | None) -> None:
        parts = [b"*%d\r\n" % len(args)]
        for arg in args:
            if arg is ARG:
                parts.append(b"$%d\r\n%s\r\n")
            else:
                data = arg.encode() if isinstance(arg, str) else b"%d" % arg
                parts.append(_bulk(data).replace(b"%", b"%%"))  # literal in the format
        self._format = b"".join(parts)
        self.arity = args.count(ARG)

    def pack(self, *values: bytes) -> bytes:
        """The command, with ``values`` in the ``ARG`` places in order."""
        if len(values) != self.arity:
            raise TypeError(f"this command takes {self.arity} values, not {len(values)}")
        lengths_and_values: list[int | bytes] = []
        for value in values:
            lengths_and_values += (len(value), value)
        return self._format % tuple(lengths_and_values)


class ScriptCall:
    """A Lua script's call as a template: ``EVALSHA`` and, for a server that lacks the script
    (first use, or after a restart), the same call as ``EVAL``."""

    __slots__ = ("by_sha", "by_source")

    def __init__(self, source: str, sha: str, numkeys: int, *args: str | int | None) -> None:
        self.by_sha = CommandTemplate("EVALSHA", sha, numkeys, *args)
        self.by_source = CommandTemplate("EVAL", source, numkeys, *args)


class _Protocol(asyncio.Protocol):
    def __init__(self, timeout: float, observe: Callable[[float], None] | None = None) -> None:
        self._observe = observe
        self._loop = asyncio.get_running_loop()
        self._reader = hiredis.Reader(replyError=ResponseError, encoding="utf-8")
        self._pending: deque[tuple[float, asyncio.Future[Any]]] = deque()
        self._outgoing: list[bytes] = []
        self._timeout = timeout
        self._transport: asyncio.Transport | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        # False from the moment the connection is closed, aborted or lost: a plain attribute,
        # read on every command, rather than asking the transport.
        self.usable = False
        self.closed = asyncio.Event()

    # -- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        self.usable = True
        self._watchdog = self._loop.call_later(self._timeout / 2, self._check_timeouts)

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        pending = self._pending
        observe = self._observe
        received = time.monotonic()  # one clock read for every reply this chunk completes
        while True:
            reply = reader.gets()
            if reply is False:
                return
            if not pending:  # a reply nobody asked for: the stream is out of step
                self._abort(RedisConnectionError("unexpected reply from Redis"))
                return
            sent, future = pending.popleft()
            if observe is not None:
                observe(received - sent)
            if isinstance(reply, ResponseError) and str(reply).startswith(_NOT_A_MASTER):
                # A master that became a replica (a failover): never read from it. Every command
                # on this connection fails, and the next one reconnects to the master.
                lost = RedisConnectionError("Redis is no longer the master")
                if not future.done():
                    future.set_exception(lost)
                self._abort(lost)
                return
            if future.done():
                continue
            if isinstance(reply, ResponseError):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def eof_received(self) -> None:
        self.usable = False  # the transport closes itself; connection_lost fails what is pending

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        self._fail_all(RedisConnectionError("connection to Redis lost"))
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._transport = None
        self.closed.set()

    # -- sending --------------------------------------------------------------------------------

    def send(self, packed: bytes) -> asyncio.Future[Any]:
        future = self._loop.create_future()
        if not self.usable:
            future.set_exception(RedisConnectionError("connection to Redis lost"))
            return future
        self._pending.append((time.monotonic(), future))
        if not self._outgoing:
            self._loop.call_soon(self._flush)
        self._outgoing.append(packed)
        return future

    def _flush(self) -> None:
        if self._outgoing and self.usable:
            try:
                # ``usable`` holds only while a transport is connected.
                self._transport.write(b"".join(self._outgoing))  # type: ignore[union-attr]
            except RuntimeError:  # uvloop, for a transport closed under us: fail what waits
                self._abort(RedisConnectionError("connection to Redis lost"))
        self._outgoing.clear()

    # -- failure --------------------------------------------------------------------------------

    def _check_timeouts(self) -> None:
        if self._pending and time.monotonic() - self._pending[0][0] > self._timeout:
            self._abort(RedisTimeoutError("Redis did not answer in time"))
            return
        self._watchdog = self._loop.call_later(self._timeout / 2, self._check_timeouts)

    def _fail_all(self, error: Exception) -> None:
        while self._pending:
            _, future = self._pending.popleft()
            if not future.done():
                future.set_exception(error)

    def _abort(self, error: Exception) -> None:
        self.usable = False
        self._fail_all(error)
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        self.usable = False
        if self._transport is not None:
            self._transport.close()


class PipelinedRedis:
    """One auto-pipelined connection to the server named by a redis://, rediss:// or unix:// URL.

    ``observe``, when given, is called with each command's seconds from send to reply.
    ``locate``, when given, is asked for the server's (host, port) on every connection (Redis
    Sentinel's master); the URL then gives only the credentials, database and TLS. With
    ``require_master`` a connection is used only once the server says (``ROLE``) it is a master.
    """

    def __init__(
        self,
        url: str,
        timeout_seconds: float,
        observe: Callable[[float], None] | None = None,
        *,
        locate: Callable[[], Awaitable[tuple[str, int]]] | None = None,
        require_master: bool = False,
    ) -> None:
        self._options = parse_url(url)
        self._timeout = timeout_seconds
        self._observe = observe
        self._locate = locate
        self._require_master = require_master
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None

    async def execute(self, *args: str | bytes | int) -> Any:
        """Send one command and return its reply (strings decoded as UTF-8)."""
        return await self.execute_packed(hiredis.pack_command(args))

    def execute_packed(self, command: bytes) -> Awaitable[Any]:
        """Send one command already in the protocol's encoding (``CommandTemplate.pack``); await
        what this returns for the reply. While connected that is the reply's future itself: the
        hot path's await does not go through one more coroutine."""
        protocol = self._protocol
        if protocol is None or not protocol.usable:
            return self._connect_and_send(command)
        return protocol.send(command)

    async def _connect_and_send(self, command: bytes) -> Any:
        protocol = await self._connect()
        return await protocol.send(command)

    async def execute_asking(self, command: bytes) -> Any:
        """``ASKING`` then the command, together on the connection: a Redis Cluster node serves
        a key of a slot being migrated to it only to a client that says so first."""
        protocol = self._protocol
        if protocol is None or not protocol.usable:
            protocol = await self._connect()
        asking, reply = await asyncio.gather(
            protocol.send(_ASKING), protocol.send(command), return_exceptions=True
        )
        for outcome in (asking, reply):
            if isinstance(outcome, BaseException):
                raise outcome
        return reply

    async def run_script(self, call: ScriptCall, *values: bytes) -> Any:
        """Run a script by its SHA1, sending its source once if the server lacks it."""
        try:
            return await self.execute_packed(call.by_sha.pack(*values))
        except ResponseError as error:
            if not str(error).startswith("NOSCRIPT"):
                raise
        return await self.execute_packed(call.by_source.pack(*values))

    async def _connect(self) -> _Protocol:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._protocol is not None and self._protocol.usable:
                return self._protocol
            return await self._connect_now()

    async def _connect_now(self) -> _Protocol:
        # In a task of its own: the gateway lane drives its requests without a task
        # (service.api._aiohttp), and asyncio's timeouts need one (wait_for too, from Python
        # 3.12). A connection is made once per worker and after a failure, so the task costs the
        # hot path nothing.
        return await asyncio.ensure_future(self._open_within_timeout())

    async def _open_within_timeout(self) -> _Protocol:
        try:
            async with asyncio.timeout(self._timeout):
                protocol = await self._open()
        except (OSError, TimeoutError, RedisError) as error:
            raise RedisConnectionError(f"cannot connect to Redis: {type(error).__name__}") from None
        try:
            async with asyncio.timeout(self._timeout):
                await self._handshake(protocol)
        except BaseException as error:
            protocol.close()  # not yet ours to keep: a refused AUTH must not leak a socket
            if isinstance(error, TimeoutError):
                raise RedisConnectionError("cannot connect to Redis: TimeoutError") from None
            raise
        self._protocol = protocol
        return protocol

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        options = self._options
        cls = options.get("connection_class")

        def factory() -> _Protocol:
            return _Protocol(self._timeout, self._observe)

        if cls is UnixDomainSocketConnection:
            _, protocol = await loop.create_unix_connection(factory, options["path"])
        else:
            if self._locate is not None:
                host, port = await self._locate()
            else:
                host, port = options.get("host", "localhost"), options.get("port", 6379)
            context = ssl.create_default_context() if cls is SSLConnection else None
            _, protocol = await loop.create_connection(factory, host, port, ssl=context)
        return protocol

    async def _handshake(self, protocol: _Protocol) -> None:
        password = self._options.get("password")
        if password is not None:
            username = self._options.get("username")
            args = ("AUTH", username, password) if username else ("AUTH", password)
            await protocol.send(hiredis.pack_command(args))
        db = int(self._options.get("db") or 0)
        if db:
            await protocol.send(hiredis.pack_command(("SELECT", db)))
        if self._require_master:
            role = await protocol.send(hiredis.pack_command(("ROLE",)))
            if not role or role[0] != "master":  # a sentinel's stale answer: try again later
                raise RedisConnectionError("cannot connect to Redis: not the master")

    async def aclose(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            protocol.close()
            try:
                async with asyncio.timeout(self._timeout):
                    await protocol.closed.wait()
            except TimeoutError:
                pass  # shutting down anyway; never let a stuck socket block exit
