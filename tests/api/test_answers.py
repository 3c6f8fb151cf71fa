"""``Answer`` writes what ``web.Response`` would: the same status line, headers (but for their
order and the Date) and body, case by case, read off the wire of a real server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from service.api._aiohttp import SERVER_NAME, Answer, header_block, serialise_head

BLOCK = header_block({"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
BODY = b'{"success":true,"data":{"files":[]}}'


def _answer(case: str) -> web.Response:
    if case == "json":
        response = Answer(BODY)
    elif case == "empty":
        response = Answer()
    elif case == "created":
        response = Answer(BODY, 201)
    elif case == "refused":
        response = Answer(b'{"success":false}', 401)
        response.headers["WWW-Authenticate"] = 'Bearer realm="filehost"'
    elif case == "no-content":
        response = Answer(None, 204)
    elif case == "closing":
        response = Answer(BODY)
        response.force_close()
    elif case == "split":
        response = Answer(BODY)
        response.headers["X-Evil"] = "a\r\nSet-Cookie: b=c"
    else:
        raise AssertionError(case)
    response.headers["X-Request-ID"] = "req-1"
    response.block = BLOCK
    return response


def _response(case: str) -> web.Response:
    """The same answer, made the general way (naming the service as its server, which
    ``service.api.headers`` does for every response that is not an ``Answer``)."""
    answer = _answer(case)
    response = web.Response(
        body=answer.body,
        status=answer.status,
        content_type="application/json" if answer.body is not None else None,
        headers={"Server": SERVER_NAME},
    )
    for name, value in answer.headers.items():
        if name != "Content-Type":
            response.headers.add(name, value)
    response.headers.extend(BLOCK.pairs)
    if case == "closing":
        response.force_close()
    return response


@pytest.fixture
async def server(aiohttp_server: Any) -> Any:
    async def answer(request: web.Request) -> web.StreamResponse:
        return _answer(request.match_info["case"])

    async def response(request: web.Request) -> web.StreamResponse:
        return _response(request.match_info["case"])

    app = web.Application()
    app.router.add_route("*", "/answer/{case}", answer)
    app.router.add_route("*", "/response/{case}", response)
    return await aiohttp_server(app)


async def _exchange(server: Any, request: bytes) -> tuple[str, dict[str, str], bytes, bool]:
    """Send one request; the status line, headers (Date left out), body, and whether the server
    closed the connection after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(request)
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).decode()
        status, *lines = head[:-4].split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines)
        headers.pop("Date")
        head_request = request.startswith(b"HEAD ")
        length = int(headers.get("Content-Length", "0")) if not head_request else 0
        if (
            "Content-Length" not in headers
            and not head_request
            and not status.startswith(("HTTP/1.1 204", "HTTP/1.0 204"))
        ):
            body = await asyncio.wait_for(reader.read(), 10)  # to the end: no length given
        else:
            body = await asyncio.wait_for(reader.readexactly(length), 10)
        closed = await asyncio.wait_for(reader.read(1), 2) == b"" if "close" in head else False
        return status, headers, body, closed
    finally:
        writer.close()


def _request(method: str, path: str, version: str = "1.1", extra: str = "") -> bytes:
    return f"{method} {path} HTTP/{version}\r\nHost: x\r\n{extra}\r\n".encode()


@pytest.mark.parametrize(
    ("method", "case", "version", "extra"),
    [
        ("GET", "json", "1.1", ""),
        ("GET", "empty", "1.1", ""),
        ("POST", "created", "1.1", "Content-Length: 0\r\n"),
        ("GET", "refused", "1.1", ""),
        ("GET", "no-content", "1.1", ""),
        ("HEAD", "json", "1.1", ""),
        ("HEAD", "empty", "1.1", ""),
        ("GET", "closing", "1.1", ""),
        ("GET", "json", "1.1", "Connection: close\r\n"),
        ("GET", "json", "1.0", ""),  # answered by web.Response itself
        ("GET", "json", "1.0", "Connection: keep-alive\r\n"),
    ],
)
async def test_an_answer_is_what_a_response_would_be(
    server: Any, method: str, case: str, version: str, extra: str
) -> None:
    by_answer = await _exchange(server, _request(method, f"/answer/{case}", version, extra))
    by_response = await _exchange(server, _request(method, f"/response/{case}", version, extra))
    assert by_answer == by_response
    _, headers, body, _ = by_answer
    assert headers["Cache-Control"] == "no-store"  # the block went out, in either way
    if method == "GET" and case == "json":
        assert body == BODY


async def test_a_header_that_would_split_the_answer_is_never_sent_as_aiohttp_never_sends_it(
    server: Any,
) -> None:
    # aiohttp's serialiser raises once the handler has returned: nothing is written, the
    # connection is dropped (and the error logged). An Answer does exactly that too.
    for way in ("answer", "response"):
        with pytest.raises(asyncio.IncompleteReadError) as raised:
            await _exchange(server, _request("GET", f"/{way}/split"))
        assert raised.value.partial == b""


async def test_answers_keep_the_connection_for_pipelined_requests(server: Any) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(_request("GET", "/answer/json") + _request("HEAD", "/answer/json") * 2)
        for expected_body in (BODY, b"", b""):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert f"Content-Length: {len(BODY)}\r\n".encode() in head
            assert await reader.readexactly(len(expected_body)) == expected_body
        writer.write(_request("GET", "/answer/empty"))
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).startswith(
            b"HTTP/1.1 200 OK\r\n"
        )
    finally:
        writer.close()


def test_a_block_with_a_newline_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="Newline"):
        header_block({"X-Bad": "a\nb"})


@pytest.mark.parametrize(
    "header",
    [
        ("X-Evil", "a\r\nSet-Cookie: b=c"),
        ("X-Evil", "a\nSet-Cookie: b=c"),
        ("X-Evil", "a\rb"),
        ("X-Evil\r\nSet-Cookie", "b=c"),
        ("X-Evil\n", "b"),
    ],
)
def test_a_header_that_would_split_the_answer_is_refused(header: tuple[str, str]) -> None:
    fine = ("X-Request-ID", "req-1")

    assert b"\r\nX-Request-ID: req-1\r\n" in serialise_head(200, BLOCK, [fine], 1, 0, True)
    for headers in ([header], [fine, header], [header, fine]):
        with pytest.raises(ValueError, match="Newline or carriage return"):
            serialise_head(200, BLOCK, headers, len(headers), 0, True)


@pytest.mark.parametrize(
    ("status", "reason", "line"),
    [
        (200, None, "HTTP/1.1 200 OK"),
        (401, None, "HTTP/1.1 401 Unauthorized"),
        (200, "Fine", "HTTP/1.1 200 Fine"),
        (599, None, "HTTP/1.1 599 "),  # as aiohttp: a status HTTPStatus does not name
    ],
)
def test_the_status_line(status: int, reason: str | None, line: str) -> None:
    head = serialise_head(status, None, [], 0, None, True, reason)

    assert head.decode().split("\r\n")[0] == line
