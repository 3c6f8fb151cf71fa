"""Revocation and logout under concurrency, across two worker processes.

Requests with one credential start at random intervals (about 200 in half a second) while the
key is revoked (or the session logged out) once 50 of them were served, and go on until a third
of them started after that. Each request's start (taken before it is sent) and
the revocation's return (taken after its answer arrived) are on the same monotonic clock, so a
2xx for a request that started after the revocation returned is a real violation: not one is
allowed. Requests that overlap the revocation may go either way. Both workers must have served
the requests (the access log names each worker's pid) so no worker may keep a stale view.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from tests.support.api import bearer
from tests.support.clients import Outcome, Recorder
from tests.support.processes import PASSWORD, Server, create_user, env_for, line_mentions, started
from tests.support.redis import free_port

EMAIL = "race@example.com"
REQUESTS = 200
SPREAD = 0.5  # seconds over which about REQUESTS requests start
MAX_REQUESTS = 2000
ROUNDS = 3


async def _round(
    rec: Recorder, credential: dict[str, str], revoke: tuple[str, str, dict[str, str]]
) -> tuple[list[Outcome], Outcome]:
    """Start requests with ``credential`` at random intervals (about REQUESTS over SPREAD
    seconds), send ``revoke`` once a quarter of REQUESTS were served, and go on until at least
    REQUESTS have started, a third of them after the revocation returned (at most
    MAX_REQUESTS); the requests' outcomes and the revocation's. Waiting on what happened, not
    on the clock, keeps a busy machine from making the round vacuous."""
    rng = random.Random(REQUESTS)
    served, returned = asyncio.Event(), asyncio.Event()
    served_count = 0

    async def one() -> Outcome:
        nonlocal served_count
        outcome = await rec.send("use", "GET", "/files", headers=credential)
        served_count += outcome.ok
        if served_count >= REQUESTS // 4:
            served.set()
        return outcome

    async def revocation() -> Outcome:
        await served.wait()
        method, path, headers = revoke
        outcome = await rec.send("revoke", method, path, headers=headers)
        returned.set()
        return outcome

    revoking = asyncio.create_task(revocation())
    uses: list[asyncio.Task[Outcome]] = []
    started_after = 0
    while len(uses) < MAX_REQUESTS and (len(uses) < REQUESTS or started_after < REQUESTS // 3):
        started_after += returned.is_set()
        uses.append(asyncio.create_task(one()))
        await asyncio.sleep(rng.uniform(0, 2 * SPREAD / REQUESTS))
    return list(await asyncio.gather(*uses)), await revoking


def _check_round(uses: list[Outcome], revoked: Outcome, refusal: str) -> tuple[int, int]:
    assert revoked.status == 200, revoked
    returned = revoked.end
    after = [o for o in uses if o.start > returned]
    served_after = [o for o in after if o.ok]
    assert not served_after, (
        f"{len(served_after)} requests that started after the revocation returned were served, "
        f"the latest {max(o.start - returned for o in served_after) * 1000:.1f} ms after it"
    )
    # Every request got an answer: served, or refused as revoked; nothing else.
    assert {(o.status, o.code) for o in uses} <= {(200, None), (401, refusal)}, {
        (o.status, o.code, o.error) for o in uses
    }
    # Not vacuous: the credential worked before, and many requests came after.
    assert any(o.ok for o in uses if o.end < revoked.start)
    assert len(after) >= REQUESTS // 3, len(after)
    return len(after), sum(o.ok for o in uses)


@pytest.mark.parametrize("credential", ["api_key", "session"])
async def test_nothing_is_served_after_revocation_returns_across_two_workers(
    redis_url: str, tmp_path: Path, credential: str
) -> None:
    port = free_port()
    env = env_for(redis_url, port)
    create_user(env, EMAIL)
    server = Server(env, port, tmp_path, "--workers", "2")
    figures = []
    try:
        workers = started(server, 2)
        async with Recorder(server.base) as rec:
            for _ in range(ROUNDS):
                login = await rec.send(
                    "login", "POST", "/auth/login", json={"email": EMAIL, "password": PASSWORD}
                )
                token = login.json()["data"]["token"]
                if credential == "api_key":
                    created = await rec.send(
                        "create",
                        "POST",
                        "/keys",
                        json={"name": "race", "permissions": ["files.read"]},
                        headers=bearer(token),
                    )
                    key = created.json()["data"]
                    uses, revoked = await _round(
                        rec,
                        {"X-API-Key": key["secret_key"]},
                        ("DELETE", f"/keys/{key['id']}", bearer(token)),
                    )
                    figures.append(_check_round(uses, revoked, "api_key_revoked"))
                else:
                    uses, revoked = await _round(
                        rec, bearer(token), ("POST", "/auth/logout", bearer(token))
                    )
                    figures.append(_check_round(uses, revoked, "invalid_session"))
        assert server.stop() == 0
    finally:
        server.stop()
    log = server.stderr()
    for pid in workers:
        for status in ("200", "401"):
            assert line_mentions(log, pid, "/api/v1/files", status), (
                f"worker {pid} answered no {status} on /files"
            )
    print(f"{credential}: per round (requests after the revocation, served): {figures}")
