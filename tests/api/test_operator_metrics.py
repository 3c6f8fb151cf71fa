"""What ``/metrics`` tells an operator beyond requests and checks: what is running (build info),
uploads by outcome and their bytes, the bytes downloads sent, logins by outcome (never which
emails exist), and the requests the store failed by kind; and none of prometheus-client's
``_created`` series."""

from __future__ import annotations

import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync
from redis.exceptions import ConnectionError as RedisConnectionError

from service.app import STORE
from tests.support.api import PASSWORD, Api, bearer
from tests.support.files import upload, uploaded
from tests.support.keys import sha256_hex
from tests.support.metrics import samples, value
from tests.support.tus import create, created, send

LOGIN = "/api/v1/auth/login"


async def scrape(api: Api) -> str:
    response = await api.client.get("/metrics")
    assert response.status == 200
    return await response.text()


async def test_there_are_no_created_series(api: Api) -> None:
    token = await api.user_with_session()
    assert (await api.files(token=token)).status == 200
    text = await scrape(api)
    assert "filehost_http_requests_total{" in text
    assert "_created" not in text


async def test_the_build_is_one_series_naming_the_versions(api: Api) -> None:
    text = await scrape(api)
    [(labels, count)] = [
        (dict(labels), count)
        for (name, labels), count in samples(text).items()
        if name == "filehost_build_info"
    ]
    assert count == 1
    assert labels == {
        "version": metadata.version("filehost-auth"),
        "python": platform.python_version(),
        "aiohttp": metadata.version("aiohttp"),
    }


