"""The files resource: upload, list (cursor pages), metadata, content (Range, ETag) and delete.

Each test drives the service over HTTP as a client would, against the real Redis server of the
fixtures, with the blobs in a temporary directory of its own. Who may do what (a ``files.read``
key reads, a ``files.write`` key writes, a session does both), that another account's file is
an unknown one, and that no failure (a cut-off upload, the size limit, the quota, Redis) leaves
bytes or a record behind.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import redis as redis_sync
from redis.exceptions import ConnectionError as RedisConnectionError

from service.app import BLOBS
from service.domain.credentials import generate_api_key, generate_session_token
from service.store.files import FilesStore
from tests.support.api import Api, assert_error, bearer, path_of
from tests.support.blobs import is_directory, stored_names
from tests.support.files import auth, multipart, upload, uploaded
from tests.support.images import image_bytes
from tests.support.memory import PeakRss
from tests.support.openapi import validator

FILES_URL = "/api/v1/files"
MIB = 1024 * 1024


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


def with_bad_checksum(secret: str) -> str:
    last = secret[-1]
    return secret[:-1] + ("A" if last != "A" else "B")


async def listing(api: Api, query: str = "", **credential: str) -> dict[str, Any]:
    response = await api.client.get(FILES_URL + query, headers=auth(**credential))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def content(
    api: Api, file_id: str, headers: dict[str, str] | None = None, **credential: str
) -> Any:
    return await api.client.get(
        f"{FILES_URL}/{file_id}/content", headers={**auth(**credential), **(headers or {})}
    )


async def keys_for(api: Api, token: str) -> tuple[str, str]:
    reader = await api.create_key(token, name="reader", permissions=["files.read"])
    writer = await api.create_key(token, name="writer", permissions=["files.write"])
    return reader["secret_key"], writer["secret_key"]


# -- the whole story ---------------------------------------------------------------------------


async def test_a_writer_key_uploads_and_a_reader_key_lists_and_downloads_byte_for_byte(
    api: Api,
) -> None:
    token = await api.user_with_session()
    reader, writer = await keys_for(api, token)
    data = os.urandom(300_000) + b"\x00\r\n--xXxBoundary"  # binary, and boundary-like bytes

    response = await upload(api, data, key=writer, filename="report.bin")
    assert response.status == 201, await response.text()
    answer = await response.json()
    validator("/components/schemas/FileEnvelope").validate(answer)
    created = answer["data"]
    assert set(created) == {
        "id",
        "name",
        "size",
        "content_type",
        "sha256",
        "created_at",
        "folder_id",
        "url",
        "thumbnail_url",
    }
    assert created["id"].startswith("fil_") and created["name"] == "report.bin"
    assert created["thumbnail_url"] is None  # not an image
    assert created["folder_id"] is None  # at the top level
    origin = str(api.client.make_url("")).rstrip("/")  # absolute, as an alias's url
    assert created["url"] == f"{origin}{FILES_URL}/{created['id']}/content"
    assert created["size"] == len(data)
    assert created["sha256"] == hashlib.sha256(data).hexdigest()
    assert created["created_at"].endswith("Z")
    assert response.headers["Location"] == f"{FILES_URL}/{created['id']}"

    page = await listing(api, key=reader)
    assert page == {"files": [created], "next_cursor": None}
    meta = await api.client.get(f"{FILES_URL}/{created['id']}", headers=auth(key=reader))
    assert (await meta.json())["data"] == created

    download = await api.client.get(path_of(created["url"]), headers=auth(key=reader))
    assert download.status == 200
    assert await download.read() == data
    assert download.headers["Content-Length"] == str(len(data))
    assert download.headers["ETag"] == f'"{created["sha256"]}"'
    assert download.headers["Accept-Ranges"] == "bytes"
    assert download.headers["X-Content-Type-Options"] == "nosniff"
    assert await stored_names(api) == [created["id"]]  # named by id, nothing else left


async def test_a_session_does_everything(api: Api) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"session bytes", token=token)
    assert (await listing(api, token=token))["files"] == [created]
    assert await (await content(api, created["id"], token=token)).read() == b"session bytes"
    deleted = await api.client.delete(f"{FILES_URL}/{created['id']}", headers=bearer(token))
    assert deleted.status == 200, await deleted.text()
    body = (await deleted.json())["data"]
    assert body["id"] == created["id"] and body["deleted_at"].endswith("Z")
    assert await stored_names(api) == []  # the bytes are gone from storage
    assert (await listing(api, token=token))["files"] == []
    await assert_error(await content(api, created["id"], token=token), 404, "file_not_found")
    again = await api.client.delete(f"{FILES_URL}/{created['id']}", headers=bearer(token))
    await assert_error(again, 404, "file_not_found")


# -- permissions -------------------------------------------------------------------------------


async def test_a_files_read_key_can_neither_upload_nor_delete(api: Api) -> None:
    token = await api.user_with_session()
    reader, _ = await keys_for(api, token)
    created = await uploaded(api, b"x", token=token)

    error = await assert_error(await upload(api, b"y", key=reader), 403, "insufficient_permission")
    assert error["details"]["required_permission"] == "files.write"
    deleted = await api.client.delete(f"{FILES_URL}/{created['id']}", headers=auth(key=reader))
    await assert_error(deleted, 403, "insufficient_permission")
    assert await stored_names(api) == [created["id"]]
    assert (await listing(api, key=reader))["files"] == [created]


async def test_a_files_write_key_can_neither_list_nor_read(api: Api) -> None:
    token = await api.user_with_session()
    _, writer = await keys_for(api, token)
    created = await uploaded(api, b"secret", key=writer)
    for path in (FILES_URL, f"{FILES_URL}/{created['id']}", f"{FILES_URL}/{created['id']}/content"):
        response = await api.client.get(path, headers=auth(key=writer))
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"]["required_permission"] == "files.read"
        assert b"secret" not in await response.read()


@pytest.mark.parametrize("permissions", [["folders.read"], ["keys.write", "settings.write"]])
async def test_a_key_without_files_permissions_gets_nothing(
    api: Api, permissions: list[str]
) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token, permissions=permissions))["secret_key"]
    await assert_error(await upload(api, b"x", key=key), 403, "insufficient_permission")
    await assert_error(await api.files(key=key), 403, "insufficient_permission")
    assert await stored_names(api) == []


async def test_every_operation_refuses_a_missing_or_unknown_credential(api: Api) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"x", token=token)
    file_url = f"{FILES_URL}/{created['id']}"
    for credential, code in (
        ({}, "credential_missing"),
        ({"key": generate_api_key()}, "invalid_api_key"),
        ({"key": with_bad_checksum(generate_api_key())}, "invalid_api_key"),
        ({"token": generate_session_token()}, "invalid_session"),
    ):
        headers = auth(**credential)
        await assert_error(await api.client.get(FILES_URL, headers=headers), 401, code)
        await assert_error(await upload(api, b"y", **credential), 401, code)
        await assert_error(await api.client.get(file_url, headers=headers), 401, code)
        await assert_error(await api.client.get(file_url + "/content", headers=headers), 401, code)
        await assert_error(await api.client.delete(file_url, headers=headers), 401, code)
    assert await stored_names(api) == [created["id"]]


async def test_a_revoked_key_no_longer_lists_files(api: Api) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token)
    assert (await api.files(key=key["secret_key"])).status == 200
    revoked = await api.client.delete(f"/api/v1/keys/{key['id']}", headers=bearer(token))
    assert revoked.status == 200
    await assert_error(await api.files(key=key["secret_key"]), 401, "api_key_revoked")


# -- accounts are apart ------------------------------------------------------------------------


async def test_another_accounts_file_is_exactly_an_unknown_one(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    bob_key = (await api.create_key(bob, permissions=["files.read", "files.write"]))["secret_key"]
    secret = await uploaded(api, b"alice's secret", token=alice, filename="alice-secret.pdf")
    unknown = "fil_" + "0" * 22

    for credential in ({"token": bob}, {"key": bob_key}):
        body = json.dumps(await listing(api, **credential))
        assert secret["id"] not in body and "alice-secret" not in body
        for file_id in (secret["id"], unknown, "not-an-id", "fil_../../etc"):
            for method, suffix in (("GET", ""), ("GET", "/content"), ("DELETE", "")):
                response = await api.client.request(
                    method, f"{FILES_URL}/{file_id}{suffix}", headers=auth(**credential)
                )
                error = await assert_error(response, 404, "file_not_found")
                assert error == {"code": "file_not_found", "message": "No such file."}
    # Alice's file is untouched.
    assert await (await content(api, secret["id"], token=alice)).read() == b"alice's secret"


# -- uploads that fail leave nothing -----------------------------------------------------------


def file_keys(redis_client: redis_sync.Redis) -> list[str]:
    return sorted(k for k in redis_client.keys("*") if k.endswith((":files", ":file-order")))


async def test_an_upload_cut_off_half_way_leaves_no_bytes_and_no_record(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    # Half of it past a part (8 MiB): in an object store too, a multipart upload is under way.
    body, headers = multipart(os.urandom(20 * MIB))
    head = (
        f"POST {FILES_URL} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: {headers['Content-Type']}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.port)
    writer.write(head + body[: len(body) // 2])
    await writer.drain()
    deadline = time.monotonic() + 10
    while not await stored_names(api):  # the upload is being written
        assert time.monotonic() < deadline, "the upload never reached storage"
        await asyncio.sleep(0.01)
    writer.close()  # the client goes away half-way
    while left := await stored_names(api):
        assert time.monotonic() < deadline, f"left behind: {left}"
        await asyncio.sleep(0.01)
    assert file_keys(redis_client) == []
    assert (await listing(api, token=token))["files"] == []
    del reader


async def test_the_size_limit_is_exact_and_a_larger_file_is_refused_without_reading_on(
    make_api: Any, tmp_path: Path, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(data_dir=tmp_path, max_upload_bytes=MIB)
    token = await api.user_with_session()
    exact = await uploaded(api, b"a" * MIB, token=token)
    assert exact["size"] == MIB

    # Streamed, with no Content-Length: refused when the limit is passed, long before the end.
    total = 64 * MIB
    sent = 0

    async def stream() -> AsyncIterator[bytes]:
        nonlocal sent
        body, _ = multipart(b"")
        opening = body[: body.index(b"\r\n\r\n") + 4]
        yield opening
        while sent < total:
            sent += 64 * 1024
            yield b"b" * (64 * 1024)
            await asyncio.sleep(0)

    _, headers = multipart(b"")
    response = await api.client.post(FILES_URL, data=stream(), headers={**headers, **bearer(token)})
    error = await assert_error(response, 413, "payload_too_large")
    assert error["details"] == {"max_bytes": MIB}
    assert response.headers["Connection"] == "close"
    # What the client got to send before the answer closed the connection: what aiohttp read and
    # discarded meanwhile, which a busy machine lengthens; a server reading on would take it all.
    assert sent < total // 4, f"the client sent {sent} bytes of a refused upload"

    # A declared Content-Length past the limit is refused before the body is read at all.
    body, headers = multipart(b"c" * (MIB + 128 * 1024))
    response = await api.client.post(FILES_URL, data=body, headers={**headers, **bearer(token)})
    await assert_error(response, 413, "payload_too_large")

    # One byte over, declared within the framing allowance: refused by counting.
    response = await upload(api, b"d" * (MIB + 1), token=token)
    await assert_error(response, 413, "payload_too_large")

    assert await stored_names(api) == [exact["id"]]
    assert [f["id"] for f in (await listing(api, token=token))["files"]] == [exact["id"]]


async def test_a_store_failure_when_recording_leaves_no_bytes(
    api: Api, monkeypatch: pytest.MonkeyPatch, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()

    async def failing(*args: Any, **kwargs: Any) -> bool:
        raise RedisConnectionError("connection to Redis lost")

    monkeypatch.setattr(FilesStore, "add", failing)
    await assert_error(
        await upload(api, os.urandom(100_000), token=token), 503, "store_unavailable"
    )
    assert await stored_names(api) == []
    assert file_keys(redis_client) == []


async def test_the_account_quota_is_409_file_limit_reached(make_api: Any, tmp_path: Path) -> None:
    api = await make_api(data_dir=tmp_path, max_files_per_account=2)
    token = await api.user_with_session()
    first = await uploaded(api, b"1", token=token)
    await uploaded(api, b"2", token=token)
    error = await assert_error(await upload(api, b"3", token=token), 409, "file_limit_reached")
    assert error["details"] == {"max_files": 2}
    assert len(await stored_names(api)) == 2
    # Concurrent uploads at the limit: the check at the end holds, whatever raced.
    deleted = await api.client.delete(f"{FILES_URL}/{first['id']}", headers=bearer(token))
    assert deleted.status == 200
    answers = await asyncio.gather(*(upload(api, b"race", token=token) for _ in range(6)))
    assert sorted(r.status for r in answers) == [201] + [409] * 5
    assert len(await stored_names(api)) == 2
    assert len((await listing(api, token=token))["files"]) == 2


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({"Content-Type": "application/json"}, b"{}", 415, "unsupported_media_type"),
        ({"Content-Type": "application/octet-stream"}, b"raw", 415, "unsupported_media_type"),
        ({}, b"", 415, "unsupported_media_type"),
        ({"Content-Type": "multipart/form-data"}, b"no boundary", 400, "validation_failed"),
        (
            {"Content-Type": "multipart/form-data; boundary=zz"},
            b"--zz--\r\n",
            400,
            "validation_failed",
        ),
        (
            {"Content-Type": "multipart/form-data; boundary=zz"},
            b"garbage without any boundary",
            400,
            "validation_failed",
        ),
    ],
)
async def test_a_body_that_is_not_one_file_is_refused(
    api: Api, headers: dict[str, str], body: bytes, status: int, code: str
) -> None:
    token = await api.user_with_session()
    response = await api.client.post(FILES_URL, data=body, headers={**headers, **bearer(token)})
    error = await assert_error(response, status, code)
    if headers.get("Content-Type") == "multipart/form-data":
        # The cause named: a Content-Type set by hand without the library's boundary.
        assert error["details"]["body"].startswith("has no boundary: the Content-Type must name")
    assert await stored_names(api) == []


@pytest.mark.parametrize(
    "rest",
    [b"\r\nthe rest\r\n", b"\r\n\r\nthe rest\r\n"],
    ids=["a line after it", "a blank line after it"],
)
async def test_a_file_holding_its_boundary_is_refused_saying_so(api: Api, rest: bytes) -> None:
    # openapi-python-client's fixed boundary "+++" inside the file: the file's bytes end there,
    # and what follows is no part. The refusal names that cause, not a malformed body.
    token = await api.user_with_session()
    body = (
        b'--+++\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        b"abc\r\n--+++" + rest + b"\r\n--+++--\r\n"
    )
    headers = {"Content-Type": "multipart/form-data; boundary=+++", **bearer(token)}
    response = await api.client.post(FILES_URL, data=body, headers=headers)
    error = await assert_error(response, 400, "validation_failed")
    assert error["details"] == {
        "body": "breaks off after the file: the file holds the boundary (a line starting with "
        "-- and the boundary); send it with a boundary that does not occur in it"
    }
    assert await stored_names(api) == []


async def test_another_field_than_file_and_folder_id_or_a_second_file_is_refused_and_nothing_kept(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    error = await assert_error(
        await upload(api, b"x", token=token, field="upload"), 400, "validation_failed"
    )
    assert "upload" in error["details"]
    second = b'--xXxBoundaryxXx\r\nContent-Disposition: form-data; name="more"\r\n\r\nmore\r\n'
    error = await assert_error(
        await upload(api, b"x", token=token, extra=second), 400, "validation_failed"
    )
    assert error["details"] == {
        "more": "is not a known field; send file and, optionally, folder_id and alias"
    }
    again = b'--xXxBoundaryxXx\r\nContent-Disposition: form-data; name="file"\r\n\r\nmore\r\n'
    error = await assert_error(
        await upload(api, b"x", token=token, extra=again), 400, "validation_failed"
    )
    assert error["details"] == {"file": "must be sent once"}
    assert await stored_names(api) == []
    assert file_keys(redis_client) == []


async def test_a_file_holding_its_own_closing_boundary_is_refused_not_cut_short(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    # A client with a fixed boundary (openapi-python-client's "+++") sends a file that holds
    # the closing delimiter: the file's bytes would end there and the rest would be dropped.
    token = await api.user_with_session()
    content = b"abc\r\n--+++--\r\nthe rest of the file\r\nand more of it\r\n"
    body = (
        b'--+++\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\n" + content + b"\r\n--+++--\r\n"
    )
    headers = {"Content-Type": "multipart/form-data; boundary=+++", **bearer(token)}
    response = await api.client.post(FILES_URL, data=body, headers=headers)
    error = await assert_error(response, 400, "validation_failed")
    assert "closing boundary" in error["details"]["body"]
    assert await stored_names(api) == []
    assert file_keys(redis_client) == []


async def test_an_empty_epilogue_after_the_closing_boundary_is_fine(api: Api) -> None:
    token = await api.user_with_session()
    body = (
        b'--zz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
        b"abc\r\n--zz--\r\n\r\n\r\n"
    )
    headers = {"Content-Type": "multipart/form-data; boundary=zz", **bearer(token)}
    response = await api.client.post(FILES_URL, data=body, headers=headers)
    assert response.status == 201, await response.text()
    assert (await response.json())["data"]["size"] == 3


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("../../etc/passwd", "passwd"),
        ("/etc/shadow", "shadow"),
        ("..", "unnamed"),
        ("C:\\Users\\me\\..\\report.pdf", "report.pdf"),
        ("a\\..\\..\\b.txt", "b.txt"),
        ("  spaced name.txt  ", "spaced name.txt"),
        ("tab\there.txt", "tabhere.txt"),
        ("", "unnamed"),
        ("résumé 履歴書 🙂.txt", "résumé 履歴書 🙂.txt"),
        ("x" * 300 + ".txt", "x" * 251 + ".txt"),
        ("y" * 300, "y" * 255),
        ("z" * 300 + ".an-extension-too-long-to-keep", "z" * 255),
        ('quote"and;semi.txt', 'quote"and;semi.txt'),
        ("100%.txt", "100%.txt"),
    ],
)
async def test_odd_names_are_kept_for_display_only(api: Api, sent: str, kept: str | None) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"odd", token=token, filename=sent)
    if kept is not None:
        assert created["name"] == kept
    assert 1 <= len(created["name"]) <= 255
    assert "/" not in created["name"] and "\\" not in created["name"]
    assert await stored_names(api) == [created["id"]]  # the blob is named by id, nowhere else
    if is_directory(api):
        assert sorted(p.name for p in api.app[BLOBS].root.parent.iterdir()) == ["files"]

    download = await content(api, created["id"], token=token)
    disposition = download.headers["Content-Disposition"]
    assert disposition.isascii() and "\r" not in disposition and "\n" not in disposition
    encoded = disposition.split("filename*=UTF-8''", 1)[1]
    assert unquote(encoded, errors="strict") == created["name"]
    fallback = disposition.split('filename="', 1)[1].split('"', 1)[0]
    assert "\\" not in fallback and "%" not in fallback


async def test_a_nul_or_newline_in_a_name_never_reaches_storage(api: Api) -> None:
    token = await api.user_with_session()
    response = await upload(api, b"nul", token=token, filename=b"evil\x00.txt")
    if response.status == 201:  # the parser may also refuse the header outright
        assert (await response.json())["data"]["name"] == "evil.txt"
    else:
        assert response.status == 400
    assert all(p.startswith("fil_") for p in await stored_names(api))


# -- what a download says ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "stored", "served", "disposition"),
    [
        ("text/plain", "text/plain", "text/plain", "inline"),
        ("image/PNG", "image/png", "image/png", "inline"),
        ("text/html; charset=utf-8", "text/html", "application/octet-stream", "attachment"),
        ("image/svg+xml", "image/svg+xml", "application/octet-stream", "attachment"),
        (
            "application/javascript",
            "application/javascript",
            "application/octet-stream",
            "attachment",
        ),
        (
            "application/xhtml+xml",
            "application/xhtml+xml",
            "application/octet-stream",
            "attachment",
        ),
        ("application/pdf", "application/pdf", "application/octet-stream", "attachment"),
        # An unreadable type is none: the name's extension says what it is.
        ("not a type", "text/html", "application/octet-stream", "attachment"),
    ],
)
async def test_risky_types_are_never_served_as_something_a_browser_renders(
    api: Api, declared: str, stored: str, served: str, disposition: str
) -> None:
    token = await api.user_with_session()
    created = await uploaded(
        api, b"<script>alert(1)</script>", token=token, content_type=declared, filename="x.html"
    )
    assert created["content_type"] == stored
    download = await content(api, created["id"], token=token)
    assert download.headers["Content-Type"].split(";")[0] == served
    assert download.headers["Content-Disposition"].startswith(disposition + ";")
    assert download.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert download.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    ("filename", "declared", "stored"),
    [
        ("photo.PNG", None, "image/png"),
        ("photo.png", "application/octet-stream", "image/png"),  # what curl sends unsure
        ("photo.png", "image/jpeg", "image/jpeg"),  # a declared type is kept as it is
        ("clip.webm", None, "video/webm"),
        ("voice.m4a", None, "audio/mp4"),
        ("song.flac", "application/octet-stream", "audio/flac"),
        ("README.md", None, "text/markdown"),
        ("paper.pdf", None, "application/pdf"),
        ("bundle.zip", None, "application/zip"),  # Python's table of registered types
        ("page.html", None, "text/html"),  # and still served only as a download
        (".bashrc", None, "application/octet-stream"),
        ("no-extension", None, "application/octet-stream"),
        ("odd.qqzx", None, "application/octet-stream"),
    ],
)
async def test_a_file_sent_without_a_type_has_its_extensions(
    api: Api, filename: str, declared: str | None, stored: str
) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"bytes", token=token, filename=filename, content_type=declared)
    assert created["content_type"] == stored
    (listed,) = (await listing(api, token=token))["files"]
    assert listed["content_type"] == stored


async def test_a_picture_sent_without_a_type_is_shown_and_has_a_thumbnail(api: Api) -> None:
    """A script's upload (Python's requests sends no type for a file) is a picture like any."""
    token = await api.user_with_session()
    picture = image_bytes("PNG", (64, 48))
    created = await uploaded(api, picture, token=token, filename="shot.png", content_type=None)
    assert created["content_type"] == "image/png"
    assert created["thumbnail_url"] == f"/api/v1/files/{created['id']}/thumbnail"
    download = await content(api, created["id"], token=token)
    assert download.headers["Content-Type"] == "image/png"
    assert download.headers["Content-Disposition"].startswith("inline;")
    thumbnail = await api.client.get(created["thumbnail_url"], headers=bearer(token))
    assert thumbnail.status == 200 and thumbnail.content_type == "image/webp"


async def test_range_requests(api: Api) -> None:
    token = await api.user_with_session()
    data = bytes(range(256)) * 40  # 10240 bytes
    created = await uploaded(api, data, token=token)
    size = len(data)

    async def ranged(value: str, **extra: str) -> Any:
        return await content(api, created["id"], {"Range": value, **extra}, token=token)

    for header, start, end in (
        ("bytes=0-99", 0, 99),
        ("bytes=100-", 100, size - 1),
        ("bytes=-10", size - 10, size - 1),
        ("bytes=-999999", 0, size - 1),
        ("bytes=10000-99999", 10000, size - 1),
        ("bytes=5-5", 5, 5),
        ("bytes=0-10240", 0, size - 1),
        ("bytes=0-99999999999999999999999999", 0, size - 1),
        ("bytes=10-" + "9" * 5000, 10, size - 1),
        ("bytes=-" + "9" * 5000, 0, size - 1),
        ("bytes=0000000000000000000000000010-19", 10, 19),
        ("BYTES=0-99", 0, 99),  # a unit's name is case-insensitive (RFC 9110 14.1)
        ("Bytes=5-5", 5, 5),
    ):
        response = await ranged(header)
        assert response.status == 206, header
        assert await response.read() == data[start : end + 1], header
        assert response.headers["Content-Range"] == f"bytes {start}-{end}/{size}"
        assert response.headers["Content-Length"] == str(end - start + 1)

    for header in ("bytes=10240-", "bytes=99999-100000", "bytes=-0", "bytes=" + "9" * 5000 + "-"):
        response = await ranged(header)
        error = await assert_error(response, 416, "range_not_satisfiable")
        assert response.headers["Content-Range"] == f"bytes */{size}"
        assert error["details"] == {"size": size}

    # Ignored, whole file: several ranges, a malformed one, another unit, a stale If-Range.
    for header, extra in (
        ("bytes=0-1,5-6", {}),
        ("bytes=9-3", {}),
        ("items=0-1", {}),
        ("bytes=abc", {}),
        ("bytes=0-99", {"If-Range": '"not-the-etag"'}),
    ):
        response = await ranged(header, **extra)
        assert response.status == 200, header
        assert await response.read() == data
    response = await ranged("bytes=0-99", **{"If-Range": f'"{created["sha256"]}"'})
    assert response.status == 206


async def test_etag_and_if_none_match(api: Api) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"cache me", token=token)
    etag = f'"{created["sha256"]}"'
    for value in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = await content(api, created["id"], {"If-None-Match": value}, token=token)
        assert response.status == 304, value
        assert response.headers["ETag"] == etag
        assert await response.read() == b""
    response = await content(api, created["id"], {"If-None-Match": '"other"'}, token=token)
    assert response.status == 200 and await response.read() == b"cache me"


async def test_head_answers_a_downloads_headers_without_its_bytes(api: Api) -> None:
    """As download tools ask before they download: the size, the ETag, ranges."""
    token = await api.user_with_session()
    reader, writer = await keys_for(api, token)
    small = await uploaded(api, b"cache me", token=token)
    # Past what a worker keeps in memory: streamed from the file storage.
    large_data = os.urandom(MIB + 3)
    large = await uploaded(api, large_data, token=token)
    for made, size in ((small, 8), (large, len(large_data))):
        path = f"{FILES_URL}/{made['id']}/content"
        get = await api.client.get(path, headers=auth(key=reader))
        head = await api.client.head(path, headers=auth(key=reader))
        assert (head.status, await head.read()) == (200, b"")
        for name in ("Content-Length", "Content-Type", "ETag", "Accept-Ranges"):
            assert head.headers[name] == get.headers[name], name
        assert head.headers["Content-Length"] == str(size)
        ranged = await api.client.head(path, headers={**auth(key=reader), "Range": "bytes=2-5"})
        assert (ranged.status, ranged.headers["Content-Range"]) == (206, f"bytes 2-5/{size}")
        assert await ranged.read() == b""
        for refused, status in (
            (await api.client.head(path, headers=auth(key=writer)), 403),
            (await api.client.head(path), 401),
        ):
            assert (refused.status, await refused.read()) == (status, b"")
    image = await uploaded(
        api, image_bytes("PNG", (400, 300)), token=token, filename="a.png", content_type="image/png"
    )
    thumbnail = f"{FILES_URL}/{image['id']}/thumbnail"
    got = await api.client.get(thumbnail, headers=auth(key=reader))
    head = await api.client.head(thumbnail, headers=auth(key=reader))
    assert (head.status, head.headers["Content-Type"], await head.read()) == (
        200,
        "image/webp",
        b"",
    )
    assert head.headers["Content-Length"] == str(len(await got.read()))
    # The API's other routes take GET alone.
    listed = await api.client.head(FILES_URL, headers=auth(key=reader))
    assert (listed.status, listed.headers["Allow"]) == (405, "GET, POST")


async def test_an_empty_file(api: Api) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, b"", token=token)
    assert created["size"] == 0 and created["sha256"] == hashlib.sha256(b"").hexdigest()
    response = await content(api, created["id"], token=token)
    assert response.status == 200 and await response.read() == b""
    await assert_error(
        await content(api, created["id"], {"Range": "bytes=0-"}, token=token),
        416,
        "range_not_satisfiable",
    )


# -- the list ----------------------------------------------------------------------------------


async def test_an_account_without_files_lists_none(api: Api) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token, permissions=["settings.write", "files.read", "keys.read"])
    for credential in ({"token": token}, {"key": key["secret_key"]}):
        response = await api.files(**credential)
        assert response.status == 200, await response.text()
        assert response.content_type == "application/json"
        assert await response.json() == {
            "success": True,
            "data": {"files": [], "next_cursor": None},
        }


async def test_pages_cover_every_file_once_newest_first_while_others_upload(
    api: Api, clock: Any
) -> None:
    token = await api.user_with_session()
    before = []
    for index in range(25):
        created = await uploaded(api, b"%d" % index, token=token, filename=f"f{index}.txt")
        before.append((clock.ms, created["id"]))
        clock.advance(seconds=0.001 * (index % 3))  # some share a millisecond
    expected = [file_id for _ms, file_id in sorted(before, reverse=True)]  # ties: by id

    seen: list[str] = []
    during: list[dict[str, Any]] = []
    cursor = ""
    pages = 0
    while True:
        page = await listing(api, f"?limit=7{cursor}", token=token)
        pages += 1
        seen += [f["id"] for f in page["files"]]
        # Uploads land between pages, concurrently with the next page's read.
        clock.advance(seconds=1)
        during += await asyncio.gather(*(uploaded(api, b"new", token=token) for _ in range(3)))
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert pages == 4
    assert seen == expected  # every earlier file once, in order, none of the new
    assert len(seen) == len(set(seen))

    everything = await listing(api, "?limit=1000", token=token)
    assert len(everything["files"]) == 25 + len(during)
    assert everything["next_cursor"] is None
    assert [f["id"] for f in everything["files"]][-25:] == expected


async def test_a_deleted_files_cursor_still_leads_on(api: Api) -> None:
    token = await api.user_with_session()
    ids = [(await uploaded(api, b"x", token=token))["id"] for _ in range(4)]
    first = await listing(api, "?limit=2", token=token)
    last_on_page = first["files"][-1]["id"]
    await api.client.delete(f"{FILES_URL}/{last_on_page}", headers=bearer(token))
    second = await listing(api, f"?limit=2&cursor={first['next_cursor']}", token=token)
    assert {f["id"] for f in first["files"]} | {f["id"] for f in second["files"]} == set(ids)
    assert second["next_cursor"] is None


async def test_a_cursor_is_a_position_any_well_formed_one_starts_a_page_after_it(
    api: Api, clock: Any
) -> None:
    # Documented: a cursor encodes (upload time, id) and is not a token the service hands out.
    token = await api.user_with_session()
    old = await uploaded(api, b"old", token=token)
    clock.advance(seconds=10)
    new = await uploaded(api, b"new", token=token)
    between = base64.urlsafe_b64encode(f"{clock.ms - 5000:013d}:fil_{'0' * 22}".encode())
    cursor = between.decode().rstrip("=")

    page = await listing(api, f"?cursor={cursor}", token=token)

    assert [f["id"] for f in page["files"]] == [old["id"]]
    assert new["id"] != old["id"]


@pytest.mark.parametrize(
    "query",
    [
        "?limit=0",
        "?limit=1001",
        "?limit=-1",
        "?limit=ten",
        "?limit=",
        "?limit=1.5",
        "?limit=%EF%BC%91",  # a fullwidth digit
        "?limit=1&limit=2",
        "?cursor=",
        "?cursor=nonsense",
        "?cursor=MTIzOmZpbF94",
        "?cursor=" + "A" * 100,
    ],
)
async def test_a_bad_limit_or_cursor_is_validation_failed(api: Api, query: str) -> None:
    token = await api.user_with_session()
    response = await api.client.get(FILES_URL + query, headers=bearer(token))
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) <= {"limit", "cursor"}


async def test_corrupt_file_record_fails_closed(api: Api, redis_client: redis_sync.Redis) -> None:
    alice = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    created = await uploaded(api, b"x", token=token)
    position = redis_client.hget(f"fh:{{{alice.id}}}:files", created["id"])[:40]
    redis_client.hset(f"fh:{{{alice.id}}}:files", created["id"], position + ":{not json")
    redis_client.zadd(f"fh:{{{alice.id}}}:file-order", {position + ":{not json": 0})
    await assert_error(await api.files(token=token), 503, "store_unavailable")
    response = await api.client.get(f"{FILES_URL}/{created['id']}", headers=bearer(token))
    await assert_error(response, 503, "store_unavailable")


async def test_the_metadata_lives_under_the_accounts_hash_tag(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    alice = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    created = await uploaded(api, b"x", token=token)
    assert file_keys(redis_client) == [
        f"fh:{{{alice.id}}}:file-order",
        f"fh:{{{alice.id}}}:files",
    ]
    member = redis_client.hget(f"fh:{{{alice.id}}}:files", created["id"])
    assert redis_client.zrange(f"fh:{{{alice.id}}}:file-order", 0, -1) == [member]
    position, record = member[:40], json.loads(member[41:])
    assert position == f"{record['created_at']:013d}:{created['id']}"
    assert record["id"] == created["id"] and record["size"] == 1


# -- memory ------------------------------------------------------------------------------------


async def test_a_50_mib_upload_and_download_keep_memory_bounded(api: Api) -> None:
    """Service and client share this process, so the bound covers both: the file is generated
    and checked chunk by chunk, and neither side may hold it whole."""
    token = await api.user_with_session()
    size = 50 * MIB
    chunk = os.urandom(MIB)
    expected = hashlib.sha256()
    for _ in range(size // MIB):
        expected.update(chunk)
    body, headers = multipart(b"")
    opening, closing = body.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n", b"\r\n--xXxBoundaryxXx--\r\n"

    async def stream() -> AsyncIterator[bytes]:
        yield opening
        for _ in range(size // MIB):
            yield chunk
        yield closing

    await uploaded(api, b"warm-up", token=token)  # first-use allocations out of the measure
    with PeakRss() as upload_rss:
        response = await api.client.post(
            FILES_URL, data=stream(), headers={**headers, **bearer(token)}
        )
        assert response.status == 201, await response.text()
    created = (await response.json())["data"]
    assert created["size"] == size and created["sha256"] == expected.hexdigest()

    with PeakRss() as download_rss:
        response = await content(api, created["id"], token=token)
        received = hashlib.sha256()
        length = 0
        async for piece in response.content.iter_chunked(256 * 1024):
            received.update(piece)
            length += len(piece)
    assert length == size and received.hexdigest() == expected.hexdigest()
    print(
        f"RSS growth: upload {upload_rss.growth / MIB:.1f} MiB, "
        f"download {download_rss.growth / MIB:.1f} MiB for {size // MIB} MiB"
    )
    # In an object store, an upload holds its part buffer and the parts on their way (each
    # twice while the socket takes it): bounded whatever the size (docs/performance.md).
    bound = 16 * MIB if is_directory(api) else 64 * MIB
    assert upload_rss.growth < bound, upload_rss.growth
    assert download_rss.growth < 16 * MIB, download_rss.growth


# -- forward-auth keeps mapping the resource ---------------------------------------------------


@pytest.mark.parametrize(
    ("method", "uri", "needed"),
    [
        ("GET", "/api/v1/files", "files.read"),
        ("GET", "/api/v1/files/fil_0000000000000000000000/content", "files.read"),
        ("POST", "/api/v1/files", "files.write"),
        ("DELETE", "/api/v1/files/fil_0000000000000000000000", "files.write"),
    ],
)
async def test_forward_auth_maps_the_files_routes_by_method(
    api: Api, method: str, uri: str, needed: str
) -> None:
    token = await api.user_with_session()
    reader, writer = await keys_for(api, token)
    for key, allowed in ((reader, needed == "files.read"), (writer, needed == "files.write")):
        response = await api.client.get(
            "/api/v1/auth/verify",
            headers={"X-API-Key": key, "X-Original-Method": method, "X-Original-URI": uri},
        )
        assert response.status == (200 if allowed else 403), (method, uri, await response.text())


async def test_listing_an_empty_account_with_a_key_is_one_command_besides_the_credential(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token, permissions=["files.read"]))["secret_key"]
    redis_client.config_resetstat()
    assert (await api.files(key=key)).status == 200
    stats = redis_client.info("commandstats")
    calls = {name: value["calls"] for name, value in stats.items()}
    # The files part of the request: one ZRANGE, nothing else that reads an account's files.
    assert calls.get("cmdstat_zrange") == 1
    assert not {"cmdstat_hgetall", "cmdstat_hget", "cmdstat_zcard"} & set(calls), calls
