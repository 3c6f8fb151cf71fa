"""The gateway listener (``service.api.gateway_listener``) answers what aiohttp's handling of the
same request answers, byte for byte but for ``Date`` and a generated request id, and refuses
the rest: each case goes over a raw connection to the listener's port and to the main port of
the same application (without the gateway lane, so through aiohttp's own objects), followed on
the same connection by a plain sub-request, so that whether and how the connection goes on is
compared too."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.api.context import SETTINGS
from service.api.gateway_listener import GATEWAY_LISTENER, GatewayListener
from service.app import create_app
from service.config import ConfigError, Settings, load_settings
from service.logs import AccessLogger, LineBuffer
from tests.conftest import Api, EnvelopeTestServer, free_port

VERIFY = "/api/v1/auth/verify"
_GENERATED_ID = re.compile(rb"X-Request-ID: [0-9a-f]{32}\r\n")
_MALFORMED = b'{"success":false,"error":{"code":"bad_request","message":"Malformed HTTP request."}}'
# A sub-request sent after each case on the same connection: its answer shows the connection
# went on as it should (or its absence that it was closed).
_NEXT = b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: gw\r\nX-Request-ID: next\r\n\r\n"


def _request(
    path: str, headers: dict[str, str], version: str = "1.1", method: str = "GET"
) -> bytes:
    lines = [f"{method} {path} HTTP/{version}", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _comparable(transcript: bytes) -> bytes:
    transcript = re.sub(rb"Date: [^\r]*\r\n", b"Date: -\r\n", transcript)
    # Both ports take from the same credential's bucket: what remains differs.
    transcript = re.sub(rb'(RateLimit: "credential";r=)\d+', rb"\1-", transcript)
    return _GENERATED_ID.sub(b"X-Request-ID: generated\r\n", transcript)


async def _read_answer(reader: asyncio.StreamReader, head_only: bool = False) -> bytes:
    """One answer (with any 100 Continue before it), or b"" when the connection closes."""
    answer = b""
    while True:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        except asyncio.IncompleteReadError as error:
            assert not error.partial, error.partial
            return answer
        answer += head
        if not head.startswith(b"HTTP/1.1 100 "):
            break
    length = re.search(rb"Content-Length: (\d+)", head)
    if length and not head_only:
        answer += await reader.readexactly(int(length.group(1)))
    return answer


async def _transcript(
    port: int, raw: bytes | list[bytes], answers: int = 1, head_only: bool = False
) -> bytes:
    """Send ``raw`` on a new connection (a list: each piece once the one before it was read)
    and read ``answers`` answers, then send ``_NEXT`` and read its answer; all that came, and
    ``<closed>`` where the connection closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = b""
    try:
        for piece in raw if isinstance(raw, list) else [raw]:
            writer.write(piece)
            await asyncio.sleep(0.05)
        for _ in range(answers):
            answer = await _read_answer(reader, head_only)
            out += answer or b"<closed>"
            if not answer:
                return out
        try:
            writer.write(_NEXT)
            await writer.drain()
        except ConnectionError:
            return out + b"<closed>"
        answer = await _read_answer(reader)
        return out + (answer or b"<closed>")
    finally:
        writer.close()


@pytest.fixture
async def api(make_api: Any) -> Api:
    """The service with the listener, and without the gateway lane: the main port answers
    through aiohttp's own objects."""
    api = await make_api(gateway_port=free_port(), gateway_lane=False)
    assert GATEWAY_LISTENER in api.app
    return api


def _ports(api: Api) -> tuple[int, int]:
    return api.app[GATEWAY_LISTENER].port, api.client.server.port


