"""Concurrent creations of one folder name under ``serve --workers 2``: of the creations of one
name (in any case) in one place sent at once, exactly one is made and every other is 409
``folder_name_taken``, whichever worker answers each. Real processes and sockets, every request
on a connection of its own so the kernel spreads them over both workers; the access log shows
that both workers answered creations."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.api import bearer
from tests.support.clients import Recorder, login, wait_for_two_workers
from tests.support.clients import fresh_session as new_session
from tests.support.processes import Server, create_user, env_for, started
from tests.support.redis import free_port

EMAIL = "folder.race@example.com"
ROUNDS = 6
AT_ONCE = 16


async def test_of_concurrent_creations_of_one_name_on_two_workers_exactly_one_wins(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = env_for(redis_url, port)
    create_user(env, EMAIL)
    server = Server(env, port, tmp_path, "--workers", "2")
    try:
        started(server, 2)
        async with new_session() as http:
            await wait_for_two_workers(http, server)
            token = await login(http, server, EMAIL)
        async with Recorder(server.base) as rec:
            parent = await rec.send(
                "setup", "POST", "/folders", json={"name": "parent"}, headers=bearer(token)
            )
            assert parent.status == 201, parent.body
            parent_id = parent.json()["data"]["id"]
            rounds = []
            for round_ in range(ROUNDS):
                spellings = [f"Shared {round_}", f"SHARED {round_}", f"shared {round_}"]
                bodies = [
                    {"name": spellings[n % 3], "parent_id": parent_id} for n in range(AT_ONCE)
                ]
                rounds.append(
                    await asyncio.gather(
                        *(
                            rec.send("create", "POST", "/folders", json=body, headers=bearer(token))
                            for body in bodies
                        )
                    )
                )
            listed = await rec.send(
                "list", "GET", f"/folders?parent_id={parent_id}&limit=1000", headers=bearer(token)
            )
        assert server.stop() == 0
    finally:
        server.stop()

    for outcomes in rounds:
        answers = sorted((o.status, o.code) for o in outcomes)
        assert answers == [(201, None)] + [(409, "folder_name_taken")] * (AT_ONCE - 1), answers
    names = sorted(f["name"].casefold() for f in listed.json()["data"]["folders"])
    assert names == [f"shared {n}" for n in range(ROUNDS)]
    creators = {
        pid
        for pid, method, path, status in server.access_lines()
        if method == "POST" and path == "/api/v1/folders" and status in (201, 409)
    }
    assert len(creators) == 2, "both workers answered creations"
