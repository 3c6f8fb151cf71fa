"""Resumable uploads (scenario ``t``): a 1 GiB file through ``/api/v1/uploads`` (tus) in the
chunks the docs recommend (``CHUNK_BYTES``), beside the same file through ``POST
/api/v1/files`` in the same round, on each blob store (the data directory, then a SeaweedFS the
bench starts), one upload at a time; the ratio is tus's rate over the single request's, within
a round. Then one tus upload cut off half-way through a ``PATCH`` (the connection closed by the
client) and resumed from the offset ``HEAD`` answers: the bytes the client sent in all, against
the file's size.

The tus client is the bench's own, as lean as the transfers' client: one blocking socket per
request, each chunk sent with ``os.sendfile`` from the page cache; ``POST /files`` goes through
the transfers' client (``benchmark.transfer_client``), the same way."""

from __future__ import annotations

import base64
import contextlib
import socket
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from benchmark import processes
from benchmark.transfer_client import HEAD_LIMIT, Outcome, Request, read_answer, run
from benchmark.transfers import MIB
from tests.support.seaweedfs import SeaweedFS

TUS_FILE_BYTES = 1024 * MIB
# What docs/api.md recommends: a multiple of the object store's 8 MiB parts.
CHUNK_BYTES = 64 * MIB
LEAST = 0.80


@dataclass
class StoreRow:
    store: str
    single: list[float] = field(default_factory=list)  # POST /files, MiB/s per round
    tus: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    resume: str = ""


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The answer's status, headers (names in lower case) and short body."""
    outcome = Outcome()
    read_answer(sock, outcome, memoryview(bytearray(HEAD_LIMIT)))
    return outcome.status, outcome.headers, outcome.body


