"""The transfers' load generator: one blocking socket per transfer in a thread of its own, so a
transfer costs the client little more than the kernel's work.

A download's body is spliced from the socket into a pipe and on into /dev/null, never copied into
the process (Linux; elsewhere read into one reused buffer), and not hashed; an upload sends the
file with ``os.sendfile`` from the page cache, between the few bytes of multipart framing the
service needs (nginx's ``PUT`` takes the bare body). Each transfer opens
its own connection (``Connection: close``), as a browser or curl fetching one big file does, and
is checked: the expected status, and for a download every byte of the announced length.

The client's CPU time (``RUSAGE_SELF`` around a run) is reported with each run, so a run whose
client kept a core busy, and so may have held the transfer back, shows it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

RECEIVE_BUFFER = 1024 * 1024
BOUNDARY = "benchTransferBoundary7f3a"
HEAD_LIMIT = 64 * 1024
PIPE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    """One transfer: ``method`` on ``url`` with ``headers``; ``upload`` is the file sent as its
    body (``multipart``: in a multipart/form-data field named ``file``), None for a download."""

    method: str
    url: str
    headers: dict[str, str]
    expected: tuple[int, ...]
    upload: Path | None = None
    multipart: bool = False
    body: bytes | None = None  # a small body sent as it is (JSON), instead of a file
    after: Callable[[], None] | None = None  # run once the answer is read, timed with it
    follow: bool = False  # a redirect's Location is fetched too, timed with it


@dataclass(slots=True)
class Outcome:
    status: int = 0
    received: int = 0  # body bytes of the answer
    sent: int = 0  # body bytes of the request
    body: bytes = b""  # the answer's body, when short (an upload's JSON answer)
    error: str | None = None
    location: str = ""  # a redirect's
    headers: dict[str, str] = field(default_factory=dict)  # the answer's, names in lower case


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one run of ``concurrency`` transfers at once (``rounds`` times over) measured."""

    seconds: float  # wall time from the first connection to the last answer's end
    transfers: int
    payload_bytes: int  # the file bytes moved (downloaded or uploaded)
    client_cpu_seconds: float
    errors: list[str]
    bodies: list[bytes]  # the short answers' bodies (uploads: the created records)


def _framing(path: Path) -> tuple[bytes, bytes]:
    opening = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    return opening, f"\r\n--{BOUNDARY}--\r\n".encode()


def _head(request: Request, length: int | None) -> bytes:
    parts = urlsplit(request.url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"{request.method} {target} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    if length is not None:
        lines.append(f"Content-Length: {length}")
        if request.multipart:
            lines.append(f"Content-Type: multipart/form-data; boundary={BOUNDARY}")
        elif request.body is not None:
            lines.append("Content-Type: application/json")
        else:
            lines.append("Content-Type: application/octet-stream")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _send_body(sock: socket.socket, request: Request, outcome: Outcome) -> None:
    assert request.upload is not None
    with open(request.upload, "rb") as source:
        size = os.fstat(source.fileno()).st_size
        opening, closing = _framing(request.upload) if request.multipart else (b"", b"")
        sock.sendall(_head(request, len(opening) + size + len(closing)) + opening)
        outcome.sent = sock.sendfile(source)  # os.sendfile, waiting while the socket is full
        if closing:
            sock.sendall(closing)


def read_answer(sock: socket.socket, outcome: Outcome, buffer: memoryview) -> None:
    head = b""
    while b"\r\n\r\n" not in head:
        got = sock.recv(65536)
        if not got:
            raise OSError("the connection closed before the answer's headers")
        head += got
        if len(head) > HEAD_LIMIT:
            raise OSError("the answer's headers never ended")
    head, rest = head.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    outcome.status = int(lines[0].split(" ", 2)[1])
    fields = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    outcome.headers = fields
    outcome.location = fields.get("location", "")
    length = int(fields["content-length"]) if "content-length" in fields else None
    received = len(rest)
    short = [rest] if length is not None and length <= HEAD_LIMIT else None
    if short is None and length is not None and hasattr(os, "splice"):
        received += _discard(sock, length - received)
    while length is None or received < length:
        count = sock.recv_into(buffer)
        if count == 0:
            break
        received += count
        if short is not None:
            short.append(bytes(buffer[:count]))
    outcome.received = received
    if short is not None:
        outcome.body = b"".join(short)
    if length is not None and received != length:
        raise OSError(f"the answer ended after {received} of {length} bytes")


_sinks = threading.local()


def _discard(sock: socket.socket, count: int) -> int:
    """Read and drop ``count`` bytes of a body without copying them into this process: spliced
    from the socket into a pipe and from the pipe into /dev/null (Linux). How many arrived."""
    if not hasattr(_sinks, "pipe"):
        _sinks.pipe = os.pipe()
        with contextlib.suppress(OSError):  # a larger pipe: fewer calls per MiB
            fcntl.fcntl(_sinks.pipe[1], fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        _sinks.null = os.open(os.devnull, os.O_WRONLY)
    readable, writable = _sinks.pipe
    sock.settimeout(None)  # blocking: splice waits for the bytes
    received = 0
    while received < count:
        moved = os.splice(sock.fileno(), writable, min(count - received, PIPE_BYTES))
        if moved == 0:
            break
        received += moved
        while moved:
            moved -= os.splice(readable, _sinks.null, moved)
    return received


def transfer(request: Request, buffer: memoryview) -> Outcome:
    """One transfer on a connection of its own; never raises (the error is in the outcome)."""
    outcome = Outcome()
    parts = urlsplit(request.url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=120) as sock:
            if request.upload is not None:
                _send_body(sock, request, outcome)
            elif request.body is not None:
                sock.sendall(_head(request, len(request.body)) + request.body)
            else:
                sock.sendall(_head(request, None))
            read_answer(sock, outcome, buffer)
        if request.follow and outcome.status in (302, 303, 307) and outcome.location:
            followed = Request("GET", outcome.location, {}, request.expected)
            return transfer(followed, buffer)
        if request.after is not None and outcome.status in request.expected:
            request.after()
        if outcome.status not in request.expected:
            outcome.error = f"status {outcome.status}: {outcome.body[:200]!r}"
    except OSError as failed:
        outcome.error = f"{type(failed).__name__}: {failed}"
    return outcome


def run(requests: list[list[Request]], seconds: float = 0.0) -> RunResult:
    """Every list of ``requests`` in a thread of its own, all started together; each thread
    sends its list one transfer after another, and starts no other once ``seconds`` have passed
    (its first transfer always runs)."""
    outcomes: list[list[Outcome]] = [[] for _ in requests]
    start = threading.Barrier(len(requests) + 1)
    deadline = 0.0

    def worker(index: int) -> None:
        buffer = memoryview(bytearray(RECEIVE_BUFFER))
        start.wait()
        for request in requests[index]:
            if outcomes[index] and time.perf_counter() >= deadline:
                return
            outcomes[index].append(transfer(request, buffer))

    threads = [
        threading.Thread(target=worker, args=(n,), daemon=True) for n in range(len(requests))
    ]
    for thread in threads:
        thread.start()
    before = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    deadline = began + seconds
    start.wait()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    done = [outcome for per_thread in outcomes for outcome in per_thread]
    return RunResult(
        seconds=took,
        transfers=len(done),
        payload_bytes=sum(outcome.sent or outcome.received for outcome in done),
        client_cpu_seconds=cpu,
        errors=[outcome.error for outcome in done if outcome.error],
        bodies=[outcome.body for outcome in done if outcome.body],
    )
