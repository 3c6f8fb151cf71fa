"""ZIP archives: a folder's whole subtree (``GET /folders/{id}/archive``), a selection
(``GET /files/archive?ids=``) and a folder alias's (``GET /a/{slug}/archive``), opened with the
standard library's ``zipfile`` and every entry's bytes checked; paths made of folder names,
duplicates renamed, the alias rules, the permissions, memory bounded for a large file, and a
client gone mid-archive. Over HTTP, on the fixtures' real Redis and blob store (either)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import threading
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from service.auth.archives import Archives
from service.auth.bulk_files import MAX_BULK_IDS
from service.domain.blobs import Blob, StorageUnavailable
from service.domain.records import FileRecord
from tests.support.aliases import alias, edit_alias, public
from tests.support.api import Api, assert_error, bearer
from tests.support.blobs import is_directory
from tests.support.bound import account
from tests.support.clock import FakeClock
from tests.support.files import FILES_URL, many_uploaded, multipart, uploaded
from tests.support.folders import FOLDERS, folder
from tests.support.memory import PeakRss

MIB = 1024 * 1024
ARCHIVE = f"{FILES_URL}/archive"


@pytest.fixture
async def api(make_api: Any) -> Api:
    """Without a request rate: a test uploads hundreds of files one after another."""
    return await make_api(rate_limit_per_second=0)


async def archive(api: Api, url: str, headers: dict[str, str]) -> zipfile.ZipFile:
    response = await api.client.get(url, headers=headers)
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"] == "application/zip"
    assert response.headers.getall("Cache-Control") == ["no-store"]  # once, as every answer's
    opened = zipfile.ZipFile(io.BytesIO(await response.read()))
    assert opened.testzip() is None  # every entry's CRC holds
    return opened


def contents(opened: zipfile.ZipFile) -> dict[str, bytes]:
    return {info.filename: opened.read(info) for info in opened.infolist()}


async def test_a_folder_archive_holds_its_whole_subtree_byte_for_byte(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    top = await folder(api, "Photos 2024", token=token)
    march = await folder(api, "März", top["id"], token=token)
    deep = await folder(api, "deep", march["id"], token=token)
    empty = await folder(api, "empty", top["id"], token=token)
    outside = await folder(api, "Elsewhere", token=token)
    await uploaded(api, b"not in it", token=token, folder_id=outside["id"], filename="x.txt")
    expected: dict[str, bytes] = {"März/": b"", "März/deep/": b"", "empty/": b""}
    for place, path in ((top, ""), (march, "März/"), (deep, "März/deep/")):
        for made in await many_uploaded(
            api, 100, prefix=place["name"], token=token, folder_id=place["id"]
        ):
            expected[path + made["name"]] = (
                made["name"].replace("-", " ").removesuffix(".txt").encode()
            )
    # The same name three times (in any case), and a file named as a sub-folder is.
    for data, name in (
        (b"one", "a.txt"),
        (b"two", "A.TXT"),
        (b"three", "a.txt"),
        (b"four", "empty"),
    ):
        clock.advance(seconds=0.001)  # the first uploaded keeps its name
        await uploaded(api, data, token=token, folder_id=top["id"], filename=name)

    response = await api.client.get(f"{FOLDERS}/{top['id']}/archive", headers=bearer(token))
    assert response.status == 200, await response.text()
    assert response.headers["Content-Disposition"] == (
        "attachment; filename=\"Photos 2024.zip\"; filename*=UTF-8''Photos%202024.zip"
    )
    opened = zipfile.ZipFile(io.BytesIO(await response.read()))
    assert opened.testzip() is None
    found = contents(opened)
    renamed = {found.pop(name) for name in ("a.txt", "A (2).TXT", "a (3).txt")}
    assert renamed == {b"one", b"two", b"three"}
    assert found.pop("empty (2)") == b"four"
    assert found == expected  # 300 files and 3 folders, nothing of Elsewhere
    assert all(not name.startswith("/") and ".." not in name.split("/") for name in found)
    assert (await archive(api, f"{FOLDERS}/{empty['id']}/archive", bearer(token))).infolist() == []
    named = await api.client.get(f"{FOLDERS}/{march['id']}/archive", headers=bearer(token))
    disposition = named.headers["Content-Disposition"]
    assert disposition == f"attachment; filename=\"M_rz.zip\"; filename*=UTF-8''{quote('März')}.zip"


async def test_a_selection_holds_each_file_once_side_by_side(api: Api) -> None:
    token = await api.user_with_session()
    left = await folder(api, "left", token=token)
    files = await many_uploaded(api, 250, token=token)
    twin = await uploaded(api, b"twin", token=token, folder_id=left["id"], filename="file-0.txt")
    ids = [twin["id"], *(made["id"] for made in files), files[3]["id"]]
    opened = await archive(api, f"{ARCHIVE}?ids={','.join(ids)}", bearer(token))
    names = [info.filename for info in opened.infolist()]
    assert names[:3] == ["file-0.txt", "file-0 (2).txt", "file-1.txt"]
    assert len(names) == 251  # the one given twice is in it once
    assert opened.read("file-0.txt") == b"twin"
    assert all(opened.read(f"file-{n}.txt") == f"file {n}".encode() for n in range(1, 250))

    other = await api.user_with_session("other@example.com")
    theirs = (await uploaded(api, b"theirs", token=other))["id"]
    unknown = "fil_0000000000000000000000"
    refused = await api.client.get(
        f"{ARCHIVE}?ids={files[0]['id']},{theirs},{unknown},junk", headers=bearer(token)
    )
    details = (await assert_error(refused, 404, "file_not_found"))["details"]
    assert details == {"ids": [theirs, unknown, "junk"]}
    for query in ("", "?ids=", f"?ids={files[0]['id']},", f"?ids=a&ids={files[0]['id']}"):
        bad = await api.client.get(f"{ARCHIVE}{query}", headers=bearer(token))
        assert (await assert_error(bad, 400, "validation_failed"))["details"].keys() == {"ids"}
    too_many = ",".join(["x"] * (MAX_BULK_IDS + 1))
    refused = await api.client.get(f"{ARCHIVE}?ids={too_many}", headers=bearer(token))
    await assert_error(refused, 400, "too_many_ids")
    writer = await api.create_key(token, permissions=["files.write"])
    refused = await api.client.get(
        f"{ARCHIVE}?ids={files[0]['id']}", headers={"X-API-Key": writer["secret_key"]}
    )
    await assert_error(refused, 403, "insufficient_permission")


async def test_a_selection_longer_than_a_request_line_is_posted(api: Api) -> None:
    token = await api.user_with_session()
    files = await many_uploaded(api, 320, token=token)  # past what ?ids= holds (about 290)
    ids = [made["id"] for made in files]
    response = await api.client.post(ARCHIVE, json={"ids": ids}, headers=bearer(token))
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"] == "application/zip"
    opened = zipfile.ZipFile(io.BytesIO(await response.read()))
    assert opened.testzip() is None
    assert [info.filename for info in opened.infolist()] == [f"file-{n}.txt" for n in range(320)]
    for body in ({}, {"ids": []}, {"ids": "fil_a"}, {"ids": ids[:1], "folder_id": None}):
        bad = await api.client.post(ARCHIVE, json=body, headers=bearer(token))
        assert (await assert_error(bad, 400, "validation_failed"))["details"]
    too_many = {"ids": ["x"] * (MAX_BULK_IDS + 1)}
    refused = await api.client.post(ARCHIVE, json=too_many, headers=bearer(token))
    await assert_error(refused, 400, "too_many_ids")


async def test_a_folder_archive_needs_both_readings_and_stays_in_a_bound_keys_folders(
    api: Api, clock: FakeClock
) -> None:
    laid_out = await account(api, clock)
    inbox = laid_out.folder_id("inbox")
    opened = await archive(api, f"{FOLDERS}/{inbox}/archive", laid_out.secret)
    assert contents(opened) == {
        "Sub/": b"",
        "inbox.txt": b"inbox",
        "Sub/inbox_sub.txt": b"inbox_sub",
    }
    for outside in (laid_out.folder_id("private"), "fld_0000000000000000000000", "archive"):
        refused = await api.client.get(f"{FOLDERS}/{outside}/archive", headers=laid_out.secret)
        await assert_error(refused, 404, "folder_not_found")
    selection = f"{ARCHIVE}?ids={laid_out.files['inbox']},{laid_out.files['private']}"
    refused = await api.client.get(selection, headers=laid_out.secret)
    assert (await assert_error(refused, 404, "file_not_found"))["details"] == {
        "ids": [laid_out.files["private"]]
    }
    for permissions in (["files.read"], ["folders.read"]):
        key = await api.create_key(laid_out.token, permissions=permissions)
        refused = await api.client.get(
            f"{FOLDERS}/{inbox}/archive", headers={"X-API-Key": key["secret_key"]}
        )
        await assert_error(refused, 403, "insufficient_permission")


async def test_a_folder_alias_archive_follows_the_alias_rules(api: Api) -> None:
    token = await api.user_with_session()
    shared = await folder(api, "Shared", token=token)
    inner = await folder(api, "inner", shared["id"], token=token)
    await uploaded(api, b"outer bytes", token=token, folder_id=shared["id"], filename="o.txt")
    await uploaded(api, b"inner bytes", token=token, folder_id=inner["id"], filename="i.txt")
    made = await alias(
        api, {"folder_id": shared["id"], "slug": "our-share", "max_views": 2}, token=token
    )
    opened = await archive(api, "/a/our-share/archive", {})
    assert contents(opened) == {
        "inner/": b"",
        "o.txt": b"outer bytes",
        "inner/i.txt": b"inner bytes",
    }
    listing = await public(api, "/a/our-share", Accept="application/json")  # the second view
    assert listing.status == 200
    used_up = await public(api, "/a/our-share/archive")
    await assert_error(used_up, 404, "alias_not_found")
    viewed = await api.client.get(f"/api/v1/aliases/{made['id']}", headers=bearer(token))
    assert (await viewed.json())["data"]["views"] == 2  # the refused archive spent none

    protected = await alias(
        api, {"folder_id": inner["id"], "slug": "locked", "password": "open sesame"}, token=token
    )
    await assert_error(await public(api, "/a/locked/archive"), 401, "alias_password_required")
    form = await public(api, "/a/locked/archive", Accept="text/html")
    assert form.status == 401 and 'action="/a/locked"' in await form.text()
    wrong = await public(api, "/a/locked/archive", **{"X-Alias-Password": "nope"})
    await assert_error(wrong, 401, "alias_password_invalid")
    right = await archive(api, "/a/locked/archive", {"X-Alias-Password": "open sesame"})
    assert contents(right) == {"i.txt": b"inner bytes"}
    assert (await edit_alias(api, protected["id"], {"enabled": False}, token=token)).status == 200
    off = await public(api, "/a/locked/archive", **{"X-Alias-Password": "open sesame"})
    await assert_error(off, 404, "alias_not_found")

    a_file = await uploaded(api, b"single", token=token)
    await alias(api, {"file_id": a_file["id"], "slug": "one-file"}, token=token)
    await assert_error(await public(api, "/a/one-file/archive"), 404, "alias_not_found")
    await assert_error(await public(api, "/a/no-such-alias/archive"), 404, "alias_not_found")


async def _upload_large(api: Api, token: str, size: int, folder_id: str) -> str:
    """A file of ``size`` random bytes (a MiB repeated), streamed: its SHA-256."""
    chunk = os.urandom(MIB)
    body, headers = multipart(
        b"", folder_id=folder_id, filename="big.bin", content_type="application/octet-stream"
    )
    opening = body[: body.index(b"\r\n\r\n", body.index(b'name="file"')) + 4]
    closing = body[len(opening) :]
    expected = hashlib.sha256()

    async def stream() -> AsyncIterator[bytes]:
        yield opening
        for _ in range(size // MIB):
            yield chunk
        yield closing

    for _ in range(size // MIB):
        expected.update(chunk)
    response = await api.client.post(FILES_URL, data=stream(), headers={**headers, **bearer(token)})
    assert response.status == 201, await response.text()
    return expected.hexdigest()


async def test_an_archive_of_a_large_file_keeps_memory_bounded(api: Api, tmp_path: Path) -> None:
    """Service and client share this process: the archive is written to a file as it comes,
    and checked from there once the measure is over."""
    token = await api.user_with_session()
    holder = await folder(api, "big", token=token)
    size = 50 * MIB
    digest = await _upload_large(api, token, size, holder["id"])
    await uploaded(api, b"warm-up", token=token, folder_id=holder["id"])
    await archive(api, f"{FOLDERS}/{holder['id']}/archive", bearer(token))  # first use out of it
    saved = tmp_path / "big.zip"
    with PeakRss() as rss, saved.open("wb") as out:
        response = await api.client.get(f"{FOLDERS}/{holder['id']}/archive", headers=bearer(token))
        assert response.status == 200
        async for piece in response.content.iter_chunked(256 * 1024):
            out.write(piece)
    print(f"RSS growth: archive {rss.growth / MIB:.1f} MiB for {size // MIB} MiB")
    assert rss.growth < (16 if is_directory(api) else 32) * MIB, rss.growth
    with zipfile.ZipFile(saved) as opened, opened.open("big.bin") as entry:
        received = hashlib.sha256()
        while piece := entry.read(MIB):
            received.update(piece)
    assert received.hexdigest() == digest


async def test_a_client_gone_mid_archive_leaves_nothing_open(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    token = await api.user_with_session()
    holder = await folder(api, "many", token=token)
    await _upload_large(api, token, 8 * MIB, holder["id"])
    for made in await many_uploaded(api, 20, token=token, folder_id=holder["id"]):
        assert made["id"]

    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    threads_before = threading.active_count()
    response = await api.client.get(f"{FOLDERS}/{holder['id']}/archive", headers=bearer(token))
    assert response.status == 200
    assert await response.content.readexactly(64 * 1024)
    response.close()  # gone, mid-archive
    for _ in range(200):
        await asyncio.sleep(0.02)
        if open_descriptors() <= before:
            break
    assert open_descriptors() <= before
    assert threading.active_count() <= threads_before + 4  # at most the zip pool's threads
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]
    # The service goes on: the same archive, whole, right after.
    opened = await archive(api, f"{FOLDERS}/{holder['id']}/archive", bearer(token))
    assert len(opened.infolist()) == 21


async def test_a_file_gone_before_its_turn_is_left_out_and_a_failure_cuts_the_archive_short(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    files = await many_uploaded(api, 3, token=token)
    url = f"{ARCHIVE}?ids={','.join(made['id'] for made in files)}"
    opening = Archives.open

    async def gone(self: Archives, record: FileRecord) -> Blob | None:
        return None if record.id == files[1]["id"] else await opening(self, record)

    monkeypatch.setattr(Archives, "open", gone)
    opened = await archive(api, url, bearer(token))
    assert contents(opened) == {"file-0.txt": b"file 0", "file-2.txt": b"file 2"}

    async def unreachable(self: Archives, record: FileRecord) -> Blob | None:
        if record.id == files[1]["id"]:
            raise StorageUnavailable("the object store is unreachable")
        return await opening(self, record)

    monkeypatch.setattr(Archives, "open", unreachable)
    response = await api.client.get(url, headers=bearer(token))
    assert response.status == 200  # the headers went out before the failure
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.read()  # cut short: never mistaken for a whole archive
    assert (await api.client.get(FILES_URL, headers=bearer(token))).status == 200

    # Unreachable from the first file on: answered, before any header went out.
    async def down(self: Archives, record: FileRecord) -> Blob | None:
        raise StorageUnavailable("the object store is unreachable")

    monkeypatch.setattr(Archives, "open", down)
    response = await api.client.get(url, headers=bearer(token))
    await assert_error(response, 503, "storage_unavailable")
    assert response.headers["Retry-After"]
