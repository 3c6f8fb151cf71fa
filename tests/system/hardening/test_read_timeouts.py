"""Slow clients against a real ``serve``: a request's headers and body each have a deadline.

The finding: a body trickled one byte every 5 s was held 97 s, headers about 75 s (aiohttp's
keep-alive timeout). Now headers that are not all in ``FILEHOST_HEADER_TIMEOUT_SECONDS`` after the
request's first byte, or a body not all in ``FILEHOST_BODY_TIMEOUT_SECONDS`` after its headers,
get 408 ``request_timeout`` in the error envelope and the connection is closed; a connection that
sends nothing is closed. These are deadlines: a byte now and then does not extend them. Small
timeouts keep the tests short; raw sockets send exactly the bytes meant.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import orjson
import pytest

from tests.support.processes import PASSWORD, Server, create_user, env_for, started
from tests.support.redis import RedisServer, free_port

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.5
TRICKLE_EVERY = 0.25
GIVE_UP = 8.0  # far below the old 75 s, far above the timeouts
UPLOADER = "uploader@example.com"


@pytest.fixture(scope="module")
def server(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    env = env_for(
        redis_server.url,
        port,
        FILEHOST_HEADER_TIMEOUT_SECONDS=str(HEADER_TIMEOUT),
        FILEHOST_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT),
        FILEHOST_DATA_DIR=str(tmp_path_factory.mktemp("data")),
    )
    create_user(env, UPLOADER)
    serving = Server(env, port, tmp_path_factory.mktemp("serve"))
    try:
        started(serving, 1)
        yield serving
    finally:
        serving.stop()
    log = serving.stderr()
    assert "Traceback" not in log and "Unhandled exception" not in log, log


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=GIVE_UP)


def trickle(sock: socket.socket, data: bytes) -> tuple[bytes, float]:
    """Send ``data`` a byte every ``TRICKLE_EVERY`` seconds until the server answers or closes;
    everything it sent until it closed, and when its first byte came (seconds from now)."""
    start = time.monotonic()
    for byte in data:
        readable, _, _ = select.select([sock], [], [], TRICKLE_EVERY)
        if readable:
            break
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            break
    else:
        raise AssertionError("the server was still reading when the trickle ran out")
    readable, _, _ = select.select([sock], [], [], GIVE_UP)
    first = time.monotonic() - start
    return read_to_close(sock), first


def read_to_close(sock: socket.socket) -> bytes:
    received = b""
    sock.settimeout(GIVE_UP)
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def responses(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The responses in ``raw``: (status, headers with lower-case names, body)."""
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        found.append((int(lines[0].split()[1]), headers, rest[:length]))
        raw = rest[length:]
    return found


def answer_of(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one response (with a Content-Length) from a connection that stays open."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head = received.partition(b"\r\n\r\n")[0]
    length = int(responses(head + b"\r\n\r\n")[0][1]["content-length"])
    while len(received) < len(head) + 4 + length:
        received += sock.recv(65536)
    [answer] = responses(received)
    return answer


def signed_in(sock: socket.socket) -> bytes:
    """The uploader's session token, from a login on ``sock`` (which stays open)."""
    login = orjson.dumps({"email": UPLOADER, "password": PASSWORD})
    sock.sendall(
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(login), login)
    )
    status, _headers, body = answer_of(sock)
    assert status == 200, body
    return orjson.loads(body)["data"]["token"].encode()  # type: ignore[no-any-return]


def is_request_timeout(answer: tuple[int, dict[str, str], bytes]) -> None:
    status, headers, body = answer
    assert status == 408, answer
    assert headers["content-type"].startswith("application/json")
    assert headers["cache-control"] == "no-store"
    envelope = orjson.loads(body)
    assert envelope["success"] is False
    assert envelope["error"]["code"] == "request_timeout", envelope


def test_headers_trickled_in_are_cut_at_the_header_timeout_with_a_408(server: Server) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /api/v1/files HTTP/1.1\r\nHost: localhost\r\n")
        raw, after = trickle(sock, b"X-Slow: " + b"a" * 200)

    [answer] = responses(raw)  # and then the connection was closed
    is_request_timeout(answer)
    assert HEADER_TIMEOUT - 0.1 <= after < HEADER_TIMEOUT + 1.0, after


