"""Clients generated from the OpenAPI document the service serves, used as an integrator uses them:
``python -m service serve`` on the tests' Redis, a Python client (openapi-python-client) and a
TypeScript one (openapi-typescript's types, openapi-fetch's requests) generated from
``GET /api/v1/openapi.json`` into the test's directory, and each one logs in, creates a key,
uploads bytes that are not text and downloads them back unchanged, lists the files, and reads a
refusal as the generated error type with its code.

Generation fails on any generator warning (a schema or operation dropped), and the TypeScript
usage is type-checked with tsc against the generated types before it runs. The generators'
versions are locked: the Python one in ``requirements/test.txt``, the TypeScript ones in
``tests/system/clients/typescript/package-lock.json`` (installed with ``npm ci``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.generated_clients import (
    build_typescript_client,
    generate_python_client,
    imported_python_client,
    install_typescript_tools,
    node_major_version,
    run_typescript_flow,
)
from tests.support.processes import PASSWORD, Server, create_user, env_for, running
from tests.support.redis import free_port

EMAIL = "integrator@example.com"
# Every byte value, then every one again in reverse: not UTF-8, with NUL, CR and LF among them.
EVERY_BYTE = bytes(range(256)) + bytes(reversed(range(256)))
UNKNOWN_FILE = "fil_" + "0" * 22


@pytest.fixture
def server(redis_url: str, tmp_path: Path) -> Iterator[Server]:
    port = free_port()
    env = env_for(redis_url, port)
    logs = tmp_path / "logs"
    logs.mkdir()
    with running(env, port, logs) as server:
        create_user(env, EMAIL)
        yield server


def document_url(server: Server) -> str:
    return f"{server.base}/openapi.json"


def root_url(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def test_a_generated_python_client_round_trips_every_byte_and_reads_refusals_as_typed_errors(
    server: Server, tmp_path: Path
) -> None:
    into = tmp_path / "python"
    into.mkdir()
    generate_python_client(document_url(server), into)

    with imported_python_client(into) as generated:
        models, types = generated["models"], generated["types"]
        client_module = generated["client"]
        anonymous = client_module.Client(base_url=root_url(server))

        login = generated["api.auth.login"].sync(
            client=anonymous, body=models.LoginRequest(email=EMAIL, password=PASSWORD)
        )
        assert isinstance(login, models.LoginEnvelope), login
        session = client_module.AuthenticatedClient(
            base_url=root_url(server), token=login.data.token
        )

        created = generated["api.keys.create_key"].sync(
            client=session,
            body=models.CreateKeyRequest(
                name="python client",
                permissions=[models.Permission.FILES_READ, models.Permission.FILES_WRITE],
            ),
        )
        assert isinstance(created, models.CreatedKeyEnvelope), created
        keyed = client_module.AuthenticatedClient(
            base_url=root_url(server),
            token=created.data.secret_key,
            prefix="",
            auth_header_name="X-API-Key",
        )

        upload = models.UploadRequest(
            file=types.File(
                payload=io.BytesIO(EVERY_BYTE),
                file_name="every-byte.bin",
                mime_type="application/octet-stream",
            )
        )
        uploaded = generated["api.files.upload_file"].sync(client=keyed, body=upload)
        assert isinstance(uploaded, models.FileEnvelope), uploaded
        assert uploaded.data.size == len(EVERY_BYTE)
        assert uploaded.data.sha256 == hashlib.sha256(EVERY_BYTE).hexdigest()
        assert uploaded.data.name == "every-byte.bin"

        downloaded = generated["api.files.download_file"].sync(
            client=keyed, file_id=uploaded.data.id
        )
        assert isinstance(downloaded, types.File), downloaded
        assert downloaded.payload.read() == EVERY_BYTE

        listed = generated["api.files.list_files"].sync(client=keyed)
        assert isinstance(listed, models.FileListEnvelope), listed
        assert [file.id for file in listed.data.files] == [uploaded.data.id]

        missing = generated["api.files.get_file"].sync(client=keyed, file_id=UNKNOWN_FILE)
        assert isinstance(missing, models.ErrorEnvelope), missing
        assert isinstance(missing.error, models.Error)
        assert missing.error.code == "file_not_found"

        refused = generated["api.files.list_files"].sync_detailed(client=anonymous)
        assert refused.status_code == 401
        assert isinstance(refused.parsed, models.ErrorEnvelope), refused.content
        assert refused.parsed.error.code == "credential_missing"


@pytest.fixture(scope="module")
def typescript_tools() -> None:
    major = node_major_version()
    assert major >= 18, f"Node.js {major}: the TypeScript client's tools need 18 or newer"
    install_typescript_tools()


def test_a_generated_typescript_client_round_trips_every_byte_and_reads_refusals_as_typed_errors(
    typescript_tools: None, server: Server, tmp_path: Path
) -> None:
    into = tmp_path / "typescript"
    into.mkdir()
    flow = build_typescript_client(document_url(server), into)

    got = json.loads(run_typescript_flow(flow, root_url(server), EMAIL, PASSWORD))

    sent = base64.b64decode(got["uploaded"]["sent_base64"])
    assert sent == EVERY_BYTE
    assert got["uploaded"]["size"] == len(EVERY_BYTE)
    assert got["uploaded"]["sha256"] == hashlib.sha256(EVERY_BYTE).hexdigest()
    assert got["uploaded"]["name"] == "every-byte.bin"
    assert base64.b64decode(got["downloaded_base64"]) == EVERY_BYTE
    assert got["listed_ids"] == [got["uploaded"]["id"]]
    assert got["not_found"]["status"] == 404
    assert got["not_found"]["code"] == "file_not_found"
    assert got["unauthenticated"]["status"] == 401
    assert got["unauthenticated"]["code"] == "credential_missing"
