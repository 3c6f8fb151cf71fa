"""Running the service: the embedded store when no REDIS_URL is set, and N worker processes
sharing one port through SO_REUSEPORT. Logs are JSON lines (``service.observability.log_lines``):
one access line per request with method, route, path (never the query string), status and
duration; never a header value, so never a credential. With several workers the metrics are
shared through prometheus-client's multiprocess mode
(``service.observability.metrics.WorkerMetricsDir``).

``serve`` supervises what it started: a worker or an embedded store that dies is started again
after a back-off (``Backoff``: 0.5 s, doubling up to 30 s, back to 0.5 s once it ran a minute);
meanwhile the other workers serve, and without the store every protected request, and
``/readyz``, is 503. Both die with ``serve``, even when it is killed (``PR_SET_PDEATHSIG``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import multiprocessing
import os
import signal
import time
from multiprocessing.connection import wait as wait_for_exits
from multiprocessing.context import SpawnProcess
from urllib.parse import urlsplit

from aiohttp import web

from service.api._aiohttp import run_app
from service.api.access_log import AccessLogger
from service.app import create_app
from service.config import Settings
from service.observability.log_lines import configure_logging
from service.observability.metrics import WorkerMetricsDir
from service.store.embedded import EmbeddedRedis, die_with_parent

log = logging.getLogger("service")

# The signals that stop the service. A worker blocks them while it starts, until it can stop
# gracefully, so that an early one waits instead of killing it half-way; see ``_stop_once``.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
# How long the parent still waits for a worker once aiohttp's shutdown is over (it waits up to twice
# the grace period: for a request, then for it to take its cancellation) before killing it: a
# worker closes its Redis connections and drains its background writes after its last request.
_KILL_MARGIN_SECONDS = 10.0
# How often serve looks at the embedded store it keeps running.
_WATCH_SECONDS = 0.5


class Backoff:
    """The delays before restarting something that keeps dying: ``first`` seconds, doubling up
    to ``cap``; back to ``first`` once it ran for ``stable`` seconds."""

    def __init__(self, first: float = 0.5, cap: float = 30.0, stable: float = 60.0) -> None:
        self.first, self.cap, self.stable = first, cap, stable
        self.failures = 0

    def delay(self, ran_for: float) -> float:
        """The delay before the next start of one that died after ``ran_for`` seconds."""
        if ran_for >= self.stable:
            self.failures = 0
        self.failures += 1
        return min(self.cap, self.first * 2 ** (self.failures - 1))


class StoreKeeper:
    """Restarts the embedded store when it dies: ``check()`` is called every ``_WATCH_SECONDS``
    from serve's main thread (the store's life is tied to that thread's)."""

    def __init__(self, embedded: EmbeddedRedis) -> None:
        self.embedded = embedded
        self.backoff = Backoff()
        self.started_at = time.monotonic()
        self.restart_at: float | None = None

    def check(self) -> None:
        now = time.monotonic()
        if self.restart_at is None:
            code = self.embedded.exited()
            if code is None:
                return
            delay = self.backoff.delay(now - self.started_at)
            self.restart_at = now + delay
            log.error(
                "the embedded store exited (%s); restarting it in %gs; see %s/redis.log",
                code,
                delay,
                self.embedded.data_dir,
            )
        elif now >= self.restart_at:
            self.restart_at = None
            self.started_at = now
            try:
                self.embedded.restart()
            except OSError as error:
                self.restart_at = now + self.backoff.delay(0.0)
                log.error("the embedded store could not be started: %s", error)
            else:
                log.info("the embedded store was started again")


def _keep_store_running(keeper: StoreKeeper, app: web.Application) -> None:
    """With one worker, serve is the worker: its event loop watches the store."""

    async def watch() -> None:
        while True:
            await asyncio.sleep(_WATCH_SECONDS)
            keeper.check()

    tasks: list[asyncio.Task[None]] = []

    async def start(_app: web.Application) -> None:
        tasks.append(asyncio.create_task(watch()))

    async def stop(_app: web.Application) -> None:  # shutting down: the store is stopped after
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.on_startup.append(start)
    app.on_shutdown.append(stop)


