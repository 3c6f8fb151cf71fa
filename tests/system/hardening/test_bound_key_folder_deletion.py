"""A folder deleted while a key bound to it is in use, under ``serve --workers 2``: the key never
reaches anything outside its folder, before, during or after the deletion, on either worker, and
once the deletion has answered it is refused everything (its folders are none), never widened
to the whole account. Real processes and sockets, every request on a connection of its own so
the kernel spreads them over both workers; the access log shows both answered after the
deletion."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.api import bearer
from tests.support.clients import (
    fresh_session,
    login,
    request,
    request_pids,
    wait_for_two_workers,
)
from tests.support.processes import Server, create_user, env_for, running
from tests.support.redis import free_port

EMAIL = "bound.deletion@example.com"
INSIDE = 300  # files in the key's folder: its removal takes more than one step
CLIENTS = 4
BEFORE = 40  # outcomes recorded before the deletion starts
AFTER = 80  # outcomes of requests sent after it answered


async def upload(
    http: aiohttp.ClientSession, server: Server, headers: dict[str, str], folder_id: str | None
) -> tuple[int, dict[str, Any]]:
    form = aiohttp.FormData()
    if folder_id is not None:
        form.add_field("folder_id", folder_id)
    form.add_field("file", b"x", filename="x.txt", content_type="text/plain")
    return await request(http, "POST", f"{server.base}/files", data=form, headers=headers)


async def make_folder(http: aiohttp.ClientSession, server: Server, token: str, name: str) -> str:
    status, body = await request(
        http, "POST", f"{server.base}/folders", json={"name": name}, headers=bearer(token)
    )
    assert status == 201, body
    return str(body["data"]["id"])


async def test_a_folder_deleted_while_a_bound_key_uses_it_never_widens_the_key(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = env_for(redis_url, port, FILEHOST_DATA_DIR=str(tmp_path / "data"))
    outcomes: list[tuple[bool, str, int, Any]] = []  # (after the deletion answered, kind, ...)

    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:
            await wait_for_two_workers(http, server)
            create_user(env, EMAIL)
            token = await login(http, server, EMAIL)
            session = bearer(token)
            shared = await make_folder(http, server, token, "Shared")
            private = await make_folder(http, server, token, "Private")
            outside = []
            for folder_id in (None, private):
                status, body = await upload(http, server, session, folder_id)
                assert status == 201, body
                outside.append(body["data"]["id"])
            inside = []
            for start in range(0, INSIDE, 20):
                made = await asyncio.gather(
                    *(upload(http, server, session, shared) for _ in range(start, start + 20))
                )
                assert all(status == 201 for status, _ in made)
                inside += [body["data"]["id"] for _, body in made]
            status, body = await request(
                http,
                "POST",
                f"{server.base}/keys",
                json={
                    "name": "bound",
                    "permissions": ["files.read", "files.write", "folders.read"],
                    "folder_ids": [shared],
                },
                headers=session,
            )
            assert status == 201, body
            key = {"X-API-Key": body["data"]["secret_key"]}

            deleted = asyncio.Event()
            going = asyncio.Event()  # enough outcomes recorded before the deletion
            enough = asyncio.Event()
            counted = [0, 0]  # outcomes before the deletion started, and after it answered

            async def send(n: int, kind: str) -> None:
                after = deleted.is_set()  # sent once the deletion had answered
                headers = {**key, "X-Request-ID": f"{'after' if after else 'during'}-{kind}-{n}"}
                base = server.base
                if kind == "list":
                    url = f"{base}/files?limit=1000"
                elif kind == "outside-top":
                    url = f"{base}/files/{outside[0]}"
                elif kind == "outside-private":
                    url = f"{base}/files/{outside[1]}/content"
                elif kind == "inside":
                    url = f"{base}/files/{inside[n % INSIDE]}"
                elif kind == "folders":
                    url = f"{base}/folders"
                elif kind == "verify":
                    url = f"{base}/auth/verify"
                    headers["X-Original-Method"] = "GET"
                    headers["X-Original-URI"] = f"/api/v1/files/{outside[n % 2]}"
                if kind == "upload":
                    status, body = await upload(http, server, headers, None)
                else:
                    async with http.get(url, headers=headers) as response:
                        status = response.status
                        json = response.content_type == "application/json"
                        body = await response.json() if json else None
                outcomes.append((after, kind, status, body))
                counted[after] += 1
                if counted[0] >= BEFORE:
                    going.set()
                if counted[1] >= AFTER:
                    enough.set()

            kinds = [
                "list",
                "outside-top",
                "outside-private",
                "inside",
                "folders",
                "verify",
                "upload",
            ]

            async def client(offset: int) -> None:
                n = offset
                while not enough.is_set():
                    await send(n, kinds[n % len(kinds)])
                    n += CLIENTS

            clients = [asyncio.create_task(client(offset)) for offset in range(CLIENTS)]
            await going.wait()
            status, body = await request(
                http,
                "DELETE",
                f"{server.base}/folders/{shared}?recursive=true",
                headers=session,
            )
            assert status == 200, body
            deleted.set()
            await asyncio.gather(*clients)

            status, body = await request(http, "GET", f"{server.base}/keys", headers=session)
            assert body["data"]["keys"][0]["folder_ids"] == []
            status, body = await request(
                http, "GET", f"{server.base}/files?limit=1000", headers=session
            )
            assert sorted(f["id"] for f in body["data"]["files"]) == sorted(outside)
        assert server.stop() == 0

    for after, kind, status, body in outcomes:
        where = (after, kind, status, body)
        if after:  # its folders are none: refused everything
            assert status == 403 and body["error"]["code"] == "insufficient_permission", where
            assert body["error"]["details"]["bound_to_folders"] is True, where
            continue
        if kind in ("outside-top", "outside-private"):
            assert status in (404, 403), where
        elif kind == "verify":
            assert status == 403, where
        elif kind == "list":
            assert status in (200, 403), where
            if status == 200:  # what the key uploaded included: in its folder, all of them
                assert all(f["folder_id"] == shared for f in body["data"]["files"]), where
        elif kind == "folders":
            assert status in (200, 403), where
            if status == 200:
                assert [f["id"] for f in body["data"]["folders"]] in ([shared], []), where
        elif kind == "inside":
            assert status in (200, 404, 403), where
        elif kind == "upload":
            assert status in (201, 404, 403), where
            if status == 201:
                assert body["data"]["folder_id"] == shared, where
    assert sum(1 for after, *_ in outcomes if after) >= AFTER
    assert any(status == 200 for after, kind, status, _ in outcomes if kind == "list" and not after)

    answered_by = request_pids(server)
    workers = {pid for request_id, pid in answered_by.items() if request_id.startswith("after-")}
    assert len(workers) == 2, "one worker answered every request after the deletion"
    assert server.process.pid not in workers
    assert "Traceback" not in server.stderr()
