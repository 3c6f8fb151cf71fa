"""``python -m service serve`` as an operator runs it: real processes, real sockets, real signals.

Each test starts the server in a subprocess (in its own session, so a stuck server and its
workers can be cleaned up by process group), waits for the port by polling it, and stops it with
SIGTERM in ``finally``. Standard error goes to a file so the access log can be read afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from service.observability.log_lines import FLUSH_SECONDS
from service.store.embedded import socket_responds
from tests.conftest import free_port, processes_mentioning

REPO_ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "Serve-Test-Password-1"


def service_env(redis_url: str | None, port: int, **extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "REDIS_URL" and not name.startswith("FILEHOST_")
    }
    env["FILEHOST_BCRYPT_COST"] = "4"
    env["FILEHOST_PORT"] = str(port)
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
        if os.environ.get("FILEHOST_TEST_REDIS") == "cluster":  # pytest --redis cluster
            env["FILEHOST_REDIS_MODE"] = "cluster"
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=REPO_ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


class Server:
    """One ``serve`` process; ``stop()`` returns its exit code."""

    def __init__(self, env: dict[str, str], port: int, log_dir: Path, *args: str) -> None:
        self.port = port
        self.stdout_path = log_dir / f"serve-{port}.out"
        self.stderr_path = log_dir / f"serve-{port}.err"
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "service", "serve", *args],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"serve exited with {self.process.returncode}: {self.stderr()}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"serve did not listen in time: {self.stderr()}") from None
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
                raise AssertionError(f"serve did not exit on SIGTERM: {self.stderr()}") from None
        return self.process.returncode

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def access_lines(self) -> list[tuple[int, str, str, int]]:
        """(pid, method, path, status) of every access-log line so far. A worker writes its
        lines up to ``FLUSH_SECONDS`` late, so while serve runs this waits that long first."""
        if self.process.poll() is None:
            time.sleep(2 * FLUSH_SECONDS)
        lines = []
        for line in self.stderr().splitlines():
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:  # a line cut short by a concurrent read
                continue
            if entry.get("logger") == "aiohttp.access":
                lines.append((entry["pid"], entry["method"], entry["path"], entry["status"]))
        return lines


@contextlib.contextmanager
def running(env: dict[str, str], port: int, log_dir: Path, *args: str) -> Iterator[Server]:
    server = Server(env, port, log_dir, *args)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


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


async def revoke_key(http: aiohttp.ClientSession, server: Server, token: str, key_id: str) -> None:
    status, body = await request(
        http, "DELETE", f"{server.base}/keys/{key_id}", headers={"Authorization": f"Bearer {token}"}
    )
    assert status == 200, body


async def files_with_key(http: aiohttp.ClientSession, server: Server, key: str):  # type: ignore[no-untyped-def]
    return await request(http, "GET", f"{server.base}/files", headers={"X-API-Key": key})


def create_user(env: dict[str, str], email: str) -> None:
    result = run_cli(
        "users", "create", "--email", email, "--password-stdin", env=env, stdin=PASSWORD + "\n"
    )
    assert result.returncode == 0, result.stderr


async def wait_for_two_workers(http: aiohttp.ClientSession, server: Server) -> None:
    """Both workers have bound the port once unauthenticated probes are answered by two pids.

    Probes use /auth/session so they are not confused with the requests under test."""
    deadline = time.monotonic() + 15
    while True:
        for _ in range(10):
            status, _body = await request(http, "GET", f"{server.base}/auth/session")
            assert status == 401
        pids = {pid for pid, _m, path, _s in server.access_lines() if path.endswith("/session")}
        if len(pids) >= 2:
            return
        assert time.monotonic() < deadline, "the second worker never answered"


# -- tests ---------------------------------------------------------------------------------------


async def test_two_workers_both_refuse_a_revoked_key(redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = service_env(redis_url, port)

    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:
            await wait_for_two_workers(http, server)
            create_user(env, "Worker.Test@example.com")
            token = await login(http, server, "worker.test@example.com")
            key = await create_key(http, server, token)
            status, body = await files_with_key(http, server, key["secret_key"])
            assert status == 200, body

            await revoke_key(http, server, token, key["id"])
            results = [await files_with_key(http, server, key["secret_key"]) for _ in range(60)]

        assert server.stop() == 0
    stdout, stderr = server.stdout(), server.stderr()

    assert "2 worker(s)" in stdout
    assert [status for status, _ in results] == [401] * 60
    assert {body["error"]["code"] for _, body in results} == {"invalid_api_key"}
    refused = [
        pid
        for pid, method, path, status in server.access_lines()
        if (method, path, status) == ("GET", "/api/v1/files", 401)
    ]
    assert len(refused) == 60, stderr
    assert len(set(refused)) == 2, f"all 60 refusals came from {set(refused)}"
    assert server.process.pid not in refused  # the parent only supervises
    # The access log never carries a credential.
    assert key["secret_key"] not in stderr + stdout
    assert token not in stderr + stdout
    assert "Traceback" not in stderr


@pytest.fixture
def embedded_socket(tmp_path: Path) -> Iterator[Path]:
    """The embedded store's socket path; any store process left on it is stopped at teardown
    (only happens when serve had to be killed and could not stop the store itself)."""
    sock = tmp_path / "data" / "redis.sock"
    assert len(str(sock)) < 100, "tmp_path too long for a unix socket"
    yield sock
    for pid in processes_mentioning(str(sock)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


async def test_embedded_restart(tmp_path: Path, embedded_socket: Path) -> None:
    """The default store keeps users and keys across a restart and is stopped with serve."""
    sock = embedded_socket
    data_dir = sock.parent
    port = free_port()
    env = service_env(None, port, FILEHOST_DATA_DIR=str(data_dir))

    with running(env, port, tmp_path) as server:
        assert socket_responds(sock)
        create_user(env, "embedded@example.com")  # attaches to the running store
        assert socket_responds(sock), "the CLI stopped the store that serve owns"
        async with fresh_session() as http:
            token = await login(http, server, "embedded@example.com")
            kept = await create_key(http, server, token)
            revoked = await create_key(http, server, token)
            await revoke_key(http, server, token, revoked["id"])
            assert (await files_with_key(http, server, kept["secret_key"]))[0] == 200
            assert (await files_with_key(http, server, revoked["secret_key"]))[0] == 401
        assert server.stop() == 0
    assert "embedded store" in server.stdout()
    assert not socket_responds(sock)
    assert processes_mentioning(str(sock)) == []

    port = free_port()
    env = service_env(None, port, FILEHOST_DATA_DIR=str(data_dir))
    with running(env, port, tmp_path) as server:
        async with fresh_session() as http:
            token = await login(http, server, "EMBEDDED@example.com")
            status, body = await files_with_key(http, server, kept["secret_key"])
            assert status == 200, body
            status, body = await files_with_key(http, server, revoked["secret_key"])
            assert status == 401
            assert body["error"]["code"] == "invalid_api_key"
            status, body = await request(
                http, "GET", f"{server.base}/keys", headers={"Authorization": f"Bearer {token}"}
            )
            assert status == 200
            assert [k["id"] for k in body["data"]["keys"]] == [kept["id"]]
        assert server.stop() == 0
    assert not socket_responds(sock)
    assert processes_mentioning(str(sock)) == []


@pytest.mark.parametrize(
    ("extra_env", "args", "named"),
    [
        ({"FILEHOST_WORKERS": "0"}, (), "FILEHOST_WORKERS"),
        ({"FILEHOST_WORKERS": "many"}, (), "FILEHOST_WORKERS"),
        ({"FILEHOST_PORT": "70000"}, (), "FILEHOST_PORT"),
        ({"FILEHOST_LOG_LEVEL": "loud"}, (), "FILEHOST_LOG_LEVEL"),
        ({}, ("--workers", "0"), "--workers"),
        ({}, ("--workers", "2", "--port", "0"), "port"),
    ],
)
def test_serve_with_a_bad_setting_exits_2(
    redis_url: str, extra_env: dict[str, str], args: tuple[str, ...], named: str
) -> None:
    env = service_env(redis_url, free_port(), **extra_env)

    result = subprocess.run(
        [sys.executable, "-m", "service", "serve", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr
    assert "serving" not in result.stdout


async def test_banner_hides_the_redis_password(redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    secret = "Banner-Secret-Pw-5"
    url = redis_url.replace("redis://", f"redis://operator:{secret}@")
    env = service_env(url, port)

    with running(env, port, tmp_path) as server:
        assert server.stop() == 0

    assert f"http://127.0.0.1:{port}/api/v1" in server.stdout()
    assert secret not in server.stdout() + server.stderr()
    assert "operator" not in server.stdout() + server.stderr()