def describe_store(url: str) -> str:
    """Where the store is, without credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix socket {parts.path}"
    return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}"


async def _stop_once(app: web.Application) -> None:
    """Only the first stop signal counts, then the stop signals are let in.

    aiohttp stops on SIGINT/SIGTERM by raising GracefulExit from a signal handler; a second signal
    while it stops raises it again, abandons the shutdown half-way and cuts the requests in flight.
    A worker often gets two: Ctrl-C signals the whole process group and the parent forwards
    SIGTERM as well, and systemd signals every process of the unit."""
    loop = asyncio.get_running_loop()
    stopping = False

    def stop() -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            raise web.GracefulExit()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # one that came early is handled now


# The collector's thresholds while a worker serves: a young generation of this many objects, and
# Python's defaults for the older two. See ``_settle_heap``.
YOUNG_GENERATION_THRESHOLD = 10_000


async def _settle_heap(app: web.Application) -> None:
    """Once a worker has started: what start-up made (modules, the OpenAPI document, the routes)
    is set aside from the garbage collector's work (``gc.freeze``), and its young generation is
    let grow to ``YOUNG_GENERATION_THRESHOLD`` objects.

    Why: Python collects the young generation each time 700 more container objects were made
    than freed, and the objects of the requests in flight (64 connections of a gateway) reach
    that every couple of hundred requests; each collection moved them on to the older
    generations, and every few seconds a full collection walked the whole start-up heap, a
    pause in which no request was answered. Requests make no reference cycles of their own
    (``tests/api/test_gateway_lane.py`` checks the gateway's answers), so the larger young
    generation holds no garbage for long, and memory stays bounded by the threshold."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)


def run_worker(
    settings: Settings, parent: int | None = None, keeper: StoreKeeper | None = None
) -> None:
    """One worker process: an event loop (uvloop when available) serving the app until SIGTERM or
    SIGINT. Then it stops listening (new connections are refused), gives the requests in flight
    ``shutdown_grace_seconds`` to finish (aiohttp cuts those still running after at most twice
    that), closes its Redis connections and returns.

    ``parent``: the pid of the serve process that started it; when that dies, so does this one
    (gracefully, on SIGTERM). ``keeper``: with one worker, in the serve process, the embedded
    store to keep running."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # until _stop_once is in place
    if parent is not None:
        die_with_parent(parent)
    configure_logging(settings.log_level)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass
    app = create_app(settings)
    app.on_startup.append(_stop_once)
    if keeper is not None:
        _keep_store_running(keeper, app)
    app.on_startup.append(_settle_heap)  # last: after every other start-up step
    run_app(  # aiohttp's run_app, with its own refusals in the JSON error envelope
        app,
        host=settings.host,
        port=settings.port,
        reuse_port=settings.workers > 1,
        access_log_class=AccessLogger,
        print=None,
        handle_signals=True,
        shutdown_timeout=settings.shutdown_grace_seconds,
        header_timeout=settings.header_timeout_seconds,
        body_timeout=settings.body_timeout_seconds,
    )
    for signum in STOP_SIGNALS:  # stopped: a late signal must not interrupt the exit
        signal.signal(signum, signal.SIG_IGN)


def serve(settings: Settings) -> int:
    """Serve until SIGTERM or SIGINT, then stop the workers (requests in flight finish) and after
    them the embedded store (its append-only file flushed). 0 when everything stopped cleanly.

    Without ``REDIS_URL`` serve owns the embedded store (waiting first for a ``users`` command
    that owns it to finish), and restarts it when it dies."""
    configure_logging(settings.log_level)
    embedded = keeper = None
    if settings.redis_url is None:
        embedded = EmbeddedRedis(settings.data_dir, settings.embedded_server, serving=True)
        embedded.start()
        keeper = StoreKeeper(embedded)
        settings = dataclasses.replace(settings, redis_url=embedded.url)
        store = f"embedded store in {embedded.data_dir} ({describe_store(embedded.url)})"
    else:
        store = describe_store(settings.redis_url)
    base = f"http://{settings.host}:{settings.port}"
    print(
        f"filehost-auth: serving {base}/api/v1 with {settings.workers} worker(s) on {store}\n"
        "  create a user:  python -m service users create --email you@example.com "
        "--password-stdin\n"
        f"  log in:         curl -s {base}/api/v1/auth/login -H 'Content-Type: application/json' "
        '-d \'{"email": "you@example.com", "password": "..."}\'',
        flush=True,
    )
    metrics_dir = WorkerMetricsDir() if settings.workers > 1 and settings.metrics_enabled else None
    store_stopped_cleanly = True
    try:
        if settings.workers == 1:
            run_worker(settings, keeper=keeper)
            code = 0
        else:
            code = _run_workers(settings, metrics_dir, keeper)
    finally:
        if embedded is not None:
            store_stopped_cleanly = embedded.stop()
        if metrics_dir is not None:
            metrics_dir.close()
    return code if store_stopped_cleanly else 1


def _run_workers(
    settings: Settings,
    metrics_dir: WorkerMetricsDir | None = None,
    keeper: StoreKeeper | None = None,
) -> int:
    """Run the workers until they are stopped; 0 when every one stopped cleanly.

    A worker that dies while serving is started again after a back-off, and the embedded store
    (``keeper``) too. SIGTERM and SIGINT are forwarded to each worker as SIGTERM, and the parent
    returns only after every worker exited: one still running twice ``shutdown_grace_seconds``
    plus a margin after the signal is killed."""
    context = multiprocessing.get_context("spawn")
    workers: list[SpawnProcess] = []
    started_at = [time.monotonic()] * settings.workers
    backoffs = [Backoff() for _ in range(settings.workers)]
    restart_at: dict[int, float] = {}  # worker slot -> when to start it again
    deadline: float | None = None

    def forward(signum: int, _frame: object) -> None:
        nonlocal deadline
        if deadline is None:
            grace = settings.shutdown_grace_seconds
            deadline = time.monotonic() + 2 * grace + _KILL_MARGIN_SECONDS
            log.info(
                "%s: stopping %d workers; requests in flight get %gs to finish",
                signal.Signals(signum).name,
                len(workers),
                grace,
            )
        for worker in workers:
            if worker.pid is not None and worker.exitcode is None:
                worker.terminate()

    def start(slot: int) -> SpawnProcess:
        worker = context.Process(
            target=run_worker, args=(settings, os.getpid()), name=f"worker-{slot}"
        )
        if slot < len(workers):
            workers[slot] = worker
        else:
            workers.append(worker)
        started_at[slot] = time.monotonic()
        # Workers inherit an ignored SIGINT, so a Ctrl-C while they start (it reaches the whole
        # process group) raises no KeyboardInterrupt in them: the SIGTERM forwarded from here
        # stops them.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            worker.start()
        finally:
            signal.signal(signal.SIGINT, forward)
        return worker

    signal.signal(signal.SIGTERM, forward)
    for slot in range(settings.workers):
        start(slot)
    if deadline is not None:  # stopped while they were starting: reach the ones started since
        forward(signal.SIGTERM, None)

    running, killed = list(workers), False
    while running or (restart_at and deadline is None):
        wait_for_exits([worker.sentinel for worker in running], timeout=_WATCH_SECONDS)
        now = time.monotonic()
        for worker in [worker for worker in running if worker.exitcode is not None]:
            running.remove(worker)
            if deadline is None:
                slot = workers.index(worker)
                delay = backoffs[slot].delay(now - started_at[slot])
                restart_at[slot] = now + delay
                log.error(
                    "%s (pid %s) exited unexpectedly: %s; starting it again in %gs",
                    worker.name,
                    worker.pid,
                    worker.exitcode,
                    delay,
                )
            else:
                log.info("%s (pid %s) exited with %s", worker.name, worker.pid, worker.exitcode)
            if metrics_dir is not None:
                metrics_dir.worker_gone(worker.pid)
        if deadline is None:
            for slot, when in sorted(restart_at.items()):
                if now >= when:
                    del restart_at[slot]
                    running.append(start(slot))
                    log.info("%s started again (pid %s)", workers[slot].name, workers[slot].pid)
            if deadline is not None:  # a signal came while one started
                forward(signal.SIGTERM, None)
            elif keeper is not None:
                keeper.check()
        if running and not killed and deadline is not None and time.monotonic() > deadline:
            killed = True
            for worker in running:
                log.error("%s (pid %s) did not stop in time: killed", worker.name, worker.pid)
                worker.kill()
    # Killed by the forwarded SIGTERM before it could handle it: it was still starting, no harm.
    failed = [w.name for w in workers if w.exitcode not in (0, -signal.SIGTERM)]
    if failed:
        log.error("workers exited abnormally: %s", ", ".join(failed))
        return 1
    return 0
