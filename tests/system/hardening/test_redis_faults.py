"""Redis faults under live traffic, against ``serve`` with two workers.

- Redis paused (SIGSTOP) or killed while 20 clients keep requesting protected routes: every
  request is answered, within 2 s, and nothing is served while the store is gone (503
  ``store_unavailable``); when Redis is back the same processes serve again.
- Redis SIGKILLed during a burst of key creations, revocations, logins and logouts, restarted on
  its append-only file: whatever was acknowledged (2xx) survives, whatever was revoked or logged
  out stays refused.
- The same for the embedded default store: its valkey killed under ``serve``; restarting
  ``serve`` brings back every acknowledged write.

The in-process outage tests (tests/api/test_errors.py) and the hot-path connection's own tests
(tests/store/test_pipelined.py) cover one request at a time; these cover traffic in flight across
worker processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from service.domain.credentials import generate_api_key
from tests.support.api import bearer
from tests.support.clients import Outcome, Recorder
from tests.support.processes import (
    PASSWORD,
    Server,
    create_user,
    env_for,
    line_mentions,
    parent_of,
    processes_mentioning,
    started,
)
from tests.support.redis import aof_redis, free_port, stopped_at_exit

EMAIL = "faults@example.com"
# The bound for an answer while the store is gone. It holds with a Redis timeout of 0.5 s:
# a paused store is noticed after at most 1.5 x the timeout on the hot path and 2 x on redis-py's.
ANSWER_BOUND = 2.0
REDIS_TIMEOUT = "0.5"
RECOVERY_BOUND = 10.0


async def login(rec: Recorder, email: str = EMAIL) -> str:
    outcome = await rec.send(
        "login", "POST", "/auth/login", json={"email": email, "password": PASSWORD}
    )
    assert outcome.status == 200, outcome
    return outcome.json()["data"]["token"]


async def new_key(rec: Recorder, token: str, name: str = "faults") -> dict:
    outcome = await rec.send(
        "create",
        "POST",
        "/keys",
        json={"name": name, "permissions": ["files.read"]},
        headers=bearer(token),
    )
    assert outcome.status == 201, outcome
    return outcome.json()["data"]


def describe(outcomes: list[Outcome]) -> str:
    return "; ".join(
        f"{o.kind} {o.status or o.error} {o.code or ''} in {o.seconds:.2f}s" for o in outcomes[:10]
    )


# -- store paused or killed mid-traffic ----------------------------------------------------------


@pytest.mark.parametrize("fault", ["paused", "killed"])
async def test_store_outage_under_concurrent_traffic_fails_closed_fast_and_recovers(
    tmp_path: Path, fault: str
) -> None:
    """20 clients request /files (by key, by session) and /keys through the fault: every answer
    within 2 s, only 2xx or 503 store_unavailable, no 2xx for a request that started after the
    fault and ended before the store was back, and everything served again within 10 s."""
    port = free_port()
    with stopped_at_exit(aof_redis(tmp_path / "redis")) as redis:
        env = env_for(redis.url, port, FILEHOST_REDIS_TIMEOUT_SECONDS=REDIS_TIMEOUT)
        create_user(env, EMAIL)
        server = Server(env, port, tmp_path, "--workers", "2")
        try:
            workers = started(server, 2)
            async with Recorder(server.base) as rec:
                token = await login(rec)
                key = (await new_key(rec, token))["secret_key"]
                plans = [
                    ("files by key", "GET", "/files", {"headers": {"X-API-Key": key}}),
                    ("files by session", "GET", "/files", {"headers": bearer(token)}),
                    ("keys by session", "GET", "/keys", {"headers": bearer(token)}),
                ]
                rec.outcomes.clear()
                stop = asyncio.Event()
                traffic = asyncio.create_task(rec.loop(plans, clients=20, stop=stop, pause=0.05))
                try:
                    await _answered(rec, lambda o: True, 20, "traffic before the fault")
                    assert redis.process is not None
                    if fault == "paused":
                        os.kill(redis.process.pid, signal.SIGSTOP)
                    else:
                        redis.stop(kill=True)
                    t_fault = time.monotonic()
                    await asyncio.sleep(2.0)
                    t_back = time.monotonic()  # from here on the store may answer again
                    if fault == "paused":
                        assert redis.process is not None
                        os.kill(redis.process.pid, signal.SIGCONT)
                    else:
                        await asyncio.to_thread(redis.start)  # same port, same AOF
                    t_recovered = await _recovered(rec, plans, t_back)
                    t_steady = time.monotonic() + 0.3
                    await _answered(rec, lambda o: o.start > t_steady, 40, "steady traffic")
                finally:
                    stop.set()
                    await traffic
            assert server.stop() == 0
        finally:
            server.stop()

    outcomes = rec.outcomes
    during = [o for o in outcomes if t_fault < o.start and o.end < t_back]
    steady = [o for o in outcomes if o.start > t_steady]
    log = server.stderr()
    print(  # the figures of the run, shown with -rP
        f"{fault}: {len(outcomes)} requests, {len(during)} during the outage, "
        f"max answer {max(o.seconds for o in outcomes):.3f}s, "
        f"max 503 {max((o.seconds for o in outcomes if o.status == 503), default=0):.3f}s, "
        f"recovered {t_recovered - t_back:.2f}s after the store came back"
    )

    # Every request was answered (no hang, no reset) within the bound, by 2xx or 503 only.
    unanswered = [o for o in outcomes if o.status is None]
    assert not unanswered, describe(unanswered)
    slow = [o for o in outcomes if o.seconds > ANSWER_BOUND]
    assert not slow, f"{len(slow)} answers took over {ANSWER_BOUND}s: {describe(slow)}"
    unexpected = [o for o in outcomes if not o.ok and o.status != 503]
    assert not unexpected, describe(unexpected)
    for outcome in outcomes:
        if outcome.status == 503:
            assert outcome.code == "store_unavailable", outcome.body
            assert outcome.headers.get("Retry-After") == "1"
    # Nothing protected was served while the store was gone: a 2xx either started before the
    # fault or ended after the store was back.
    served = [o for o in outcomes if o.ok and o.start > t_fault and o.end < t_back]
    assert not served, describe(served)
    assert len(during) >= 20, f"only {len(during)} requests ran during the outage"
    assert {o.kind for o in during} == {kind for kind, *_ in plans}
    # Recovery without a restart: the same workers serve everything again.
    assert t_recovered - t_back < RECOVERY_BOUND
    assert len(steady) >= 40 and all(o.ok for o in steady), describe(
        [o for o in steady if not o.ok]
    )
    assert server.process.returncode == 0
    assert "Traceback" not in log
    # Both workers answered 503s during the outage (the access log names each worker's pid).
    for pid in workers:
        assert line_mentions(log, pid, "503"), f"worker {pid} logged no 503"


async def _answered(rec: Recorder, which: Callable[[Outcome], bool], count: int, what: str) -> None:
    """Wait for ``count`` answers ``which`` picks: a number of requests, not a time, since a busy
    machine answers fewer a second. Bounded, generously, for when they never come."""
    deadline = time.monotonic() + 60
    while sum(1 for o in rec.outcomes if which(o)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} answers of {what} in 60 s"
        await asyncio.sleep(0.05)


async def _recovered(rec: Recorder, plans: list, t_back: float) -> float:
    """When every kind of request has succeeded once after the store came back."""
    kinds = {kind for kind, *_ in plans}
    deadline = t_back + RECOVERY_BOUND + ANSWER_BOUND
    while time.monotonic() < deadline:
        done = {o.kind for o in rec.outcomes if o.ok and o.start > t_back}
        if done == kinds:
            return max(
                min(o.end for o in rec.outcomes if o.ok and o.start > t_back and o.kind == kind)
                for kind in kinds
            )
        await asyncio.sleep(0.05)
    raise AssertionError(f"not recovered {RECOVERY_BOUND}s after the store came back")


# -- acknowledged writes survive a SIGKILL of Redis ----------------------------------------------


async def test_acknowledged_writes_survive_a_redis_sigkill_mid_traffic(tmp_path: Path) -> None:
    """Redis as docker-compose runs it (AOF, fsync always), SIGKILLed during a burst of writes:
    after its restart every acknowledged key and session works, every acknowledged revocation and
    logout holds, and the listing agrees."""
    port = free_port()
    with stopped_at_exit(aof_redis(tmp_path / "redis")) as redis:
        env = env_for(
            redis.url,
            port,
            FILEHOST_REDIS_TIMEOUT_SECONDS=REDIS_TIMEOUT,
            FILEHOST_MAX_KEYS_PER_ACCOUNT="1000",
        )
        create_user(env, EMAIL)
        server = Server(env, port, tmp_path, "--workers", "2")
        try:
            started(server, 2)
            async with Recorder(server.base) as rec:
                token = await login(rec)
                results = await _burst_then_kill(rec, token, redis, kill_after=100)
                await asyncio.to_thread(redis.start)  # the same data dir: the AOF is replayed
                await _wait_until_served(rec)
                await _check_survivors(rec, token, *results)
            assert server.stop() == 0
        finally:
            server.stop()
    assert "Traceback" not in server.stderr()


async def _burst_then_kill(
    rec: Recorder, token: str, redis, kill_after: int
) -> tuple[dict, dict, dict, dict]:
    """200 key creations (every other one revoked at once) and 40 logins (every other one
    logged out) by 20 concurrent clients; Redis is SIGKILLed once ``kill_after`` creations were
    acknowledged. Returns what was acknowledged: created, revoked, logged in, logged out."""
    created: dict[int, dict] = {}
    revoked: dict[int, dict] = {}
    sessions: dict[int, str] = {}
    logged_out: dict[int, str] = {}
    failed: list[Outcome] = []
    jobs: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    for n in range(200):
        jobs.put_nowait(("key", n))
        if n % 5 == 0:
            jobs.put_nowait(("session", n // 5))
    killed = asyncio.Event()

    async def key_job(n: int) -> None:
        outcome = await rec.send(
            "create",
            "POST",
            "/keys",
            json={"name": f"burst {n}", "permissions": ["files.read"]},
            headers=bearer(token),
        )
        if outcome.status != 201:
            failed.append(outcome)
            return
        created[n] = outcome.json()["data"]
        if len(created) >= kill_after and not killed.is_set():
            killed.set()
            redis.stop(kill=True)
        if n % 2 == 0:
            outcome = await rec.send(
                "revoke", "DELETE", f"/keys/{created[n]['id']}", headers=bearer(token)
            )
            if outcome.status == 200:
                revoked[n] = created[n]
            else:
                failed.append(outcome)

    async def session_job(n: int) -> None:
        outcome = await rec.send(
            "login", "POST", "/auth/login", json={"email": EMAIL, "password": PASSWORD}
        )
        if outcome.status != 200:
            failed.append(outcome)
            return
        sessions[n] = outcome.json()["data"]["token"]
        if n % 2 == 0:
            outcome = await rec.send("logout", "POST", "/auth/logout", headers=bearer(sessions[n]))
            if outcome.status == 200:
                logged_out[n] = sessions[n]
            else:
                failed.append(outcome)

    async def client() -> None:
        while not jobs.empty():
            what, n = jobs.get_nowait()
            await (key_job(n) if what == "key" else session_job(n))

    await asyncio.gather(*(client() for _ in range(20)))

    assert killed.is_set(), f"only {len(created)} keys were created: {describe(failed)}"
    # The kill happened while traffic was going: writes were refused after it, with 503 only.
    assert failed, "nothing failed: the kill came after the traffic"
    assert {o.status for o in failed} == {503}, describe(failed)
    assert len(revoked) >= 20 and len(logged_out) >= 2, (len(revoked), len(logged_out))
    print(
        f"acknowledged: {len(created)} keys created, {len(revoked)} revoked, {len(sessions)} "
        f"logins, {len(logged_out)} logouts; {len(failed)} writes refused with 503 after the kill"
    )
    return created, revoked, sessions, logged_out


async def _wait_until_served(rec: Recorder) -> None:
    """Until the store answers again: an unknown (but well-formed) key is refused with 401."""
    probe = {"X-API-Key": generate_api_key()}
    deadline = time.monotonic() + RECOVERY_BOUND
    while (await rec.send("probe", "GET", "/files", headers=probe)).status != 401:
        assert time.monotonic() < deadline, "not recovered after Redis restarted"
        await asyncio.sleep(0.1)


async def _check_survivors(
    rec: Recorder, token: str, created: dict, revoked: dict, sessions: dict, logged_out: dict
) -> None:
    async def files(headers: dict) -> Outcome:
        return await rec.send("check", "GET", "/files", headers=headers)

    kept = {n: key for n, key in created.items() if n % 2 == 1}
    for key in kept.values():
        outcome = await files({"X-API-Key": key["secret_key"]})
        assert outcome.status == 200, f"acknowledged key {key['id']} lost: {outcome}"
    for key in revoked.values():
        outcome = await files({"X-API-Key": key["secret_key"]})
        assert (outcome.status, outcome.code) == (401, "api_key_revoked"), key["id"]
    listing = await rec.send("list", "GET", "/keys", headers=bearer(token))
    listed = {key["id"] for key in listing.json()["data"]["keys"]}
    assert {key["id"] for key in kept.values()} <= listed
    assert not {key["id"] for key in revoked.values()} & listed
    for n, session in sessions.items():
        outcome = await files(bearer(session))
        if n in logged_out:
            assert (outcome.status, outcome.code) == (401, "invalid_session")
        elif n % 2 == 1:
            assert outcome.status == 200, f"acknowledged session {n} lost: {outcome}"
        else:  # its logout was not acknowledged: either way, but never an error
            assert outcome.status in (200, 401), outcome


# -- the embedded store killed -------------------------------------------------------------------


def embedded_store_pid(server: Server, data: Path) -> int:
    """The valkey this ``serve`` started: the one process on our socket whose parent it is."""
    pids = [
        pid
        for pid in processes_mentioning(str(data / "redis.sock"))
        if parent_of(pid) == server.process.pid
    ]
    assert len(pids) == 1, pids
    return pids[0]


async def test_embedded_store_killed_fails_closed_and_a_restart_keeps_acknowledged_data(
    tmp_path: Path, data_dir: Path
) -> None:
    """The valkey that serve started, SIGKILLed under traffic: 503 at once, until serve has
    restarted it; then, and in a new serve on the same data, every acknowledged write is
    there, revocations included."""
    port = free_port()
    env = env_for(None, port, FILEHOST_DATA_DIR=str(data_dir))
    server = Server(env, port, tmp_path, "--workers", "2")
    try:
        started(server, 2)
        store = embedded_store_pid(server, data_dir)
        create_user(env, EMAIL)  # attaches to the store serve owns
        async with Recorder(server.base) as rec:
            token = await login(rec)
            gone_session = await login(rec)
            keys = await asyncio.gather(*(new_key(rec, token, f"k{n}") for n in range(20)))
            revoked, kept = keys[:10], keys[10:]
            for key in revoked:
                assert (
                    await rec.send("r", "DELETE", f"/keys/{key['id']}", headers=bearer(token))
                ).ok
            assert (await rec.send("out", "POST", "/auth/logout", headers=bearer(gone_session))).ok

            plans = [
                (
                    "files by key",
                    "GET",
                    "/files",
                    {"headers": {"X-API-Key": kept[0]["secret_key"]}},
                ),
                ("files by session", "GET", "/files", {"headers": bearer(token)}),
            ]
            rec.outcomes.clear()
            stop = asyncio.Event()
            traffic = asyncio.create_task(rec.loop(plans, clients=10, stop=stop, pause=0.05))
            await asyncio.sleep(0.3)
            os.kill(store, signal.SIGKILL)
            t_kill = time.monotonic()
            await asyncio.sleep(2.0)
            stop.set()
            await traffic
        code = server.stop()
    finally:
        server.stop()

    outcomes = rec.outcomes
    after = [o for o in outcomes if o.start > t_kill]
    assert len(after) >= 40
    assert not [o for o in outcomes if o.status is None], describe(outcomes)
    assert max(o.seconds for o in outcomes) < ANSWER_BOUND
    assert not [o for o in outcomes if not o.ok and o.status != 503]
    # Fail closed at once: what started just after the kill is 503, never a pass...
    at_once = [o for o in after if o.start < t_kill + 0.3]
    assert at_once and {(o.status, o.code) for o in at_once} == {(503, "store_unavailable")}
    # ...until serve has restarted its store (after a 0.5 s back-off): then answers again.
    assert [o for o in after if o.start > t_kill + 1.5 and o.ok], describe(after)
    assert code == 0, server.stderr()
    assert "restarting it in" in server.stderr()
    assert processes_mentioning(str(data_dir / "redis.sock")) == []

    # A new serve starts a new store on the same data dir: everything acknowledged is there.
    port = free_port()
    env = env_for(None, port, FILEHOST_DATA_DIR=str(data_dir))
    server = Server(env, port, tmp_path)
    try:
        started(server, 1)
        async with Recorder(server.base) as rec:
            for key in kept:
                outcome = await rec.send(
                    "k", "GET", "/files", headers={"X-API-Key": key["secret_key"]}
                )
                assert outcome.status == 200, outcome
            for key in revoked:
                outcome = await rec.send(
                    "r", "GET", "/files", headers={"X-API-Key": key["secret_key"]}
                )
                assert (outcome.status, outcome.code) == (401, "api_key_revoked")
            assert (await rec.send("s", "GET", "/files", headers=bearer(token))).status == 200
            outcome = await rec.send("g", "GET", "/files", headers=bearer(gone_session))
            assert (outcome.status, outcome.code) == (401, "invalid_session")
        assert server.stop() == 0
    finally:
        server.stop()
