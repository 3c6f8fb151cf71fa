"""The operator's view: ``/healthz``, ``/readyz``, ``/metrics``, and the request middleware that
feeds the access log and the metrics.

- ``GET /healthz``: 200 ``{"status": "ok"}`` while the process serves; never touches Redis.
- ``GET /readyz``: 200 ``{"status": "ok"}`` when Redis answers a PING within
  ``FILEHOST_REDIS_TIMEOUT_SECONDS`` and the blob store answers (the object store its bucket's
  ``HEAD`` within ``FILEHOST_S3_TIMEOUT_SECONDS``), else 503 naming which is not:
  ``store_unavailable`` (``details.dependency`` ``redis``, ``Retry-After: 1``) or
  ``storage_unavailable`` (``details.dependency`` ``object_store`` and ``details.reason``).
- ``GET /metrics``: Prometheus text format (``service.observability.metrics``); absent (404) when
  ``FILEHOST_METRICS=off``. It exposes counts and timings by route template, status, credential
  type and error code: no user, key, address or secret. It needs no credential, like every
  scrape target, so keep it off the public side of the proxy (the examples in ``deploy/`` do).

What each request adds to the metrics and the access log is gathered by what every request goes
through (``service.api.handling.request_handling``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from redis.exceptions import RedisError

from service.api._aiohttp import Answer
from service.api.context import METRICS, POLICY, SETTINGS
from service.api.envelope import note_store_error
from service.errors import ApiError, Code
from service.observability.metrics import CONTENT_TYPE, FLUSH_SECONDS, Metrics
from service.observability.trace import current_trace

log = logging.getLogger("service.api")

LOGIN_ROUTE = "/api/v1/auth/login"
_OK_BODY = b'{"status":"ok"}'


# -- the endpoints -------------------------------------------------------------------------------


async def healthz(request: web.Request) -> web.Response:
    return Answer(_OK_BODY)


async def readyz(request: web.Request) -> web.Response:
    try:
        async with asyncio.timeout(request.app[SETTINGS].redis_timeout_seconds):
            await request.app[POLICY].readiness.ping_store()
    except (RedisError, OSError, TimeoutError) as error:
        note_store_error(current_trace.get(), error)  # type: ignore[arg-type]  # set by request_handling
        raise ApiError(Code.STORE_UNAVAILABLE, details={"dependency": "redis"}) from None
    problem = await request.app[POLICY].readiness.blob_problem()
    if problem is not None:
        raise ApiError(
            Code.STORAGE_UNAVAILABLE, details={"dependency": "object_store", "reason": problem}
        )
    return Answer(_OK_BODY)


async def metrics_endpoint(request: web.Request) -> web.Response:
    response = web.Response(body=request.app[METRICS].render())
    response.headers["Content-Type"] = CONTENT_TYPE
    return response


# -- wiring --------------------------------------------------------------------------------------


def add_ops(app: web.Application, metrics: Metrics | None) -> None:
    """Routes, and the metrics (None when off) with their periodic flush."""
    app.router.add_get("/healthz", healthz, allow_head=False)
    app.router.add_get("/readyz", readyz, allow_head=False)
    if metrics is not None:
        app[METRICS] = metrics
        app.router.add_get("/metrics", metrics_endpoint, allow_head=False)
    app.cleanup_ctx.append(_flushing)


async def _flushing(app: web.Application) -> AsyncIterator[None]:
    metrics = app.get(METRICS)
    if metrics is None:
        yield
        return
    flusher = asyncio.get_running_loop().create_task(_flush_periodically(metrics))
    yield
    flusher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await flusher
    metrics.flush()


async def _flush_periodically(metrics: Metrics) -> None:
    while True:
        await asyncio.sleep(FLUSH_SECONDS)
        try:
            metrics.flush()
        except Exception:
            log.exception("could not write the metrics")
