"""Graceful shutdown of ``serve``: requests in flight finish, new connections are refused, Redis
connections are closed, the embedded store is stopped with its data on disk, and every process
exits 0, the workers before the parent.

A login against a user whose password hash has bcrypt cost 13 takes over half a second, which makes
a request that is reliably in flight when the signal arrives. The signal comes the way operators
send it: SIGTERM to the parent only (``docker stop``, ``kill``), or SIGINT to the whole process
group (Ctrl-C in a terminal; systemd's default also signals every process), where each worker
gets the signal twice, directly and forwarded by the parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import socket
import time
from pathlib import Path

import orjson
import pytest
import redis as redis_sync

from service.domain.credentials import generate_session_token
from service.store.keys import RedisKeys
from tests.support.api import bearer
from tests.support.clients import Outcome, Recorder
from tests.support.processes import (
    PASSWORD,
    Server,
    create_user,
    env_for,
    line_mentions,
    processes_mentioning,
    started,
)
from tests.support.redis import aof_redis, client_count, free_port, stopped_at_exit

EMAIL = "slow@example.com"
SLOW_COST = "13"  # about 0.6 s per check, more under load
# Deadlines for what must happen, generous because they cost nothing unless it never happens: a
# busy machine (a load of 13 on 2 cores) makes four cost-13 logins take over 10 s, past the
# grace period's default and the client's 8 s, and serve's signal handling take seconds.
EXIT_BOUND = 60.0
REFUSED_BOUND = 30.0
LOGIN_BOUND = 60.0
# Long enough for the logins in flight to finish on a busy machine: what is checked is that
# they finish, not how long the default grace period is.
GRACE = "60"


def refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return False
    except (ConnectionRefusedError, ConnectionResetError):  # reset: queued as a listener closed
        return True


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def deliver(server: Server, how: str) -> None:
    if how == "SIGTERM to serve":
        server.process.send_signal(signal.SIGTERM)
    else:
        os.killpg(server.process.pid, signal.SIGINT)


async def slow_logins(rec: Recorder, count: int, store_url: str) -> list[asyncio.Task[Outcome]]:
    """``count`` logins, started now and left running once each has read its user from the store
    at ``store_url`` (what it does just before hashing the password)."""
    body = {"email": EMAIL, "password": PASSWORD}
    with redis_sync.Redis.from_url(store_url) as store:
        store.config_resetstat()
        tasks = [
            asyncio.create_task(rec.send("login", "POST", "/auth/login", json=body))
            for _ in range(count)
        ]
        deadline = time.monotonic() + LOGIN_BOUND
        while user_reads(store) < count:
            assert not any(task.done() for task in tasks), [t.result() for t in tasks if t.done()]
            assert time.monotonic() < deadline, "the logins never reached the store"
            await asyncio.sleep(0.01)
    assert not any(task.done() for task in tasks), "the logins were not slow"
    return tasks


def user_reads(store: redis_sync.Redis) -> int:
    """Users read (HGETALL) since the statistics were reset: one per login before its hash."""
    return int(store.info("commandstats").get("cmdstat_hgetall", {}).get("calls", 0))


async def shut_down(server: Server, how: str, logins: list[asyncio.Task[Outcome]]) -> dict:
    """Signal ``serve`` while ``logins`` are in flight; what was observed on the way out."""
    deliver(server, how)
    t_signal = time.monotonic()
    while not refused(server.port):
        assert time.monotonic() - t_signal < REFUSED_BOUND, "still accepting after the signal"
        await asyncio.sleep(0.01)
    t_refused = time.monotonic()
    outcomes = await asyncio.gather(*logins)
    code = await asyncio.to_thread(server.process.wait, EXIT_BOUND)
    return {
        "code": code,
        "logins": outcomes,
        "refused_after": t_refused - t_signal,
        "refused_before_logins_ended": t_refused < min(o.end for o in outcomes),
        "exited_after": time.monotonic() - t_signal,
    }


@pytest.fixture
def slow_user_env():  # type: ignore[no-untyped-def]
    """Creates the slow user on a store and returns the service environment for it."""

    def make(redis_url: str | None, port: int, cost: str = SLOW_COST, **extra: str) -> dict:
        create_user(env_for(redis_url, port, FILEHOST_BCRYPT_COST=cost, **extra), EMAIL)
        return env_for(redis_url, port, **extra)

    return make


@pytest.mark.parametrize("how", ["SIGTERM to serve", "SIGINT to the process group"])
async def test_in_flight_requests_finish_and_every_process_exits_0(
    tmp_path: Path, how: str, slow_user_env
) -> None:
    """Four logins in flight across two workers when the signal comes: new connections are
    refused at once, the four finish with 200 and their sessions stored, the workers exit 0 and
    before the parent, which exits 0, and the Redis server is left with no connection."""
    port = free_port()
    with stopped_at_exit(aof_redis(tmp_path / "redis")) as redis:
        env = slow_user_env(redis.url, port, FILEHOST_SHUTDOWN_GRACE_SECONDS=GRACE)
        server = Server(env, port, tmp_path, "--workers", "2")
        try:
            workers = started(server, 2)
            async with (
                Recorder(server.base, timeout=LOGIN_BOUND) as rec,
                Recorder(server.base, force_close=False) as idle,
            ):
                # Every worker opens its Redis connections (an unknown session is looked up);
                # one client keeps an idle keep-alive connection, which must not hold shutdown up.
                unknown = bearer(generate_session_token())
                for _ in range(20):
                    assert (await rec.send("warm", "GET", "/files", headers=unknown)).status == 401
                assert (await idle.send("idle", "GET", "/files")).status == 401
                logins = await slow_logins(rec, 4, redis.url)
                connected = client_count(redis.url)
                seen = await shut_down(server, how, logins)
                still_alive = [pid for pid in workers if alive(pid)]
                late = await rec.send("late", "GET", "/files")
        finally:
            server.stop()
        after = _poll(lambda: client_count(redis.url), 0, 30.0)
        sessions = stored_sessions(redis.url, seen["logins"])

    log = server.stdout() + server.stderr()
    print(f"{how}: {_figures(seen)}, redis clients {connected} -> {after}")
    assert [o.status for o in seen["logins"]] == [200] * 4, [o.error for o in seen["logins"]]
    assert sessions == [True] * 4, "an in-flight login answered before its session was stored"
    assert seen["refused_before_logins_ended"], "new connections were taken during shutdown"
    assert (late.status, late.error) == (None, "ClientConnectorError"), late
    assert seen["code"] == 0, log
    assert still_alive == [], "serve exited before its workers"
    for pid in workers:  # the parent names each worker's exit status
        assert line_mentions(log, pid, "exited with 0"), f"worker {pid}: {log}"
    assert connected >= 2 and after == 0, (connected, after)
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log


def stored_sessions(redis_url: str, logins: list[Outcome]) -> list[bool]:
    """For each login answered 200: is its session in the store?"""
    store = redis_sync.Redis.from_url(redis_url, decode_responses=True)
    names = RedisKeys("fh")
    try:
        return [
            bool(store.exists(names.session_entry(hashlib.sha256(token.encode()).hexdigest())))
            for token in (o.json()["data"]["token"] for o in logins if o.ok)
        ]
    finally:
        store.close()


def _figures(seen: dict) -> dict:
    logins = [(o.status or o.error, round(o.end - o.start, 2)) for o in seen["logins"]]
    return {**seen, "logins": logins}


def _poll(read, want, seconds: float = 3.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while (value := read()) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


async def test_shutdown_cuts_requests_that_outlast_the_grace_period(
    tmp_path: Path, slow_user_env
) -> None:
    port = free_port()
    with stopped_at_exit(aof_redis(tmp_path / "redis")) as redis:
        # A login takes 1.3 s or more at cost 14; the grace period is 0.1 s.
        env = slow_user_env(redis.url, port, "14", FILEHOST_SHUTDOWN_GRACE_SECONDS="0.1")
        server = Server(env, port, tmp_path, "--workers", "2")
        try:
            started(server, 2)
            async with Recorder(server.base, timeout=LOGIN_BOUND) as rec:
                logins = await slow_logins(rec, 2, redis.url)
                seen = await shut_down(server, "SIGTERM to serve", logins)
        finally:
            server.stop()
    print(f"grace 0.1 s: {_figures(seen)}")
    # Cut after the grace period (aiohttp waits for it twice: for the handler, then for it to
    # take its cancellation): the client sees the connection closed, never a half answer.
    assert [(o.status, o.error) for o in seen["logins"]] == [(None, "ServerDisconnectedError")] * 2
    assert all(o.end - o.start < 1.0 for o in seen["logins"]), "waited past the grace period"
    assert seen["code"] == 0, server.stderr()
    # No answer, so no access line: each cut request's trace is one warning.
    entries = [orjson.loads(line) for line in server.stderr().splitlines()]
    cut = [entry for entry in entries if entry["msg"].startswith("cut off by the stop")]
    assert [entry["level"] for entry in cut] == ["WARNING"] * 2, server.stderr()
    assert all(entry["msg"].endswith("POST /api/v1/auth/login") for entry in cut)
    assert len({entry["request_id"] for entry in cut}) == 2


async def test_embedded_store_is_stopped_cleanly_with_in_flight_writes_on_disk(
    tmp_path: Path, slow_user_env
) -> None:
    """The default set-up (``scripts/run``): one worker, in the serve process, on the embedded
    store. The store is stopped after the requests in flight finished, with their writes."""
    workers = 1
    data = tmp_path / "data"
    sock = data / "redis.sock"
    assert len(str(sock)) < 100
    port = free_port()
    # The CLI starts and stops the embedded store.
    env = slow_user_env(
        None, port, FILEHOST_DATA_DIR=str(data), FILEHOST_SHUTDOWN_GRACE_SECONDS=GRACE
    )
    logged_before = len((data / "redis.log").read_text())
    server = Server(env, port, tmp_path, "--workers", str(workers))
    try:
        started(server, workers)
        async with Recorder(server.base, timeout=LOGIN_BOUND) as rec:
            logins = await slow_logins(rec, 2, f"unix://{sock}")
            seen = await shut_down(server, "SIGTERM to serve", logins)
    finally:
        server.stop()
        leftover = processes_mentioning(str(sock))
        for pid in leftover:
            os.kill(pid, signal.SIGKILL)
    assert leftover == [], "the embedded store outlived serve"
    assert [o.status for o in seen["logins"]] == [200, 200]
    assert seen["code"] == 0, server.stderr()
    store_log = (data / "redis.log").read_text()[logged_before:]  # what serve's store logged
    assert "ready to exit" in store_log, store_log  # a clean SHUTDOWN: the AOF flushed and fsynced

    # The sessions of the logins that were in flight are there after a restart.
    port = free_port()
    server = Server(env_for(None, port, FILEHOST_DATA_DIR=str(data)), port, tmp_path)
    try:
        started(server, 1)
        async with Recorder(server.base) as rec:
            for login in seen["logins"]:
                token = login.json()["data"]["token"]
                assert (
                    await rec.send("files", "GET", "/files", headers=bearer(token))
                ).status == 200
        assert server.stop() == 0
    finally:
        server.stop()


async def test_a_stuck_worker_is_killed_and_serve_still_exits(tmp_path: Path) -> None:
    """A worker that cannot stop (here: SIGSTOPped) is killed by the parent once the grace period
    and its margin are over: serve exits, non-zero, naming it; the other worker exits 0."""
    port = free_port()
    with stopped_at_exit(aof_redis(tmp_path / "redis")) as redis:
        env = env_for(redis.url, port, FILEHOST_SHUTDOWN_GRACE_SECONDS="0.1")
        server = Server(env, port, tmp_path, "--workers", "2")
        try:
            stuck, healthy = started(server, 2)
            os.kill(stuck, signal.SIGSTOP)
            t_signal = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(server.process.wait, 30)
            took = time.monotonic() - t_signal
            leftover = alive(stuck)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stuck, signal.SIGKILL)
            server.stop()
    log = server.stderr()
    print(f"stuck worker: serve exited with {code} after {took:.1f}s")
    assert code == 1, log
    assert 10.0 <= took < 20.0, took  # twice the grace period (0.1 s) plus the 10 s margin
    assert not leftover, "the stuck worker outlived serve"
    assert line_mentions(log, stuck, "did not stop in time")
    assert line_mentions(log, healthy, "exited with 0")


# serve with one worker whose stop never ends: a step of the app's cleanup that waits forever,
# after the yield of a cleanup context (as the service's own are: an await inside an async
# generator, which a task's chain of awaits does not name by itself).
STOP_HANGS = """
import asyncio
import sys

