"""The operator's view: ``/healthz``, ``/readyz``, ``/metrics``, and the request middleware that
feeds the access log and the metrics.

- ``GET /healthz``: 200 ``{"status": "ok"}`` while the process serves; never touches Redis.
- ``GET /readyz``: 200 ``{"status": "ok"}`` when Redis answers a PING within
  ``FILEHOST_REDIS_TIMEOUT_SECONDS``, else 503 ``store_unavailable`` (``Retry-After: 1``).
- ``GET /metrics``: Prometheus text format (``service.metrics``); absent (404) when
  ``FILEHOST_METRICS=off``. It exposes counts and timings by route template, status, credential
  type and error code: no user, key, address or secret. It needs no credential, like every
  scrape target, so keep it off the public side of the proxy (``deploy/nginx.conf`` does).

``observe_requests`` must be the outermost middleware (before ``error_envelope``) so it sees the
final status of every answer, error envelopes included; ``observe_refusals`` sits inside
``error_envelope`` to read the error code a handler raised. Neither changes an answer, and a
failure of their own bookkeeping is logged, never answered. ``X-Request-ID`` is added to every
answer with the other standard headers (``service.api.middleware.response_headers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from time import perf_counter

from aiohttp import web
from aiohttp.typedefs import Handler
from redis.exceptions import RedisError

from service.api.context import SETTINGS, STORE
from service.config import Settings
from service.errors import ApiError, StoreUnavailable
from service.logs import (
    REQUEST_ID_HEADER,
    TRACE,
    UNMATCHED_ROUTE,
    RequestTrace,
    current_trace,
    request_id_from,
)
from service.metrics import CONTENT_TYPE, FLUSH_SECONDS, Metrics

log = logging.getLogger("service.api")

METRICS = web.AppKey("metrics", Metrics)
LOGIN_ROUTE = "/api/v1/auth/login"
_OK_BODY = b'{"status":"ok"}'


# -- the endpoints -------------------------------------------------------------------------------


async def healthz(request: web.Request) -> web.Response:
    return web.Response(body=_OK_BODY, content_type="application/json")


async def readyz(request: web.Request) -> web.Response:
    try:
        async with asyncio.timeout(request.app[SETTINGS].redis_timeout_seconds):
            await request.app[STORE].ping()
    except (RedisError, OSError, TimeoutError):
        raise StoreUnavailable() from None
    return web.Response(body=_OK_BODY, content_type="application/json")


async def metrics(request: web.Request) -> web.Response:
    response = web.Response(body=request.app[METRICS].render())
    response.headers["Content-Type"] = CONTENT_TYPE
    return response


# -- the middlewares -----------------------------------------------------------------------------


@web.middleware
async def observe_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id in and out, the trace for the access log, and the request's metrics."""
    resource = request.match_info.route.resource
    trace = RequestTrace(
        request_id_from(request.headers.getall(REQUEST_ID_HEADER, ())),
        resource.canonical if resource is not None else UNMATCHED_ROUTE,
    )
    request[TRACE] = trace
    metrics = request.app.get(METRICS)
    login = metrics is not None and trace.route == LOGIN_ROUTE and request.method == "POST"
    if login:
        metrics.login_in_flight.inc()  # type: ignore[union-attr]
    token = current_trace.set(trace)
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # only a non-error status gets past error_envelope
        _account(metrics, request.method, exc.status, trace)
        raise
    finally:
        current_trace.reset(token)
        if login:
            metrics.login_in_flight.dec()  # type: ignore[union-attr]
    _account(metrics, request.method, response.status, trace)
    return response


def _account(metrics: Metrics | None, method: str, status: int, trace: RequestTrace) -> None:
    if metrics is None:
        return
    try:
        metrics.request(trace.route, method, status, perf_counter() - trace.started)
        if trace.outcome is not None:
            metrics.auth(trace.credential or "none", trace.outcome, trace.auth_seconds)
    except Exception:  # bookkeeping never turns an answer into an error
        log.exception("could not record the request's metrics")


@web.middleware
async def observe_refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A 403 raised after the credential was accepted (``require``) is the check's outcome."""
    try:
        return await handler(request)
    except ApiError as error:
        trace = request.get(TRACE)
        if error.status == 403 and trace is not None and trace.outcome == "ok":
            trace.outcome = error.code
        raise


# -- wiring --------------------------------------------------------------------------------------


def add_ops(app: web.Application, settings: Settings) -> None:
    """Routes, metrics and the metrics' periodic flush."""
    app.router.add_get("/healthz", healthz, allow_head=False)
    app.router.add_get("/readyz", readyz, allow_head=False)
    if settings.metrics_enabled:
        app[METRICS] = Metrics()
        app.router.add_get("/metrics", metrics, allow_head=False)
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