def _call(
    url: str, method: str, headers: dict[str, str], body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    lines = [f"{method} {parts.path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    with socket.create_connection((parts.hostname, parts.port), timeout=120) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        return _answer(sock)


def _patch(
    url: str, key: str, source: Path, offset: int, count: int, cut_after: int | None = None
) -> tuple[int, dict[str, str], int]:
    """A PATCH of ``count`` bytes of ``source`` from ``offset``: (status, headers, bytes sent).
    With ``cut_after``, the connection is closed after that many, mid-body (status 0)."""
    parts = urlsplit(url)
    head = (
        f"PATCH {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n"
        f"X-API-Key: {key}\r\nTus-Resumable: 1.0.0\r\n"
        f"Content-Type: application/offset+octet-stream\r\nUpload-Offset: {offset}\r\n"
        f"Content-Length: {count}\r\n\r\n"
    ).encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=120) as sock:
        sock.sendall(head)
        with open(source, "rb") as file:
            sent = sock.sendfile(file, offset, count if cut_after is None else cut_after)
        if cut_after is not None:
            return 0, {}, sent  # closed here, mid-body
        status, fields, _ = _answer(sock)
        return status, fields, sent


def _create(service: str, key: str, size: int) -> str:
    metadata = "filename " + base64.b64encode(b"bench.bin").decode()
    status, fields, body = _call(
        f"{service}/api/v1/uploads",
        "POST",
        {
            "X-API-Key": key,
            "Tus-Resumable": "1.0.0",
            "Upload-Length": str(size),
            "Upload-Metadata": metadata,
        },
    )
    if status != 201:
        raise RuntimeError(f"creating an upload: {status} {body[:200]!r}")
    return fields["location"]


def _offset(url: str, key: str) -> int:
    status, fields, _ = _call(url, "HEAD", {"X-API-Key": key, "Tus-Resumable": "1.0.0"})
    if status != 200:
        raise RuntimeError(f"HEAD of an upload: {status}")
    return int(fields["upload-offset"])


def _delete_file(service: str, key: str, file_id: str) -> None:
    _call(f"{service}/api/v1/files/{file_id}", "DELETE", {"X-API-Key": key})


def tus_upload(service: str, key: str, source: Path) -> tuple[float, str]:
    """One upload of ``source`` through tus in ``CHUNK_BYTES`` chunks: (MiB/s, file id)."""
    size = source.stat().st_size
    began = time.perf_counter()
    url = _create(service, key, size)
    offset, file_id = 0, ""
    while offset < size:
        status, fields, _ = _patch(url, key, source, offset, min(CHUNK_BYTES, size - offset))
        if status != 204:
            raise RuntimeError(f"PATCH at {offset}: {status}")
        offset = int(fields["upload-offset"])
        file_id = fields.get("filehost-file-id", file_id)
    return size / MIB / (time.perf_counter() - began), file_id


def single_upload(service: str, key: str, source: Path) -> tuple[float, str]:
    """The same file through ``POST /files``: (MiB/s, file id)."""
    request = Request(
        "POST",
        f"{service}/api/v1/files",
        {"X-API-Key": key},
        (201,),
        upload=source,
        multipart=True,
    )
    result = run([[request]])
    if result.errors:
        raise RuntimeError(result.errors[0])
    file_id = orjson.loads(result.bodies[0])["data"]["id"]
    return result.payload_bytes / MIB / result.seconds, file_id


def resumed_upload(service: str, key: str, source: Path) -> str:
    """One upload cut off half-way through its single PATCH and resumed: what was sent."""
    size = source.stat().st_size
    url = _create(service, key, size)
    _, _, before = _patch(url, key, source, 0, size, cut_after=size // 2)
    time.sleep(0.5)  # the service commits what arrived once it sees the connection gone
    held = _offset(url, key)
    status, fields, after = _patch(url, key, source, held, size - held)
    if status != 204 or "filehost-file-id" not in fields:
        return f"the resumed PATCH answered {status}"
    _delete_file(service, key, fields["filehost-file-id"])
    resent = before + after - size
    return (
        f"cut off after {before / MIB:,.0f} MiB, the service held {held / MIB:,.1f} MiB; the "
        f"resumed PATCH sent {after / MIB:,.1f} MiB: {(before + after) / MIB:,.1f} MiB sent for "
        f"a {size / MIB:,.0f} MiB file ({resent / MIB:,.1f} MiB sent twice, the bytes in flight "
        "when the connection closed)"
    )


@contextlib.contextmanager
def _stores(workdir: Path) -> Iterator[Iterator[tuple[str, dict[str, str]]]]:
    """The blob stores in turn: (name, the service's environment for it)."""
    weed = SeaweedFS(workdir / "seaweedfs-resumable")

    def each() -> Iterator[tuple[str, dict[str, str]]]:
        yield "directory", {"FILEHOST_DATA_DIR": str(workdir / "resumable-data")}
        weed.start()
        env = {**weed.env("resumable/"), "FILEHOST_DATA_DIR": str(workdir / "resumable-s3")}
        yield "object store (SeaweedFS)", env

    try:
        yield each()
    finally:
        weed.stop()


def resumable_part(
    workdir: Path, redis_url: str, workers: int, rounds: int, key: str, source: Path
) -> list[StoreRow]:
    rows = []
    with _stores(workdir) as stores:
        for store, env in stores:
            row = StoreRow(store)
            rows.append(row)
            extra = {**env, "FILEHOST_MAX_UPLOAD_BYTES": str(2 * TUS_FILE_BYTES)}
            log = workdir / f"resumable-{len(rows)}.log"
            with processes.service(redis_url, workers, log=log, extra=extra) as (url, _):
                for kind in (single_upload, tus_upload):  # warm-up
                    _delete_file(url, key, kind(url, key, source)[1])
                for number in range(1, rounds + 1):
                    print(f"resumable uploads, {store}, round {number}/{rounds}", flush=True)
                    order = [single_upload, tus_upload]
                    if number % 2 == 0:
                        order.reverse()
                    rates = {}
                    for kind in order:
                        try:
                            rate, file_id = kind(url, key, source)
                        except (OSError, RuntimeError) as error:
                            row.errors.append(f"{kind.__name__}: {error}")
                            continue
                        _delete_file(url, key, file_id)
                        rates[kind] = rate
                        print(f"  {kind.__name__}: {rate:,.0f} MiB/s", flush=True)
                    if len(rates) == 2:
                        row.single.append(rates[single_upload])
                        row.tus.append(rates[tus_upload])
                        row.ratios.append(rates[tus_upload] / rates[single_upload])
                row.resume = resumed_upload(url, key, source)
                print(f"  resumed: {row.resume}", flush=True)
    return rows


def resumable_table(rows: list[StoreRow]) -> str:
    lines = [
        "| blob store | POST /files, MiB/s | tus, MiB/s | tus ÷ POST /files (range) | "
        f"target ≥ {LEAST:.2f} |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        if not row.ratios:
            lines.append(f"| {row.store} | – | – | – | errors: {row.errors[:1]} |")
            continue
        ratio = statistics.median(row.ratios)
        lines.append(
            f"| {row.store} | {statistics.median(row.single):,.0f} | "
            f"{statistics.median(row.tus):,.0f} | {ratio:.2f} ({min(row.ratios):.2f}–"
            f"{max(row.ratios):.2f}) | {'met' if ratio >= LEAST else 'NOT met'} |"
        )
    return "\n".join(lines)


__all__ = ["CHUNK_BYTES", "TUS_FILE_BYTES", "resumable_part", "resumable_table"]
