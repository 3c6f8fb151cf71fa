"""Helpers of the hardening tests: real ``serve`` processes and Redis servers, found and signalled
by pid, and a client that records when each request started and how it ended.

Nothing here reads the log format: logs are searched as plain text (a worker's pid and a path or
status on the same line), so the access log can change shape without breaking these tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import redis as redis_sync

from tests.conftest import RedisServer, free_port, processes_mentioning
from tests.test_serve import PASSWORD, Server, run_cli, service_env

__all__ = [
    "PASSWORD",
    "Outcome",
    "Recorder",
    "RedisServer",
    "Server",
    "aof_redis",
    "bearer",
    "create_user",
    "env_for",
    "free_port",
    "line_mentions",
    "parent_of",
    "processes_mentioning",
    "run_cli",
    "started",
    "wait_for_workers",
    "worker_pids",
]

# Request-rate limits are a separate concern: these tests send many requests with one credential.
NO_RATE_LIMIT = {"FILEHOST_RATE_LIMIT_PER_SECOND": "0"}


def env_for(redis_url: str | None, port: int, **extra: str) -> dict[str, str]:
    """The environment of a ``serve`` or CLI process under test (bcrypt cost 4, no rate limit)."""
    return service_env(redis_url, port, **{**NO_RATE_LIMIT, **extra})


def aof_redis(data_dir: Path) -> RedisServer:
    """A Redis server of the test's own, configured like docker-compose's: AOF fsynced always."""
    data_dir.mkdir(parents=True, exist_ok=True)
    server = RedisServer(
        free_port(), data_dir, ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    )
    server.start()
    return server


def create_user(env: dict[str, str], email: str, password: str = PASSWORD) -> None:
    result = run_cli(
        "users", "create", "--email", email, "--password-stdin", env=env, stdin=password + "\n"
    )
    assert result.returncode == 0, result.stderr


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- processes --------------------------------------------------------------------------------


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (2nd field) is in parentheses and may hold spaces; ppid follows it.
    return int(stat.rsplit(")", 1)[1].split()[1])


def _children(pid: int) -> list[int]:
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in raw.split()]


def worker_pids(server_pid: int) -> list[int]:
    """The worker processes of a ``serve`` process (multiprocessing spawn children)."""
    found = []
    for child in _children(server_pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.append(child)
    return found


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(inode)
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    return inodes


def wait_for_workers(server: Server, count: int, timeout: float = 20.0) -> list[int]:
    """Wait until ``count`` workers each hold a listening socket on the port; their pids."""
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise AssertionError(f"serve exited with {server.process.returncode}")
        pids = worker_pids(server.process.pid) if count > 1 else [server.process.pid]
        listening = _listening_inodes(server.port)
        ready = [pid for pid in pids if _socket_inodes(pid) & listening]
        if len(ready) >= count:
            return ready
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(ready)} of {count} workers listen: {server.stderr()}")
        time.sleep(0.05)


def started(server: Server, workers: int) -> list[int]:
    server.wait_ready()
    return wait_for_workers(server, workers)


def line_mentions(text: str, pid: int, *words: str) -> int:
    """How many lines of ``text`` name ``pid`` and hold every word; a word of digits (a pid, a
    status) counts only as a number of its own, not inside a longer number or a hex id."""
    patterns = [
        re.compile(rf"(?<![\w.]){re.escape(w)}(?![\w.])")
        if w.isdigit()
        else re.compile(re.escape(w))
        for w in (str(pid), *words)
    ]
    return sum(1 for line in text.splitlines() if all(p.search(line) for p in patterns))


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


# -- a client that records ------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str
    start: float
    end: float
    status: int | None  # None: no HTTP answer (connection error or client timeout)
    code: str | None = None
    error: str | None = None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def json(self) -> Any:
        return orjson.loads(self.body)


class Recorder:
    """Sends requests and keeps an Outcome of each; ``start`` is taken before the request is sent
    and ``end`` after its answer arrived, so [start, end] covers the request's whole life."""

    def __init__(self, base: str, timeout: float = 8.0, force_close: bool = True) -> None:
        self.base = base
        self.timeout = timeout
        self.outcomes: list[Outcome] = []
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(force_close=force_close, limit=0),
            timeout=aiohttp.ClientTimeout(total=timeout),
        )

    async def __aenter__(self) -> Recorder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.close()

    async def send(self, kind: str, method: str, path: str, **kwargs: Any) -> Outcome:
        start = time.monotonic()
        try:
            async with self._http.request(method, self.base + path, **kwargs) as response:
                body = await response.read()
                end = time.monotonic()
                code = None
                if response.content_type == "application/json" and body:
                    with contextlib.suppress(orjson.JSONDecodeError):
                        error = orjson.loads(body).get("error")
                        code = error.get("code") if isinstance(error, dict) else None
                outcome = Outcome(
                    kind,
                    start,
                    end,
                    response.status,
                    code,
                    body=body,
                    headers=dict(response.headers),
                )
        except (aiohttp.ClientError, TimeoutError) as error:
            outcome = Outcome(kind, start, time.monotonic(), None, error=type(error).__name__)
        self.outcomes.append(outcome)
        return outcome

    async def loop(
        self,
        plans: list[tuple[str, str, str, dict[str, Any]]],
        clients: int,
        stop: asyncio.Event,
        pause: float = 0.0,
        limit: int = 100_000,
    ) -> None:
        """``clients`` concurrent clients cycling through ``plans`` until ``stop`` is set or
        ``limit`` requests were sent, each pausing ``pause`` seconds between requests."""
        sent = 0

        async def client(offset: int) -> None:
            nonlocal sent
            n = offset
            while not stop.is_set() and sent < limit:
                sent += 1
                kind, method, path, kwargs = plans[n % len(plans)]
                n += 1
                await self.send(kind, method, path, **kwargs)
                if pause:
                    await asyncio.sleep(pause)

        await asyncio.gather(*(client(n) for n in range(clients)))
