"""A folder's recursive deletion killed half-way (``serve`` SIGKILLed while it removes thousands
of files) is finished by the next start: the folder is gone from the first step, part of its
subtree is left in Redis and on disk by the kill, and once ``serve`` is started again nothing of
the subtree is left in either. Real processes, the tests' Redis (a cluster under
``--redis cluster``), the files' bytes in a data directory of the test's own."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from redis.asyncio import Redis

from service.config import Settings
from service.domain.credentials import new_id
from service.domain.records import FileRecord
from service.store.keys import RedisKeys
from service.store.stores import open_stores
from tests.support.api import bearer
from tests.support.clients import fresh_session, login, request
from tests.support.processes import Server, create_user, env_for, started
from tests.support.redis import free_port

EMAIL = "crash@example.com"
FILES = 6000  # enough that the removal takes many steps, so the kill lands in the middle
SETTLE_BOUND = 60.0


@asynccontextmanager
async def store_client(redis_url: str, redis_mode: str) -> AsyncIterator[Any]:
    if redis_mode == "cluster":
        from service.store.cluster import connect_cluster_client

        client: Any = connect_cluster_client(Settings(redis_url=redis_url, redis_mode="cluster"))
    else:
        client = Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


async def seed(client: Any, user_id: str, folder_id: str, blobs: Path) -> list[str]:
    """``FILES`` files in the folder: records as uploads write them, and bytes on disk."""
    files = open_stores(client, "fh").files
    blobs.mkdir(mode=0o700, parents=True, exist_ok=True)
    ids = [new_id("fil") for _ in range(FILES)]
    now = int(time.time() * 1000)
    for start in range(0, FILES, 50):
        chunk = ids[start : start + 50]
        records = [
            FileRecord(file_id, "f.txt", 1, "text/plain", "0" * 64, now + n, folder_id)
            for n, file_id in enumerate(chunk, start)
        ]
        added = await asyncio.gather(*(files.add(user_id, record, FILES * 2) for record in records))
        assert all(added)
        for file_id in chunk:
            (blobs / file_id).write_bytes(b"x")
    return ids


async def test_a_deletion_killed_half_way_is_finished_by_the_next_start(
    redis_url: str, redis_mode: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    blobs = data / "files"
    port = free_port()
    env = env_for(
        redis_url,
        port,
        FILEHOST_DATA_DIR=str(data),
        FILEHOST_MAX_FILES_PER_ACCOUNT=str(FILES * 2),
    )
    create_user(env, EMAIL)
    keys = RedisKeys("fh")
    server = Server(env, port, tmp_path)
    try:
        started(server, 1)
        async with fresh_session() as http:
            token = await login(http, server, EMAIL)
            status, body = await request(
                http, "GET", f"{server.base}/auth/session", headers=bearer(token)
            )
            user_id = body["data"]["user"]["id"]
            status, body = await request(
                http, "POST", f"{server.base}/folders", json={"name": "big"}, headers=bearer(token)
            )
            assert status == 201, body
            big = body["data"]["id"]
        async with store_client(redis_url, redis_mode) as client:
            ids = await seed(client, user_id, big, blobs)
            index = keys.folder_files(user_id, big)

            async with aiohttp.ClientSession() as http:
                deletion = asyncio.create_task(
                    http.delete(
                        f"{server.base}/folders/{big}?recursive=true", headers=bearer(token)
                    )
                )
                # Killed once the removal is under way and before it is done.
                deadline = time.monotonic() + SETTLE_BOUND
                while not 0 < await client.zcard(index) < FILES:
                    assert time.monotonic() < deadline, "the removal never started"
                    assert not deletion.done(), "the deletion finished before the kill"
                    await asyncio.sleep(0.002)
                os.kill(server.process.pid, signal.SIGKILL)
                server.process.wait(10)
                try:
                    await deletion
                except aiohttp.ClientError:
                    pass  # the connection died with the server

            left_records = await client.zcard(index)
            left_bytes = len(list(blobs.iterdir()))
            assert 0 < left_records < FILES
            assert left_bytes > 0
            assert await client.sismember(keys.folder_trash(user_id), big)
            assert await client.sismember(keys.folder_removals, user_id)

            restarted = Server(env, port, tmp_path)  # the same command, started again
            try:
                started(restarted, 1)
                deadline = time.monotonic() + SETTLE_BOUND
                while await client.sismember(keys.folder_removals, user_id):
                    assert time.monotonic() < deadline, "the next start did not finish it"
                    await asyncio.sleep(0.05)
                assert restarted.stop() == 0
            finally:
                restarted.stop()

            assert list(blobs.iterdir()) == []
            named = [
                keys.account_folders(user_id),
                keys.folder_trash(user_id),
                keys.account_removed(user_id),
                keys.folder_children(user_id, "root"),
                keys.folder_heights(user_id, "root"),
                keys.folder_children(user_id, big),
                keys.folder_heights(user_id, big),
                index,
                keys.account_files(user_id),
                keys.account_file_order(user_id),
            ]
            assert await client.exists(*named) == 0
            assert not await client.hexists(keys.account_files(user_id), ids[0])
    finally:
        server.stop()
