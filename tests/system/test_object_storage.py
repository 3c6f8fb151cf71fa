"""Files' bytes in an S3-compatible object store, as an operator runs it: ``serve`` processes
with ``FILEHOST_BLOB_STORE=s3`` against a real SeaweedFS.

Two instances with data directories of their own, on one Redis (one server, and a Redis Cluster)
and one bucket, serve one account's files to each other: uploaded through one, listed,
downloaded whole and by range with the same ETag, shared by alias, and deleted through the
other; nothing of the bytes in either data directory. The store stopped: file transfers answer
503 ``storage_unavailable`` with ``Retry-After`` within the timeout while logins, keys and the
gateway's ``verify`` go on, ``/readyz`` names the object store, and the service recovers by
itself. A bucket that does not exist or credentials it refuses stop ``serve`` with one line
naming the setting."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from service.server import CANNOT_START
from tests.support.clients import fresh_session, login, request
from tests.support.cluster import ClusterServer
from tests.support.files import multipart
from tests.support.processes import Server, create_user, env_for, running, serve_once
from tests.support.redis import free_port
from tests.support.s3 import objects, open_uploads
from tests.support.seaweedfs import SeaweedFS

EMAIL = "objects@example.com"
MIB = 1024 * 1024


@contextlib.contextmanager
def instances(
    redis_url: str, seaweedfs: SeaweedFS, tmp_path: Path, prefix: str, count: int = 2, **extra: str
) -> Iterator[list[Server]]:
    """``count`` instances on ``redis_url`` and one bucket prefix, each with a data directory of
    its own."""
    with contextlib.ExitStack() as stack:
        servers = []
        for n in range(count):
            port = free_port()
            home = tmp_path / f"instance-{n}"
            home.mkdir()
            settings = {**seaweedfs.env(prefix), "FILEHOST_DATA_DIR": str(home / "data"), **extra}
            env = env_for(redis_url, port, **settings)
            servers.append(stack.enter_context(running(env, port, home)))
        yield servers


async def upload(
    http: aiohttp.ClientSession, server: Server, headers: dict[str, str], data: bytes, **form: Any
) -> tuple[int, dict[str, Any]]:
    body, content_type = multipart(data, filename="object.bin", content_type="image/png", **form)
    return await request(
        http, "POST", f"{server.base}/files", data=body, headers={**headers, **content_type}
    )


async def fetch(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> tuple[int, bytes, Any]:
    async with http.get(url, headers=headers or {}, allow_redirects=False) as response:
        return response.status, await response.read(), response.headers


@pytest.mark.parametrize("topology", ["one server", "cluster"])
async def test_two_instances_serve_one_accounts_files_to_each_other(
    redis_url: str, seaweedfs: SeaweedFS, tmp_path: Path, topology: str
) -> None:
    prefix = f"two-{topology.replace(' ', '-')}/"
    with contextlib.ExitStack() as stack:
        if topology == "cluster":
            cluster = ClusterServer(tmp_path / "cluster")
            cluster.start()
            stack.callback(cluster.stop)
            url, extra = cluster.url, {"FILEHOST_REDIS_MODE": "cluster"}
        else:
            url, extra = redis_url, {}
        a, b = stack.enter_context(instances(url, seaweedfs, tmp_path, prefix, **extra))
        create_user(env_for(url, 0, **extra), EMAIL)
        data = os.urandom(20 * MIB + 12_345)  # a multipart upload: three parts
        async with fresh_session() as http:
            token = await login(http, a, EMAIL)
            bearer = {"Authorization": f"Bearer {token}"}
            status, body = await upload(http, a, bearer, data)
            assert status == 201, body
            made = body["data"]
            assert made["sha256"] == hashlib.sha256(data).hexdigest()

            # Listed, downloaded whole and by range, with the same ETag, through the other.
            status, listed = await request(http, "GET", f"{b.base}/files", headers=bearer)
            assert [f["id"] for f in listed["data"]["files"]] == [made["id"]]
            content = f"{b.base}/files/{made['id']}/content"
            status, whole, headers = await fetch(http, content, bearer)
            assert (status, hashlib.sha256(whole).hexdigest()) == (200, made["sha256"])
            etag = headers["ETag"]
            status, part, headers = await fetch(http, content, {**bearer, "Range": "bytes=9-19"})
            assert (status, part) == (206, data[9:20])
            assert headers["ETag"] == etag
            status, _, headers = await fetch(
                http, content.replace(b.base, a.base), {**bearer, "If-None-Match": etag}
            )
            assert status == 304

            # Shared by an alias made on b, opened through a.
            status, body = await request(
                http,
                "POST",
                f"{b.base}/aliases",
                json={"file_id": made["id"], "slug": f"shared-{topology[0]}"},
                headers=bearer,
            )
            assert status == 201, body
            public = f"{a.base.removesuffix('/api/v1')}/a/shared-{topology[0]}"
            status, shared, _ = await fetch(http, public)
            assert (status, shared == data) == (200, True)

            # Nothing of the bytes in either data directory: all in the bucket.
            assert objects(seaweedfs, prefix) == {f"files/{made['id']}": len(data)}
            for n in range(2):
                files = tmp_path / f"instance-{n}" / "data" / "files"
                assert not files.exists() or not any(files.iterdir())

            # Deleted through b: gone for a, and from the bucket.
            status, body = await request(
                http, "DELETE", f"{b.base}/files/{made['id']}", headers=bearer
            )
            assert status == 200, body
            status, _, _ = await fetch(http, content.replace(b.base, a.base), bearer)
            assert status == 404
            assert objects(seaweedfs, prefix) == {}
            assert open_uploads(seaweedfs, prefix) == []


async def test_with_the_store_down_transfers_are_503_and_the_rest_works_then_recovers(
    redis_url: str, tmp_path: Path
) -> None:
    store = SeaweedFS(tmp_path / "seaweedfs")
    store.start()
    try:
        with instances(
            redis_url, store, tmp_path, "down/", count=1, FILEHOST_S3_TIMEOUT_SECONDS="2"
        ) as (server,):
            create_user(env_for(redis_url, 0), EMAIL)
            async with fresh_session() as http:
                token = await login(http, server, EMAIL)
                bearer = {"Authorization": f"Bearer {token}"}
                status, body = await upload(http, server, bearer, b"kept before")
                assert status == 201, body
                kept = body["data"]["id"]
                status, body = await request(
                    http,
                    "POST",
                    f"{server.base}/keys",
                    json={"name": "gateway", "permissions": ["files.read"]},
                    headers=bearer,
                )
                key = {"X-API-Key": body["data"]["secret_key"]}
                root = server.base.removesuffix("/api/v1")

                store.stop()
                started = time.monotonic()
                status, body = await upload(http, server, bearer, os.urandom(MIB))
                assert status == 503 and body["error"]["code"] == "storage_unavailable", body
                assert time.monotonic() - started < 2 * 2 + 1  # never a hang past the timeout
                async with http.get(
                    f"{server.base}/files/{kept}/content", headers=bearer
                ) as response:
                    assert response.status == 503
                    assert int(response.headers["Retry-After"]) >= 1
                    assert (await response.json())["error"]["code"] == "storage_unavailable"
                # The rest goes on: a login, the gateway's check, the list, a key.
                assert await login(http, server, EMAIL)
                verify = await http.get(
                    f"{server.base}/auth/verify",
                    headers={**key, "X-Required-Permission": "files.read"},
                )
                assert verify.status == 200
                status, listed = await request(http, "GET", f"{server.base}/files", headers=key)
                assert status == 200 and len(listed["data"]["files"]) == 1
                async with http.get(f"{root}/readyz") as ready:
                    answer = await ready.json()
                    assert ready.status == 503
                    assert answer["error"]["code"] == "storage_unavailable"
                    assert answer["error"]["details"]["dependency"] == "object_store"

                store.start()  # back: no restart of the service
                status, body = await upload(http, server, bearer, b"after")
                assert status == 201, body
                status, whole, _ = await fetch(http, f"{server.base}/files/{kept}/content", bearer)
                assert (status, whole) == (200, b"kept before")
                async with http.get(f"{root}/readyz") as ready:
                    assert ready.status == 200
            lines = [orjson.loads(line) for line in server.stderr().splitlines()]
            assert not [line for line in lines if line["level"] in ("ERROR", "CRITICAL")]
            assert "filehost-tests-secret" not in server.stderr()
    finally:
        store.stop()


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"FILEHOST_S3_BUCKET": "no-such-bucket"}, "FILEHOST_S3_BUCKET"),
        ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, "AWS_SECRET_ACCESS_KEY"),
        ({"FILEHOST_BLOB_STORE": "s3", "FILEHOST_S3_BUCKET": ""}, "FILEHOST_S3_BUCKET"),
    ],
)
def test_a_bad_configuration_is_one_line_at_start_naming_the_setting(
    redis_url: str, seaweedfs: SeaweedFS, changed: dict[str, str], named: str
) -> None:
    env = {**env_for(redis_url, free_port()), **seaweedfs.env("bad/"), **changed}
    if not changed.get("FILEHOST_S3_BUCKET", "x"):
        del env["FILEHOST_S3_BUCKET"]
    result = serve_once(env)
    assert result.returncode in (CANNOT_START, 2), result.stderr
    [line] = [orjson.loads(line) for line in result.stderr.splitlines()]
    assert line["level"] == "ERROR" and named in line["msg"], line
    assert "not-the-secret" not in result.stderr


def test_an_instance_on_its_own_store_with_a_bucket_is_told_to_be_its_only_one(
    seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    """Its sweep knows only its own uploads in progress: another instance on the bucket would
    lose its unfinished ones to it."""
    port = free_port()
    env = env_for(None, port, **seaweedfs.env("alone/"), FILEHOST_DATA_DIR=str(tmp_path / "data"))
    with running(env, port, tmp_path) as server:
        lines = [orjson.loads(line) for line in server.stderr().splitlines()]
    [warned] = [line for line in lines if line["level"] == "WARNING"]
    assert "no other instance may use the same bucket and FILEHOST_S3_PREFIX" in warned["msg"]
    assert "REDIS_URL" in warned["msg"]
