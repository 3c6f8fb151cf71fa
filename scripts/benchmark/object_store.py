"""The object-store part of the transfers: 100 MiB files through a service with
``FILEHOST_BLOB_STORE=s3`` against a SeaweedFS the bench starts, each run beside a plain S3 client
moving the same bytes to and from the same server (obstore, Rust: outside the service and its
client library), with the same part size as the service's (8 MiB) and as many parts on their way
as one upload of the service keeps (its buffer filling, and ``PARTS_IN_FLIGHT`` sent).

Scenarios (``OBJECT_TRANSFERS``, for ``--only``): ``s`` uploads through ``POST /api/v1/files``;
``o`` downloads through ``GET /api/v1/files/{id}/content``, streamed by the service; ``x`` the
same download with ``FILEHOST_S3_DOWNLOADS=redirect``, the client following the 302 to the store.
Each runs one at a time and ``MANY`` at once, for ``RUN_SECONDS``, and every run sits beside a run
of the plain client (first in odd rounds, last in even ones); each ratio is taken within that
pair. Then the memory a 1 GiB upload and download through the object store grow a worker by."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import obstore
import orjson
from obstore.store import S3Store

from benchmark import processes
from benchmark.transfer_client import run
from benchmark.transfers import (
    FILE_BYTES,
    MANY,
    MIB,
    RUN_SECONDS,
    Measured,
    Row,
    Seeded,
    Transfer,
    _delete_uploads,
    _with_key,
    memory_growth,
)
from service.store.s3_writes import PART_BYTES, PARTS_IN_FLIGHT
from tests.support.seaweedfs import ACCESS_KEY, BUCKET, SECRET_KEY, SeaweedFS

# A 1 GiB transfer through the object store may grow a worker by less than this.
MEMORY_LIMIT = 64 * MIB
FLOOR_KEY = "bench-floor/file.bin"


def _seed_object_file(seeded: Seeded) -> None:
    result = run([OBJECT_TRANSFERS["s"].requests(seeded, 1)])
    if result.errors:
        raise RuntimeError(f"seeding the file failed: {result.errors[0]}")
    seeded.values["file_id"] = orjson.loads(result.bodies[0])["data"]["id"]


def _redirected(seeded: Seeded) -> str:
    return f"{seeded.values['redirecting']}/api/v1/files/{seeded.values['file_id']}/content"


OBJECT_TRANSFERS: dict[str, Transfer] = {
    transfer.name: transfer
    for transfer in (
        Transfer(
            "s",
            "s upload into the object store, POST /api/v1/files (multipart, SHA-256)",
            "upload",
            lambda s: f"{s.service}/api/v1/files",
            least=0.80,
            method="POST",
            expected=(201,),
            multipart=True,
            cleanup=_delete_uploads,
        ),
        Transfer(
            "o",
            "o download from the object store, GET /api/v1/files/{id}/content, streamed",
            "download",
            lambda s: f"{s.service}/api/v1/files/{s.values['file_id']}/content",
            least=0.80,
            setup=_seed_object_file,
        ),
        Transfer(
            "x",
            "x download, FILEHOST_S3_DOWNLOADS=redirect: the 302, then the store",
            "download",
            _redirected,
            least=0.80,
            headers=_with_key,
            setup=_seed_object_file,
            follow=True,
        ),
    )
}


class PlainClient:
    """obstore on a loop of its own thread: the floor's transfers, timed like the service's."""

    def __init__(self, server: SeaweedFS, source: Path) -> None:
        self._store = S3Store(
            BUCKET,
            config={
                "endpoint": server.endpoint,
                "access_key_id": ACCESS_KEY,
                "secret_access_key": SECRET_KEY,
                "region": "us-east-1",
                "allow_http": True,
                "virtual_hosted_style_request": False,
            },
        )
        self._source = source
        self._data = source.read_bytes()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._names = iter(range(10**9))

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    async def _upload(self) -> int:
        key = f"bench-floor/put-{next(self._names)}.bin"
        await obstore.put_async(
            self._store,
            key,
            memoryview(self._data),
            chunk_size=PART_BYTES,
            max_concurrency=PARTS_IN_FLIGHT + 1,
        )
        await obstore.delete_async(self._store, key)
        return len(self._data)

    async def _download(self) -> int:
        got = 0
        answer = await obstore.get_async(self._store, FLOOR_KEY)
        async for chunk in answer.stream(min_chunk_size=256 * 1024):
            got += len(chunk)
        return got

    async def _run(self, direction: str, at_once: int) -> tuple[float, int, list[str]]:
        one = self._upload if direction == "upload" else self._download
        moved, errors = 0, []
        began = time.perf_counter()

        async def in_a_row() -> None:
            nonlocal moved
            first = True
            while first or time.perf_counter() - began < RUN_SECONDS:
                first = False
                try:
                    got = await one()
                except Exception as error:  # a failed transfer is counted, not fatal
                    errors.append(f"{type(error).__name__}: {error}")
                    return
                moved += got  # not ``moved += await``: that reads ``moved`` before waiting

        await asyncio.gather(*(in_a_row() for _ in range(at_once)))
        return time.perf_counter() - began, moved, errors

    def seed(self) -> None:
        async def put() -> None:
            await obstore.put_async(self._store, FLOOR_KEY, memoryview(self._data))

        asyncio.run_coroutine_threadsafe(put(), self._loop).result()

    def measure(self, direction: str, at_once: int) -> Measured:
        future = asyncio.run_coroutine_threadsafe(self._run(direction, at_once), self._loop)
        seconds, moved, errors = future.result()
        return Measured(moved / MIB / seconds, 0.0, 0.0, 0.0, errors)


@contextmanager
def object_services(
    workdir: Path, redis_url: str, workers: int, extra: dict[str, str]
) -> Iterator[tuple[SeaweedFS, str, int, str]]:
    """SeaweedFS, a service on it proxying downloads and one redirecting them: (the store, the
    proxying service's URL and pid, the redirecting service's URL)."""
    store = SeaweedFS(workdir / "seaweedfs")
    store.start()
    try:
        with ExitStack() as stack:
            proxied = {**extra, **store.env("bench/")}
            url, pid = stack.enter_context(
                processes.service(
                    redis_url, workers, log=workdir / "object-service.log", extra=proxied
                )
            )
            redirecting = {**proxied, "FILEHOST_S3_DOWNLOADS": "redirect"}
            other, _ = stack.enter_context(
                processes.service(
                    redis_url, 1, log=workdir / "redirect-service.log", extra=redirecting
                )
            )
            yield store, url, pid, other
    finally:
        store.stop()


def object_part(
    workdir: Path,
    redis_url: str,
    workers: int,
    names: str,
    rounds: int,
    key: str,
    source: Path,
    service_env: dict[str, str],
) -> tuple[list[Row], list[str]]:
    """The object-store scenarios ``names`` in ``rounds`` rounds beside the plain client, then
    the memory runs; the rows and the notes."""
    rows = [Row(OBJECT_TRANSFERS[name], at_once) for name in names for at_once in (1, MANY)]
    extra = {**service_env, "FILEHOST_DATA_DIR": str(workdir / "object-service-data")}
    with object_services(workdir, redis_url, workers, extra) as (store, url, pid, other):
        seeded = Seeded(url, "", key, source, workdir, values={"redirecting": other})
        for name in names:
            setup = OBJECT_TRANSFERS[name].setup
            if setup is not None and "file_id" not in seeded.values:
                setup(seeded)
        client = PlainClient(store, source)
        try:
            client.seed()
            for row in rows:  # warm-up: the first connections made
                _service_measure(row.transfer, seeded, pid, 1)
                client.measure(row.transfer.direction, 1)
            for round_number in range(1, rounds + 1):
                print(f"object-store transfers, round {round_number}/{rounds}", flush=True)
                for row in rows:
                    order = ["service", "plain"] if round_number % 2 == 0 else ["plain", "service"]
                    for side in order:
                        if side == "service":
                            result = _service_measure(row.transfer, seeded, pid, row.at_once)
                            row.runs.append(result)
                            label = row.transfer.label
                        else:
                            result = client.measure(row.transfer.direction, row.at_once)
                            row.floors.setdefault("plain S3", []).append(result)
                            label = f"plain S3 client {row.transfer.direction}"
                        print(
                            f"  {label}, {row.at_once} at once: {result.mib_per_second:,.0f} "
                            f"MiB/s, errors {len(result.errors)}"
                            + (f" ({result.errors[0]})" if result.errors else ""),
                            flush=True,
                        )
        finally:
            client.close()
    notes = [object_memory_note(workdir, redis_url, key, extra)]
    return rows, notes


def _service_measure(transfer: Transfer, seeded: Seeded, pid: int, at_once: int) -> Measured:
    from benchmark.transfers import measure

    return measure(transfer, seeded, pid, at_once)


def object_memory_note(workdir: Path, redis_url: str, key: str, extra: dict[str, str]) -> str:
    """A 1 GiB upload into the object store, then its download, through one worker."""
    store = SeaweedFS(workdir / "seaweedfs-memory")
    store.start()
    try:
        env = {**extra, **store.env("memory/")}
        log = workdir / "object-memory.log"
        with processes.service(redis_url, 1, log=log, extra=env) as (url, pid):
            transfers = (OBJECT_TRANSFERS["s"], OBJECT_TRANSFERS["o"])
            said, rss = memory_growth(url, pid, key, workdir, transfers, MEMORY_LIMIT)
    finally:
        store.stop()
    return (
        f"object-store memory (target: a 1 GiB upload and download through SeaweedFS each grow "
        f"the worker by less than {MEMORY_LIMIT // MIB} MiB; one worker of {rss / MIB:.0f} MiB): "
        + said
    )


__all__ = ["FILE_BYTES", "OBJECT_TRANSFERS", "object_part"]
