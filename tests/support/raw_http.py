"""HTTP as bytes on a socket, for requests a client library would refuse to send and for
reading exactly what the server wrote."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

# The body of the HTTP parser's own refusal of a malformed request.
MALFORMED = {
    "success": False,
    "error": {"code": "bad_request", "message": "Malformed HTTP request."},
}


@dataclass
class RawResponse:
    status: int
    headers: dict[str, list[str]]  # lower-cased names
    body: bytes

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body)


async def exchange(port: int, data: bytes, *, timeout: float = 10.0) -> bytes:
    """Send ``data`` and read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def parse_responses(data: bytes) -> list[RawResponse]:
    """Every response in ``data`` (each has a Content-Length; 1xx interim ones are skipped)."""
    responses = []
    while data:
        head, separator, rest = data.partition(b"\r\n\r\n")
        assert separator, data
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers: dict[str, list[str]] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.setdefault(name.strip().lower(), []).append(value.strip())
        length = int(headers.get("content-length", ["0"])[0])
        body, data = rest[:length], rest[length:]
        if status >= 200:
            responses.append(RawResponse(status, headers, body))
    return responses


async def raw(port: int, data: bytes) -> RawResponse:
    """The one response to ``data``, after which the server closed the connection."""
    received = await exchange(port, data)
    [response] = parse_responses(received)
    return response


def request_bytes(
    method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes = b""
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    if body:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body
