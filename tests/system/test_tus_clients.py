"""Real tus clients against served instances, on each blob store: tuspy (Python) and
tus-js-client (Node) upload a file with an API key in chunks, stop after the first one as a
dropped connection would, and resume from the offset the service holds, on the other instance
of two that share Redis (and the bucket, or the data directory). The file is whole, hashed
right, named from the metadata, and nothing of the upload is left beside it.

The clients' versions are locked: tuspy in ``requirements/test.txt``, tus-js-client in
``tests/system/clients/tus/package-lock.json`` (installed with ``npm ci``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tusclient import client as tus_client

from tests.support.clients import login, request
from tests.support.node import NODE_ENV, npm_ci, run_checked
from tests.support.paths import REPO_ROOT
from tests.support.processes import Server, create_user, env_for, running
from tests.support.redis import free_port
from tests.support.seaweedfs import SeaweedFS

pytestmark = pytest.mark.system

EMAIL = "tus@example.com"
MIB = 1024 * 1024
TUS_JS = REPO_ROOT / "tests" / "system" / "clients" / "tus"


@contextlib.contextmanager
def two_instances(
    redis_url: str, tmp_path: Path, blobs: str, seaweedfs: SeaweedFS | None
) -> Iterator[tuple[Server, Server]]:
    """Two instances of one deployment: one Redis, and one bucket prefix or one data
    directory."""
    shared = {"FILEHOST_DATA_DIR": str(tmp_path / "data")}
    if seaweedfs is not None:
        shared.update(seaweedfs.env())
    with contextlib.ExitStack() as stack:
        servers = []
        for n in range(2):
            port = free_port()
            logs = tmp_path / f"logs-{n}"
            logs.mkdir()
            env = env_for(redis_url, port, **shared)
            servers.append(stack.enter_context(running(env, port, logs)))
        create_user(env, EMAIL)
        yield servers[0], servers[1]


@pytest.fixture(params=["directory", "s3"])
def instances(
    request: pytest.FixtureRequest, redis_url: str, tmp_path: Path
) -> Iterator[tuple[Server, Server]]:
    store = request.getfixturevalue("seaweedfs") if request.param == "s3" else None
    with two_instances(redis_url, tmp_path, request.param, store) as pair:
        yield pair


async def uploading_key(server: Server) -> str:
    async with aiohttp.ClientSession() as http:
        token = await login(http, server, EMAIL)
        status, body = await request(
            http,
            "POST",
            f"{server.base}/keys",
            json={"name": "tus", "permissions": ["files.read", "files.write"]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert status == 201, body
        return str(body["data"]["secret_key"])


async def the_file(server: Server, key: str, file_id: str) -> tuple[dict[str, Any], bytes]:
    async with aiohttp.ClientSession(headers={"X-API-Key": key}) as http:
        status, body = await request(http, "GET", f"{server.base}/files/{file_id}")
        assert status == 200, body
        async with http.get(f"{server.base}/files/{file_id}/content") as response:
            return body["data"], await response.read()


def contents(size: int) -> bytes:
    return (hashlib.sha256(b"tus").digest() * (size // 32 + 1))[:size]


async def test_tuspy_resumes_an_upload_on_the_other_instance(
    instances: tuple[Server, Server], tmp_path: Path
) -> None:
    first, second = instances
    key = await uploading_key(first)
    data = contents(21 * MIB + 5)
    path = tmp_path / "video.bin"
    path.write_bytes(data)
    headers = {"X-API-Key": key}
    chunk = 8 * MIB

    uploader = tus_client.TusClient(f"{first.base}/uploads", headers=headers).uploader(
        str(path), chunk_size=chunk, metadata={"filename": "video.bin"}
    )
    uploader.upload(stop_at=chunk)  # then the connection "drops"
    assert uploader.offset == chunk
    url = uploader.url
    assert url.startswith(f"{first.base}/uploads/upl_")

    elsewhere = url.replace(first.base, second.base)
    resumed = tus_client.TusClient(f"{second.base}/uploads", headers=headers).uploader(
        str(path), chunk_size=chunk, url=elsewhere
    )
    assert resumed.offset == chunk  # asked with HEAD: only the rest is sent
    resumed.upload()
    file_id = resumed.request.response_headers["filehost-file-id"]  # tuspy lowers them
    view, body = await the_file(first, key, file_id)
    assert body == data
    assert view["name"] == "video.bin" and view["size"] == len(data)
    assert view["sha256"] == hashlib.sha256(data).hexdigest()


async def test_tus_js_client_resumes_an_upload_from_where_the_service_says(
    instances: tuple[Server, Server], tmp_path: Path
) -> None:
    first, second = instances
    npm_ci(TUS_JS)
    key = await uploading_key(first)
    data = contents(19 * MIB + 77)
    path = tmp_path / "upload.bin"
    path.write_bytes(data)
    chunk = 8 * MIB
    result = run_checked(
        [
            "node",
            str(TUS_JS / "upload.mjs"),
            f"{first.base}/uploads",
            key,
            str(path),
            str(chunk),
            str(tmp_path / "tus-urls.json"),
            f"http://127.0.0.1:{second.port}",
        ],
        cwd=TUS_JS,
        timeout=120,
        **NODE_ENV,
    )
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["resumedAt"] == chunk
    view, body = await the_file(second, key, outcome["fileId"])
    assert body == data
    assert view["name"] == "from-node.bin"
    assert view["sha256"] == hashlib.sha256(data).hexdigest()
