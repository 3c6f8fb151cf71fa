"""Running the service: the embedded store when no REDIS_URL is set, and N worker processes
sharing one port through SO_REUSEPORT. Logs are JSON lines (``service.observability.log_lines``):
one access line per request with method, route, path (never the query string), status and
duration; never a header value, so never a credential. With several workers the metrics are
shared through prometheus-client's multiprocess mode
(``service.observability.metrics.WorkerMetricsDir``).

``serve`` supervises what it started: a worker or an embedded store that dies is started again
after a back-off (``Backoff``: 0.5 s, doubling up to 30 s, back to 0.5 s once it ran a minute);
meanwhile the other workers serve, and without the store every protected request, and
``/readyz``, is 503. Both die with ``serve``, even when it is killed (``PR_SET_PDEATHSIG``).

Everything ``serve`` writes is a JSON line on standard error, the start-up banner (once the port
is bound) and its refusals too; standard output stays empty. What stops it from starting (the
address in use or not this machine's, the embedded store's data directory held or unusable) is
one ERROR line saying what to change, and exit status ``CANNOT_START``, never a traceback: the
address is tried before anything starts, and a worker that still cannot bind it (taken since)
exits with ``_WORKER_CANNOT_LISTEN``, which stops ``serve`` rather than restarting the worker."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import gc
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import wait as wait_for_exits
from multiprocessing.context import SpawnProcess
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from service.announcements import Banner, Shutdown, second_factor_notes
from service.api._aiohttp import ListenError, run_app, unprotected_problem
from service.api.access_log import AccessLogger
from service.app import create_app
from service.config import Settings
from service.config.generated_key import with_generated_key
from service.domain.blobs import StorageUnavailable
from service.observability.log_lines import configure_logging
from service.observability.metrics import WorkerMetricsDir
from service.stop_deadline import StopDeadline, most_a_stop_takes
from service.store.blob_stores import open_object_store
from service.store.embedded import EmbeddedRedis, EmbeddedStoreError, die_with_parent

log = logging.getLogger("service")

# The signals that stop the service. A worker blocks them while it starts, until it can stop
# gracefully, so that an early one waits instead of killing it half-way; see ``_stop_once``.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
# How often serve looks at the embedded store it keeps running.
_WATCH_SECONDS = 0.5
# serve's exit status when it cannot start (see the module's docstring); 2 is a bad setting.
CANNOT_START = 1
# A worker's exit status when it cannot bind the address: serve stops instead of restarting it.
_WORKER_CANNOT_LISTEN = 3


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen_problem(host: str, port: int) -> str | None:
    """Why ``serve`` cannot listen on ``host``:``port``, as one line saying what to change; None
    when it can. Tried without ``SO_REUSEPORT``, so that a port another process (another
    ``serve`` included) listens on is found taken whatever the workers' count."""
    where = _where(host, port)
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        return (
            f"cannot listen on {where}: {host!r} is not an address or a name this machine "
            "resolves; choose another with --host or FILEHOST_HOST"
        )
    for family, kind, protocol, _, address in addresses:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the workers do
            try:
                probe.bind(address)
            except OSError as error:
                return _bind_problem(where, error)
    return None


def _bind_problem(where: str, error: OSError) -> str:
    if error.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: the port is already in use (by another serve or another "
            "program); choose another with --port or FILEHOST_PORT, or stop what holds it"
        )
    if error.errno == errno.EACCES:
        return (
            f"cannot listen on {where}: permission denied (ports below 1024 need privileges); "
            "choose another port with --port or FILEHOST_PORT"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: the address is not one of this machine's; choose "
            "another with --host or FILEHOST_HOST"
        )
    return (
        f"cannot listen on {where}: {error.strerror or error}; choose another address with "
        "--host or FILEHOST_HOST, or another port with --port or FILEHOST_PORT"
    )


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
        return min(self.cap, self.first * 2.0 ** (self.failures - 1))


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


def describe_store(settings: Settings) -> str:
    """Where the store is, without credentials: ``REDIS_URL``'s server (a cluster's seed node),
    or with Sentinel the sentinels asked for the master (``REDIS_URL`` names no server then)."""
    if settings.redis_mode == "sentinel":
        asked = ", ".join(_where(host, port) for host, port in settings.sentinels)
        return f"the master {settings.sentinel_master} of the sentinels at {asked}"
    parts = urlsplit(settings.redis_url or "")
    if parts.scheme == "unix":
        return f"the store at unix socket {parts.path}"
    return f"the store at {parts.scheme}://{_where(parts.hostname or '', parts.port or 6379)}"


# When and why this worker began to stop (``_stop_once``), for its line at shutdown.
_SHUTDOWN = web.AppKey("shutdown", Shutdown)


