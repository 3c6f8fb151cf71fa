"""What every request of the application goes through (``request_handling``): its trace, the
error envelope, the standard headers and its metrics; the gateway lane, which answers the
gateway's own requests without aiohttp's request objects, goes through the same functions
(``envelope.refusal``, ``envelope.error_body``, ``headers.trace_headers``, ``Metrics.answered``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from time import perf_counter

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from service.api._aiohttp import PlainRoutes, use_route
from service.api.client_address import ClientAddresses
from service.api.context import NOT_FOUND_PAGE
from service.api.credentials import count_refused_key
from service.api.envelope import error_response, refusal
from service.api.headers import REQUEST_ID, standard_headers
from service.auth.rate_limits import RateLimitFields
from service.observability.metrics import Metrics
from service.observability.trace import (
    UNMATCHED_ROUTE,
    RequestTrace,
    current_trace,
    loggable_path,
    request_id_from,
)

log = logging.getLogger("service.api")

LOGIN_ROUTE = "/api/v1/auth/login"


def request_handling(
    metrics: Metrics | None, rate_fields: RateLimitFields | None, addresses: ClientAddresses
) -> Callable[[Handler], Handler]:
    """What every request of the application goes through, around the application's own
    handling (routing, then the route's handler): the server wraps the application's handler
    in it (``service.api._aiohttp.EnvelopeAppRunner``, which finds it as
    ``app[REQUEST_HANDLING]``).

    In: the request's trace (id, client address) for the access log, the metrics and the log
    records made while it is handled. Out: every refusal as the error envelope (``ApiError``,
    aiohttp's routing errors, Redis failures as 503, anything else as a 500 whose traceback goes
    to the log only; a browser's GET of an unknown page outside the API gets the dashboard's "not
    found" page instead, ``NOT_FOUND_PAGE``), the headers every answer gets (the security
    headers, ``X-Request-ID``, and an accepted credential's ``RateLimit-Policy`` and
    ``RateLimit``), and the request's metrics.

    Not an aiohttp middleware: an application with one gets a second, aiohttp's own, and each
    costs a coroutine per request on the gateway's path (together about as much as the Redis
    lookup's share of a request). A handler that streams its answer prepares it with
    ``prepare_streamed``, which adds the headers first.
    """
    logins = metrics.login_in_flight if metrics is not None else None

    def wrap(application: Handler) -> Handler:
        plain = PlainRoutes.of(application)

        async def handle(request: web.Request) -> web.StreamResponse:
            trace = RequestTrace(
                request_id_from(request.headers), UNMATCHED_ROUTE, addresses.of(request)
            )
            # aiohttp handles each request in a task of its own (a copy of the context), so the
            # trace stays this request's until its access line is written, and is never another's.
            current_trace.set(trace)
            method = request.method
            login = logins is not None and method == "POST" and request.path == LOGIN_ROUTE
            if login:
                logins.inc()  # type: ignore[union-attr]  # login: logins is not None
            route = plain.get((method, request.rel_url.path_safe))
            try:
                if route is None or hdrs.EXPECT in request.headers:
                    route = None
                    response = await application(request)
                else:
                    use_route(request, route)
                    trace.route = route.canonical
                    response = await route.handler(request)
            except web.HTTPException as exc:
                if exc.status < 400:  # a redirect or the like: aiohttp answers it as it is
                    _route(request, trace)
                    standard_headers(exc, trace, rate_fields)
                    record_answer(metrics, request.method, exc.status, trace)
                    raise
                response = _not_found_page(request, exc) or error_response(
                    refusal(exc, trace, method, request.path)
                )
                count_refused_key(request.app, trace)
            except Exception as exc:
                response = error_response(refusal(exc, trace, method, request.path))
                count_refused_key(request.app, trace)
            except asyncio.CancelledError:
                # aiohttp cancels a handler only when the server stops with the request still
                # running past the grace period: no answer, so no access line; this is its trace.
                log.warning(
                    "cut off by the stop after %.1f s: %s %s",
                    perf_counter() - trace.started,
                    method,
                    loggable_path(request.path),
                )
                raise
            finally:
                if login:
                    logins.dec()  # type: ignore[union-attr]  # login: logins is not None
            if response.status >= 400 and (failed := request.content.exception()) is not None:
                # A body that could not be read (one that doesn't decode, say): nothing after it
                # on the connection can be read as a request. Closed after the answer, which
                # says so, so that a client sends nothing more on it.
                if isinstance(failed, web.RequestPayloadError):
                    log.info("a request body could not be read: %s", type(failed).__name__)
                response.force_close()
            if route is None:  # a plain route's is on the trace already
                _route(request, trace)
            if not response.prepared:
                standard_headers(response, trace, rate_fields)
            elif REQUEST_ID not in response.headers:
                log.error(
                    "%s answered without the standard headers: use prepare_streamed", trace.route
                )
            record_answer(metrics, method, response.status, trace)
            return response

        return handle

    return wrap


def _not_found_page(request: web.Request, exc: web.HTTPException) -> web.StreamResponse | None:
    """The page for a path no route matched, when the application has one for it (the
    dashboard's, outside ``/api``); None for the envelope's answer."""
    if not isinstance(exc, web.HTTPNotFound):
        return None
    page = request.app.get(NOT_FOUND_PAGE)
    return page(request) if page is not None else None


def _route(request: web.Request, trace: RequestTrace) -> None:
    """The trace's route: the template of the route the application matched."""
    match_info = request.match_info
    if match_info is not None:
        resource = match_info.route.resource
        if resource is not None:
            trace.route = resource.canonical


def record_answer(metrics: Metrics | None, method: str, status: int, trace: RequestTrace) -> None:
    """Count a request answered just now in the metrics."""
    if metrics is not None:
        metrics.answered(trace, method, status, perf_counter())
