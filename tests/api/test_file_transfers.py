"""How a file's bytes travel: an upload written in batches by threads is whole, hashed and in
order, and a client that leaves mid-upload, or a cancelled upload, leaves no descriptor open and
no bytes.

Each test drives the service over HTTP on the fixtures' real Redis, its blobs in a temporary
directory of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from service.api.context import BLOBS
from service.store import blobs as blob_store
from tests.support.api import Api, bearer
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


async def test_an_upload_written_in_batches_is_whole_and_hashed_in_order(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blob_store, "WRITE_BATCH", 64 * 1024)  # many batches, odd chunk edges
    token = await api.user_with_session()
    data = b"".join(os.urandom(97 * 1024 + n) for n in range(40))
    created = await uploaded(api, data, token=token)
    assert created["size"] == len(data)
    assert created["sha256"] == hashlib.sha256(data).hexdigest()
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
    while not blobs.leftovers():  # the upload is being written
        assert time.monotonic() < deadline, "the upload never reached storage"
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    writer.transport.abort()
    assert await settled_descriptors(before) <= before
    while blobs.leftovers():
        assert time.monotonic() < deadline, f"left behind: {blobs.leftovers()}"
        await asyncio.sleep(0.01)
    del reader


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


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

    task = asyncio.create_task(store.put("fil_" + "A" * 22, chunks()))
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
    assert store.leftovers() == [] and store.stored() == []
