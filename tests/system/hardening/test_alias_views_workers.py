"""A vanity alias's ``max_views`` under ``serve --workers 2``: of many downloads of one alias sent
at once, whole files and ranges alike, exactly ``max_views`` are served (200 or 206) and every
other is the one 404 ``alias_not_found``, whichever worker answers each; the alias's ``views``
say so. Real processes and sockets, every request on a connection of its own so the kernel
spreads them over both workers; the access log shows that both answered the alias."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from tests.support.api import bearer
from tests.support.clients import Recorder, login, wait_for_two_workers
from tests.support.clients import fresh_session as new_session
from tests.support.processes import Server, create_user, env_for, started
from tests.support.redis import free_port

EMAIL = "alias.views@example.com"
MAX_VIEWS = 25
AT_ONCE = 120
CONTENT = bytes(range(256)) * 4  # 1 KiB


async def test_no_more_than_max_views_are_served_by_two_workers_at_once(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    # The public side's rate per address is another bound: every request here comes from one.
    env = env_for(redis_url, port, FILEHOST_ALIAS_RATE_PER_SECOND="0")
    create_user(env, EMAIL)
    server = Server(env, port, tmp_path, "--workers", "2")
    try:
        started(server, 2)
        async with new_session() as http:
            await wait_for_two_workers(http, server)
            token = await login(http, server, EMAIL)
            form = aiohttp.FormData()
            form.add_field("file", CONTENT, filename="one.bin", content_type="text/plain")
            async with http.post(f"{server.base}/files", data=form, headers=bearer(token)) as up:
                assert up.status == 201, await up.text()
                file_id = (await up.json())["data"]["id"]
        root = server.base.removesuffix("/api/v1")
        async with Recorder(server.base) as rec:
            made = await rec.send(
                "setup",
                "POST",
                "/aliases",
                json={"file_id": file_id, "slug": "limited", "max_views": MAX_VIEWS},
                headers=bearer(token),
            )
            assert made.status == 201, made.body
            alias_id = made.json()["data"]["id"]
        async with Recorder(root) as rec:
            outcomes = await asyncio.gather(
                *(
                    rec.send(
                        "view",
                        "GET",
                        "/a/limited",
                        headers={"Range": "bytes=0-9"} if n % 3 == 0 else {},
                    )
                    for n in range(AT_ONCE)
                )
            )
        async with Recorder(server.base) as rec:
            read = await rec.send("read", "GET", f"/aliases/{alias_id}", headers=bearer(token))
        assert server.stop() == 0
    finally:
        server.stop()

    served = [o for o in outcomes if o.status in (200, 206)]
    assert len(served) == MAX_VIEWS, sorted((o.status, o.code, o.error) for o in outcomes)
    assert all(o.body == (CONTENT if o.status == 200 else CONTENT[:10]) for o in served)
    refused = [(o.status, o.code) for o in outcomes if o.status not in (200, 206)]
    assert refused == [(404, "alias_not_found")] * (AT_ONCE - MAX_VIEWS)
    assert read.json()["data"]["views"] == MAX_VIEWS
    answering = {
        pid
        for pid, method, path, status in server.access_lines()
        if method == "GET" and path == "/a/limited" and status in (200, 206, 404)
    }
    assert len(answering) == 2, "both workers answered the alias"