@pytest.fixture
async def credentials(api: Api) -> dict[str, str]:
    token = await api.user_with_session("listener@example.com")
    reader = await api.create_key(token, permissions=["files.read"])
    writer = await api.create_key(token, name="writer", permissions=["files.write"])
    return {"token": token, "reader": reader["secret_key"], "writer": writer["secret_key"]}


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests the listener answered, in order."""
    paths: list[str] = []
    answer = GatewayListener.answer

    def counted(self: GatewayListener, trace: Any, method: str, path: str, *rest: Any) -> bytes:
        paths.append(path)
        return answer(self, trace, method, path, *rest)

    monkeypatch.setattr(GatewayListener, "answer", counted)
    return paths


# The verify cases of tests/api/test_gateway_lane.py: (headers), with {token}, {reader} and
# {writer} filled in.
CASES = {
    "key holding the permission": {"X-API-Key": "{reader}", "X-Required-Permission": "files.read"},
    "key lacking the permission": {"X-API-Key": "{writer}", "X-Required-Permission": "files.read"},
    "session": {"Authorization": "Bearer {token}", "X-Required-Permission": "files.write"},
    "original request nginx sends": {
        "X-API-Key": "{reader}",
        "X-Original-Method": "GET",
        "X-Original-URI": "/api/v1/files",
    },
    "key on the key endpoints": {
        "X-API-Key": "{reader}",
        "X-Forwarded-Method": "GET",
        "X-Forwarded-Uri": "/api/v1/keys",
    },
    "no credential": {"X-Required-Permission": "files.read"},
    "malformed key": {"X-API-Key": "fhk_notakey", "X-Required-Permission": "files.read"},
    "both credentials": {
        "X-API-Key": "{reader}",
        "Authorization": "Bearer {token}",
        "X-Required-Permission": "files.read",
    },
    "unknown permission name": {"X-API-Key": "{reader}", "X-Required-Permission": "files.delete"},
    "no permission named": {"X-API-Key": "{reader}"},
    "a client's request id": {
        "X-API-Key": "{reader}",
        "X-Required-Permission": "files.read",
        "X-Request-ID": "gw-1",
    },
    "a request id that looks like a key": {
        "X-API-Key": "{reader}",
        "X-Required-Permission": "files.read",
        "X-Request-ID": "fhk_abc",
    },
    "the key sent twice": {
        "X-API-Key": "{reader}",
        "x-api-key": "{reader}",
        "X-Required-Permission": "files.read",
    },
}


@pytest.mark.parametrize("version", ["1.1", "1.0"])
@pytest.mark.parametrize("case", CASES)
async def test_the_listener_answers_as_aiohttps_handling_does(
    case: str, version: str, api: Api, credentials: dict[str, str], answered: list[str]
) -> None:
    headers = {name: value.format(**credentials) for name, value in CASES[case].items()}
    if version == "1.0":
        headers["Connection"] = "keep-alive"
    raw = _request(VERIFY, headers, version)
    listener, aiohttp = _ports(api)
    ours = await _transcript(listener, raw)
    assert answered == [VERIFY, VERIFY]
    assert _comparable(ours) == _comparable(await _transcript(aiohttp, raw))
    assert b"fhk_" not in ours and b"fhs_" not in ours


# Requests other than a plain sub-request, answered as the main port answers them.
REFUSALS = {
    "HEAD": (b"HEAD /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\n\r\n", 1, True),
    "HEAD over HTTP/1.0": (b"HEAD /api/v1/auth/verify HTTP/1.0\r\n\r\n", 1, True),
    "POST with a body": (
        b"POST /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        1,
        False,
    ),
    "DELETE": (b"DELETE /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\n\r\n", 1, False),
    "OPTIONS *": (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 1, False),
    "another path": (b"GET /api/v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n", 1, False),
    "a path with a key in it": (
        b"GET /nothing/fhk_secret HTTP/1.1\r\nHost: x\r\n\r\n",
        1,
        False,
    ),
    "a trailing slash": (b"GET /api/v1/auth/verify/ HTTP/1.1\r\nHost: x\r\n\r\n", 1, False),
    "a query": (
        b"GET /api/v1/auth/verify?a=1 HTTP/1.1\r\nHost: x\r\n"
        b"X-Required-Permission: files.read\r\n\r\n",
        1,
        False,
    ),
    "a body by length": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        1,
        False,
    ),
    "a chunked body": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n",
        1,
        False,
    ),
    "Expect: 100-continue": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        1,
        False,
    ),
    "Expect: 100-continue on another path": (
        b"GET /nowhere HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
        1,
        False,
    ),
    "another expectation": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n",
        1,
        False,
    ),
    "another expectation, another method": (
        b"PUT /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n",
        1,
        False,
    ),
    "an expectation over HTTP/1.0": (
        b"GET /api/v1/auth/verify HTTP/1.0\r\nExpect: 100-continue\r\n\r\n",
        1,
        False,
    ),
    "HTTP/1.0": (b"GET /api/v1/auth/verify HTTP/1.0\r\n\r\n", 1, False),
    "Connection: close": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        1,
        False,
    ),
    "a target of 8190 bytes": (
        b"GET /api/v1/auth/verify?" + b"a" * (8190 - 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        1,
        False,
    ),
    "a header of 8190 bytes": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nX-Long: "
        + b"a" * (8190 - 6)
        + b"\r\nHost: x\r\n\r\n",
        1,
        False,
    ),
    "128 headers": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X-H%d: v\r\n" % n for n in range(127))
        + b"\r\n",
        1,
        False,
    ),
    "Expect: 100-continue behind a request in hand": (
        _request(VERIFY, {}) + b"GET /nowhere HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
        2,
        False,
    ),
    "pipelined behind a body": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n0\r\n\r\n",
        4,
        False,
    ),
}
# Malformed requests: 400 in aiohttp's words, then closed.
MALFORMED = {
    "not HTTP": b"HELLO\r\n\r\n",
    "TLS": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
    "a control character in a header": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nX-API-Key: fhk_se\x01cret\r\n\r\n"
    ),
    "a NUL in a header": b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "no Host over HTTP/1.1": b"GET /api/v1/auth/verify HTTP/1.1\r\nX-API-Key: fhk_x\r\n\r\n",
    "Host twice": b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    "Content-Length twice": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
        b"Content-Length: 1\r\n\r\nab"
    ),
    "Content-Length and chunked": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "a bad Content-Length": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n"
    ),
    "bare LF": b"GET /api/v1/auth/verify HTTP/1.1\nHost: x\n\n",
    "a lower-case method": b"get /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\n\r\n",
    "a space before the colon": b"GET /api/v1/auth/verify HTTP/1.1\r\nHost : x\r\n\r\n",
    "a folded header": b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
    "a non-ASCII target": "GET /api/v1/auth/vérify HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
    "the old WebSocket handshake": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nSec-WebSocket-Key1: 1\r\n\r\n"
    ),
    "a target of 8191 bytes": (
        b"GET /api/v1/auth/verify?" + b"a" * (8191 - 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    ),
    "a header of 8191 bytes": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nX-Long: " + b"a" * (8191 - 6) + b"\r\nHost: x\r\n\r\n"
    ),
    "129 headers": (
        b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\n"
        + b"".join(b"X-H%d: v\r\n" % n for n in range(128))
        + b"\r\n"
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
async def test_other_requests_are_answered_as_aiohttp_answers_them(
    case: str, api: Api, answered: list[str]
) -> None:
    raw, count, head_only = REFUSALS[case]
    listener, aiohttp = _ports(api)
    ours = await _transcript(listener, raw, count, head_only)
    assert answered  # the listener answered, not something behind it
    assert _comparable(ours) == _comparable(await _transcript(aiohttp, raw, count, head_only))
    assert b"fhk_" not in ours


@pytest.mark.parametrize("case", MALFORMED)
async def test_malformed_requests_are_refused_as_aiohttp_refuses_them(
    case: str, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    raw = MALFORMED[case]
    listener, aiohttp = _ports(api)
    ours = await _transcript(listener, raw)
    assert ours.endswith(_MALFORMED + b"<closed>"), ours
    assert _comparable(ours) == _comparable(await _transcript(aiohttp, raw))
    assert "fhk_" not in caplog.text and "cret" not in caplog.text


async def test_what_the_listener_answers_otherwise_than_aiohttp(api: Api) -> None:
    # Deliberately stricter than the main port, all failing closed.
    listener, _ = _ports(api)
    # A path spelled otherwise (aiohttp decodes it, or takes an absolute URI): not found.
    for target in (b"/api/v1/auth/%76erify", b"http://x/api/v1/auth/verify"):
        raw = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target
        answer = await _transcript(listener, raw)
        assert answer.startswith(b"HTTP/1.1 404 Not Found\r\n"), answer
    # Another HTTP version (aiohttp answers it in that version's name): malformed.
    for raw in (
        b"GET /api/v1/auth/verify HTTP/2.0\r\nHost: x\r\n\r\n",
        b"GET /api/v1/auth/verify\r\n\r\n",
    ):
        answer = await _transcript(listener, raw)
        assert answer.endswith(_MALFORMED + b"<closed>"), answer
    # An upgrade (aiohttp then reads nothing more, but leaves the connection open): answered
    # without switching protocols, with Connection: close, and closed.
    for upgrade in (b"websocket", b"h2c"):
        raw = b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n"
        answer = await _transcript(listener, raw % (VERIFY.encode(), upgrade) + b"\x81\x80garbage")
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
        assert b"\r\nConnection: close\r\n" in answer and answer.endswith(b"}<closed>")
    # A malformed request behind a good one in the same read (aiohttp answers only the refusal):
    # the good one is answered first.
    raw = _request(VERIFY, {"X-Request-ID": "first"}) + b"HELLO\r\n\r\n"
    answer = await _transcript(listener, raw, 2)
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"X-Request-ID: first" in answer
    assert answer.endswith(_MALFORMED + b"<closed>") and answer.count(b"HTTP/1.") == 2
    # A body that breaks off after its headers were answered (aiohttp then neither answers nor
    # closes): the answer stands, and the connection is closed.
    head = b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    answer = await _transcript(listener, [head, b"zz\r\n"])
    assert (
        answer.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"permission_unspecified" in answer
    )
    assert answer.endswith(b"}<closed>") and answer.count(b"HTTP/1.") == 1
    answer = await _transcript(listener, b"CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404 Not Found\r\n") and answer.endswith(b"<closed>")


# -- pipelining ------------------------------------------------------------------------------------


def _split_randomly(raw: bytes, seed: int) -> list[bytes]:
    """``raw`` cut into pieces of 1-400 bytes, the same cuts for the same seed."""
    rng = random.Random(seed)
    pieces, start = [], 0
    while start < len(raw):
        end = start + rng.randint(1, 400)
        pieces.append(raw[start:end])
        start = end
    return pieces


async def _read_ids(reader: asyncio.StreamReader, count: int) -> list[tuple[bytes, bytes]]:
    """(status, request id) of the next ``count`` answers."""
    seen = []
    for _ in range(count):
        answer = await _read_answer(reader)
        assert answer, f"closed after {len(seen)} answers"
        status = answer.split(b" ", 2)[1]
        seen.append((status, re.search(rb"X-Request-ID: (\S+)", answer).group(1)))  # type: ignore[union-attr]
    return seen


@pytest.mark.parametrize(
    ("count", "split_seed"),
    [(1, None), (33, None), (100, None), (300, None), (1, 1), (33, 2), (100, 3), (300, 4)],
)
async def test_pipelined_requests_are_answered_in_order(
    count: int, split_seed: int | None, make_api: Any
) -> None:
    api = await make_api(gateway_port=free_port(), rate_limit_burst=10_000)
    token = await api.user_with_session("pipeline@example.com")
    key = (await api.create_key(token))["secret_key"]
    # Sub-requests answered after a lookup, with refusals answered at once among them.
    raw, expected = b"", []
    for n in range(count):
        if n % 7 == 3:
            raw += _request("/nowhere", {"X-Request-ID": f"p{n}"})
            expected.append((b"404", f"p{n}".encode()))
        else:
            headers = {"X-API-Key": key, "X-Required-Permission": "files.read"}
            raw += _request(VERIFY, {**headers, "X-Request-ID": f"p{n}"})
            expected.append((b"200", f"p{n}".encode()))
    pieces = [raw] if split_seed is None else _split_randomly(raw, split_seed)
    reader, writer = await asyncio.open_connection("127.0.0.1", api.app[GATEWAY_LISTENER].port)
    try:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
        assert await _read_ids(reader, count) == expected
        writer.write(_NEXT)  # and the connection goes on
        assert await _read_ids(reader, 1) == [(b"400", b"next")]
    finally:
        writer.close()


# -- deadlines ----------------------------------------------------------------------------------


async def _until_closed(reader: asyncio.StreamReader, seconds: float = 5) -> bytes:
    """All the connection sends until it closes (failing after ``seconds``)."""
    return await asyncio.wait_for(reader.read(), seconds)


async def test_late_headers_are_answered_408_as_aiohttp_answers_them(
    make_api: Any, aiohttp_client: Any
) -> None:
    api = await make_api(gateway_port=free_port(), header_timeout_seconds=0.3)
    # The main port with the same deadline (a test server takes it as an argument).
    server = EnvelopeTestServer(create_app(replace(api.app[SETTINGS], gateway_port=0)))
    await server.start_server(header_timeout=0.3)
    await aiohttp_client(server)  # closed with the test
    transcripts = []
    for port in (api.app[GATEWAY_LISTENER].port, server.port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nX-API-Key: fhk_")
            transcripts.append(await _until_closed(reader))
        finally:
            writer.close()
    ours, theirs = transcripts
    assert ours.startswith(b"HTTP/1.0 408 Request Timeout\r\n") and b"request_timeout" in ours
    assert _comparable(ours) == _comparable(theirs)


async def test_the_header_deadline_is_not_an_idle_timer(make_api: Any) -> None:
    api = await make_api(gateway_port=free_port(), header_timeout_seconds=0.3)
    reader, writer = await asyncio.open_connection("127.0.0.1", api.app[GATEWAY_LISTENER].port)
    try:
        started = asyncio.get_running_loop().time()
        for byte in b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaa":
            writer.write(bytes([byte]))
            await asyncio.sleep(0.02)  # a byte now and then
            if reader.at_eof() or reader._buffer:  # type: ignore[attr-defined]
                break
        answer = await _until_closed(reader)
        assert answer.startswith(b"HTTP/1.0 408 Request Timeout\r\n")
        assert asyncio.get_running_loop().time() - started < 2
    finally:
        writer.close()


async def test_silent_and_idle_connections_are_closed(make_api: Any) -> None:
    api = await make_api(gateway_port=free_port(), header_timeout_seconds=0.3)
    listener = api.app[GATEWAY_LISTENER]
    listener.keepalive_timeout = 0.3
    # Nothing sent: closed without a word after the header deadline.
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    assert await _until_closed(reader) == b""
    writer.close()
    # Idle after an answer: closed after the keep-alive timeout.
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    try:
        writer.write(_NEXT)
        assert (await _read_answer(reader)).startswith(b"HTTP/1.1 400 ")
        assert await _until_closed(reader) == b""
    finally:
        writer.close()
    assert not listener.connections


async def test_a_body_that_does_not_come_is_not_waited_for(make_api: Any) -> None:
    api = await make_api(gateway_port=free_port(), body_timeout_seconds=0.3)
    reader, writer = await asyncio.open_connection("127.0.0.1", api.app[GATEWAY_LISTENER].port)
    try:
        writer.write(
            b"GET /api/v1/auth/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n12"
        )
        answer = await _read_answer(reader)  # answered without its body, as aiohttp answers
        assert answer.startswith(b"HTTP/1.1 400 ") and b"permission_unspecified" in answer
        assert await _until_closed(reader) == b""
    finally:
        writer.close()


# -- a client that does not read, one that goes away ------------------------------------------


async def test_a_client_that_does_not_read_stops_being_read(api: Api, answered: list[str]) -> None:
    listener = api.app[GATEWAY_LISTENER]
    count = 30_000  # answers of some 13 MB: more than the sockets' buffers take
    raw = b"".join(
        b"GET /n HTTP/1.1\r\nHost: x\r\nX-Request-ID: p%d\r\n\r\n" % n for n in range(count)
    )
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", listener.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        writer.write(raw)
        sending = asyncio.ensure_future(writer.drain())
        # Until the listener stops answering.
        settled = -1
        while settled != len(answered):
            settled = len(answered)
            await asyncio.sleep(0.5)
        assert 0 < settled < count
        [connection] = listener.connections
        assert not connection._reading  # type: ignore[attr-defined]
        assert connection._transport.get_write_buffer_size() < 4 * 1024 * 1024  # type: ignore[attr-defined]
        # Once the client reads, every answer comes, in order.
        ids = [status_id[1] for status_id in await _read_ids(reader, count)]
        assert ids == [b"p%d" % n for n in range(count)]
        await sending
    finally:
        writer.close()


async def _held_at_the_store(
    port: int, request: bytes, redis_client: Any
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sent ``request`` while the store is paused for 200 ms, so that its
    lookup waits for a reply when this returns."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    redis_client.execute_command("CLIENT", "PAUSE", 200)
    writer.write(request)
    await writer.drain()
    await asyncio.sleep(0.05)
    return reader, writer


async def test_a_client_gone_mid_request_is_no_error(
    api: Api,
    credentials: dict[str, str],
    redis_client: Any,
    answered: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    listener = api.app[GATEWAY_LISTENER]
    request = _request(
        VERIFY, {"X-API-Key": credentials["reader"], "X-Required-Permission": "files.read"}
    )
    _, writer = await _held_at_the_store(listener.port, request, redis_client)
    writer.close()  # gone before its answer
    await asyncio.sleep(0.3)
    assert answered == [VERIFY]  # answered (counted, logged), and dropped
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]
    transcript = await _transcript(listener.port, request)
    assert transcript.startswith(b"HTTP/1.1 200 OK\r\n")


# -- shutdown ----------------------------------------------------------------------------------


async def test_shutdown_waits_for_the_request_in_hand(
    api: Api, credentials: dict[str, str], redis_client: Any
) -> None:
    listener = api.app[GATEWAY_LISTENER]
    # An idle keep-alive connection: closed at once.
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", listener.port)
    idle_writer.write(_NEXT)
    await _read_answer(idle_reader)
    request = _request(
        VERIFY, {"X-API-Key": credentials["reader"], "X-Required-Permission": "files.read"}
    )
    reader, writer = await _held_at_the_store(listener.port, request, redis_client)
    try:
        closing = asyncio.ensure_future(api.client.server.close())  # stops as SIGTERM does
        assert await _until_closed(idle_reader, 1) == b""
        answer = await _until_closed(reader)  # all it is sent, until it is closed
        await closing
    finally:
        writer.close()
        idle_writer.close()
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"X-Auth-Credential: api_key" in answer
    assert not listener.connections
    with pytest.raises(OSError):  # no longer listening
        await asyncio.open_connection("127.0.0.1", listener.port)


# -- what is logged and counted ------------------------------------------------------------------


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_the_access_lines_and_metrics_are_aiohttps(
    make_api: Any,
    aiohttp_client: Any,
    clock: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    api = await make_api()
    token = await api.user_with_session("logged@example.com")
    key = (await api.create_key(token))["secret_key"]
    writer_key = (await api.create_key(token, name="w", permissions=["files.write"]))["secret_key"]
    requests = [
        _request(VERIFY, {"X-API-Key": key, "X-Required-Permission": "files.read"}),
        _request(
            VERIFY, {"Authorization": f"Bearer {token}", "X-Required-Permission": "keys.read"}
        ),
        _request(VERIFY, {"X-API-Key": writer_key, "X-Required-Permission": "files.read"}),
        _request(VERIFY, {"X-API-Key": "fhk_forged", "X-Required-Permission": "files.read"}),
        _request(VERIFY, {"X-API-Key": key}),
        _request("/nowhere/fhk_secret", {}),
        _request(VERIFY, {"X-API-Key": key}, method="HEAD"),
    ]
    log_file = tmp_path / "access.log"
    with log_file.open("wb") as output:
        lines = LineBuffer(output.fileno())  # the log's own line buffer, into a file of this test's
        monkeypatch.setattr("service.logs.LINES", lines)
        monkeypatch.setattr("service.api.gateway_listener.LINES", lines)
        caplog.set_level(logging.INFO, logger="aiohttp.access")  # as production serves
        settings = replace(api.app[SETTINGS], gateway_port=free_port(), gateway_lane=False)
        server = EnvelopeTestServer(create_app(settings, clock=clock))
        await server.start_server(access_log_class=AccessLogger)
        client = await aiohttp_client(server)
        logged = []
        for port in (settings.gateway_port, server.port):
            for request in requests:
                await _transcript(port, request, head_only=request.startswith(b"HEAD"))
            await _transcript(port, b"HELLO\r\n\r\n")
            lines.flush()
            logged.append([orjson.loads(line) for line in log_file.read_bytes().splitlines()])
            log_file.write_bytes(b"")
            output.seek(0)
    ours, theirs = logged
    fields = ("method", "route", "path", "status", "credential", "key_id", "auth", "remote")
    assert [[entry[name] for name in fields] for entry in ours] == [
        [entry[name] for name in fields] for entry in theirs
    ]
    assert [entry["status"] for entry in ours[::2]] == [200, 200, 403, 401, 400, 404, 405, 400]
    assert ours[-1]["request_id"] is None and ours[-1]["method"] == "UNKNOWN"
    assert "fhk_" not in log_file.read_text() + caplog.text
    for entry in ours + theirs:
        assert "fhk_" not in orjson.dumps(entry).decode()
    # Each request was counted once on each port.
    metrics = _samples(await (await client.get("/metrics")).text())
    counted = {
        labels: value
        for (name, labels), value in metrics.items()
        if name in ("filehost_http_requests_total", "filehost_auth_checks_total") and value
    }
    assert counted and all(value % 2 == 0 for value in counted.values()), counted
    requests_total = "filehost_http_requests_total"
    by_route = {"route": VERIFY, "method": "GET", "status": "200"}
    assert metrics[(requests_total, frozenset(by_route.items()))] == 4  # and /metrics's own
    assert counted[frozenset({"credential": "api_key", "outcome": "ok"}.items())] == 2


# -- off by default, on when set -----------------------------------------------------------------


def test_the_listener_is_off_by_default() -> None:
    assert Settings().gateway_port == 0
    assert load_settings({}).gateway_port == 0
    assert load_settings({"FILEHOST_GATEWAY_PORT": " 9090 "}).gateway_port == 9090
    with pytest.raises(ConfigError, match="FILEHOST_GATEWAY_PORT"):
        load_settings({"FILEHOST_GATEWAY_PORT": "8080"})  # the main port's default
    with pytest.raises(ConfigError, match="FILEHOST_GATEWAY_PORT"):
        load_settings({"FILEHOST_GATEWAY_PORT": "70000"})


async def test_the_listener_listens_only_when_set(
    make_api: Any, credentials: dict[str, str]
) -> None:
    port = free_port()
    api = await make_api()
    assert GATEWAY_LISTENER not in api.app
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    api = await make_api(gateway_port=port)
    headers = {"X-API-Key": credentials["reader"], "X-Required-Permission": "files.read"}
    answer = await _transcript(port, _request(VERIFY, headers))
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"X-Auth-Permissions: files.read" in answer


def _made_by_the_service(thing: object) -> bool:
    """Whether ``thing`` is an object of the service's code or one of its functions' frames."""
    code = getattr(thing, "f_code", None)
    if code is not None:
        return "/service/" in code.co_filename
    return type(thing).__module__.startswith("service.")


@pytest.mark.parametrize("case", ["key holding the permission", "malformed key", "no credential"])
async def test_the_listeners_answers_leave_no_reference_cycles(
    case: str, api: Api, credentials: dict[str, str]
) -> None:
    # The server's collector is tuned on the premise that requests make none (service.server).
    headers = {name: value.format(**credentials) for name, value in CASES[case].items()}
    port = api.app[GATEWAY_LISTENER].port
    await _transcript(port, _request(VERIFY, headers))
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to look at
    try:
        await _transcript(port, _request(VERIFY, headers) * 3, 3)
        gc.collect()
        ours = [type(thing).__name__ for thing in gc.garbage if _made_by_the_service(thing)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert ours == []


# -- serve, with two workers --------------------------------------------------------------------


def _access_lines(stderr: Path) -> list[dict[str, Any]]:
    lines = []
    for line in stderr.read_bytes().splitlines():
        with contextlib.suppress(orjson.JSONDecodeError):  # a line being written
            entry = orjson.loads(line)
            if entry.get("logger") == "aiohttp.access":
                lines.append(entry)
    return lines


async def test_every_worker_of_serve_listens_and_stops_cleanly(
    make_api: Any, redis_url: str, redis_mode: str, tmp_path: Path
) -> None:
    api = await make_api()
    token = await api.user_with_session("serve@example.com")
    key = (await api.create_key(token))["secret_key"]
    port, gateway = free_port(), free_port()
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "REDIS_URL" and not name.startswith("FILEHOST_")
    }
    env |= {
        "REDIS_URL": redis_url,
        "FILEHOST_REDIS_MODE": redis_mode,
        "FILEHOST_PORT": str(port),
        "FILEHOST_GATEWAY_PORT": str(gateway),
        "FILEHOST_WORKERS": "2",
    }
    stderr = tmp_path / "serve.err"
    with stderr.open("wb") as errors:
        serve = subprocess.Popen(
            [sys.executable, "-m", "service", "serve"],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
        )
    try:
        headers = {"X-API-Key": key, "X-Required-Permission": "files.read"}
        deadline = time.monotonic() + 30
        pids: set[int] = set()
        sent = 0
        while len(pids) < 2:  # until both workers answered (each connection goes to either)
            assert time.monotonic() < deadline and serve.poll() is None, stderr.read_text()
            try:
                answer = await _transcript(
                    gateway, _request(VERIFY, {**headers, "X-Request-ID": f"mp{sent}"})
                )
            except OSError:  # not listening yet
                await asyncio.sleep(0.1)
                continue
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer
            sent += 1
            await asyncio.sleep(0.02)
            pids = {e["pid"] for e in _access_lines(stderr) if e["request_id"].startswith("mp")}
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            assert serve.wait(30) == 0, stderr.read_text()
        finally:
            if serve.poll() is None:
                os.killpg(serve.pid, signal.SIGKILL)
    text = stderr.read_text()
    assert serve.pid not in pids and "Traceback" not in text and key not in text
    assert len([e for e in _access_lines(stderr) if e["request_id"].startswith("mp")]) == sent
