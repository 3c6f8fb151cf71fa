"""The benchmark's bare upload receiver (``scripts/benchmark/upload_floor.py``) does the work it
claims: each upload's bytes stored whole and hashed, whatever its length against its buffers and
the disk's blocks. A floor that dropped or skipped bytes would make the service look slow."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.paths import REPO_ROOT
from tests.support.processes import wait_listening
from tests.support.redis import free_port

BATCH = 4 * 1024 * 1024
BOUNDARY = b"floorTestBoundary"


@pytest.fixture
def floor(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port, stored = free_port(), tmp_path / "stored"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "scripts")}
    command = [sys.executable, "-m", "benchmark.upload_floor", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--workers", "1", "--directory", str(stored)], cwd=REPO_ROOT, env=env
    )
    try:
        wait_listening(process, port, "the upload floor", lambda: "", 30)
        yield port, stored
    finally:
        process.terminate()
        process.wait(10)


def upload(port: int, data: bytes) -> dict[str, object]:
    body = (
        b"--" + BOUNDARY + b'\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--" + BOUNDARY + b"--\r\n"
    )
    head = (
        b"POST /upload HTTP/1.1\r\nHost: floor\r\nConnection: close\r\n"
        b"Content-Type: multipart/form-data; boundary=" + BOUNDARY + b"\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + body)
        answer = b""
        while piece := sock.recv(65536):
            answer += piece
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 201 Created", answer[:200]
    return orjson.loads(rest.partition(b"\r\n\r\n")[2])["data"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "size",
    [0, 1, 4095, 4096, BATCH - 40, BATCH - 17, BATCH, BATCH + 1, 2 * BATCH + 4097, 9_999_999],
)
def test_every_byte_is_stored_and_hashed(floor: tuple[int, Path], size: int) -> None:
    port, stored = floor
    data = os.urandom(size)
    assert upload(port, data) == {"size": size, "sha256": hashlib.sha256(data).hexdigest()}
    (file,) = stored.iterdir()
    assert file.read_bytes() == data
