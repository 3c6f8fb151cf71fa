"""Under ``serve --workers 2``: requests refused for the address they come from take nothing from
a pinned key's rate, whichever worker refuses them, so whoever holds a leaked, pinned key cannot
lock its owner's servers out with 429s. Real processes and sockets on loopback: the key is
pinned to 127.0.0.2, the refused requests come from 127.0.0.1, each on a connection of its own
so the kernel spreads them over both workers."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tests.support.clients import fresh_session, login, request, wait_for_two_workers
from tests.support.processes import create_user, running, service_env
from tests.support.redis import free_port

EMAIL = "pinned@example.com"
OWNER = "127.0.0.2"


async def test_refused_addresses_never_spend_a_pinned_keys_rate_on_either_worker(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = service_env(redis_url, port)
    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:
            await wait_for_two_workers(http, server)
            create_user(env, EMAIL)
            token = await login(http, server, EMAIL)
            session = {"Authorization": f"Bearer {token}"}
            status, body = await request(
                http,
                "POST",
                f"{server.base}/keys",
                json={"name": "pinned", "permissions": ["files.read"]},
                headers=session,
            )
            assert status == 201, body
            key = body["data"]
            status, body = await request(
                http,
                "PATCH",
                f"{server.base}/keys/{key['id']}",
                json={"allowed_ips": [OWNER], "rate_limit": {"per_second": 1, "burst": 5}},
                headers=session,
            )
            assert status == 200, body
            with_key = {"X-API-Key": key["secret_key"]}

            refused = [
                (await request(http, "GET", f"{server.base}/files", headers=with_key))[0]
                for _ in range(12)
            ]

            owner = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True, local_addr=(OWNER, 0)),
                timeout=aiohttp.ClientTimeout(total=10),
            )
            async with owner:
                served = [
                    (await request(owner, "GET", f"{server.base}/files", headers=with_key))[0]
                    for _ in range(5)
                ]
                over, _ = await request(owner, "GET", f"{server.base}/files", headers=with_key)

    assert refused == [403] * 12
    assert served == [200] * 5
    assert over == 429
    workers = {pid for pid, _m, path, status in server.access_lines() if status == 403}
    assert len(workers) == 2, "both workers refused some of the requests"
