"""The benchmark's floors: servers outside the service, so that nothing the service does around
its credential check (logging, metrics, middlewares, headers) can cancel out of a ratio.

- ``bare`` (F0): aiohttp + uvloop + orjson, ``reuse_port``, no middleware, no Redis: a handler
  answering the small envelope ``GET /api/v1/files`` answers for an account without files.
- ``lookup`` (F1): the same plus one ``HMGET`` of a credential's digest entry per request, over
  the service's own auto-pipelined connection (``service.store.pipelined.PipelinedRedis``): the
  least a server can do that reads its credential from Redis on every request.

``PYTHONPATH=scripts python -m benchmark.floors bare --port P --workers N`` (``lookup`` also
takes ``--redis-url`` and ``--entry``, the Redis key to read). Listens on 127.0.0.1 only; every
worker is a process of its own sharing the port, and each stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import gc
import signal

import orjson
import uvloop
from aiohttp import web

from benchmark.workers import run_workers
from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis

# The same answer the service gives its benchmark account, made the same way per request.
DATA: dict = {"files": [], "next_cursor": None}
LOOKUP_FIELDS = ("u", "k", "p", "e")  # an API key's digest entry, as the service reads it


# What the service's workers do to the collector once started (``service.server._settle_heap``),
# done here too so that each floor runs at its best: without it, the young generation's
# collections and the full ones they lead to cost a floor time the service does not spend.
YOUNG_GENERATION_THRESHOLD = 10_000


async def settle_heap(app: web.Application) -> None:
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)


def bare_app() -> web.Application:
    async def files(request: web.Request) -> web.Response:
        return web.Response(
            body=orjson.dumps({"success": True, "data": DATA}), content_type="application/json"
        )

    app = web.Application()
    app.router.add_get("/api/v1/files", files)
    app.on_startup.append(settle_heap)
    return app


def lookup_app(redis_url: str, entry: str) -> web.Application:
    connection = PipelinedRedis(redis_url, 1.0)
    lookup = CommandTemplate("HMGET", ARG, *LOOKUP_FIELDS).pack(entry.encode())

    async def files(request: web.Request) -> web.Response:
        fields = await connection.execute_packed(lookup)
        if fields[0] is None:
            raise web.HTTPUnauthorized()
        return web.Response(
            body=orjson.dumps({"success": True, "data": DATA}), content_type="application/json"
        )

    async def closing(app: web.Application):  # type: ignore[no-untyped-def]
        yield
        await connection.aclose()

    app = web.Application()
    app.router.add_get("/api/v1/files", files)
    app.cleanup_ctx.append(closing)
    app.on_startup.append(settle_heap)
    return app


def worker(kind: str, port: int, redis_url: str | None, entry: str | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    app = bare_app() if kind == "bare" else lookup_app(redis_url or "", entry or "")
    web.run_app(
        app,
        host="127.0.0.1",
        port=port,
        reuse_port=True,
        access_log=None,
        print=None,
        loop=uvloop.new_event_loop(),  # as the service's workers: no policy installed
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=("bare", "lookup"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-url")
    parser.add_argument("--entry", help="the Redis hash ``lookup`` reads on every request")
    args = parser.parse_args()
    if args.kind == "lookup" and not (args.redis_url and args.entry):
        parser.error("lookup needs --redis-url and --entry")
    if args.workers == 1:  # in this process: what ``bench --instructions`` runs under valgrind
        worker(args.kind, args.port, args.redis_url, args.entry)
        return 0
    return run_workers(worker, (args.kind, args.port, args.redis_url, args.entry), args.workers)


if __name__ == "__main__":
    raise SystemExit(main())
