"""The upload floor: a bare receiver that does an upload's irreducible work the way a careful
hand-written server would, and nothing else, so that an upload's ratio to it says how much the
service adds on top of the work itself (nginx's `PUT`, the other floor, neither hashes nor waits
for the disk).

Each worker is a process of its own sharing the port (``SO_REUSEPORT``), with a thread per
connection on blocking sockets: no event loop, no HTTP framework. Per request it reads the head
(``Content-Length`` and the multipart boundary, nothing else checked), then the body with
``recv_into`` into one of two 4 MiB buffers, searches each new piece for the closing delimiter
with glibc's ``memmem``, and hands each full buffer to a thread that hashes it (SHA-256) and to
another that writes it with ``O_DIRECT`` (whole blocks; the file's last bytes through the page
cache), while the connection fills the other buffer. Then fsync, a rename into place, an fsync
of the directory, and a small JSON answer with the file's size and SHA-256, which the bench's
client does not check but a person trying it can. A request it cannot take (no length, no
boundary, a body that ends before its delimiter) closes the connection. Requests on one
connection are taken one after another, but not pipelined: one sent before the last answer was
read may be lost. The bench's client sends one upload per connection.

``PYTHONPATH=scripts python -m benchmark.upload_floor --port P --workers N --directory D``:
stores into ``D`` (``<pid>-<n>.bin``, removed by the bench after each run); listens on 127.0.0.1
only; every worker stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import hashlib
import itertools
import mmap
import os
import re
import signal
import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import orjson

from benchmark.workers import run_workers

BATCH = 4 * 1024 * 1024
BLOCK = 4096
HEAD_LIMIT = 64 * 1024
_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
_CLOSE = re.compile(rb"\r\nconnection:\s*close", re.IGNORECASE)
_BOUNDARY = re.compile(rb"\r\ncontent-type:\s*multipart/form-data;\s*boundary=([^\s;]+)", re.I)

_libc = ctypes.CDLL(None)
_memmem = _libc.memmem
_memmem.restype = ctypes.c_void_p
_memmem.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]


class Refused(Exception):
    """A request this floor does not take: the connection is closed."""


def find(buffer: mmap.mmap, needle: bytes, start: int, end: int) -> int:
    """Where ``needle`` first is in ``buffer[start:end]``, or -1 (glibc's ``memmem``). The
    service searches the same way; this is a copy of its own, so that no change to the service
    moves its floor."""
    if end - start < len(needle):
        return -1
    held = ctypes.c_char.from_buffer(buffer)
    try:
        base = ctypes.addressof(held)
        at = _memmem(base + start, end - start, needle, len(needle))
    finally:
        del held
    return -1 if at is None else at - base


class Connection:
    """One client's connection: requests read and answered one after another."""

    def __init__(self, sock: socket.socket, directory: Path, pool: ThreadPoolExecutor) -> None:
        self.sock = sock
        self.directory = directory
        self.pool = pool
        self.left = b""  # bytes read past what the last step needed

    def serve(self) -> None:
        while True:
            head = self.read_until(b"\r\n\r\n", closed_ok=True)
            if head is None:
                return
            length = _LENGTH.search(head)
            boundary = _BOUNDARY.search(head)
            if length is None or boundary is None:
                raise Refused()
            body = self.store(int(length.group(1)), b"\r\n--" + boundary.group(1).strip(b'"'))
            self.sock.sendall(
                b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            if _CLOSE.search(head):
                return

    def read_until(self, end: bytes, *, closed_ok: bool = False) -> bytes | None:
        """The bytes up to and including ``end``; None when the client closed first and
        ``closed_ok``."""
        data = self.left
        while (at := data.find(end)) < 0:
            if len(data) > HEAD_LIMIT:
                raise Refused()
            piece = self.sock.recv(HEAD_LIMIT)
            if not piece:
                if closed_ok and not data:
                    return None
                raise Refused()
            data += piece
        self.left = data[at + len(end) :]
        return data[: at + len(end)]

    def store(self, length: int, delimiter: bytes) -> bytes:
        part_head = self.read_until(b"\r\n\r\n")
        assert part_head is not None
        remaining = length - len(part_head) - len(self.left)  # still to read from the socket
        file = _File(self.directory / f"{os.getpid()}-{next(_NAMES)}.bin", self.pool)
        try:
            buffer = file.buffer()
            filled = len(self.left)
            buffer[:filled], self.left = self.left, b""
            found = find(buffer, delimiter, 0, filled)
            while found < 0:
                if filled == BATCH:  # all but a tail that may start the delimiter goes on
                    through = (BATCH - len(delimiter)) // BLOCK * BLOCK
                    buffer = file.hand_on(through)
                    filled = BATCH - through
                if remaining <= 0:
                    raise Refused()
                with memoryview(buffer) as view:
                    count = self.sock.recv_into(view[filled:], min(BATCH - filled, remaining))
                if not count:
                    raise Refused()
                remaining -= count
                found = find(buffer, delimiter, max(0, filled - len(delimiter) + 1), filled + count)
                filled += count
            answer = file.finish(found)
            while remaining > 0:  # the rest of the closing delimiter: read and dropped
                piece = self.sock.recv(min(remaining, HEAD_LIMIT))
                if not piece:
                    raise Refused()
                remaining -= len(piece)
            file.keep()
        finally:
            file.close()
        return answer


class _File:
    """An upload on its way to disk: two buffers, one filled by the connection while threads
    hash and write the other."""

    def __init__(self, name: Path, pool: ThreadPoolExecutor) -> None:
        self.name = name
        self.temporary = name.with_suffix(".tmp")
        self.pool = pool
        self.direct = _open(self.temporary, direct=True)
        self.buffered = _open(self.temporary, direct=False)
        self.buffers = (mmap.mmap(-1, BATCH), mmap.mmap(-1, BATCH))
        self.index = 0
        self.digest = hashlib.sha256()
        self.size = 0
        self.hashed: Future[None] | None = None  # the last batch's hash: they go in order
        self.pending: list[list[Future]] = [[], []]  # each buffer's hash and write

    def buffer(self) -> mmap.mmap:
        return self.buffers[self.index]

    def hand_on(self, through: int) -> mmap.mmap:
        """Hash and write the full buffer's first ``through`` bytes; the next buffer, its rest
        carried to its front."""
        buffer = self.buffers[self.index]
        if self.hashed is not None:
            self.hashed.result()
        self.hashed = self.pool.submit(_hash, self.digest, buffer, through)
        view = memoryview(buffer)[:through]
        writing = self.pool.submit(os.pwrite, self.direct, view, self.size)
        self.pending[self.index] = [self.hashed, writing]
        self.size += through
        self.index = 1 - self.index
        for future in self.pending[self.index]:
            future.result()
        following = self.buffers[self.index]
        following[: BATCH - through] = buffer[through:]
        return following

    def finish(self, end: int) -> bytes:
        """The current buffer's first ``end`` bytes are the file's last: hash and write them,
        fsync; the answer."""
        for future in (*self.pending[0], *self.pending[1]):
            future.result()
        buffer = self.buffers[self.index]
        with memoryview(buffer) as view:
            self.digest.update(view[:end])
            whole = end // BLOCK * BLOCK
            os.pwrite(self.direct, view[:whole], self.size)
            os.pwrite(self.buffered, view[whole:end], self.size + whole)
        self.size += end
        os.fsync(self.buffered)
        return orjson.dumps({"data": {"size": self.size, "sha256": self.digest.hexdigest()}})

    def keep(self) -> None:
        os.rename(self.temporary, self.name)
        _fsync_directory(self.name.parent)

    def close(self) -> None:
        for future in (*self.pending[0], *self.pending[1]):
            future.exception()  # never close a descriptor under a write
        os.close(self.direct)
        os.close(self.buffered)
        self.temporary.unlink(missing_ok=True)


_NAMES = itertools.count()


def _hash(digest: hashlib._Hash, buffer: mmap.mmap, end: int) -> None:
    with memoryview(buffer) as view:
        digest.update(view[:end])


def _open(path: Path, *, direct: bool) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    if direct:
        try:
            return os.open(path, flags | os.O_DIRECT, 0o600)
        except OSError as error:  # a filesystem without direct writes (tmpfs)
            if error.errno != errno.EINVAL:
                raise
    return os.open(path, flags, 0o600)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def worker(port: int, directory: Path) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    pool = ThreadPoolExecutor(32, thread_name_prefix="floor")
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve, args=(sock, directory, pool), daemon=True).start()


def _serve(sock: socket.socket, directory: Path, pool: ThreadPoolExecutor) -> None:
    with sock:
        try:
            Connection(sock, directory, pool).serve()
        except (Refused, OSError):
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--directory", type=Path, required=True)
    args = parser.parse_args()
    args.directory.mkdir(parents=True, exist_ok=True)
    return run_workers(worker, (args.port, args.directory), args.workers)


if __name__ == "__main__":
    raise SystemExit(main())