async def _stop_once(app: web.Application, deadline: StopDeadline, grace: float | None) -> None:
    """Only the first stop signal counts, then the stop signals are let in; it is noted as the
    shutdown's cause (``_SHUTDOWN``), arms ``deadline`` and, with ``grace`` (serve itself, one
    worker: the line serve's parent would log), is logged.

    aiohttp stops on SIGINT/SIGTERM by raising GracefulExit from a signal handler; a second signal
    while it stops raises it again, abandons the shutdown half-way and cuts the requests in flight.
    A worker often gets two: Ctrl-C signals the whole process group and the parent forwards
    SIGTERM as well, and systemd signals every process of the unit."""
    loop = asyncio.get_running_loop()
    stopping = False
    shutdown = app.get(_SHUTDOWN)

    def stop(signum: int) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            cause = signal.Signals(signum).name
            if shutdown is not None:
                shutdown.begin(cause)
            if grace is not None:
                log.info("%s: stopping; requests in flight get %gs to finish", cause, grace)
            deadline.arm(cause)
            raise web.GracefulExit()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
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


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a worker's event loop: uvloop's, where it is installed (a dependency on
    Linux). Handed to the runner rather than installed as asyncio's policy, which Python 3.12+
    deprecates (uvloop warns) and later releases remove."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run_worker(
    settings: Settings,
    parent: int | None = None,
    keeper: StoreKeeper | None = None,
    banner: Banner | None = None,
) -> int:
    """One worker process: an event loop (uvloop when available) serving the app until SIGTERM or
    SIGINT. Then it stops listening (new connections are refused), gives the requests in flight
    ``shutdown_grace_seconds`` to finish (aiohttp cuts those still running after at most twice
    that), closes its Redis connections and returns 0; ``_WORKER_CANNOT_LISTEN`` (logged) when
    it could not bind the address.

    ``parent``: the pid of the serve process that started it; when that dies, so does this one
    (gracefully, on SIGTERM). ``keeper``: with one worker, in the serve process, the embedded
    store to keep running. ``banner``: logged once the port is bound."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # until _stop_once is in place
    if parent is not None:
        die_with_parent(parent)
    configure_logging(settings.log_level)
    app = create_app(settings)
    shutdown = app[_SHUTDOWN] = Shutdown()
    grace = settings.shutdown_grace_seconds
    deadline = StopDeadline(grace, spawned=parent is not None)
    app.on_startup.append(
        functools.partial(_stop_once, deadline=deadline, grace=grace if parent is None else None)
    )
    if keeper is not None:
        _keep_store_running(keeper, app)
    app.on_startup.append(_settle_heap)  # last: after every other start-up step

    def listening(addresses: list[Any]) -> None:
        if banner is not None:
            port = addresses[0][1] if addresses else settings.port  # port 0: the one given
            banner.log(settings.host, port)

    try:
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
            on_listening=listening,
            loop_factory=event_loop_factory(),
        )
    except ListenError as error:
        log.error(_bind_problem(_where(settings.host, settings.port), error))
        return _WORKER_CANNOT_LISTEN
    finally:
        for signum in STOP_SIGNALS:  # stopped: a late signal must not interrupt the exit
            signal.signal(signum, signal.SIG_IGN)
        deadline.disarm()
    if parent is None:  # serve itself (one worker): its line; with several, serve says it
        shutdown.log_stopped()
    return 0


def _worker_process(settings: Settings, parent: int, banner: Banner | None) -> None:
    """A spawned worker's whole life: whatever ends it is a JSON line, never a traceback
    printed by multiprocessing."""
    try:
        code = run_worker(settings, parent, banner=banner)
    except Exception:
        log.exception("the worker failed")
        code = 1
    sys.exit(code)


def serve(settings: Settings, command: str = "filehost-auth") -> int:
    """Serve until SIGTERM or SIGINT, then stop the workers (requests in flight finish) and after
    them the embedded store (its append-only file flushed). 0 when everything stopped cleanly;
    ``CANNOT_START`` when it could not start (logged as one line saying what to change).
    ``command``: how serve was started, for the banner's command that creates a user.
    Without a configured secrets key, it makes one in the data directory on its first start
    (``service.config.generated_key``).

    Without ``REDIS_URL`` serve owns the embedded store (waiting first for a ``users`` command
    that owns it to finish), and restarts it when it dies."""
    configure_logging(settings.log_level)
    try:
        return _serve(settings, command)
    except KeyboardInterrupt:  # Ctrl-C before the workers took over the signals
        log.info("interrupted while starting")
        return 130
    except Exception:
        log.exception("serve failed")
        return 1


def _serve(settings: Settings, command: str) -> int:
    problem = unprotected_problem() or listen_problem(settings.host, settings.port)
    if problem is not None:
        log.error(problem)
        return CANNOT_START
    try:
        settings, generated_key = with_generated_key(settings, create=True)
    except OSError as error:
        log.error(
            "cannot use the data directory %s: %s; choose another with FILEHOST_DATA_DIR, or "
            "set FILEHOST_SECRETS_KEY",
            settings.data_dir,
            error.strerror or error,
        )
        return CANNOT_START
    if settings.object_store is not None:
        refused = asyncio.run(_object_store_problem(settings))
        if refused is not None and refused.configuration:
            log.error("cannot use the object store: %s", refused.reason)
            return CANNOT_START
        if refused is not None:
            log.warning(
                "the object store does not answer (%s): file transfers answer 503 until it does",
                refused.reason,
            )
    embedded = keeper = None
    if settings.redis_url is None:
        embedded = EmbeddedRedis(settings.data_dir, settings.embedded_server, serving=True)
        try:
            embedded.start()
        except EmbeddedStoreError as error:  # says what to do
            log.error("cannot start the embedded store: %s", error)
            return CANNOT_START
        except OSError as error:
            log.error(
                "cannot use the data directory %s: %s; choose another with FILEHOST_DATA_DIR",
                settings.data_dir,
                error.strerror or error,
            )
            return CANNOT_START
        keeper = StoreKeeper(embedded)
        settings = dataclasses.replace(settings, redis_url=embedded.url)
        store = f"the embedded store in {embedded.data_dir}"
        if settings.object_store is not None:
            # Another instance on this bucket would lose its uploads in progress to this one's
            # sweep, which knows only its own.
            log.warning(
                "the files are in the object store, the records in this instance's embedded "
                "store: no other instance may use the same bucket and FILEHOST_S3_PREFIX; "
                "several instances share one Redis (REDIS_URL, docs/scaling.md)"
            )
    else:
        store = describe_store(settings)
    banner = Banner(
        store,
        settings.workers,
        command,
        second_factor_notes(settings, generated_key),
        settings.public_url,
    )
    metrics_dir = WorkerMetricsDir() if settings.workers > 1 and settings.metrics_enabled else None
    store_stopped_cleanly = True
    try:
        if settings.workers == 1:
            code = run_worker(settings, keeper=keeper, banner=banner)
            if code == _WORKER_CANNOT_LISTEN:
                code = CANNOT_START
        else:
            code = _run_workers(settings, metrics_dir, keeper, banner)
    finally:
        if embedded is not None:
            store_stopped_cleanly = embedded.stop()
        if metrics_dir is not None:
            metrics_dir.close()
    return code if store_stopped_cleanly else 1


async def _object_store_problem(settings: Settings) -> StorageUnavailable | None:
    """What is wrong with the object store the settings name, asked once before serving."""
    assert settings.object_store is not None
    blobs = open_object_store(settings.object_store)
    try:
        return await blobs.probe()
    finally:
        await blobs.close()


def _run_workers(
    settings: Settings,
    metrics_dir: WorkerMetricsDir | None = None,
    keeper: StoreKeeper | None = None,
    banner: Banner | None = None,
) -> int:
    """Run the workers until they are stopped; 0 when every one stopped cleanly.

    A worker that dies while serving is started again after a back-off, and the embedded store
    (``keeper``) too; one that cannot bind the address stops them all (``CANNOT_START``).
    SIGTERM and SIGINT are forwarded to each worker as SIGTERM, and the parent returns only
    after every worker exited: one still running ``most_a_stop_takes`` after the signal is
    killed (it has logged its stacks just before). The first worker logs ``banner`` once it
    listens."""
    context = multiprocessing.get_context("spawn")
    workers: list[SpawnProcess] = []
    started_at = [time.monotonic()] * settings.workers
    backoffs = [Backoff() for _ in range(settings.workers)]
    restart_at: dict[int, float] = {}  # worker slot -> when to start it again
    deadline: float | None = None
    cannot_listen = False
    shutdown = Shutdown()

    def forward(signum: int, _frame: object, why: str | None = None) -> None:
        nonlocal deadline
        if deadline is None:
            shutdown.begin(why or signal.Signals(signum).name)
            grace = settings.shutdown_grace_seconds
            deadline = time.monotonic() + most_a_stop_takes(grace)
            log.info(
                "%s: stopping %d workers; requests in flight get %gs to finish",
                why or signal.Signals(signum).name,
                len(workers),
                grace,
            )
        for worker in workers:
            if worker.pid is not None and worker.exitcode is None:
                worker.terminate()

    def start(slot: int) -> SpawnProcess:
        announce = banner if slot == 0 and not workers else None  # the very first start
        worker = context.Process(
            target=_worker_process, args=(settings, os.getpid(), announce), name=f"worker-{slot}"
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
            if deadline is None and worker.exitcode == _WORKER_CANNOT_LISTEN:
                cannot_listen = True  # it said why; restarting it would not help
                forward(signal.SIGTERM, None, f"{worker.name} cannot listen")
            elif deadline is None:
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
    shutdown.log_stopped(f"{len(workers)} workers")
    if cannot_listen:
        return CANNOT_START
    # Killed by the forwarded SIGTERM before it could handle it: it was still starting, no harm.
    failed = [w.name for w in workers if w.exitcode not in (0, -signal.SIGTERM)]
    if failed:
        log.error("workers exited abnormally: %s", ", ".join(failed))
        return 1
    return 0
