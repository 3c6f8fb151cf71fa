"""Resumable uploads (tus 1.0) on the blob store the run uses: an upload made, sent in pieces
(across S3's part size), asked where it is, finished into a file exactly once; each way a PATCH
can be wrong answered with its code and ``Tus-Resumable``; an upload continued by another
instance; a body cut off keeping what arrived."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
from pathlib import Path
from typing import Any

import pytest

from service.app import BLOBS, STORE
from service.auth.uploads import LEASE_MS
from service.domain import sha256_state
from service.domain.uploads import TAKEN
from tests.support.api import Api, bearer, path_of
from tests.support.openapi import validator
from tests.support.tus import (
    OCTETS,
    TUS,
    UPLOADS_URL,
    content_of,
    create,
    created,
    files_of,
    offset_of,
    send,
)

MIB = 1024 * 1024


def pattern(size: int) -> bytes:
    """Bytes that differ at every offset a piece could start at."""
    block = hashlib.sha256(b"seed").digest() * 2048
    return (block * (size // len(block) + 1))[:size]


async def test_options_tells_the_protocol_without_a_credential(api: Api) -> None:
    response = await api.client.options(UPLOADS_URL)
    assert response.status == 204
    headers = response.headers
    assert headers["Tus-Resumable"] == "1.0.0" and headers["Tus-Version"] == "1.0.0"
    assert set(headers["Tus-Extension"].split(",")) == {
        "creation",
        "creation-with-upload",
        "creation-defer-length",
        "termination",
        "expiration",
        "checksum",
    }
    assert int(headers["Tus-Max-Size"]) == 100 * MIB
    assert headers["Tus-Checksum-Algorithm"] == "sha1,sha256"


async def test_an_upload_sent_in_pieces_becomes_one_file(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    data = pattern(9 * MIB + 12345)  # past one S3 part, with a tail
    response = await create(api, auth, len(data), filename="video.mp4", filetype="video/mp4")
    assert response.status == 201
    origin = str(api.client.make_url("")).rstrip("/")
    assert response.headers["Location"].startswith(f"{origin}{UPLOADS_URL}/upl_")
    url = path_of(response.headers["Location"])
    assert response.headers["Tus-Resumable"] == "1.0.0"
    assert response.headers["Upload-Expires"].endswith(" GMT")
    answer = await response.json()
    validator("/components/schemas/UploadEnvelope").validate(answer)
    made = answer["data"]
    assert made["offset"] == 0 and made["length"] == len(data) and made["url"] == url

    head = await api.client.head(url, headers={**TUS, **auth})
    assert head.status == 200
    assert head.headers["Upload-Offset"] == "0"
    assert head.headers["Upload-Length"] == str(len(data))
    assert head.headers["Cache-Control"] == "no-store"

    cuts = [0, 3 * MIB + 7, 8 * MIB + 1, len(data)]
    for start, end in itertools.pairwise(cuts):
        answer = await send(api, url, auth, start, data[start:end])
        assert answer.status == 204, await answer.text()
        assert answer.headers["Upload-Offset"] == str(end)
        assert answer.headers["Tus-Resumable"] == "1.0.0"
    file_id = answer.headers["Filehost-File-Id"]
    assert answer.headers["Filehost-File-Url"] == f"{origin}/api/v1/files/{file_id}"
    assert await content_of(api, token, file_id) == data
    (listed,) = await files_of(api, token)
    assert listed["id"] == file_id
    assert (listed["name"], listed["content_type"]) == ("video.mp4", "video/mp4")
    assert listed["size"] == len(data)
    assert listed["sha256"] == hashlib.sha256(data).hexdigest()

    status = await api.client.get(url, headers=auth)
    answer = await status.json()
    validator("/components/schemas/UploadEnvelope").validate(answer)
    view = answer["data"]
    assert view["offset"] == view["length"] == len(data)
    assert view["file"]["id"] == file_id


async def test_an_upload_without_a_filetype_has_its_names(api: Api) -> None:
    """tuspy sends no type: the name's extension gives one, as for ``POST /files``."""
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 5, filename="notes.md")
    assert (await send(api, url, auth, 0, b"# hi\n")).status == 204
    (listed,) = await files_of(api, token)
    assert (listed["name"], listed["content_type"]) == ("notes.md", "text/markdown")


