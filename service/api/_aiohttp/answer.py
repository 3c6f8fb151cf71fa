"""The API's answers: a JSON body (or none) and a few headers, written to the connection in one
piece.

aiohttp's ``web.Response`` is general: on every answer it works out compression, cookies,
chunking, the content type and the connection header, builds every header into a multidict and
serialises that multidict a character at a time, checking each for CR and LF: on the
gateway's path, work of the order of the Redis lookup the answer reports on. An ``Answer`` is a
``web.Response`` that knows what it is: the headers every answer of its kind carries
(``service.api.headers.standard_headers``: the security headers) are serialised once, at
import, as a ``HeaderBlock``; only the few headers of this one answer (its request id, its rate,
the forward-auth identity, a challenge) go through the multidict, and they are checked for CR
and LF as aiohttp checks them. The rest of aiohttp's work is done as aiohttp does it: Date,
Server (our own name, ``SERVER_NAME``, never aiohttp's default naming the versions of Python and
aiohttp), Content-Length (also for HEAD), the Connection header, no body for HEAD, 204, 304 and
1xx, the access log, keep-alive.

Anything out of the ordinary (a request other than HTTP/1.1, compression, cookies) is answered
by ``web.Response`` itself, with the block's headers added to the multidict first, so it is never
answered differently, only more slowly. ``tests/api/test_answers.py`` compares the status line
and headers of both ways, case by case.
"""

from __future__ import annotations

from collections.abc import Iterable
from http import HTTPStatus
from typing import NamedTuple

from aiohttp import hdrs, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import HttpVersion11
from multidict import istr

from service.api._aiohttp import names

rfc822_formatted_time = names.private("aiohttp.helpers.rfc822_formatted_time")

JSON = "application/json"
# Statuses whose answers never carry a body (nor do 1xx ones).
EMPTY_BODY_STATUSES = frozenset({204, 304})
# Every answer's Server header: the product, without the versions of Python and aiohttp that
# aiohttp's own default names (an attacker's first look-up for known flaws).
SERVER_NAME = "filehost-auth"
_SERVER = f"Server: {SERVER_NAME}\r\n"


class HeaderBlock(NamedTuple):
    """Headers that go out together on many answers: as ``(name, value)`` pairs for a multidict,
    and as their serialised lines."""

    pairs: tuple[tuple[istr, str], ...]
    lines: str


def header_block(headers: dict[str, str]) -> HeaderBlock:
    for name, value in headers.items():
        _check(name, value)
    return HeaderBlock(
        tuple((istr(name), value) for name, value in headers.items()),
        "".join(f"{name}: {value}\r\n" for name, value in headers.items()),
    )


def _check(name: str, value: str) -> None:
    # As aiohttp's serialiser: a header that would split the answer is refused, never sent.
    if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
        raise ValueError("Newline or carriage return detected in headers")


class Reply(NamedTuple):
    """What a gateway route answers (``service.api.gateway``): a status, a body (JSON already
    serialised, unless ``content_type`` says otherwise) or none, and the route's own headers,
    as plain values. The same route answers through aiohttp as ``Answer.of(reply)``."""

    status: int
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = JSON


# A header's line but for its CRLF, from its ``(name, value)``: both are strings.
_HEADER_LINE = ": ".join
# The status line aiohttp writes for each status: with the reason phrase HTTPStatus knows.
_STATUS_LINES = {
    status.value: f"HTTP/1.1 {status.value} {status.phrase}\r\n" for status in HTTPStatus
}


