"""Resumable uploads at their edges, on the blob store the run uses: an upload of no bytes, a body
that goes past the length, bytes sent to a finished upload, a last step that failed after every
byte was in, a creation whose first bytes are refused or fail, a ``PATCH`` whose upload was
terminated under it, and a key bound to folders asking about an upload outside them. Each ends
with a file a tus client can see, or with nothing of the upload left behind."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from service.api.context import POLICY
from service.domain.blobs import StorageUnavailable
from tests.support.api import Api, assert_error, bearer, path_of
from tests.support.tus import (
    OCTETS,
    TUS,
    UPLOADS_URL,
    bound_inside,
    content_of,
    created,
    files_of,
    nothing_left,
    offset_of,
    send,
)

MIB = 1024 * 1024


async def chunked(*pieces: bytes, between: asyncio.Event | None = None) -> AsyncIterator[bytes]:
    """A body sent in chunks, without a ``Content-Length``; after the first, it waits for
    ``between`` when given."""
    for index, piece in enumerate(pieces):
        if index and between is not None:
            await between.wait()
        yield piece


async def test_an_upload_of_no_bytes_is_finished_at_creation(api: Api) -> None:
    # tus clients send no PATCH for an empty file: the creation must make it.
    token = await api.user_with_session()
    auth = bearer(token)
    headers = {**TUS, **auth, "Upload-Length": "0"}
    made = await api.client.post(UPLOADS_URL, headers=headers)
    assert made.status == 201, await made.text()
    file_id = made.headers["Filehost-File-Id"]
    assert (await made.json())["data"]["file"]["size"] == 0
    assert await content_of(api, token, file_id) == b""
    # Its length told later, as 0, by an empty PATCH: the same.
    deferred = await created(api, auth, None)
    told = await send(api, deferred, auth, 0, b"", Upload_Length="0")
    assert told.status == 204, await told.text()
    assert await content_of(api, token, told.headers["Filehost-File-Id"]) == b""
    assert len(await files_of(api, token)) == 2
    await nothing_left(api)


async def test_a_body_going_past_the_length_leaves_the_upload_short_of_its_end(api: Api) -> None:
    # Were the bytes up to the length kept, a tus client asking would hear "all in" and stop,
    # with no file made.
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 6)
    headers = {**TUS, **OCTETS, **auth, "Upload-Offset": "0"}
    refused = await api.client.patch(url, data=chunked(b"abc", b"defXYZ"), headers=headers)
    await assert_error(refused, 400, "validation_failed")
    assert await offset_of(api, url, auth) < 6
    assert await files_of(api, token) == []
    offset = await offset_of(api, url, auth)
    done = await send(api, url, auth, offset, b"abcdef"[offset:])
    assert await content_of(api, token, done.headers["Filehost-File-Id"]) == b"abcdef"


async def test_bytes_sent_to_a_finished_upload_are_refused(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 3)
    done = await send(api, url, auth, 0, b"abc")
    more = await send(api, url, auth, 3, b"def")
    await assert_error(more, 400, "validation_failed")
    headers = {**TUS, **OCTETS, **auth, "Upload-Offset": "3"}
    unsized = await api.client.patch(url, data=chunked(b"d", b"ef"), headers=headers)
    await assert_error(unsized, 400, "validation_failed")
    again = await send(api, url, auth, 3, b"")  # the last PATCH retried: its file
    assert again.headers["Filehost-File-Id"] == done.headers["Filehost-File-Id"]
    assert await content_of(api, token, done.headers["Filehost-File-Id"]) == b"abc"


async def test_an_upload_all_in_whose_file_was_not_made_is_finished_when_asked(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 4, filename="late.txt")
    uploads = api.app[POLICY].uploads
    partials = uploads._partials
    finish = partials.finish

    async def unavailable(partial: Any) -> None:
        raise StorageUnavailable("unreachable")

    monkeypatch.setattr(partials, "finish", unavailable)
    failed = await send(api, url, auth, 0, b"late")
    await assert_error(failed, 503, "storage_unavailable")
    monkeypatch.setattr(partials, "finish", finish)
    head = await api.client.head(url, headers={**TUS, **auth})
    assert head.status == 200 and head.headers["Upload-Offset"] == "4"
    (made,) = await files_of(api, token)
    assert made["name"] == "late.txt"
    assert await content_of(api, token, made["id"]) == b"late"
    view = await api.client.get(url, headers=auth)
    assert (await view.json())["data"]["file"]["id"] == made["id"]
    assert view.headers["Tus-Resumable"] == "1.0.0"


async def test_a_patch_without_a_content_type_is_415(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 3)
    headers = {**TUS, **auth, "Upload-Offset": "0"}
    untyped = await api.client.patch(
        url, data=b"abc", headers=headers, skip_auto_headers=["Content-Type"]
    )
    await assert_error(untyped, 415, "unsupported_media_type")
    assert await offset_of(api, url, auth) == 0


async def test_a_creation_whose_first_bytes_are_malformed_leaves_no_upload(make_api: Any) -> None:
    api = await make_api(max_uploads_in_progress=1)
    token = await api.user_with_session()
    auth = bearer(token)
    headers = {**TUS, **OCTETS, **auth, "Upload-Length": "3"}
    for body in (b"abcdef", chunked(b"abc", b"def")):
        refused = await api.client.post(UPLOADS_URL, data=body, headers=headers)
        await assert_error(refused, 400, "validation_failed")
        assert "Location" not in refused.headers
    # Nothing half-made counts against the account's one upload in progress.
    assert (await api.client.post(UPLOADS_URL, headers=headers)).status == 201
    await nothing_left(api)


async def test_a_creation_whose_first_bytes_fail_names_the_upload_to_go_on_with(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    partials = api.app[POLICY].uploads._partials

    async def unavailable(*args: Any) -> Any:
        raise StorageUnavailable("unreachable")

    monkeypatch.setattr(partials, "append", unavailable)
    headers = {**TUS, **OCTETS, **auth, "Upload-Length": "5"}
    failed = await api.client.post(UPLOADS_URL, data=b"hello", headers=headers)
    await assert_error(failed, 503, "storage_unavailable")
    assert failed.headers["Tus-Resumable"] == "1.0.0"
    monkeypatch.undo()
    url = path_of(failed.headers["Location"])
    assert await offset_of(api, url, auth) == 0
    done = await send(api, url, auth, 0, b"hello")
    assert await content_of(api, token, done.headers["Filehost-File-Id"]) == b"hello"


async def test_a_checksum_refused_leaves_nothing_of_its_bytes_behind(api: Api) -> None:
    # Past a part's size: on an object store the refused bytes began a multipart upload.
    token = await api.user_with_session()
    auth = bearer(token)
    data = bytes(range(256)) * (9 * MIB // 256)
    url = await created(api, auth, len(data) + 1)
    wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    refused = await send(api, url, auth, 0, data, Upload_Checksum=f"sha256 {wrong}")
    assert refused.status == 460
    assert await offset_of(api, url, auth) == 0
    assert (await api.client.delete(url, headers={**TUS, **auth})).status == 204
    await nothing_left(api)


async def test_a_patch_whose_upload_was_terminated_under_it_is_404(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 9 * MIB)
    go_on = asyncio.Event()
    headers = {**TUS, **OCTETS, **auth, "Upload-Offset": "0"}
    body = chunked(b"x" * MIB, b"y" * (8 * MIB), between=go_on)
    writing = asyncio.ensure_future(api.client.patch(url, data=body, headers=headers))
    await asyncio.sleep(0.3)  # its first bytes in, the lease held
    assert (await api.client.delete(url, headers={**TUS, **auth})).status == 204
    go_on.set()
    await assert_error(await writing, 404, "upload_not_found")
    await nothing_left(api)


async def test_a_bound_key_finds_no_upload_outside_its_folders(api: Api) -> None:
    token = await api.user_with_session()
    key, _, outside = await bound_inside(api, token)
    url = await created(api, bearer(token), 6, folder_id=outside)
    assert (await send(api, url, bearer(token), 0, b"abc")).status == 204
    head = await api.client.head(url, headers={**TUS, **key})
    assert head.status == 404 and head.headers["Tus-Resumable"] == "1.0.0"
    await assert_error(await api.client.get(url, headers=key), 404, "upload_not_found")
    ended = await api.client.delete(url, headers={**TUS, **key})
    await assert_error(ended, 404, "upload_not_found")
    await assert_error(await send(api, url, key, 3, b"def"), 404, "upload_not_found")
    # Still the session's, where it was.
    assert await offset_of(api, url, bearer(token)) == 3
