"""A client going away mid-body, or sending a body that cannot be decoded, is the client's doing:
no 500, no ERROR line and no traceback (issue 11, #8)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import orjson

from tests.support.processes import running, service_env
from tests.support.redis import free_port

LOGIN = b"POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


def gone_mid_body(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(LOGIN + b'Content-Length: 100\r\n\r\n{"email":')
        time.sleep(0.3)  # the handler is waiting for the rest when the client closes


def undecodable_gzip(port: int) -> bytes:
    body = b"this is not gzip"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            LOGIN
            + b"Content-Encoding: gzip\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (len(body), body)
        )
        return sock.recv(4096)


def test_a_client_gone_mid_body_and_a_broken_gzip_body_are_no_server_errors(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    with running(service_env(redis_url, port), port, tmp_path) as server:
        gone_mid_body(port)
        answer = undecodable_gzip(port)
        time.sleep(0.5)  # the drained body's error and the access lines are written
        assert server.stop() == 0

    assert answer.split(b" ")[1] == b"400"
    entries = [orjson.loads(line) for line in server.stderr().splitlines()]
    statuses = [e["status"] for e in entries if e["logger"] == "aiohttp.access"]
    assert sorted(statuses) == [400, 499]  # 499: nginx's "client closed request"
    assert [e for e in entries if e["level"] in ("ERROR", "CRITICAL")] == []
    assert "Traceback" not in server.stderr()
    notes = {e["msg"] for e in entries if e["level"] == "INFO" and e["logger"] != "aiohttp.access"}
    assert "client went away during POST /api/v1/auth/login" in notes
    assert "a request body could not be read: RequestPayloadError" in notes