def serialise_head(
    status: int,
    block: HeaderBlock | None,
    headers: Iterable[tuple[str, str]],
    count: int,
    length: int | None,
    keep_alive: bool,
    reason: str | None = None,
) -> bytes:
    """The status line and headers of an answer to an HTTP/1.1 request, as aiohttp writes them:
    ``block``'s lines, then the answer's own ``count`` headers (refused, as aiohttp refuses them,
    if one would split the answer), ``Content-Length`` unless ``length`` is None, ``Date``,
    ``Server`` and, without keep-alive, ``Connection: close``."""
    status_line = None if reason else _STATUS_LINES.get(status)
    if status_line is None:  # a reason of the answer's own, or a status HTTPStatus doesn't name
        status_line = f"HTTP/1.1 {status} {reason or ''}\r\n"
    head = [status_line]
    if block is not None:
        head.append(block.lines)
    if count:
        lines = list(map(_HEADER_LINE, headers))
        # No line break in any: else a value would split the answer (``in`` is a memchr, where
        # counting the breaks of the joined lines walked them a character at a time).
        joined = "".join(lines)
        if "\n" in joined or "\r" in joined:
            for name, value in headers:
                _check(name, value)
        head.append("\r\n".join(lines))
        head.append("\r\n")
    if length is not None:
        head.append(f"Content-Length: {length}\r\n")
    head.append(f"Date: {rfc822_formatted_time()}\r\n")
    head.append(_SERVER)
    if not keep_alive:
        head.append("Connection: close\r\n")
    head.append("\r\n")
    return "".join(head).encode()


class Answer(web.Response):
    """A JSON answer (``body`` already serialised) or an empty one; see the module."""

    block: HeaderBlock | None = None

    def __init__(self, body: bytes | None = None, status: int = 200) -> None:
        if not names.FAST_PATHS:
            super().__init__(body=body, status=status)
            if body is not None:
                self.headers[hdrs.CONTENT_TYPE] = JSON
            return
        # web.Response's own __init__ parses its arguments into headers; nothing here needs it.
        web.StreamResponse.__init__(self, status=status)
        self._body = body
        self._compressed_body = None
        self._zlib_executor_size = 0
        self._zlib_executor = None
        if body is not None:
            self._headers[hdrs.CONTENT_TYPE] = JSON

    @classmethod
    def of(cls, reply: Reply) -> Answer:
        answer = cls(reply.body, reply.status)
        if reply.body is not None and reply.content_type != JSON:
            answer.headers[hdrs.CONTENT_TYPE] = reply.content_type
        if reply.headers:
            answer.headers.extend(reply.headers)
        return answer

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if not names.FAST_PATHS or self._eof_sent or self._payload_writer is not None:
            if not self.prepared:
                self.headers.setdefault(hdrs.SERVER, SERVER_NAME)
                block = self.block
                if block is not None:
                    self.headers.extend(block.pairs)
                    self.block = None
            return await super().prepare(request)
        if request.version != HttpVersion11 or self._compression or self._cookies or self._chunked:
            self._headers.setdefault(hdrs.SERVER, SERVER_NAME)
            block = self.block
            if block is not None:
                self._headers.extend(block.pairs)
                self.block = None
            return await super().prepare(request)
        self._req = request
        writer = self._payload_writer = request._payload_writer
        keep_alive = self._keep_alive
        if keep_alive is None:
            keep_alive = self._keep_alive = request.keep_alive
        await request._prepare_hook(self)  # the application's on_response_prepare, as aiohttp
        status = self._status
        body = self._body
        length = None
        if status in EMPTY_BODY_STATUSES or status < 200:
            self._must_be_empty_body = True
        else:
            length = writer.length = 0 if body is None else len(body)
            head_only = self._must_be_empty_body = request.method == hdrs.METH_HEAD
            if head_only and not length:  # as aiohttp: HEAD of an empty answer states no length
                length = None
        headers = self._headers
        # What StreamWriter.write_headers leaves behind, so write_eof sends both in one write.
        # The request's writer is aiohttp's StreamWriter, typed as the abstract class that lacks
        # these two (``names`` checks them on StreamWriter).
        writer._headers_buf = serialise_head(  # type: ignore[attr-defined]
            status, self.block, headers.items(), len(headers), length, keep_alive, self._reason
        )
        writer._headers_written = False  # type: ignore[attr-defined]
        return writer
