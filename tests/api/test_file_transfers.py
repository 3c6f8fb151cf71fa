"""How a file's bytes travel: a download goes out with ``sendfile``, through a vanity alias too
(and without it, chunk by chunk, byte for byte the same), a client that leaves mid-download or
mid-upload leaves no descriptor open, and an upload written in batches by threads is whole,
hashed and in order.

The tests drive the service over HTTP on the fixtures' real Redis, its blobs in a temporary
directory of their own; the two about cancellation drive the sender and the blob store directly,
holding a call in its thread while they cancel it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import threading
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from service.api import sendfile
from service.app import BLOBS
from service.domain.blobs import ChunkSource
from service.store import directory_blobs as blob_store
from service.store import file_writes
from tests.support.api import Api, bearer
from tests.support.blobs import is_directory
from tests.support.files import multipart, uploaded

FILES_URL = "/api/v1/files"
MIB = 1024 * 1024


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path, max_upload_bytes=64 * MIB)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


async def warmed_up(api: Api, token: str) -> int:
    """The open descriptors once an upload and a download have opened what they open for good
    (Redis connections, the client's pool)."""
    created = await uploaded(api, b"warm-up", token=token)
    await download(api, token, created["id"])
    return open_descriptors()


async def settled_descriptors(expected: int, seconds: float = 5.0) -> int:
    """The process's open descriptors once they are back to ``expected`` (or the deadline)."""
    deadline = time.monotonic() + seconds
    while (count := open_descriptors()) > expected and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return count


async def download(api: Api, token: str, file_id: str, **headers: str) -> tuple[int, bytes]:
    response = await api.client.get(
        f"{FILES_URL}/{file_id}/content", headers={**bearer(token), **headers}
    )
    return response.status, await response.read()


async def test_a_download_goes_out_through_sendfile_byte_for_byte(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    data = os.urandom(9 * MIB + 123)
    created = await uploaded(api, data, token=token)
    sent: list[int] = []
    real = os.sendfile

    def counting(*args: Any) -> int:
        count = real(*args)
        sent.append(count)
        return count

    monkeypatch.setattr(os, "sendfile", counting)
    assert await download(api, token, created["id"]) == (200, data)
    assert sum(sent) == len(data)
    sent.clear()
    assert await download(api, token, created["id"], Range="bytes=1000-5242999") == (
        206,
        data[1000:5243000],
    )
    assert sum(sent) == 5242000


def corked(fd: int) -> bool:
    sock = socket.socket(fileno=fd)
    try:
        return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
    finally:
        sock.detach()


@pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="TCP_CORK is Linux's")
async def test_a_body_is_sent_corked_and_its_last_segment_pushed_once_it_is_sent(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full segments only while the body goes out (nginx's ``tcp_nopush``), and the cork off
    once it is sent, so a kept-alive connection gets its tail and next answer at once."""
    token = await api.user_with_session()
    data = os.urandom(3 * MIB + 7)
    created = await uploaded(api, data, token=token)
    during: list[bool] = []
    connection: list[int] = []
    real = os.sendfile

    def watching(out_fd: int, *args: Any) -> int:
        during.append(corked(out_fd))
        if not connection:
            connection.append(os.dup(out_fd))  # the same socket, to look at once it is sent
        return real(out_fd, *args)

    monkeypatch.setattr(os, "sendfile", watching)
    try:
        assert await download(api, token, created["id"]) == (200, data)
        assert during and all(during)
        assert not corked(connection[0])
    finally:
        for fd in connection:
            os.close(fd)


async def test_a_file_through_an_alias_goes_out_through_sendfile_and_head_sends_none(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    folder = await api.client.post(
        "/api/v1/folders", json={"name": "shared"}, headers=bearer(token)
    )
    folder_id = (await folder.json())["data"]["id"]
    data = os.urandom(2 * MIB + 5)
    created = await uploaded(api, data, token=token, folder_id=folder_id)
    for body in ({"file_id": created["id"], "slug": "sent-file"}, {"folder_id": folder_id}):
        made = await api.client.post("/api/v1/aliases", json=body, headers=bearer(token))
        assert made.status == 201, await made.text()
        if "folder_id" in body:
            folder_slug = (await made.json())["data"]["slug"]
    sent: list[int] = []
    real = os.sendfile

    def counting(*args: Any) -> int:
        count = real(*args)
        sent.append(count)
        return count

    monkeypatch.setattr(os, "sendfile", counting)
    for path in ("/a/sent-file", f"/a/{folder_slug}/{created['id']}"):
        sent.clear()
        response = await api.client.get(path)
        assert (response.status, await response.read()) == (200, data), path
        assert sum(sent) == len(data), path
        sent.clear()
        head = await api.client.head(path)
        assert (head.status, head.headers["Content-Length"]) == (200, str(len(data)))
        assert await head.read() == b"" and not sent


async def test_without_sendfile_a_download_is_the_same_bytes(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    data = os.urandom(3 * MIB + 7)
    created = await uploaded(api, data, token=token)
    monkeypatch.delattr(os, "sendfile")
    assert await download(api, token, created["id"]) == (200, data)
    assert await download(api, token, created["id"], Range="bytes=-100") == (206, data[-100:])


async def test_a_client_gone_mid_download_leaves_no_descriptor_open(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    created = await uploaded(api, os.urandom(32 * MIB), token=token)
    # Small calls, so that the client is gone while the body is still being sent.
    monkeypatch.setattr(sendfile, "MAX_CALL", 64 * 1024)
    before = await warmed_up(api, token)
    for _ in range(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", api.client.port)
        writer.write(
            f"GET {FILES_URL}/{created['id']}/content HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        await reader.readexactly(MIB)
        writer.transport.abort()  # gone, mid-body
    assert await settled_descriptors(before) <= before
    status, body = await download(api, token, created["id"], Range="bytes=0-9")
    assert status == 206 and len(body) == 10


async def test_a_slow_sendfile_call_outlives_its_request_without_touching_a_reused_descriptor(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread still sending when the handler gives up keeps its own descriptors: they are
    closed after it returns, never under it."""
    token = await api.user_with_session()
    created = await uploaded(api, os.urandom(4 * MIB), token=token)
    real = os.sendfile
    started = threading.Event()
    calls: list[tuple[int, int]] = []

    def slow(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        started.set()
        time.sleep(0.2)  # the client goes away meanwhile
        calls.append((out_fd, in_fd))
        os.fstat(out_fd)  # both still open: EBADF otherwise
        os.fstat(in_fd)
        return real(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", slow)
    before = await warmed_up(api, token)
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.port)
    writer.write(
        f"GET {FILES_URL}/{created['id']}/content HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    await reader.readuntil(b"\r\n\r\n")
    # Gone only once a thread is in the call: gone sooner, the handler sees the connection
    # closing and never starts one.
    assert await asyncio.to_thread(started.wait, 10), "no sendfile call was made"
    writer.transport.abort()
    deadline = time.monotonic() + 10
    while not calls and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert calls, "the sendfile call never returned"
    assert await settled_descriptors(before) <= before


async def test_an_upload_written_in_batches_is_whole_and_hashed_in_order(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_writes, "WRITE_BATCH", 256 * 1024)  # many batches, odd edges
    token = await api.user_with_session()
    data = b"".join(os.urandom(97 * 1024 + n) for n in range(40))
    created = await uploaded(api, data, token=token)
    assert created["size"] == len(data)
    assert created["sha256"] == hashlib.sha256(data).hexdigest()
    assert await download(api, token, created["id"]) == (200, data)


@pytest.mark.skipif(file_writes._start_writeback is None, reason="sync_file_range is Linux's")
async def test_each_batch_but_the_last_starts_its_writeback_in_order(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without direct writes, the fsync at the end of an upload has only its last batch left
    to wait for."""
    monkeypatch.setattr(file_writes, "_O_DIRECT", 0)
    monkeypatch.setattr(file_writes, "WRITE_BATCH", 256 * 1024)
    real = file_writes._start_writeback
    ranges: list[tuple[int, int]] = []

    def recording(fd: int, offset: int, count: int, flags: int) -> int:
        ranges.append((offset, count))
        return real(fd, offset, count, flags)  # type: ignore[misc]

    monkeypatch.setattr(file_writes, "_start_writeback", recording)
    token = await api.user_with_session()
    data = os.urandom(MIB + 777)
    created = await uploaded(api, data, token=token)
    assert created["sha256"] == hashlib.sha256(data).hexdigest()
    assert ranges and ranges[0][0] == 0
    assert all(start + count == after for (start, count), (after, _) in pairwise(ranges))
    covered = ranges[-1][0] + ranges[-1][1]
    # Left for the fsync: the last batch, less than one (empty when the bytes ended a batch).
    assert 0 <= len(data) - covered < 256 * 1024
    assert await download(api, token, created["id"]) == (200, data)


async def test_a_client_gone_mid_upload_leaves_no_descriptor_and_no_bytes(api: Api) -> None:
    token = await api.user_with_session()
    body, headers = multipart(os.urandom(24 * MIB))
    before = await warmed_up(api, token)
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.port)
    writer.write(
        f"POST {FILES_URL} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: {headers['Content-Type']}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body[: 12 * MIB]
    )
    await writer.drain()
    blobs = api.app[BLOBS]
    deadline = time.monotonic() + 10
    while not await blobs.leftovers():  # the upload is being written
        assert time.monotonic() < deadline, "the upload never reached storage"
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    writer.transport.abort()
    if is_directory(api):  # an object store's client keeps a pool of connections, any size
        assert await settled_descriptors(before) <= before
    while left := await blobs.leftovers():
        assert time.monotonic() < deadline, f"left behind: {left}"
        await asyncio.sleep(0.01)
    del reader


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


async def test_a_cancelled_send_closes_its_descriptors_only_once_the_thread_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "blob"
    path.write_bytes(os.urandom(MIB))
    left, right = socket.socketpair()
    left.setblocking(False)
    release = threading.Event()
    real = os.sendfile

    def held(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        release.wait(5)
        return real(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", held)
    with open(path, "rb") as source:
        out_fd, in_fd = os.dup(left.fileno()), os.dup(source.fileno())
        task = asyncio.create_task(sendfile._Sender(out_fd, in_fd).send(0, MIB))
        await asyncio.sleep(0.1)  # the first call is in its thread
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert is_open(out_fd) and is_open(in_fd), "closed under a thread still sending"
        release.set()
        deadline = time.monotonic() + 5
        while is_open(out_fd) or is_open(in_fd):
            assert time.monotonic() < deadline, "never closed"
            await asyncio.sleep(0.01)
    left.close()
    right.close()


async def test_a_cancelled_upload_closes_its_file_only_once_the_thread_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = blob_store.DirectoryBlobs(tmp_path / "files")
    release = threading.Event()
    real = os.write
    writing: list[int] = []

    def held(fd: int, data: Any) -> int:
        if not writing and os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            writing.append(fd)
            release.wait(5)
        return real(fd, data)

    monkeypatch.setattr(os, "write", held)

    async def chunks() -> Any:
        while True:
            yield os.urandom(256 * 1024)
            await asyncio.sleep(0)

    task = asyncio.create_task(store.put("fil_" + "A" * 22, ChunkSource(chunks())))
    deadline = time.monotonic() + 5
    while not writing:
        assert time.monotonic() < deadline, "no batch was written"
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert is_open(writing[0]), "closed under a thread still writing"
    release.set()
    while is_open(writing[0]):
        assert time.monotonic() < deadline, "never closed"
        await asyncio.sleep(0.01)
    assert store.leftovers_now() == [] and store.stored_now() == []