def test_a_body_trickled_in_is_cut_at_the_body_timeout_with_a_408(server: Server) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /api/v1/auth/login HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 300\r\n\r\n"
            b'{"email": "slow@example.com", "password": "'
        )
        raw, after = trickle(sock, b"p" * 300)

    [answer] = responses(raw)
    is_request_timeout(answer)
    assert BODY_TIMEOUT - 0.1 <= after < BODY_TIMEOUT + 1.0, after


def test_a_connection_that_sends_nothing_is_closed_at_the_header_timeout(server: Server) -> None:
    with connect(server) as sock:
        start = time.monotonic()
        received = read_to_close(sock)
        after = time.monotonic() - start

    assert received == b""
    assert HEADER_TIMEOUT - 0.1 <= after < HEADER_TIMEOUT + 1.0, after


def test_a_request_after_a_keep_alive_pause_gets_its_own_header_deadline(server: Server) -> None:
    """Keep-alive is untouched: a connection may idle between requests past the header timeout
    (aiohttp's keep-alive timeout applies there), and the next request is answered."""
    request = b"GET /api/v1/files HTTP/1.1\r\nHost: localhost\r\n\r\n"
    with connect(server) as sock:
        sock.sendall(request)
        first = answer_of(sock)
        time.sleep(HEADER_TIMEOUT + 0.5)
        sock.sendall(request)
        second = answer_of(sock)
        # The next one trickled in is cut at its own deadline.
        sock.sendall(b"GET /api/v1/files HTTP/1.1\r\n")
        raw, after = trickle(sock, b"X-Slow: " + b"a" * 200)

    assert first[0] == second[0] == 401
    is_request_timeout(responses(raw)[0])
    assert after < HEADER_TIMEOUT + 1.0, after


def test_a_slow_but_timely_request_is_answered(server: Server) -> None:
    body = b'{"email": "nobody@example.com", "password": "not this one"}'
    pieces = [
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: localhost\r\n",
        b"Content-Type: application/json\r\n",
        b"Content-Length: %d\r\n\r\n" % len(body),
        body[:10],
        body[10:],
    ]
    with connect(server) as sock:
        for piece in pieces:
            sock.sendall(piece)
            time.sleep(HEADER_TIMEOUT / 5)
        status, _headers, answer = answer_of(sock)

    assert status == 401, answer
    assert orjson.loads(answer)["error"]["code"] == "invalid_credentials"


def test_an_upload_that_keeps_coming_is_not_cut_at_the_body_timeout(server: Server) -> None:
    """The body's deadline moves on with what arrives (MIN_BODY_BYTES_PER_SECOND): an upload
    taking twice the body timeout at about twice that rate is stored whole."""
    with connect(server) as sock:
        token = signed_in(sock)

        content = bytes(range(256)) * 2048  # 512 KiB
        part = (
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + content + b"\r\n--b--\r\n"
        )
        sock.sendall(
            b"POST /api/v1/files HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n"
            % (token, len(part))
        )
        start = time.monotonic()
        chunk = 8 * 1024  # 8 KiB every 0.06 s: about 130 KiB/s, twice MIN_BODY_BYTES_PER_SECOND
        for offset in range(0, len(part), chunk):
            sock.sendall(part[offset : offset + chunk])
            time.sleep(0.06)
        took = time.monotonic() - start
        status, _headers, body = answer_of(sock)

    assert took > 2 * BODY_TIMEOUT, took  # it did outlast the plain deadline
    assert status == 201, body
    assert orjson.loads(body)["data"]["size"] == len(content)


def test_a_large_upload_that_stops_coming_is_cut_at_its_deadline_with_a_408(
    server: Server,
) -> None:
    """Past its first bytes a large body is read straight from the socket (``RequestBody``); the
    same deadline holds there: the upload stalls, is answered 408, the connection closes."""
    with connect(server) as sock:
        token = signed_in(sock)

        part = (
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="stalled.bin"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + bytes(range(256)) * 8192
        ) + b"\r\n--b--\r\n"
        sent = 100 * 1024
        sock.sendall(
            b"POST /api/v1/files HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n%s"
            % (token, len(part), part[:sent])
        )
        start = time.monotonic()
        raw = read_to_close(sock)
        after = time.monotonic() - start

    [answer] = responses(raw)
    is_request_timeout(answer)
    # The deadline: the body timeout, moved on by what arrived after the headers.
    most = BODY_TIMEOUT + sent / (64 * 1024)
    assert BODY_TIMEOUT - 0.1 <= after < most + 1.0, after
