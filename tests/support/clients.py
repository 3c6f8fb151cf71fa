"""HTTP clients of a running ``serve`` process: one-shot requests for the steps of a story
(log in, create a key, wait for the workers), and a ``Recorder`` that keeps when each request
started and how it ended."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from tests.support.processes import PASSWORD, START_BOUND, Server


def fresh_session() -> aiohttp.ClientSession:
    """A client that opens a new connection for every request."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True),
        timeout=aiohttp.ClientTimeout(total=10),
    )


async def request(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    async with http.request(method, url, **kwargs) as response:
        return response.status, await response.json()


async def login(http: aiohttp.ClientSession, server: Server, email: str) -> str:
    status, body = await request(
        http, "POST", f"{server.base}/auth/login", json={"email": email, "password": PASSWORD}
    )
    assert status == 200, body
    return body["data"]["token"]


async def create_key(http: aiohttp.ClientSession, server: Server, token: str) -> dict[str, Any]:
    status, body = await request(
        http,
        "POST",
        f"{server.base}/keys",
        json={"name": "serve-test", "permissions": ["files.read"]},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert status == 201, body
    return body["data"]


async def wait_for_two_workers(http: aiohttp.ClientSession, server: Server) -> None:
    """Both workers have bound the port once unauthenticated probes are answered by two pids.

    Probes use /auth/session so they are not confused with the requests under test. A probe
    refused a connection is tried again while ``serve`` runs (its stderr says why, if it
    stopped): what it answers is the point, not that every probe connects."""
    deadline = time.monotonic() + START_BOUND
    while True:
        for _ in range(10):
            try:
                status, _body = await request(http, "GET", f"{server.base}/auth/session")
            except aiohttp.ClientConnectorError:
                exited = server.process.poll()
                assert exited is None, f"serve exited with {exited}: {server.stderr()}"
                assert time.monotonic() < deadline, f"serve stopped listening: {server.stderr()}"
                await asyncio.sleep(0.05)
                continue
            assert status == 401
        pids = {pid for pid, _m, path, _s in server.access_lines() if path.endswith("/session")}
        if len(pids) >= 2:
            return
        assert time.monotonic() < deadline, "the second worker never answered"


def request_pids(server: Server) -> dict[str, int]:
    """The pid of the worker that answered each request, by its ``X-Request-ID``, from the
    access lines the server wrote so far."""
    found = {}
    for line in server.stderr().splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if entry.get("logger") == "aiohttp.access" and entry.get("request_id"):
            found[entry["request_id"]] = entry["pid"]
    return found


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
