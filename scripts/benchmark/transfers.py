"""The transfer part of a run: big files through the service, each run beside nginx moving the
same bytes on the same machine, and what a 1 GiB transfer costs a worker in memory.

The scenarios are named (``TRANSFERS``, one letter each, for ``--only``); each says which way
the bytes go, builds its URL and headers from what was seeded (``Seeded``) and may seed what it
needs first (``setup``). The floor of a download is nginx serving the same file with
``sendfile``; of an upload, nginx storing the same body with WebDAV ``PUT``, that ``PUT``
followed by an fsync, and a bare receiver doing what an upload must (``benchmark.upload_floor``:
the delimiter search, SHA-256, direct writes and the fsync, with no HTTP framework). Adding a
path, e.g. a public alias ``GET /a/{slug}``, is one more entry: a ``setup`` that creates the
alias through the API (``Seeded.api``) and keeps its slug in ``Seeded.values``, and a URL
builder that reads it.

Each scenario runs one transfer at a time and ``MANY`` at once, in a row for ``RUN_SECONDS``; every
run sits beside a run of its floor (the floor first in odd rounds, last in even ones), and each
ratio is taken within that pair. Uploads are removed after each run (the service's through its
API, nginx's from its directory), so no run leaves writeback for the next.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import os
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from benchmark import processes
from benchmark.seeding import seed_transfer_key
from benchmark.transfer_client import HEAD_LIMIT, Request, RunResult, run, transfer

MIB = 1024 * 1024
FILE_BYTES = 100 * MIB
MEMORY_FILE_BYTES = 1024 * MIB
# A run sends transfers in a row (one at a time) or waves of them (many at once) until it has
# lasted this long: a shared machine's noise comes in bursts that a 0.05 s transfer would
# catch whole or miss.
RUN_SECONDS = 1.0
MOST_IN_A_ROW = 64
MANY = 16
ALIAS_SLUG = "bench-transfer"
MEMORY_LIMIT = 32 * MIB  # the most a 1 GiB transfer may grow a worker by


@dataclass
class Seeded:
    """What the scenarios build their requests from: the servers' URLs, the transfer key, the
    file on disk, and what setups added (``values``, e.g. the seeded file's id)."""

    service: str
    nginx: str
    key: str
    source: Path
    nginx_root: Path
    upload_floor: str = ""  # the bare receiver's URL
    upload_floor_root: Path | None = None  # where it stores
    values: dict[str, str] = field(default_factory=dict)
    _names: Any = field(default_factory=itertools.count)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """A small call to the service's API with the transfer key (``body`` sent as JSON);
        the answer's ``data``."""
        request = Request(
            method,
            f"{self.service}{path}",
            {"X-API-Key": self.key},
            (200, 201),
            body=None if body is None else orjson.dumps(body),
        )
        outcome = transfer(request, memoryview(bytearray(HEAD_LIMIT)))
        if outcome.error:
            raise RuntimeError(f"{method} {path}: {outcome.error}")
        return orjson.loads(outcome.body)["data"]

    def unique(self) -> int:
        return next(self._names)


def _with_key(seeded: Seeded) -> dict[str, str]:
    return {"X-API-Key": seeded.key}


def _nothing(seeded: Seeded) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class Transfer:
    """A named transfer: its direction, URL and headers, and the least ratio to its floor."""

    name: str
    label: str
    direction: str  # "download" or "upload"
    url: Callable[[Seeded], str]
    least: float | None = None  # the target: at least this × the floor, one and many at once
    method: str = "GET"
    headers: Callable[[Seeded], dict[str, str]] = _with_key
    expected: tuple[int, ...] = (200,)
    multipart: bool = False
    setup: Callable[[Seeded], None] | None = None
    # Called with the run's answers' bodies once it ended: remove what an upload stored.
    cleanup: Callable[[Seeded, RunResult], None] | None = None
    # Called by the client's thread with the URL once a transfer's answer is read, timed with it.
    after: Callable[[Seeded, str], None] | None = None
    follow: bool = False  # a redirect is followed, timed with the transfer

    def requests(self, seeded: Seeded, count: int) -> list[Request]:
        made = []
        for _ in range(count):
            url = self.url(seeded)
            made.append(
                Request(
                    self.method,
                    url,
                    self.headers(seeded),
                    self.expected,
                    upload=seeded.source if self.direction == "upload" else None,
                    multipart=self.multipart,
                    after=functools.partial(self.after, seeded, url) if self.after else None,
                    follow=self.follow,
                )
            )
        return made


def _seed_file(seeded: Seeded) -> None:
    """The same file as nginx serves, uploaded through the API."""
    result = run([TRANSFERS["w"].requests(seeded, 1)])
    if result.errors:
        raise RuntimeError(f"seeding the file failed: {result.errors[0]}")
    seeded.values["file_id"] = orjson.loads(result.bodies[0])["data"]["id"]


def _seed_alias(seeded: Seeded) -> None:
    """A vanity alias of the seeded file (seeded first when no scenario did)."""
    if "file_id" not in seeded.values:
        _seed_file(seeded)
    body = {"file_id": seeded.values["file_id"], "slug": ALIAS_SLUG}
    seeded.values["slug"] = seeded.api("POST", "/api/v1/aliases", body)["slug"]


def _delete_uploads(seeded: Seeded, result: RunResult) -> None:
    for body in result.bodies:
        seeded.api("DELETE", f"/api/v1/files/{orjson.loads(body)['data']['id']}")


def _emptied(directory: Path) -> None:
    for path in directory.iterdir():
        path.unlink()


def _delete_puts(seeded: Seeded, result: RunResult) -> None:
    _emptied(seeded.nginx_root / "put")


def _delete_received(seeded: Seeded, result: RunResult) -> None:
    assert seeded.upload_floor_root is not None
    _emptied(seeded.upload_floor_root)


def _sync_put(seeded: Seeded, url: str) -> None:
    """What nginx cannot be told to do: make the file a PUT stored, and its name, durable."""
    path = seeded.nginx_root / urlsplit(url).path.lstrip("/")
    for target in (path, path.parent):
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


TRANSFERS: dict[str, Transfer] = {
    transfer.name: transfer
    for transfer in (
        Transfer(
            "r",
            "r download, GET /api/v1/files/{id}/content",
            "download",
            lambda s: f"{s.service}/api/v1/files/{s.values['file_id']}/content",
            least=0.90,
            setup=_seed_file,
        ),
        Transfer(
            "v",
            "v download, GET /a/{slug}, no credential",
            "download",
            lambda s: f"{s.service}/a/{s.values['slug']}",
            least=0.90,
            headers=_nothing,
            setup=_seed_alias,
        ),
        Transfer(
            "w",
            "w upload, POST /api/v1/files (multipart, SHA-256, fsync)",
            "upload",
            lambda s: f"{s.service}/api/v1/files",
            least=0.80,
            method="POST",
            expected=(201,),
            multipart=True,
            cleanup=_delete_uploads,
        ),
    )
}
# The floors, by direction: nginx on the same machine moving the same bytes.
FLOORS = {
    "download": Transfer(
        "N",
        "nginx GET, sendfile on",
        "download",
        lambda s: f"{s.nginx}/file.bin",
        headers=_nothing,
    ),
    "upload": Transfer(
        "N",
        "nginx WebDAV PUT",
        "upload",
        lambda s: f"{s.nginx}/put/{s.unique()}.bin",
        method="PUT",
        headers=_nothing,
        expected=(201, 204),
        cleanup=_delete_puts,
    ),
    "durable upload": Transfer(
        "N",
        "nginx WebDAV PUT, then fsync by the client",
        "upload",
        lambda s: f"{s.nginx}/put/{s.unique()}.bin",
        method="PUT",
        headers=_nothing,
        expected=(201, 204),
        cleanup=_delete_puts,
        after=_sync_put,
    ),
    "bare upload": Transfer(
        "U",
        "bare receiver: delimiter search, SHA-256, direct writes, fsync",
        "upload",
        lambda s: f"{s.upload_floor}/upload",
        method="POST",
        headers=_nothing,
        expected=(201,),
        multipart=True,
        cleanup=_delete_received,
    ),
}


@dataclass(frozen=True)
class Measured:
    """One run: the payload's throughput, each side's CPU per 100 MiB moved, and how many cores
    the client kept busy while it ran."""

    mib_per_second: float
    server_cpu: float  # seconds per 100 MiB
    client_cpu: float  # seconds per 100 MiB
    client_cores: float  # the client's CPU seconds per second of the run
    errors: list[str]


def measure(transfer: Transfer, seeded: Seeded, pid: int, at_once: int) -> Measured:
    """``at_once`` transfers together, one after another on each connection for ``RUN_SECONDS``,
    against the server whose master is ``pid``; what an upload stored is removed afterwards."""
    requests = [transfer.requests(seeded, MOST_IN_A_ROW // at_once or 1) for _ in range(at_once)]
    before = processes.cpu_seconds(pid)
    result = run(requests, RUN_SECONDS)
    server = processes.cpu_seconds(pid) - before
    if transfer.cleanup is not None:
        transfer.cleanup(seeded, result)
    hundreds = max(result.payload_bytes, 1) / FILE_BYTES
    return Measured(
        result.payload_bytes / MIB / result.seconds,
        server / hundreds,
        result.client_cpu_seconds / hundreds,
        result.client_cpu_seconds / result.seconds,
        result.errors,
    )


@dataclass
class Row:
    """A scenario at one concurrency, over the rounds, with the floor runs beside it."""

    transfer: Transfer
    at_once: int
    runs: list[Measured] = field(default_factory=list)
    floors: dict[str, list[Measured]] = field(default_factory=dict)

    def ratios(self, floor: str) -> list[float]:
        return [
            run.mib_per_second / beside.mib_per_second
            for run, beside in zip(self.runs, self.floors[floor], strict=True)
        ]


def _source(path: Path, size: int) -> str:
    """Write ``size`` bytes (a random MiB, repeated) to ``path``; their SHA-256."""
    block, digest = os.urandom(MIB), hashlib.sha256()
    with open(path, "wb") as output:
        for _ in range(size // MIB):
            output.write(block)
            digest.update(block)
    return digest.hexdigest()


def transfer_part(
    workdir: Path, redis_url: str, workers: int, names: str, rounds: int
) -> tuple[list[Row], list[str]]:
    """The transfer scenarios ``names`` in ``rounds`` rounds beside their floors, then the memory
    a 1 GiB upload and download grow a worker by; the rows and the notes."""
    key = seed_transfer_key(redis_url)
    source = workdir / "transfer.bin"
    _source(source, FILE_BYTES)
    service_env = {
        "FILEHOST_DATA_DIR": str(workdir / "service-data"),
        "FILEHOST_MAX_UPLOAD_BYTES": str(2 * MEMORY_FILE_BYTES),
    }
    rows = [Row(TRANSFERS[name], at_once) for name in names for at_once in (1, MANY)]
    notes: list[str] = []
    with ExitStack() as stack:
        nginx_url, nginx_pid, www = stack.enter_context(processes.nginx(workdir / "nginx", workers))
        service_url, service_pid = stack.enter_context(
            processes.service(
                redis_url, workers, log=workdir / "transfer-service.log", extra=service_env
            )
        )
        received = workdir / "upload-floor"
        floor_url, floor_pid = stack.enter_context(processes.upload_floor(received, workers))
        os.link(source, www / "file.bin")  # the same bytes, on the same filesystem
        seeded = Seeded(service_url, nginx_url, key, source, www, floor_url, received)
        for name in names:
            if TRANSFERS[name].setup is not None:
                TRANSFERS[name].setup(seeded)  # type: ignore[misc]
        pids = {
            "service": service_pid,
            "nginx": nginx_pid,
            "nginx+fsync": nginx_pid,
            "bare": floor_pid,
        }
        for row in rows:  # warm-up: the file in the page cache, the first connections made
            measure(row.transfer, seeded, service_pid, 1)
            for side, floor in _floors(row.transfer).items():
                measure(floor, seeded, pids[side], 1)
        for round_number in range(1, rounds + 1):
            print(f"transfers, round {round_number}/{rounds}", flush=True)
            for row in rows:
                floors = _floors(row.transfer)
                order = ["service", *floors] if round_number % 2 == 0 else [*floors, "service"]
                for side in order:
                    transfer = row.transfer if side == "service" else floors[side]
                    pid = pids[side]
                    result = measure(transfer, seeded, pid, row.at_once)
                    if side == "service":
                        row.runs.append(result)
                    else:
                        row.floors.setdefault(side, []).append(result)
                    print(
                        f"  {transfer.label}, {row.at_once} at once: "
                        f"{result.mib_per_second:,.0f} MiB/s, server CPU "
                        f"{result.server_cpu:.3f} s per 100 MiB, client "
                        f"{result.client_cores:.2f} cores, errors {len(result.errors)}"
                        + (f" ({result.errors[0]})" if result.errors else ""),
                        flush=True,
                    )
    notes.append(memory_note(workdir, redis_url, key, service_env))
    notes.append(fsync_note(workdir))
    return rows, notes


def _floors(transfer: Transfer) -> dict[str, Transfer]:
    """The floor runs beside a scenario: nginx, and for an upload also nginx followed by an
    fsync of what it stored (which nginx cannot do itself) and the bare receiver."""
    if transfer.direction == "download":
        return {"nginx": FLOORS["download"]}
    return {
        "nginx": FLOORS["upload"],
        "nginx+fsync": FLOORS["durable upload"],
        "bare": FLOORS["bare upload"],
    }


# -- memory --------------------------------------------------------------------------------------


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (bytes) of process ``pid``."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def _growth(pid: int, action: Callable[[], RunResult]) -> tuple[int, int, RunResult]:
    """How much process ``pid``'s resident size grew while ``action`` ran, and its size before:
    its peak (VmHWM) is reset first (``clear_refs``), so the peak after is the action's own."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = _status(pid)["VmRSS"]
    result = action()
    return _status(pid)["VmHWM"] - before, before, result


def memory_growth(
    url: str,
    pid: int,
    key: str,
    workdir: Path,
    transfers: tuple[Transfer, Transfer],
    limit: int,
) -> tuple[str, int]:
    """A 1 MiB upload and download (the worker's first-use allocations), then a 1 GiB upload
    and its download through the worker ``pid`` serving ``url``, by ``transfers`` (the upload's,
    the download's): each one's growth of the worker against ``limit``, with anything wrong,
    and the worker's size before."""
    small, big = workdir / "memory-small.bin", workdir / "memory.bin"
    _source(small, MIB)
    expected = _source(big, MEMORY_FILE_BYTES)
    uploading, downloading = transfers
    seeded = Seeded(url, "", key, small, workdir)

    def upload(source: Path) -> RunResult:
        return run([uploading.requests(dataclasses.replace(seeded, source=source), 1)])

    def download(file_id: str) -> RunResult:
        with_file = dataclasses.replace(seeded, values={"file_id": file_id})
        return run([downloading.requests(with_file, 1)])

    try:
        warm = orjson.loads(upload(small).bodies[0])["data"]["id"]
        download(warm)
        seeded.api("DELETE", f"/api/v1/files/{warm}")
        grown_up, rss, stored = _growth(pid, lambda: upload(big))
        if stored.errors:
            return f"the 1 GiB upload failed: {stored.errors[0]}", 0
        record = orjson.loads(stored.bodies[0])["data"]
        grown_down, _, fetched = _growth(pid, lambda: download(record["id"]))
        seeded.api("DELETE", f"/api/v1/files/{record['id']}")
    finally:
        small.unlink()
        big.unlink()
    problems = [
        problem
        for problem in (
            record["sha256"] != expected and "the stored SHA-256 differs from the file's",
            fetched.errors and f"the download failed: {fetched.errors[0]}",
            fetched.payload_bytes != MEMORY_FILE_BYTES and "the download was cut short",
        )
        if problem
    ]
    verdicts = [
        f"{what} grew it by {grown / MIB:.1f} MiB: {'met' if grown < limit else 'NOT met'}"
        for what, grown in (("the upload", grown_up), ("the download", grown_down))
    ]
    return "; ".join(verdicts) + "".join(f"; {p}" for p in problems), rss


def memory_note(workdir: Path, redis_url: str, key: str, service_env: dict[str, str]) -> str:
    """A 1 GiB upload, then its download, through a service of one worker (the serve process
    itself) started for them; how much each grew the worker, against the target."""
    log = workdir / "memory-service.log"
    with processes.service(redis_url, 1, log=log, extra=service_env) as (url, pid):
        said, rss = memory_growth(
            url, pid, key, workdir, (TRANSFERS["w"], TRANSFERS["r"]), MEMORY_LIMIT
        )
    return (
        f"memory (target: a 1 GiB upload and a 1 GiB download each grow the worker by less than "
        f"{MEMORY_LIMIT // MIB} MiB; VmHWM after over VmRSS before, one worker of "
        f"{rss / MIB:.0f} MiB): {said}"
    )


def fsync_note(workdir: Path) -> str:
    """What durability costs on this machine's disk, beside the upload rows: 100 MiB written to
    the bench's filesystem, and then fsynced (medians of 3)."""
    block = os.urandom(MIB)
    written, synced = [], []
    for n in range(3):
        path = workdir / f"fsync-{n}.bin"
        began = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            for _ in range(FILE_BYTES // MIB):
                os.write(fd, block)
            written.append(time.perf_counter() - began)
            os.fsync(fd)
            synced.append(time.perf_counter() - began - written[-1])
        finally:
            os.close(fd)
            path.unlink()
    return (
        f"the disk: writing 100 MiB to the bench's filesystem took {statistics.median(written):.3f}"
        f" s and its fsync {statistics.median(synced):.3f} s more (medians of 3), a cost the "
        "service's uploads pay and nginx's PUT does not"
    )
