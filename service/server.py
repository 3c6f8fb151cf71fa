"""Running the service: the embedded store when no REDIS_URL is set, and N worker processes
sharing one port through SO_REUSEPORT. The access log names method, path (never the query
string), status and duration; never a header, so never a credential."""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import signal
import sys
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from service.app import create_app
from service.config import Settings
from service.store.embedded import EmbeddedRedis

log = logging.getLogger("service")


class AccessLogger(AbstractAccessLogger):
    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info(
            "%s %s %s %.1fms", request.method, request.path, response.status, time * 1000
        )


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )


def describe_store(url: str) -> str:
    """Where the store is, without credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix socket {parts.path}"
    return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}"


def run_worker(settings: Settings, bench_floor_user: str | None = None) -> None:
    """One worker process: an event loop (uvloop when available) serving the app."""
    configure_logging(settings.log_level)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass
    web.run_app(
        create_app(settings, bench_floor_user=bench_floor_user),
        host=settings.host,
        port=settings.port,
        reuse_port=settings.workers > 1,
        access_log_class=AccessLogger,
        print=None,
        handle_signals=True,
    )


def serve(settings: Settings, *, bench_floor_user: str | None = None) -> int:
    configure_logging(settings.log_level)
    embedded = None
    if settings.redis_url is None:
        embedded = EmbeddedRedis(settings.data_dir)
        embedded.start()
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
    try:
        if settings.workers == 1:
            run_worker(settings, bench_floor_user)
            return 0
        return _run_workers(settings, bench_floor_user)
    finally:
        if embedded is not None:
            embedded.stop()


def _run_workers(settings: Settings, bench_floor_user: str | None) -> int:
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=run_worker, args=(settings, bench_floor_user), name=f"worker-{n}")
        for n in range(settings.workers)
    ]
    for worker in workers:
        worker.start()

    def forward(signum: int, _frame: object) -> None:
        for worker in workers:
            if worker.is_alive() and worker.pid is not None:
                worker.terminate()

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for worker in workers:
        worker.join()
    failed = [w.name for w in workers if w.exitcode not in (0, -signal.SIGTERM)]
    if failed:
        log.error("workers exited abnormally: %s", ", ".join(failed))
        return 1
    return 0