import service.server
from service.cli import AS_MODULE, main

make_app = service.server.create_app


def app_whose_cleanup_hangs(settings):
    app = make_app(settings)

    async def cleanup_that_never_ends(_app):
        yield
        await asyncio.Event().wait()

    app.cleanup_ctx.append(cleanup_that_never_ends)
    return app


service.server.create_app = app_whose_cleanup_hangs
sys.exit(main(prog=AS_MODULE))
"""


async def test_a_stop_that_hangs_logs_where_and_ends_at_the_deadline(tmp_path: Path) -> None:
    """With one worker nothing else would end serve: once a stop has taken twice the grace period
    and the margin serve gives its workers, it logs the stacks of its threads and tasks, naming
    what it waits for, and exits 1."""
    port = free_port()
    launcher = tmp_path / "serve_whose_stop_hangs.py"
    launcher.write_text(STOP_HANGS)
    with stopped_at_exit(aof_redis(tmp_path / "redis")) as redis:
        env = env_for(redis.url, port, FILEHOST_SHUTDOWN_GRACE_SECONDS="0.1")
        server = Server(env, port, tmp_path, launcher=launcher)
        try:
            server.wait_ready()
            t_signal = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(server.process.wait, 30)
            took = time.monotonic() - t_signal
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()
    log = server.stderr()
    entries = [orjson.loads(line) for line in log.splitlines()]
    print(f"a stop that hangs: serve exited with {code} after {took:.1f}s")
    assert code == 1, log
    assert 10.0 <= took < 20.0, took  # twice the grace period (0.1 s) plus the 10 s margin
    messages = [entry["msg"] for entry in entries]
    assert "SIGTERM: stopping; requests in flight get 0.1s to finish" in messages, messages
    stuck = entries[-1]
    assert stuck["level"] == "ERROR", stuck
    assert stuck["msg"].startswith("did not stop within 10.2s of SIGTERM: exiting"), stuck
    assert "MainThread" in stuck["stacks"], stuck
    assert any(
        "cleanup_that_never_ends" in stack and "await asyncio.Event().wait()" in stack
        for stack in stuck["tasks"].values()
    ), stuck["tasks"]
    assert not any(message.startswith("stopped (") for message in messages), messages
