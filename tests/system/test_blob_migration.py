"""``filehost-auth blobs migrate --to s3`` as an operator moves a running ``directory`` deployment
into an object store (a real SeaweedFS): copied while ``serve`` runs, run again for what was
uploaded meanwhile (what is there already is left as it is), checked against each record, the
objects of files deleted since removed with ``--prune``; then ``serve`` with
``FILEHOST_BLOB_STORE=s3`` serves every file byte for byte, from any data directory."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.support.clients import fresh_session, login, request
from tests.support.files import multipart
from tests.support.processes import create_user, env_for, run_cli_async, running
from tests.support.redis import free_port
from tests.support.s3 import objects, open_uploads
from tests.support.seaweedfs import SeaweedFS

EMAIL = "moving@example.com"
MIB = 1024 * 1024


async def test_a_running_deployment_moves_into_an_object_store_with_nothing_lost(
    redis_url: str, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    prefix = "moved/"
    port = free_port()
    data = tmp_path / "data"
    directory = env_for(redis_url, port, FILEHOST_DATA_DIR=str(data))
    # The command sees where the bytes go, while the deployment still keeps them in its directory.
    to_s3 = {**directory, **seaweedfs.env(prefix), "FILEHOST_BLOB_STORE": "directory"}
    create_user(directory, EMAIL)
    contents = {}
    with running(directory, port, tmp_path) as server:
        async with fresh_session() as http:
            token = await login(http, server, EMAIL)
            bearer = {"Authorization": f"Bearer {token}"}

            async def upload(payload: bytes) -> str:
                body, headers = multipart(payload)
                status, answer = await request(
                    http, "POST", f"{server.base}/files", data=body, headers={**bearer, **headers}
                )
                assert status == 201, answer
                contents[answer["data"]["id"]] = payload
                return str(answer["data"]["id"])

            for payload in (b"small", os.urandom(300_000), os.urandom(18 * MIB)):
                await upload(payload)
            doomed = await upload(b"deleted after it was copied")

            status, said = await run_cli_async("blobs", "migrate", "--to", "s3", env=to_s3)
            assert status == 0, said
            assert "copied 4 files" in said and "0 already there" in said, said

            later = await upload(b"uploaded meanwhile")
            status, answer = await request(
                http, "DELETE", f"{server.base}/files/{doomed}", headers=bearer
            )
            assert status == 200, answer
            del contents[doomed]
        assert server.stop() == 0

    # serve stopped: once more, for what came meanwhile, and the deleted file's object pruned.
    status, said = await run_cli_async("blobs", "migrate", "--to", "s3", "--prune", env=to_s3)
    assert status == 0, said
    assert "copied 1 file " in said and "3 already there" in said, said
    assert "removed 1 object no record names" in said, said
    assert set(objects(seaweedfs, prefix)) == {f"files/{file_id}" for file_id in contents}
    assert open_uploads(seaweedfs, prefix) == []
    assert later in contents

    # Served from the bucket, by an instance whose data directory holds nothing.
    elsewhere = tmp_path / "elsewhere"
    port = free_port()
    s3 = {**env_for(redis_url, port, FILEHOST_DATA_DIR=str(elsewhere)), **seaweedfs.env(prefix)}
    with running(s3, port, tmp_path) as server:
        async with fresh_session() as http:
            token = await login(http, server, EMAIL)
            bearer = {"Authorization": f"Bearer {token}"}
            for file_id, payload in contents.items():
                async with http.get(
                    f"{server.base}/files/{file_id}/content", headers=bearer
                ) as response:
                    assert response.status == 200, file_id
                    got = await response.read()
                    assert hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()
    assert not (elsewhere / "files").exists()


async def test_bytes_that_do_not_match_their_record_are_not_copied_and_reported(
    redis_url: str, seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    prefix = "damaged/"
    port = free_port()
    data = tmp_path / "data"
    directory = env_for(redis_url, port, FILEHOST_DATA_DIR=str(data))
    create_user(directory, EMAIL)
    with running(directory, port, tmp_path) as server:
        async with fresh_session() as http:
            token = await login(http, server, EMAIL)
            body, headers = multipart(b"the bytes as uploaded")
            status, answer = await request(
                http,
                "POST",
                f"{server.base}/files",
                data=body,
                headers={"Authorization": f"Bearer {token}", **headers},
            )
            assert status == 201, answer
    damaged = answer["data"]["id"]
    (data / "files" / damaged).write_bytes(b"the bytes as a disk fault left them")
    to_s3 = {**directory, **seaweedfs.env(prefix), "FILEHOST_BLOB_STORE": "directory"}
    status, said = await run_cli_async("blobs", "migrate", "--to", "s3", env=to_s3)
    assert status == 1, said
    assert f"1 file had bytes that do not match their record (not copied): {damaged}" in said
    assert objects(seaweedfs, prefix) == {}
