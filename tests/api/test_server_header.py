"""No answer names the versions of Python and aiohttp: every one, whichever way it is made (the
gateway lane, aiohttp's handling, a streamed download, an error, the dashboard's files, a request
the HTTP parser refused), says ``Server: filehost-auth`` and nothing more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.dashboard.routes import ASSETS
from tests.support.api import Api, bearer, path_of
from tests.support.files import FILES_URL, upload, uploaded
from tests.support.raw_http import raw, request_bytes

SERVER = "filehost-auth"
VERIFY = "/api/v1/auth/verify"


def assert_plain_server(headers: Any, where: str) -> None:
    assert headers.getall("Server", []) == [SERVER], where
    for name, value in headers.items():
        assert "python" not in value.lower() and "aiohttp" not in value.lower(), (where, name)


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "no lane"])
async def test_every_answer_names_the_service_without_versions(
    make_api: Any, tmp_path: Path, lane: bool
) -> None:
    api: Api = await make_api(data_dir=tmp_path, gateway_lane=lane, max_upload_bytes=1024)
    token = await api.user_with_session()
    key = (await api.create_key(token, permissions=["files.read"]))["secret_key"]
    created = await uploaded(api, b"0123456789", token=token)
    content = path_of(created["url"])
    etag = f'"{created["sha256"]}"'
    gateway = {"X-API-Key": key, "X-Required-Permission": "files.read"}
    get = api.client.get
    requests = {
        "verify 200": get(VERIFY, headers=gateway),
        "verify 401": get(VERIFY, headers={"X-Required-Permission": "files.read"}),
        "verify 403": get(VERIFY, headers={**gateway, "X-Required-Permission": "files.write"}),
        "files 200": get(FILES_URL, headers={"X-API-Key": key}),
        "files 401": get(FILES_URL),
        "files page 200": get(f"{FILES_URL}?limit=1", headers=bearer(token)),
        "metadata 404": get(f"{FILES_URL}/fil_{'0' * 22}", headers=bearer(token)),
        "download 200": get(content, headers=bearer(token)),
        "download 206": get(content, headers={**bearer(token), "Range": "bytes=0-3"}),
        "download 304": get(content, headers={**bearer(token), "If-None-Match": etag}),
        "download 416": get(content, headers={**bearer(token), "Range": "bytes=99-"}),
        "upload 413": upload(api, b"x" * 2048, token=token),
        "login 400": api.client.post("/api/v1/auth/login", data=b"{", headers=bearer(token)),
        "login 401": api.client.post(
            "/api/v1/auth/login", json={"email": "x@example.com", "password": "wrong"}
        ),
        "keys 200": get("/api/v1/keys", headers=bearer(token)),
        "keys 403": get("/api/v1/keys", headers={"X-API-Key": key}),
        "unknown 404": get("/no/such/path"),
        "method 405": api.client.request("PROPFIND", FILES_URL),
        "healthz": get("/healthz"),
        "readyz": get("/readyz"),
        "metrics": get("/metrics"),
        "openapi": get("/api/v1/openapi.json"),
        "dashboard page": get("/"),
        "dashboard asset": get("/static/" + next(iter(ASSETS))),
        "delete 200": api.client.delete(f"{FILES_URL}/{created['id']}", headers=bearer(token)),
    }
    for where, request in requests.items():
        response = await request
        await response.read()
        assert response.status < 500, (where, response.status)
        assert_plain_server(response.headers, where)


@pytest.mark.parametrize(
    "request_",
    [
        b"GET /api/v1/files HTTP/1.0\r\nHost: x\r\n\r\n",  # aiohttp's general path
        b"GET /api/v1/files HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"BROKEN REQUEST LINE\r\n\r\n",  # the HTTP parser refuses it
        b"GET / HTTP/1.1\r\nHost: x\r\nBad\x01Header: y\r\nConnection: close\r\n\r\n",
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nExpect: magic\r\nConnection: close\r\n"
        b"Content-Length: 2\r\n\r\n{}",  # aiohttp's Expect handling
    ],
    ids=["http-1.0", "connection-close", "bad-request-line", "bad-header", "expect"],
)
async def test_answers_made_outside_the_usual_path_name_the_service_too(
    api: Api, request_: bytes
) -> None:
    response = await raw(api.client.port, request_)
    assert response.headers.get("server") == [SERVER], response
    assert not any(
        "aiohttp" in value.lower() or "python" in value.lower()
        for values in response.headers.values()
        for value in values
    )


async def test_a_streamed_download_names_the_service_in_its_head(api: Api, tmp_path: Path) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"streamed bytes", token=token)
    response = await raw(
        api.client.port,
        request_bytes(
            "GET", path_of(created["url"]), [(b"Authorization", f"Bearer {token}".encode())]
        ),
    )
    assert response.status == 200 and response.body == b"streamed bytes"
    assert response.headers["server"] == [SERVER]
