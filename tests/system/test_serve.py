"""``python -m service serve`` as an operator runs it: real processes, real sockets, real signals.

Each test starts the server in a subprocess (``tests.support.processes.Server``: in its own
session, so a stuck server and its workers can be cleaned up by process group), waits for the port
by polling it, and stops it with SIGTERM in ``finally``. Standard error goes to a file so the
access log can be read afterwards.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from service.server import _WORKER_CANNOT_LISTEN, CANNOT_START
from service.store.embedded import socket_responds
from tests.support.clients import (
    create_key,
    fresh_session,
    login,
    request,
    wait_for_two_workers,
)
from tests.support.paths import REPO_ROOT
from tests.support.processes import (
    Server,
    create_user,
    processes_mentioning,
    running,
    serve_once,
    service_env,
)
from tests.support.redis import free_port


async def revoke_key(http: aiohttp.ClientSession, server: Server, token: str, key_id: str) -> None:
    status, body = await request(
        http, "DELETE", f"{server.base}/keys/{key_id}", headers={"Authorization": f"Bearer {token}"}
    )
    assert status == 200, body


async def files_with_key(http: aiohttp.ClientSession, server: Server, key: str):  # type: ignore[no-untyped-def]
    return await request(http, "GET", f"{server.base}/files", headers={"X-API-Key": key})


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

    assert server.banner()["workers"] == 2
    assert stdout == ""
    assert [status for status, _ in results] == [401] * 60
    assert {body["error"]["code"] for _, body in results} == {"api_key_revoked"}
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
    assert f"embedded store in {data_dir}" in server.banner()["store"]
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
            assert body["error"]["code"] == "api_key_revoked"  # why survives a restart too
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
        ({}, ("--port", "eighty"), "--port"),
        ({}, ("--bogus",), "bad usage: unrecognized arguments: --bogus"),
        ({}, ("extra",), "bad usage: unrecognized arguments: extra"),
        ({"REDIS_URL": "redis://:pw@127.0.0.1:notaport/0"}, (), "REDIS_URL"),
        ({"REDIS_URL": "redis://127.0.0.1:99999/0"}, (), "REDIS_URL"),
        ({"REDIS_URL": "redis://[::1"}, (), "REDIS_URL"),
        ({"REDIS_URL": "redis://"}, (), "REDIS_URL"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/abc"}, (), "REDIS_URL"),
        (
            {
                "FILEHOST_REDIS_MODE": "sentinel",
                "FILEHOST_SENTINEL_MASTER": "m",
                "FILEHOST_SENTINELS": "::1",
            },
            (),
            "FILEHOST_SENTINELS",
        ),
    ],
)
def test_serve_with_a_bad_setting_exits_2(
    redis_url: str, extra_env: dict[str, str], args: tuple[str, ...], named: str
) -> None:
    env = service_env(redis_url, free_port(), **extra_env)

    result = serve_once(env, *args)

    assert result.returncode == 2
    [refusal] = [orjson.loads(line) for line in result.stderr.splitlines()]
    assert refusal["level"] == "ERROR" and named in refusal["msg"]
    assert result.stdout == ""


def test_serve_in_sentinel_mode_with_an_ipv6_sentinel_starts_and_names_it(tmp_path: Path) -> None:
    port, sentinel = free_port(), free_port()
    env = service_env(
        None,
        port,
        FILEHOST_DATA_DIR=str(tmp_path / "data"),
        FILEHOST_REDIS_MODE="sentinel",
        FILEHOST_SENTINEL_MASTER="filehost",
        FILEHOST_SENTINELS=f"[::1]:{sentinel}",  # none there: requests are 503 until one is
    )

    with running(env, port, tmp_path) as server:
        assert server.stop() == 0

    assert server.banner()["store"] == f"the master filehost of the sentinels at [::1]:{sentinel}"


async def test_banner_names_the_public_url_and_hides_the_redis_password_and_the_stop_says_why(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    secret = "Banner-Secret-Pw-5"
    url = redis_url.replace("redis://", f"redis://operator:{secret}@")
    env = service_env(url, port, FILEHOST_PUBLIC_URL="https://files.example.com")

    with running(env, port, tmp_path) as server:
        assert server.stop() == 0

    # The address people use first; where it listens beside it, a loopback address as localhost.
    banner = server.banner()
    assert banner["api"] == "https://files.example.com/api/v1"
    assert banner["public_url"] == "https://files.example.com"
    assert banner["listening"] == f"localhost:{port}"
    assert banner["msg"].startswith(
        "serving the dashboard at https://files.example.com/ and the API at "
        f"https://files.example.com/api/v1 (listening on http://localhost:{port}/, 1 worker, "
    )
    assert secret not in server.stdout() + server.stderr()
    assert "operator" not in server.stdout() + server.stderr()
    assert "pure-Python HTTP parser" not in server.stderr()  # aiohttp's C parser is in use
    # A line says when it began to stop, and the last what stopped it and how long draining took.
    lines = [orjson.loads(line)["msg"] for line in server.stderr().splitlines()]
    assert "SIGTERM: stopping; requests in flight get 10s to finish" in lines, lines
    last = orjson.loads(server.stderr().splitlines()[-1])
    assert (last["cause"], last["level"]) == ("SIGTERM", "INFO")
    assert 0 <= last["drain_seconds"] < 10
    assert re.fullmatch(r"stopped \(SIGTERM\): draining took \d+\.\d\d s", last["msg"])


# -- what stops it from starting ------------------------------------------------------------------


@contextlib.contextmanager
def port_taken() -> Iterator[int]:
    """A loopback port another program listens on (a plain socket, no SO_REUSEPORT)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def only_line(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The one line serve wrote, a JSON object, when it would not start; nothing on stdout."""
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    entry = orjson.loads(line)
    assert entry["level"] == "ERROR", entry
    return entry


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("store", ["redis", "embedded"])
def test_a_busy_port_is_one_line_naming_it_and_how_to_choose_another(
    redis_url: str, tmp_path: Path, workers: str, store: str
) -> None:
    data_dir = tmp_path / "data"
    with port_taken() as port:
        env = service_env(
            redis_url if store == "redis" else None,
            port,
            FILEHOST_WORKERS=workers,
            FILEHOST_DATA_DIR=str(data_dir),
        )
        result = serve_once(env)

    assert result.returncode == CANNOT_START
    message = only_line(result)["msg"]
    assert f"127.0.0.1:{port}" in message and "already in use" in message
    assert "--port" in message and "FILEHOST_PORT" in message
    assert not (data_dir / "redis.sock").exists()  # nothing was started for nothing


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_data_directory_another_serve_holds_is_one_line_naming_it(
    tmp_path: Path, embedded_socket: Path, workers: str
) -> None:
    data_dir = embedded_socket.parent
    first = free_port()
    with running(service_env(None, first, FILEHOST_DATA_DIR=str(data_dir)), first, tmp_path):
        for _ in range(3):
            env = service_env(None, free_port(), FILEHOST_WORKERS=workers)
            result = serve_once({**env, "FILEHOST_DATA_DIR": str(data_dir)})
            # serve checks its port first; one free a moment ago may since be a connection's
            # own port (the ephemeral range the other tests' clients draw from): another one.
            if "already in use" not in result.stderr:
                break
        assert socket_responds(embedded_socket)  # the first serve's store, left alone

    assert result.returncode == CANNOT_START
    message = only_line(result)["msg"]
    assert str(data_dir) in message and "owned by another serve" in message
    assert "FILEHOST_DATA_DIR" in message


def test_a_data_directory_that_cannot_be_made_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    data_dir = tmp_path / "a-file" / "data"
    result = serve_once(service_env(None, free_port(), FILEHOST_DATA_DIR=str(data_dir)))

    assert result.returncode == CANNOT_START
    message = only_line(result)["msg"]
    assert str(data_dir) in message and "FILEHOST_DATA_DIR" in message


def test_aiohttp_on_its_python_parser_is_one_warning_at_start(
    redis_url: str, tmp_path: Path
) -> None:
    """``AIOHTTP_NO_EXTENSIONS`` puts aiohttp on its pure-Python HTTP parser, which answers what
    its C parser refuses, as the warning says (an HTTP/9.9 request here)."""
    port = free_port()
    env = service_env(redis_url, port, AIOHTTP_NO_EXTENSIONS="1")
    with running(env, port, tmp_path) as server:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n")
            head = client.recv(64)
        assert server.stop() == 0
    assert head.startswith(b"HTTP/9.9 200"), head
    warnings = [
        entry["msg"]
        for entry in map(orjson.loads, server.stderr().splitlines())
        if entry["level"] == "WARNING"
    ]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("aiohttp is running without its C extensions")
    assert "unset AIOHTTP_NO_EXTENSIONS" in warnings[0]


def test_an_aiohttp_without_the_names_the_protections_need_is_one_line_and_no_start(
    tmp_path: Path,
) -> None:
    # An aiohttp release without one of them, as far as the service can tell: the name is
    # taken away before the service is imported.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import aiohttp.web_protocol\ndel aiohttp.web_protocol._ErrInfo\n"
    )
    data_dir = tmp_path / "data"
    env = service_env(None, free_port(), FILEHOST_DATA_DIR=str(data_dir))
    result = serve_once({**env, "PYTHONPATH": str(site)})

    assert result.returncode == CANNOT_START
    message = only_line(result)["msg"]
    assert "aiohttp.web_protocol._ErrInfo" in message
    assert "credential" in message and "pip install 'aiohttp>=3.14.4,<3.15'" in message
    assert not data_dir.exists()  # nothing was started for nothing


def test_a_worker_that_cannot_bind_the_port_says_so_and_exits_for_serve_to_stop(
    redis_url: str,
) -> None:
    """The port taken after serve tried it, before a worker bound it: the worker's own line,
    and the exit status that makes serve stop instead of starting it again and again."""
    worker = (
        "import sys; from service.config import load_settings; "
        "from service.server import run_worker; sys.exit(run_worker(load_settings()))"
    )
    with port_taken() as port:
        result = subprocess.run(
            [sys.executable, "-c", worker],
            cwd=REPO_ROOT,
            env=service_env(redis_url, port),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    assert result.returncode == _WORKER_CANNOT_LISTEN
    message = only_line(result)["msg"]
    assert f"127.0.0.1:{port}" in message and "--port" in message
