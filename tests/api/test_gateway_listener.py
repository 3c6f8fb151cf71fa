"""The gateway listener (``service.api.gateway_listener``) answers what aiohttp's handling of the
same request answers, byte for byte but for ``Date`` and a generated request id, and refuses
the rest: each case goes over a raw connection to the listener's port and to the main port of
the same application (without the gateway lane, so through aiohttp's own objects), followed on
the same connection by a plain sub-request, so that whether and how the connection goes on is
compared too."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from service.api.gateway_listener import GATEWAY_LISTENER, GatewayListener
from tests.conftest import Api, free_port

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
