"""A large upload's body is read straight from the socket (``RequestBody``): the bytes are the
same, aiohttp's readers get what follows the file (the form's other fields), the connection is
handed back to aiohttp's parser for what is pipelined behind the body, and a body that cannot
be handed back closes the connection after its answer. Small and chunked bodies go through
aiohttp as before."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from service.api._aiohttp import protocol
from service.api._aiohttp.request_body import SOCKET_READ_FROM, SocketBody
from service.store import file_writes
from tests.support.api import Api, bearer
from tests.support.files import FILES_URL, multipart, uploaded
from tests.support.folders import folder

MIB = 1024 * 1024


@pytest.fixture
def socket_bodies(monkeypatch: pytest.MonkeyPatch) -> list[SocketBody]:
    """Every body read from a socket from now on."""
    made: list[SocketBody] = []

    class Counted(SocketBody):
        def __init__(self, handler: Any, content: Any, fileno: int, remaining: int) -> None:
            super().__init__(handler, content, fileno, remaining)
            made.append(self)

    monkeypatch.setattr(protocol, "SocketBody", Counted)
    return made


def raw_upload(token: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return (
        f"POST {FILES_URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
        f"{head}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def listing_request(token: str) -> str:
    return f"GET {FILES_URL} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\r\n"


async def answers_on_one_connection(api: Api, raw: bytes, count: int) -> tuple[list[Any], bool]:
    """Send ``raw`` at once; the ``count`` answers (status, JSON body) and whether the server
    closed the connection after them."""
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.server.port)
    try:
        writer.write(raw)
        found = []
        for _ in range(count):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            length = next(
                int(line.split(":", 1)[1])
                for line in lines
                if line.lower().startswith("content-length:")
            )
            body = await reader.readexactly(length)
            found.append((int(lines[0].split()[1]), orjson.loads(body)))
        try:
            closed = await asyncio.wait_for(reader.read(1), 1) == b""
        except TimeoutError:
            closed = False  # still open, waiting for another request
        return found, closed
    finally:
        writer.close()


async def test_a_large_upload_is_read_from_the_socket_and_a_small_one_through_aiohttp(
    api: Api, socket_bodies: list[SocketBody]
) -> None:
    token = await api.user_with_session()
    data = os.urandom(3 * MIB + 12345)
    created = await uploaded(api, data, token=token)
    assert created["sha256"] == hashlib.sha256(data).hexdigest()
    assert len(socket_bodies) == 1 and socket_bodies[0].remaining == 0
    small = os.urandom(SOCKET_READ_FROM // 4)
    assert (await uploaded(api, small, token=token))["sha256"] == hashlib.sha256(small).hexdigest()
    assert len(socket_bodies) == 1


async def test_a_chunked_upload_is_read_through_aiohttp(
    api: Api, socket_bodies: list[SocketBody]
) -> None:
    token = await api.user_with_session()
    data = os.urandom(2 * MIB + 7)
    body, headers = multipart(data)

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 100_000):
            yield body[start : start + 100_000]

    response = await api.client.post(FILES_URL, data=pieces(), headers={**headers, **bearer(token)})
    assert response.status == 201, await response.text()
    assert (await response.json())["data"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert socket_bodies == []


async def test_the_fields_after_a_large_file_are_read_from_what_follows_it(
    api: Api, socket_bodies: list[SocketBody]
) -> None:
    token = await api.user_with_session()
    place = await folder(api, "after", token=token)
    data = os.urandom(2 * MIB)
    created = await uploaded(api, data, token=token, folder_id=place["id"], folder_after=True)
    assert created["folder_id"] == place["id"]
    assert len(socket_bodies) == 1


async def test_a_request_pipelined_behind_a_large_upload_is_answered_after_it(
    api: Api, socket_bodies: list[SocketBody]
) -> None:
    token = await api.user_with_session()
    data = os.urandom(2 * MIB + 3)
    body, headers = multipart(data)
    listing = listing_request(token)
    answers, closed = await answers_on_one_connection(
        api, raw_upload(token, body, headers) + listing.encode() + listing.encode(), 3
    )
    [(stored, created), (listed, page), (again, same)] = answers
    assert (stored, listed, again) == (201, 200, 200)
    assert created["data"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert [item["id"] for item in page["data"]["files"]] == [created["data"]["id"]]
    assert same == page
    assert not closed
    assert len(socket_bodies) == 1


def form_with_junk_after_the_file(junk: int) -> tuple[bytes, dict[str, str]]:
    boundary = "b0undary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n'
    ).encode()
    body += os.urandom(MIB)
    body += f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="junk"\r\n\r\n'.encode()
    body += b"j" * junk + f"\r\n--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


@pytest.mark.parametrize(
    ("junk", "named"),
    [
        # Read with the file's last bytes: back to aiohttp's multipart reader, which names it.
        (200 * 1024, "junk"),
        # Still in the socket, more than the framing allowance: it can't be a form's short
        # fields, so it is read and dropped, never kept, and the body is what is refused.
        (8 * MIB, "body"),
    ],
)
async def test_what_follows_a_large_file_is_refused_and_the_connection_serves_on(
    api: Api, socket_bodies: list[SocketBody], junk: int, named: str
) -> None:
    """Either way the body is read to its end, so the client gets its answer and the next
    request on the connection is served."""
    token = await api.user_with_session()
    body, headers = form_with_junk_after_the_file(junk)
    listing = listing_request(token)
    answers, closed = await answers_on_one_connection(
        api, raw_upload(token, body, headers) + listing.encode(), 2
    )
    [(status, refused), (listed, page)] = answers
    assert status == 400, refused
    assert refused["error"]["code"] == "validation_failed"
    assert list(refused["error"]["details"]) == [named]
    assert (listed, page["data"]["files"]) == (200, [])
    assert not closed
    assert len(socket_bodies) == 1


async def test_megabytes_read_past_the_file_do_not_hold_up_the_next_request(
    api: Api, socket_bodies: list[SocketBody]
) -> None:
    """A field of a few MiB after the file may come in the same read as the file's end: handed
    back to the body's stream at once, it fills the stream past its high-water mark, which
    pauses the connection's reading; the request behind the body is still read and answered.
    (Read in a later piece instead, it is dropped and the body refused: either is a 400.)"""
    token = await api.user_with_session()
    body, headers = form_with_junk_after_the_file(3 * MIB)
    listing = listing_request(token)
    answers, closed = await answers_on_one_connection(
        api, raw_upload(token, body, headers) + listing.encode(), 2
    )
    [(status, refused), (listed, page)] = answers
    assert status == 400 and list(refused["error"]["details"]) in (["junk"], ["body"]), refused
    assert (listed, page["data"]["files"]) == (200, [])
    assert not closed


async def test_a_file_past_the_limit_read_from_the_socket_gets_413_and_the_connection_closes(
    make_api: Any, tmp_path: Path, socket_bodies: list[SocketBody]
) -> None:
    """A declared length within the limit and its framing allowance, a file past the limit:
    refused once the limit is passed, the rest of the body never read."""
    api = await make_api(data_dir=tmp_path, max_upload_bytes=MIB)
    token = await api.user_with_session()
    body, headers = multipart(os.urandom(MIB + 32 * 1024))
    answers, closed = await answers_on_one_connection(api, raw_upload(token, body, headers), 1)
    [(status, refused)] = answers
    assert status == 413 and refused["error"]["code"] == "payload_too_large"
    assert closed
    assert len(socket_bodies) == 1
    assert (await (await api.files(token=token)).json())["data"]["files"] == []


async def test_a_large_upload_that_waits_for_100_continue_is_read_from_the_socket(
    api: Api, socket_bodies: list[SocketBody]
) -> None:
    """curl asks ``Expect: 100-continue`` for bodies over 1 MiB and sends the body only once
    told to go on."""
    token = await api.user_with_session()
    data = os.urandom(2 * MIB + 99)
    body, headers = multipart(data)
    head, _, _ = raw_upload(token, body, {**headers, "Expect": "100-continue"}).partition(
        b"\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.server.port)
    try:
        writer.write(head + b"\r\n\r\n")
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert interim.startswith(b"HTTP/1.1 100 Continue"), interim
        writer.write(body)
        final = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert final.startswith(b"HTTP/1.1 201"), final
        length = int(final.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        created = orjson.loads(await reader.readexactly(length))["data"]
    finally:
        writer.close()
    assert created["sha256"] == hashlib.sha256(data).hexdigest()
    assert len(socket_bodies) == 1


@pytest.mark.parametrize(
    ("credential", "declared", "status", "code"),
    [
        ("token", 2 * MIB, 413, "payload_too_large"),
        ("none", MIB // 2, 401, "credential_missing"),
        ("reader", MIB // 2, 403, "insufficient_permission"),
    ],
)
async def test_an_upload_refused_by_its_headers_is_told_so_before_it_sends_its_body(
    make_api: Any, tmp_path: Path, credential: str, declared: int, status: int, code: str
) -> None:
    """With ``Expect: 100-continue``, a refusal that needs no body comes instead of the 100:
    the client never sends the body."""
    api = await make_api(data_dir=tmp_path, max_upload_bytes=MIB)
    token = await api.user_with_session()
    reader_key = (await api.create_key(token, permissions=["files.read"]))["secret_key"]
    auth = {
        "token": f"Authorization: Bearer {token}\r\n",
        "none": "",
        "reader": f"X-API-Key: {reader_key}\r\n",
    }[credential]
    head = (
        f"POST {FILES_URL} HTTP/1.1\r\nHost: localhost\r\n{auth}Expect: 100-continue\r\n"
        f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {declared}\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.server.port)
    try:
        writer.write(head.encode())
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert answer.startswith(f"HTTP/1.1 {status}".encode()), answer
        length = int(answer.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        assert orjson.loads(await reader.readexactly(length))["error"]["code"] == code
    finally:
        writer.close()
    assert (await (await api.files(token=token)).json())["data"]["files"] == []


async def test_a_body_refused_just_past_the_limit_is_read_to_its_end_before_the_413(
    make_api: Any, tmp_path: Path, socket_bodies: list[SocketBody]
) -> None:
    """A connection closed with bytes unread is reset, and the client may lose its answer: the
    last few KiB of a body refused for its size are read and dropped first, as aiohttp's
    lingering close does, even when they come after the refusal."""
    api = await make_api(data_dir=tmp_path, max_upload_bytes=MIB)
    token = await api.user_with_session()
    body, headers = multipart(os.urandom(MIB + 40 * 1024))
    raw = raw_upload(token, body, headers)
    later = 20 * 1024  # past the limit already before these come
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.server.port)
    try:
        writer.write(raw[:-later])
        await asyncio.sleep(0.3)
        writer.write(raw[-later:])
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        await asyncio.wait_for(reader.read(), 10)  # to the end: closed, not reset
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413"), head
    [read] = socket_bodies
    assert read.remaining == 0


async def test_an_upload_that_fails_half_way_is_read_to_its_end_and_the_connection_serves_on(
    api: Api, socket_bodies: list[SocketBody], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk refusing a write (ENOSPC) fails the upload after its first batch with 507
    ``storage_full``: the rest of the body is read and dropped, as aiohttp's lingering close
    does, so the client reads that rather than a reset, and the next request on the connection
    is served."""
    token = await api.user_with_session()

    def disk_full(*_: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(file_writes._File, "write", disk_full)
    body, headers = multipart(os.urandom(20 * MIB))
    listing = listing_request(token)
    answers, closed = await answers_on_one_connection(
        api, raw_upload(token, body, headers) + listing.encode(), 2
    )
    [(status, failed), (listed, page)] = answers
    assert status == 507 and failed["error"]["code"] == "storage_full", failed
    assert (listed, page["data"]["files"]) == (200, [])
    assert not closed
    [read] = socket_bodies
    assert read.remaining == 0