async def test_the_last_patch_retried_is_answered_with_the_same_file(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 5)
    first = await send(api, url, auth, 0, b"hello")
    again = await send(api, url, auth, 5, b"")
    assert again.status == 204
    assert again.headers["Filehost-File-Id"] == first.headers["Filehost-File-Id"]
    assert len(await files_of(api, token)) == 1
    late = await send(api, url, auth, 0, b"hello")
    assert late.status == 409
    assert (await late.json())["error"]["details"] == {"offset": 5}


async def test_a_patch_from_another_offset_is_409_with_the_uploads_offset(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 10)
    assert (await send(api, url, auth, 0, b"abcd")).status == 204
    wrong = await send(api, url, auth, 2, b"cdef")
    assert wrong.status == 409
    assert wrong.headers["Tus-Resumable"] == "1.0.0"
    error = (await wrong.json())["error"]
    assert error["code"] == "upload_offset_mismatch" and error["details"] == {"offset": 4}
    assert await offset_of(api, url, auth) == 4


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Tus-Resumable": "0.2.2"}, 412, "tus_version_unsupported"),
        ({"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
        ({"Upload-Offset": "-1"}, 400, "validation_failed"),
        ({"Upload-Offset": "1e3"}, 400, "validation_failed"),
        ({"Upload-Checksum": "md5 AAAA"}, 400, "validation_failed"),
        ({"Upload-Checksum": "sha1 not*base64"}, 400, "validation_failed"),
    ],
)
async def test_a_malformed_patch_is_refused_with_its_code(
    api: Api, headers: dict[str, str], status: int, code: str
) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 10)
    sent = {**TUS, **OCTETS, **auth, "Upload-Offset": "0", **headers}
    response = await api.client.patch(url, data=b"abc", headers=sent)
    assert response.status == status
    assert (await response.json())["error"]["code"] == code
    assert response.headers["Tus-Resumable"] == "1.0.0"
    if status == 412:
        assert response.headers["Tus-Version"] == "1.0.0"
    assert await offset_of(api, url, auth) == 0


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        ({}, "Upload-Length"),
        ({"Upload-Length": "ten"}, "Upload-Length"),
        ({"Upload-Length": "10", "Upload-Defer-Length": "1"}, "Upload-Defer-Length"),
        ({"Upload-Defer-Length": "2"}, "Upload-Defer-Length"),
        ({"Upload-Length": "10", "Upload-Metadata": "filename not-base64!"}, "Upload-Metadata"),
        ({"Upload-Length": "10", "Upload-Metadata": "a YQ==,a YQ=="}, "Upload-Metadata"),
        ({"Upload-Length": "10", "Upload-Metadata": "alias bWF5YmU="}, "Upload-Metadata"),
    ],
)
async def test_a_malformed_creation_names_its_header(
    api: Api, headers: dict[str, str], field: str
) -> None:
    token = await api.user_with_session()
    response = await api.client.post(UPLOADS_URL, headers={**TUS, **bearer(token), **headers})
    assert response.status == 400
    assert field in (await response.json())["error"]["details"]
    assert response.headers["Tus-Resumable"] == "1.0.0"


async def test_a_creation_without_the_tus_version_is_412(api: Api) -> None:
    token = await api.user_with_session()
    response = await api.client.post(UPLOADS_URL, headers={**bearer(token), "Upload-Length": "3"})
    assert response.status == 412
    assert response.headers["Tus-Version"] == "1.0.0"