async def test_uploads_are_counted_by_outcome_with_the_bytes_stored(
    make_api: Any, tmp_path: Path
) -> None:
    api = await make_api(data_dir=tmp_path, max_upload_bytes=1000, max_files_per_account=2)
    token = await api.user_with_session()
    reader = (await api.create_key(token, permissions=["files.read"]))["secret_key"]
    assert (await upload(api, b"d" * 1001, token=token)).status == 413  # read past the limit
    too_long = await api.client.post(
        "/api/v1/files",
        data=b"x" * 70_000,
        headers={**bearer(token), "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert too_long.status == 413  # refused by its declared length
    assert (await upload(api, b"e", token=token, field="other")).status == 400
    assert (await upload(api, b"f", key=reader)).status == 403  # no upload: the key may not
    await uploaded(api, b"a" * 10, token=token)
    await uploaded(api, b"b" * 20, token=token)
    assert (await upload(api, b"c", token=token)).status == 409  # the quota

    text = await scrape(api)
    counts = {
        dict(labels)["outcome"]: count
        for (name, labels), count in samples(text).items()
        if name == "filehost_uploads_total"
    }
    assert counts == {
        "stored": 2,
        "file_limit_reached": 1,
        "payload_too_large": 2,
        "validation_failed": 1,
    }
    assert value(text, "filehost_upload_bytes_total") == 30


async def test_a_resumable_upload_is_counted_once_when_its_file_is_made(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 10)
    assert (await send(api, url, auth, 0, b"0123")).status == 204
    assert (await send(api, url, auth, 4, b"456789")).status == 204  # its file made
    assert (await send(api, url, auth, 10, b"")).status == 204  # the last one, retried
    assert (await create(api, auth, 0)).status == 201  # empty: made by its creation

    text = await scrape(api)
    assert value(text, "filehost_uploads_total", outcome="stored") == 2
    assert value(text, "filehost_upload_bytes_total") == 10


async def test_downloads_are_counted_in_bytes_sent_by_the_way_they_came(
    make_api: Any, tmp_path: Path
) -> None:
    api = await make_api(data_dir=tmp_path)
    token = await api.user_with_session()
    small = await uploaded(api, b"s" * 100, token=token)  # served from memory
    large = await uploaded(api, b"L" * 200_000, token=token)  # sent with sendfile
    made = await api.client.post(
        "/api/v1/aliases", json={"file_id": small["id"], "slug": "counted"}, headers=bearer(token)
    )
    assert made.status == 201, await made.text()

    def content(file: dict[str, Any]) -> str:
        return f"/api/v1/files/{file['id']}/content"

    for path, headers, status in (
        (content(small), {}, 200),
        (content(large), {}, 200),
        (content(large), {"Range": "bytes=0-999"}, 206),
        (content(large), {"If-None-Match": f'"{large["sha256"]}"'}, 304),  # no body
        ("/a/counted", {}, 200),
    ):
        response = await api.client.get(path, headers={**bearer(token), **headers})
        assert response.status == status, path
        await response.read()
    assert (await api.client.head("/a/counted")).status == 200  # no body
    # A ZIP of chosen files, counted in the bytes of the archive as sent.
    response = await api.client.get(
        f"/api/v1/files/archive?ids={small['id']},{large['id']}", headers=bearer(token)
    )
    assert response.status == 200
    archive = await response.read()

    text = await scrape(api)
    counts = {
        dict(labels)["via"]: count
        for (name, labels), count in samples(text).items()
        if name == "filehost_download_bytes_total"
    }
    assert counts == {"content": 100 + 200_000 + 1000, "alias": 100, "archive": len(archive)}


async def test_logins_are_counted_by_outcome_and_no_label_names_an_email(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    await api.create_user("known@example.com")

    async def log_in(email: str, password: str) -> int:
        response = await api.client.post(LOGIN, json={"email": email, "password": password})
        return response.status

    assert await log_in("known@example.com", PASSWORD) == 200
    assert await log_in("known@example.com", "wrong password") == 401
    assert await log_in("nobody@example.com", "wrong password") == 401
    while await log_in("nobody@example.com", "wrong password") != 429:
        pass
    store = api.app[STORE]

    async def down(*args: Any) -> None:
        raise RedisConnectionError("the store is down")

    monkeypatch.setattr(store.users, "find_id", down)
    assert await log_in("known@example.com", PASSWORD) == 503
    monkeypatch.undo()

    text = await scrape(api)
    logins = {
        dict(labels)["outcome"]: count
        for (name, labels), count in samples(text).items()
        if name == "filehost_logins_total"
    }
    assert logins == {
        "succeeded": 1,
        "wrong_password": 1,
        "unknown_account": 10,  # the email's window, then throttled
        "throttled": 1,
        "busy": 0,
        "error": 1,
        "second_factor_required": 0,
        "wrong_second_factor": 0,
    }
    assert not re.search(r"example\.com|known@|nobody", text)


async def test_requests_the_store_failed_are_counted_by_route_and_kind(
    api: Api, redis_client: redis_sync.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token, permissions=["files.read"])
    redis_client.hset(f"fh:key:{sha256_hex(key['secret_key'])}", "p", "not a mask")
    gateway = {"X-API-Key": key["secret_key"], "X-Required-Permission": "files.read"}
    for _ in range(2):  # the gateway lane's path and aiohttp's, both
        assert (await api.files(key=key["secret_key"])).status == 503
        assert (await api.client.get("/api/v1/auth/verify", headers=gateway)).status == 503

    async def lost(*args: Any) -> None:
        raise RedisConnectionError("connection to Redis lost")

    monkeypatch.setattr(api.app[STORE].files, "list_page", lost)
    assert (await api.files(token=token)).status == 503
    assert (await api.client.get("/api/v1/files?limit=5", headers=bearer(token))).status == 503
    monkeypatch.undo()
    assert (await api.files(token=token)).status == 200

    text = await scrape(api)
    errors = {
        (dict(labels)["route"], dict(labels)["kind"]): count
        for (name, labels), count in samples(text).items()
        if name == "filehost_store_errors_total"
    }
    assert errors == {
        ("/api/v1/files", "corrupt_record"): 2,
        ("/api/v1/auth/verify", "corrupt_record"): 2,
        ("/api/v1/files", "connection"): 2,
    }
