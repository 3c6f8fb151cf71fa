"""Key changes under ``serve --workers 2`` (issue 13): a roll, a disable, a permission change and
an allow-list change made through one worker are in force on the very next request, whichever
worker answers it. Real processes and sockets, rate limits on (so each worker holds leases of
the keys it serves), every request on a connection of its own so the kernel spreads them over
both workers; the access log (each line names its worker and the request's X-Request-ID) shows
that both workers answered before and after each change.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tests.support.clients import fresh_session, login, request, wait_for_two_workers
from tests.support.processes import Server, create_user, running, service_env
from tests.support.redis import free_port

EMAIL = "key.changes@example.com"
BEFORE = 24  # requests with the key before its change, spread over both workers
AFTER = 40  # requests after the change returned


def http_for(kept: list[aiohttp.ClientSession]) -> aiohttp.ClientSession:
    """A new client of one kept-alive connection, added to ``kept``."""
    client = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
    kept.append(client)
    return client


def pids_by_request_id(server: Server) -> dict[str, int]:
    found = {}
    for line in server.stderr().splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if entry.get("logger") == "aiohttp.access" and entry.get("request_id"):
            found[entry["request_id"]] = entry["pid"]
    return found


async def test_key_changes_are_in_force_on_the_next_request_on_both_workers(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = service_env(redis_url, port)  # rate limits on: the workers lease requests
    outcomes: dict[str, list[tuple[int, str | None]]] = defaultdict(list)

    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:
            await wait_for_two_workers(http, server)
            create_user(env, EMAIL)
            token = await login(http, server, EMAIL)
            session = {"Authorization": f"Bearer {token}"}

            async def new_key() -> dict[str, Any]:
                status, body = await request(
                    http,
                    "POST",
                    f"{server.base}/keys",
                    json={"name": "changed", "permissions": ["files.read"]},
                    headers=session,
                )
                assert status == 201, body
                return body["data"]

            async def change(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
                status, answer = await request(
                    http, method, f"{server.base}{path}", json=body, headers=session
                )
                assert status in (200, 201), answer
                return answer["data"]

            async def use(phase: str, secret: str, count: int) -> None:
                for n in range(count):
                    headers = {"X-API-Key": secret, "X-Request-ID": f"{phase}-{n}"}
                    async with http.get(f"{server.base}/files", headers=headers) as response:
                        body = await response.json()
                        code = body["error"]["code"] if not body["success"] else None
                        outcomes[phase].append((response.status, code))

            # A roll without a grace: the old secret is refused at once, the new one served.
            rolled = await new_key()
            await use("roll-before", rolled["secret_key"], BEFORE)
            new = await change("POST", f"/keys/{rolled['id']}/roll", {"grace_seconds": 0})
            await use("roll-old", rolled["secret_key"], AFTER)
            await use("roll-new", new["secret_key"], AFTER)

            # Disabled, then enabled again.
            paused = await new_key()
            await use("disable-before", paused["secret_key"], BEFORE)
            await change("PATCH", f"/keys/{paused['id']}", {"enabled": False})
            await use("disabled", paused["secret_key"], AFTER)
            await change("PATCH", f"/keys/{paused['id']}", {"enabled": True})
            await use("enabled", paused["secret_key"], AFTER)

            # Its permission taken away.
            narrowed = await new_key()
            await use("permission-before", narrowed["secret_key"], BEFORE)
            await change("PATCH", f"/keys/{narrowed['id']}", {"permissions": ["files.write"]})
            await use("permission-after", narrowed["secret_key"], AFTER)

            # Pinned to networks that leave out this client (127.0.0.1), then to it.
            pinned = await new_key()
            await use("ip-before", pinned["secret_key"], BEFORE)
            await change("PATCH", f"/keys/{pinned['id']}", {"allowed_ips": ["10.0.0.0/8"]})
            await use("ip-outside", pinned["secret_key"], AFTER)
            await change("PATCH", f"/keys/{pinned['id']}", {"allowed_ips": ["127.0.0.0/8"]})
            await use("ip-inside", pinned["secret_key"], AFTER)

        assert server.stop() == 0

    expected = {
        "roll-before": (200, None),
        "roll-old": (401, "api_key_replaced"),
        "roll-new": (200, None),
        "disable-before": (200, None),
        "disabled": (401, "api_key_disabled"),
        "enabled": (200, None),
        "permission-before": (200, None),
        "permission-after": (403, "insufficient_permission"),
        "ip-before": (200, None),
        "ip-outside": (403, "ip_not_allowed"),
        "ip-inside": (200, None),
    }
    for phase, outcome in expected.items():
        count = BEFORE if phase.endswith("-before") else AFTER
        assert outcomes[phase] == [outcome] * count, (phase, outcomes[phase])

    pids = pids_by_request_id(server)
    for phase in expected:
        count = BEFORE if phase.endswith("-before") else AFTER
        workers = {pids[f"{phase}-{n}"] for n in range(count)}
        assert len(workers) == 2, f"one worker answered every request of {phase}"
        assert server.process.pid not in workers
    assert "Traceback" not in server.stderr()


async def test_a_request_on_a_kept_alive_connection_sees_the_change_too(
    redis_url: str, tmp_path: Path
) -> None:
    """Each worker, on connections it already served the key on before the change (a kept-alive
    connection stays with its worker), refuses the key on the next request."""
    port = free_port()
    env = service_env(redis_url, port)
    kept: list[aiohttp.ClientSession] = []
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
                json={"name": "kept-alive", "permissions": ["files.read"]},
                headers=session,
            )
            assert status == 201, body
            key = body["data"]
            try:

                def warm_pids() -> set[int]:
                    pids = pids_by_request_id(server)
                    return {pids[f"warm-{n}"] for n in range(len(kept)) if f"warm-{n}" in pids}

                # Connections until both workers hold some (the kernel picks a worker per
                # connection), each having served the key once.
                while len(warm_pids()) < 2:
                    assert len(kept) < 64, "every connection went to one worker"
                    for _ in range(4):
                        client = http_for(kept)
                        headers = {
                            "X-API-Key": key["secret_key"],
                            "X-Request-ID": f"warm-{len(kept) - 1}",
                        }
                        status, _ = await request(
                            client, "GET", f"{server.base}/files", headers=headers
                        )
                        assert status == 200
                    server.access_lines()  # waits for the workers to write their access lines
                status, _ = await request(
                    http,
                    "PATCH",
                    f"{server.base}/keys/{key['id']}",
                    json={"enabled": False},
                    headers=session,
                )
                assert status == 200
                after = []
                for n, client in enumerate(kept):
                    headers = {"X-API-Key": key["secret_key"], "X-Request-ID": f"after-{n}"}
                    after.append(
                        await request(client, "GET", f"{server.base}/files", headers=headers)
                    )
            finally:
                for client in kept:
                    await client.close()
        assert server.stop() == 0

    assert [(status, body["error"]["code"]) for status, body in after] == [
        (401, "api_key_disabled")
    ] * len(kept)
    pids = pids_by_request_id(server)
    # Each connection stayed with the worker that served it before the change.
    assert {pids[f"after-{n}"] for n in range(len(kept))} == warm_pids()