async def test_bytes_past_the_length_are_refused_and_none_counted(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 4)
    response = await send(api, url, auth, 0, b"12345")
    assert response.status == 400
    assert await offset_of(api, url, auth) == 0
    assert (await send(api, url, auth, 0, b"1234")).status == 204


async def test_a_checksum_is_checked_before_the_bytes_count(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    data = pattern(6 * MIB)
    url = await created(api, auth, len(data))
    piece = data[: 5 * MIB]
    good = base64.b64encode(hashlib.sha1(piece).digest()).decode()  # noqa: S324 (tus's own)
    bad = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    refused = await send(api, url, auth, 0, piece, Upload_Checksum=f"sha256 {bad}")
    assert refused.status == 460
    assert refused.reason == "Checksum Mismatch"
    assert (await refused.json())["error"]["code"] == "upload_checksum_mismatch"
    assert await offset_of(api, url, auth) == 0
    taken = await send(api, url, auth, 0, piece, Upload_Checksum=f"sha1 {good}")
    assert taken.status == 204 and taken.headers["Upload-Offset"] == str(len(piece))
    rest = data[len(piece) :]
    digest = base64.b64encode(hashlib.sha256(rest).digest()).decode()
    done = await send(api, url, auth, len(piece), rest, Upload_Checksum=f"sha256 {digest}")
    assert done.status == 204
    assert await content_of(api, token, done.headers["Filehost-File-Id"]) == data
    (listed,) = await files_of(api, token)
    assert listed["sha256"] == hashlib.sha256(data).hexdigest()


async def test_a_deferred_length_is_told_by_a_later_patch(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, None, filename="stream.log")
    head = await api.client.head(url, headers={**TUS, **auth})
    assert head.headers["Upload-Defer-Length"] == "1" and "Upload-Length" not in head.headers
    assert (await send(api, url, auth, 0, b"first ")).status == 204
    last = await send(api, url, auth, 6, b"and last", Upload_Length="14")
    assert last.status == 204
    assert await content_of(api, token, last.headers["Filehost-File-Id"]) == b"first and last"


async def test_creation_with_upload_takes_the_first_bytes_at_once(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    headers = {**TUS, **OCTETS, **auth, "Upload-Length": "11"}
    response = await api.client.post(UPLOADS_URL, data=b"hello", headers=headers)
    assert response.status == 201
    assert response.headers["Upload-Offset"] == "5"
    url = path_of(response.headers["Location"])
    done = await send(api, url, auth, 5, b" world")
    assert await content_of(api, token, done.headers["Filehost-File-Id"]) == b"hello world"
    whole = await api.client.post(
        UPLOADS_URL, data=b"all", headers={**headers, "Upload-Length": "3"}
    )
    view = (await whole.json())["data"]
    assert whole.status == 201 and view["file"]["size"] == 3


async def test_a_terminated_upload_is_gone_and_its_file_never_made(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 10)
    assert (await send(api, url, auth, 0, b"12345")).status == 204
    ended = await api.client.delete(url, headers={**TUS, **auth})
    assert ended.status == 204 and ended.headers["Tus-Resumable"] == "1.0.0"
    head = await api.client.head(url, headers={**TUS, **auth})
    assert head.status == 404 and head.headers["Tus-Resumable"] == "1.0.0"
    answer = await send(api, url, auth, 5, b"67890")
    assert (await answer.json())["error"]["code"] == "upload_not_found"
    assert await files_of(api, token) == []


async def test_another_accounts_upload_is_an_unknown_one(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    url = await created(api, bearer(alice), 3)
    for answer in (
        await api.client.head(url, headers={**TUS, **bearer(bob)}),
        await send(api, url, bearer(bob), 0, b"abc"),
        await api.client.delete(url, headers={**TUS, **bearer(bob)}),
        await api.client.get(url, headers=bearer(bob)),
    ):
        assert answer.status == 404
    unknown = await api.client.head(f"{UPLOADS_URL}/upl_nope", headers={**TUS, **bearer(bob)})
    assert unknown.status == 404


async def test_another_instance_continues_an_upload(
    make_api: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await make_api(data_dir=tmp_path)
    second = await make_api(data_dir=tmp_path)
    if sha256_state.available():  # the hash goes on from the state the first one saved

        async def never(blob_id: str) -> None:
            raise AssertionError("the file was read back to be hashed again")

        monkeypatch.setattr(second.app[BLOBS], "open", never)
    token = await first.user_with_session()
    auth = bearer(token)
    data = pattern(9 * MIB + 3)
    url = await created(first, auth, len(data), filename="shared.bin")
    assert (await send(first, url, auth, 0, data[: 4 * MIB])).status == 204
    assert await offset_of(second, url, auth) == 4 * MIB
    done = await send(second, url, auth, 4 * MIB, data[4 * MIB :])
    assert done.status == 204
    file_id = done.headers["Filehost-File-Id"]
    assert await content_of(first, token, file_id) == data
    (listed,) = await files_of(first, token)
    assert listed["sha256"] == hashlib.sha256(data).hexdigest()


async def raw_patch(api: Api, url: str, token: str, offset: int, length: int) -> Any:
    """A PATCH announcing ``length`` bytes, its head sent: (reader, writer) to send the rest."""
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.server.port)
    writer.write(
        (
            f"PATCH {url} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
            f"Tus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\n"
            f"Upload-Offset: {offset}\r\nContent-Length: {length}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    return reader, writer


async def until(check: Any, seconds: float = 10.0) -> None:
    for _ in range(int(seconds * 20)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("never happened")


async def test_a_body_cut_off_keeps_what_arrived_and_a_writer_holds_the_upload(
    api: Api,
) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    data = pattern(2 * MIB)
    url = await created(api, auth, len(data))
    reader, writer = await raw_patch(api, url, token, 0, len(data))
    writer.write(data[: MIB + 5])
    await writer.drain()
    await asyncio.sleep(0.3)
    # While it writes, the upload is its own: another PATCH from the same offset is refused.
    busy = await send(api, url, auth, 0, data)
    assert busy.status == 409
    assert (await busy.json())["error"]["code"] == "upload_in_progress"
    assert 1 <= int(busy.headers["Retry-After"]) <= LEASE_MS // 1000
    writer.close()  # the connection drops mid-body

    async def kept() -> bool:
        return await offset_of(api, url, auth) == MIB + 5

    await until(kept)
    done = await send(api, url, auth, MIB + 5, data[MIB + 5 :])
    assert done.status == 204
    assert await content_of(api, token, done.headers["Filehost-File-Id"]) == data
    (listed,) = await files_of(api, token)
    assert listed["sha256"] == hashlib.sha256(data).hexdigest()
    del reader


async def test_an_upload_whose_writer_died_is_free_again_once_its_lease_runs_out(
    api: Api, clock: Any
) -> None:
    """A worker killed mid-PATCH never releases its lease: the next PATCH is told when to come
    back, and may write then."""
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 4)
    user_id = (await (await api.client.get("/api/v1/auth/session", headers=auth)).json())["data"][
        "user"
    ]["id"]
    now = clock.now_ms()
    claimed = await api.app[STORE].uploads.claim(
        user_id, url.rsplit("/", 1)[1], 0, "a-dead-writer", now + LEASE_MS, now
    )
    assert claimed == (TAKEN, None)
    busy = await send(api, url, auth, 0, b"data")
    assert (busy.status, busy.headers["Retry-After"]) == (409, str(LEASE_MS // 1000))
    clock.advance(seconds=LEASE_MS // 1000 - 1)
    assert (await send(api, url, auth, 0, b"data")).headers["Retry-After"] == "1"
    clock.advance(seconds=1)
    assert (await send(api, url, auth, 0, b"data")).status == 204
