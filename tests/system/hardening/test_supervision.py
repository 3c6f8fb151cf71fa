"""What ``serve`` owns, keeps running, and takes down with it: the embedded store and the workers.

- A ``users`` command started before ``serve`` owns a private store; ``serve`` waits for it to
  finish instead of attaching to a store about to be stopped, then owns its own. A ``users``
  command started while ``serve`` runs attaches, and never stops serve's store.
- The store dies with its owner, even on SIGKILL (``PR_SET_PDEATHSIG``); so do the workers.
- A worker or a store that dies while ``serve`` runs is started again (after a back-off), and
  ``/readyz`` is 503 until the store answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from service.store.embedded import socket_responds
from tests.support.clients import Recorder
from tests.support.paths import REPO_ROOT
from tests.support.processes import (
    PASSWORD,
    Server,
    create_user,
    env_for,
    parent_of,
    processes_mentioning,
    started,
    wait_for_workers,
)
from tests.support.redis import free_port

EMAIL = "owner@example.com"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def poll(check: Callable[[], bool], seconds: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def store_pid(parent: int, data: Path) -> int:
    """The store started by ``parent`` once it answers: the one process on the socket whose
    parent it is."""
    deadline = time.monotonic() + 15
    while True:
        pids = [
            pid
            for pid in processes_mentioning(str(data / "redis.sock"))
            if parent_of(pid) == parent
        ]
        if pids and socket_responds(data / "redis.sock"):
            assert len(pids) == 1, pids
            return pids[0]
        assert time.monotonic() < deadline, f"no store of {parent} answers"
        time.sleep(0.05)


def users_command(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """A ``users`` command left waiting at its password (so it holds the store it opened)."""
    return subprocess.Popen(
        [sys.executable, "-m", "service", "users", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def probes(server: Server) -> Recorder:
    """A client of the probes (``/healthz``, ``/readyz``), which are outside ``/api/v1``."""
    return Recorder(f"http://127.0.0.1:{server.port}")


async def login(rec: Recorder, email: str = EMAIL) -> int | None:
    body = {"email": email, "password": PASSWORD}
    return (await rec.send("login", "POST", "/auth/login", json=body)).status


async def test_a_users_command_started_before_serve_does_not_take_the_store_from_under_it(
    tmp_path: Path, data_dir: Path
) -> None:
    """The finding: ``users create`` started first owned the store, serve attached, and when the
    command exited it stopped the store: 503 from then on. Now serve waits for the command, then
    owns its own store; a command run while serve runs attaches and leaves it running."""
    port = free_port()
    env = env_for(None, port, FILEHOST_DATA_DIR=str(data_dir))
    cli = users_command(env, "create", "--email", EMAIL, "--password-stdin")
    server = None
    try:
        cli_store = store_pid(cli.pid, data_dir)  # the command's private store is up
        server = Server(env, port, tmp_path)
        assert poll(lambda: "waiting for the users command" in server.stderr(), 15), server.stderr()
        assert parent_of(cli_store) == cli.pid, "serve took the command's store"
        _out, err = cli.communicate(PASSWORD + "\n", timeout=30)
        assert cli.returncode == 0, err
        started(server, 1)
        serve_store = store_pid(server.process.pid, data_dir)
        assert serve_store != cli_store
        async with Recorder(server.base) as rec, probes(server) as probe:
            assert await login(rec) == 200
            create_user(env, "later@example.com")  # attaches to serve's store, then exits
            assert alive(serve_store), "the users command stopped serve's store"
            assert (await probe.send("ready", "GET", "/readyz")).status == 200
            assert await login(rec) == 200
            assert await login(rec, "later@example.com") == 200
        assert server.stop() == 0, server.stderr()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cli.pid, signal.SIGKILL)
        if server is not None:
            server.stop()
    assert not alive(serve_store)
    assert processes_mentioning(str(data_dir / "redis.sock")) == []


def test_a_second_serve_on_the_same_data_dir_is_refused(tmp_path: Path, data_dir: Path) -> None:
    port = free_port()
    env = env_for(None, port, FILEHOST_DATA_DIR=str(data_dir))
    server = Server(env, port, tmp_path)
    try:
        started(server, 1)
        second = subprocess.run(
            [sys.executable, "-m", "service", "serve"],
            cwd=REPO_ROOT,
            env=env_for(None, free_port(), FILEHOST_DATA_DIR=str(data_dir)),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert second.returncode == 1
        assert f"owned by another serve (pid {server.process.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        assert socket_responds(data_dir / "redis.sock")
        assert server.stop() == 0
    finally:
        server.stop()


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_of_serve_takes_its_store_and_workers_down(
    tmp_path: Path, data_dir: Path, workers: int
) -> None:
    port = free_port()
    env = env_for(None, port, FILEHOST_DATA_DIR=str(data_dir))
    server = Server(env, port, tmp_path, "--workers", str(workers))
    try:
        listening = started(server, workers)
        store = store_pid(server.process.pid, data_dir)
        server.process.kill()
        server.process.wait(10)
        store_gone = poll(lambda: not alive(store), 10)
        workers_gone = poll(lambda: not any(alive(pid) for pid in listening), 30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.process.pid, signal.SIGKILL)
    assert store_gone, "the embedded store outlived serve"
    assert workers_gone, "a worker outlived serve"
    assert not socket_responds(data_dir / "redis.sock")
    # The store was stopped, not killed: it flushed and said so.
    assert "ready to exit" in (data_dir / "redis.log").read_text()

    # A new serve starts its own store on the same data, straight away.
    port = free_port()
    server = Server(env_for(None, port, FILEHOST_DATA_DIR=str(data_dir)), port, tmp_path)
    try:
        started(server, 1)
        assert store_pid(server.process.pid, data_dir) != store
        assert server.stop() == 0
    finally:
        server.stop()


def test_sigkill_of_a_users_command_takes_its_private_store_down(data_dir: Path) -> None:
    env = env_for(None, free_port(), FILEHOST_DATA_DIR=str(data_dir))
    cli = users_command(env, "create", "--email", EMAIL, "--password-stdin")
    try:
        store = store_pid(cli.pid, data_dir)
        cli.kill()
        cli.wait(10)
        assert poll(lambda: not alive(store), 10), "the store outlived the users command"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cli.pid, signal.SIGKILL)
        cli.communicate(timeout=10)
    # The next command claims the store at once.
    listed = subprocess.run(
        [sys.executable, "-m", "service", "users", "list"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr


async def test_a_killed_worker_is_started_again_and_the_port_keeps_answering(
    tmp_path: Path, redis_url: str
) -> None:
    port = free_port()
    env = env_for(redis_url, port)
    server = Server(env, port, tmp_path, "--workers", "2")
    try:
        first = started(server, 2)
        victim, other = first
        os.kill(victim, signal.SIGKILL)
        async with probes(server) as probe:
            # The other worker answers meanwhile.
            answers = [(await probe.send("p", "GET", "/healthz")).status for _ in range(20)]
            now = wait_for_workers(server, 2, timeout=15)
            assert victim not in now and other in now, (first, now)
            answers += [(await probe.send("p", "GET", "/healthz")).status for _ in range(20)]
        assert server.stop() == 0, server.stderr()
    finally:
        server.stop()
    assert answers == [200] * 40
    log = server.stderr()
    assert f"(pid {victim}) exited unexpectedly: -9; starting it again" in log, log
    assert "Traceback" not in log


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_killed_embedded_store_is_started_again(
    tmp_path: Path, data_dir: Path, workers: int
) -> None:
    port = free_port()
    env = env_for(None, port, FILEHOST_DATA_DIR=str(data_dir))
    create_user(env, EMAIL)
    server = Server(env, port, tmp_path, "--workers", str(workers))
    try:
        started(server, workers)
        store = store_pid(server.process.pid, data_dir)
        async with Recorder(server.base) as rec, probes(server) as probe:
            assert await login(rec) == 200
            os.kill(store, signal.SIGKILL)
            t_kill = time.monotonic()
            readiness = []
            while time.monotonic() - t_kill < 20:
                readiness.append((await probe.send("ready", "GET", "/readyz")).status)
                if readiness[-1] == 200 and 503 in readiness:
                    break
                await asyncio.sleep(0.05)
            back_after = time.monotonic() - t_kill
            assert await login(rec) == 200  # the data is there
        again = store_pid(server.process.pid, data_dir)
        assert server.stop() == 0, server.stderr()
    finally:
        server.stop()
    assert 503 in readiness and readiness[-1] == 200, readiness
    assert back_after < 10, back_after
    assert again != store
    assert not alive(again)
    log = server.stderr()
    assert "the embedded store exited (-9); restarting it in" in log, log
    assert "Traceback" not in log
