"""``users delete`` while logins and key creations for that user are in flight, on two workers.

Clients keep logging in and creating keys (with sessions opened beforehand) while the user is
deleted part-way through. Once the deletion has returned and every request has been answered,
every token and every key secret the service ever handed out for that user must be refused:
a credential created by a request that overlapped the deletion may have been returned, but it
must not outlive the deletion. Repeated for a few rounds, each with a fresh user.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from redis.asyncio import Redis

from service.auth.passwords import PasswordHasher
from service.auth.policy import make_policy
from service.clock import SystemClock
from service.config import Settings
from service.store.blob_stores import blob_stores_over, open_blob_store
from service.store.stores import open_stores
from tests.support.api import bearer
from tests.support.clients import Outcome, Recorder
from tests.support.processes import PASSWORD, Server, create_user, env_for, started
from tests.support.redis import free_port

ROUNDS = 4
CLIENTS = 24  # per kind: logins and key creations
DELETE_AFTER = 0.4  # seconds into the round
KEEP_GOING = 0.3  # seconds of traffic after the deletion returned

# Logins need room: they are the point here, not the login queue or the throttle (a deleted
# user's logins fail and would soon be throttled, which is a refusal and fine, but it would stop
# them from racing the deletion).
EXTRA_ENV = {
    "FILEHOST_LOGIN_QUEUE_MAX": "1000",
    "FILEHOST_LOGIN_CONCURRENCY": "4",
    "FILEHOST_LOGIN_FAILURES_PER_EMAIL": "0",
    "FILEHOST_LOGIN_FAILURES_PER_ADDRESS": "0",
    "FILEHOST_MAX_KEYS_PER_ACCOUNT": "10000",
}


async def _delete(redis_url: str, email: str) -> tuple[float, float]:
    """``users delete`` as the CLI runs it, in this process so its return is timed exactly."""
    client = Redis.from_url(redis_url, decode_responses=True)
    passwords = PasswordHasher(4, concurrency=1, queue_max=0)
    try:
        settings = Settings()
        blobs = blob_stores_over(open_blob_store(settings))
        accounts = make_policy(open_stores(client, "fh"), blobs, passwords, SystemClock(), settings)
        start = time.monotonic()
        await accounts.users.delete_user(email)
        return start, time.monotonic()
    finally:
        passwords.close()
        await client.aclose()


async def _round(rec: Recorder, redis_url: str, email: str) -> tuple[list[Outcome], float]:
    """Traffic for ``email`` with its deletion in the middle; the outcomes, and when the deletion
    returned."""
    login_body = {"email": email, "password": PASSWORD}
    sessions = []
    for _ in range(CLIENTS):
        opened = await rec.send("setup", "POST", "/auth/login", json=login_body)
        assert opened.status == 200, opened
        sessions.append(opened.json()["data"]["token"])
    stop = asyncio.Event()
    outcomes: list[Outcome] = []

    async def logins() -> None:
        while not stop.is_set():
            outcomes.append(await rec.send("login", "POST", "/auth/login", json=login_body))

    async def key_creations(token: str) -> None:
        body = {"name": "race", "permissions": ["files.read"], "expires_days": 1}
        while not stop.is_set():
            outcomes.append(
                await rec.send("create", "POST", "/keys", json=body, headers=bearer(token))
            )

    async def deletion() -> float:
        await asyncio.sleep(DELETE_AFTER)
        _, returned = await _delete(redis_url, email)
        await asyncio.sleep(KEEP_GOING)
        stop.set()
        return returned

    tasks = [logins() for _ in range(CLIENTS)] + [key_creations(token) for token in sessions]
    *_, returned = await asyncio.gather(*tasks, deletion())
    return outcomes, returned


async def test_no_credential_outlives_the_deletion_of_its_user_on_two_workers(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = env_for(redis_url, port, **EXTRA_ENV)
    emails = [f"doomed{n}@example.com" for n in range(ROUNDS)]
    for email in emails:
        create_user(env, email)
    server = Server(env, port, tmp_path, "--workers", "2")
    survivors: list[str] = []
    figures = []
    try:
        started(server, 2)
        async with Recorder(server.base) as rec:
            for email in emails:
                outcomes, returned = await _round(rec, redis_url, email)
                issued = [o for o in outcomes if o.ok]
                tokens = [o.json()["data"]["token"] for o in issued if o.kind == "login"]
                keys = [o.json()["data"]["secret_key"] for o in issued if o.kind == "create"]
                overlapping = [o for o in issued if o.end > returned - 0.05]
                # Every answer is a success or a refusal for a gone user; nothing else.
                assert {(o.kind, o.status, o.code) for o in outcomes} <= {
                    ("login", 200, None),
                    ("login", 401, "invalid_credentials"),
                    ("create", 201, None),
                    ("create", 401, "invalid_session"),
                    ("create", 401, "account_gone"),
                }, {(o.kind, o.status, o.code, o.error) for o in outcomes}
                for token in tokens:
                    used = await rec.send("use", "GET", "/files", headers=bearer(token))
                    if used.status != 401:
                        survivors.append(f"{email}: session ({used.status})")
                for key in keys:
                    used = await rec.send("use", "GET", "/files", headers={"X-API-Key": key})
                    if used.status != 401:
                        survivors.append(f"{email}: key ({used.status})")
                figures.append((len(tokens), len(keys), len(overlapping)))
                # Not vacuous: credentials were issued, some of them close to the deletion.
                assert tokens and keys, figures
        assert server.stop() == 0
    finally:
        server.stop()
    assert not survivors, f"{len(survivors)} credentials outlived their user: {survivors[:10]}"
    print(f"per round (sessions issued, keys issued, issued near the deletion): {figures}")
