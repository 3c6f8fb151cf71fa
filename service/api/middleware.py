"""The one place where errors become the JSON error envelope, and the headers every response gets:
what every request goes through (``request_handling``; the gateway lane, which answers the
gateway's own requests without aiohttp's request objects, goes through the same functions:
``refusal``, ``error_body``, ``trace_headers``, and the ``Metrics.answered`` that
``record_answer`` calls, which the lane calls itself to share its clock reading).

``{"success": false, "error": {"code", "message", "details"?}}`` for every refusal: our own
``ApiError``s, aiohttp's routing errors (404, 405, 413), Redis failures (503, fail closed) and
anything unexpected (500, with nothing internal in the body; the traceback goes to the log only,
and request headers and bodies never do).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import perf_counter
from typing import NamedTuple

import orjson
from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from aiohttp.web_urldispatcher import PlainResource, UrlMappingMatchInfo
from multidict import istr
from redis.exceptions import RedisError

from service.api.answers import Answer, header_block
from service.api.client_address import ClientAddresses
from service.auth.rate_limits import RateLimitFields
from service.errors import (
    ApiError,
    ClientClosedRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    StoreUnavailable,
)
from service.logs import (
    REQUEST_ID_HEADER,
    UNMATCHED_ROUTE,
    RequestTrace,
    current_trace,
    loggable_path,
    request_id_from,
)
from service.metrics import Metrics

log = logging.getLogger("service.api")

LOGIN_ROUTE = "/api/v1/auth/login"


# The bodies of refusals without details, by code and message: the common ones (an unknown or
# malformed credential) come again and again. Messages never hold anything secret.
_REFUSAL_BODIES: dict[tuple[str, str], bytes] = {}
_REFUSAL_BODIES_KEPT = 1024


def error_body(error: ApiError) -> bytes:
    """The envelope of a refusal, serialised."""
    if error.details is None:
        key = (error.code, error.message)
        body = _REFUSAL_BODIES.get(key)
        if body is None:
            body = orjson.dumps(
                {"success": False, "error": {"code": error.code, "message": error.message}}
            )
            if len(_REFUSAL_BODIES) < _REFUSAL_BODIES_KEPT:
                _REFUSAL_BODIES[key] = body
        return body
    return orjson.dumps(
        {
            "success": False,
            "error": {"code": error.code, "message": error.message, "details": error.details},
        }
    )


def error_response(error: ApiError) -> Answer:
    response = Answer(error_body(error), error.status)
    if error.headers:
        response.headers.update(error.headers)
    return response


def _from_http_exception(exc: web.HTTPException) -> ApiError:
    if isinstance(exc, web.HTTPNotFound):
        return NotFound("No such endpoint.", code="route_not_found")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        return MethodNotAllowed(f"Allowed methods: {allowed}.", headers={"Allow": allowed})
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return PayloadTooLarge()
    error = ApiError(exc.reason, code=exc.reason.lower().replace(" ", "_"))
    error.status = exc.status
    return error


def as_api_error(exc: Exception) -> ApiError:
    """The refusal an exception is answered with: the one mapping, used by the envelope below,
    by the credential check's trace and by the forward-auth route. A Redis failure is 503 (fail
    closed); anything unexpected is 500."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, web.HTTPException):
        return _from_http_exception(exc)
    if isinstance(exc, RedisError):
        return StoreUnavailable()
    return ApiError()


# The dashboard's pages load only their own script, stylesheet and icon and talk only to their
# own origin: no inline script, style or event handler, no eval, no plugins, no <base>, no native
# form submission (the forms are sent by the script), never framed, and DOM sinks that take HTML
# strings (innerHTML and the like) refused outright.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
    "require-trusted-types-for 'script'; trusted-types 'none'"
)
# Everything else (JSON, scripts, stylesheets) is never meant to be rendered as a document.
RESOURCE_CSP = "default-src 'none'; frame-ancestors 'none'"


# Responses may carry secrets or tokens: never cached, never sniffed, never framed, never leaking
# a Referer; every one has a strict Content-Security-Policy. Made once, added in one call.
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
# Serialised once for the API's answers; names as multidict's case-insensitive strings for any
# other response, so none works out their lower case again.
RESOURCE_HEADERS = header_block({**_SECURITY_HEADERS, "Content-Security-Policy": RESOURCE_CSP})
_PAGE_HEADERS = tuple(
    (istr(name), value)
    for name, value in {**_SECURITY_HEADERS, "Content-Security-Policy": PAGE_CSP}.items()
)
_REQUEST_ID = istr(REQUEST_ID_HEADER)
_RATE_LIMIT_POLICY = istr("RateLimit-Policy")
_RATE_LIMIT = istr("RateLimit")


def request_handling(
    metrics: Metrics | None, rate_fields: RateLimitFields | None, addresses: ClientAddresses
) -> Callable[[Handler], Handler]:
    """What every request of the application goes through, around the application's own
    handling (routing, then the route's handler): the server wraps the application's handler
    in it (``service.api.low_level.EnvelopeAppRunner``, which finds it as
    ``app[REQUEST_HANDLING]``).

    In: the request's trace (id, client address) for the access log, the metrics and the log
    records made while it is handled. Out: every refusal as the error envelope (``ApiError``,
    aiohttp's routing errors, Redis failures as 503, anything else as a 500 whose traceback goes
    to the log only), the headers every answer gets (the security headers, ``X-Request-ID``, and
    an accepted credential's ``RateLimit-Policy`` and ``RateLimit``), and the request's metrics.

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
                logins.inc()  # type: ignore[union-attr]
            route = plain.get((method, request.rel_url.path_safe))
            try:
                if route is None or hdrs.EXPECT in request.headers:
                    route = None
                    response = await application(request)
                else:
                    request._match_info = route.match_info
                    trace.route = route.canonical
                    response = await route.handler(request)
            except web.HTTPException as exc:
                if exc.status < 400:  # a redirect or the like: aiohttp answers it as it is
                    _route(request, trace)
                    standard_headers(exc, trace, rate_fields)
                    record_answer(metrics, request.method, exc.status, trace)
                    raise
                response = error_response(refusal(exc, trace, method, request.path))
            except Exception as exc:
                response = error_response(refusal(exc, trace, method, request.path))
            finally:
                if login:
                    logins.dec()  # type: ignore[union-attr]
            if route is None:  # a plain route's is on the trace already
                _route(request, trace)
            if not response.prepared:
                standard_headers(response, trace, rate_fields)
            elif _REQUEST_ID not in response.headers:
                log.error(
                    "%s answered without the standard headers: use prepare_streamed", trace.route
                )
            record_answer(metrics, method, response.status, trace)
            return response

        return handle

    return wrap


def refusal(exc: Exception, trace: RequestTrace, method: str, path: str) -> ApiError:
    """The refusal an exception that escaped a route's handler is answered with (see
    ``request_handling``), logged as it deserves: a client gone while its body was read at INFO,
    a Redis failure as an error, anything unexpected with its traceback."""
    if isinstance(exc, ApiError):
        if exc.status == 403 and trace.outcome == "ok":  # ``require`` after the check
            trace.outcome = exc.code
        if exc.status >= 500:
            log.warning("refused %s %s: %s", method, loggable_path(path), exc.code)
        return exc
    if isinstance(exc, web.HTTPException):
        return as_api_error(exc)
    if isinstance(exc, ConnectionResetError):  # the client went away while its body was read
        log.info("client went away during %s %s", method, loggable_path(path))
        return ClientClosedRequest()
    if isinstance(exc, RedisError):
        log.error(
            "credential store error on %s %s: %s", method, loggable_path(path), type(exc).__name__
        )
        return as_api_error(exc)
    log.error("unexpected error on %s %s", method, loggable_path(path), exc_info=exc)
    return as_api_error(exc)


def trace_headers(
    trace: RequestTrace, rate_fields: RateLimitFields | None
) -> list[tuple[str, str]]:
    """The headers an answer gets from its request's trace: ``X-Request-ID`` and, for an
    accepted credential, ``RateLimit-Policy`` and ``RateLimit``."""
    headers = [(_REQUEST_ID, trace.request_id)]
    rate = trace.rate
    if rate is not None and rate_fields is not None:
        headers.append((_RATE_LIMIT_POLICY, rate.policy or rate_fields.policy))  # a key's own
        headers.append((_RATE_LIMIT, rate_fields.current(rate)))  # type: ignore[arg-type]
    return headers


class PlainRoute(NamedTuple):
    handler: Handler
    match_info: UrlMappingMatchInfo
    canonical: str


class PlainRoutes:
    """The application's routes without variables, by method and path: what aiohttp's router
    would find for them, found by one dict lookup.

    aiohttp resolves every request anew (two coroutines, and a match-info object made, stacked
    and frozen), which on the gateway's path costs about a tenth of the request. A route without
    variables always resolves to the same route of the same application, so its match-info is
    made once, frozen, and shared (nothing writes to a frozen one; handlers only read
    ``request.app``). Anything else (a route with variables, a sub-application, an application
    with middlewares, a request with ``Expect``) is resolved by aiohttp as before.
    ``tests/api/test_plain_routes.py`` checks that both ways find the same route."""

    @staticmethod
    def of(application: Handler) -> dict[tuple[str, str], PlainRoute]:
        app = getattr(application, "__self__", None)  # the application's own _handle
        if not isinstance(app, web.Application) or app.middlewares:
            return {}
        routes: dict[tuple[str, str], PlainRoute] = {}
        for resource in app.router.resources():
            if not isinstance(resource, PlainResource):
                continue
            for route in resource:
                if route.method == hdrs.METH_ANY:
                    continue
                match_info = UrlMappingMatchInfo({}, route)
                match_info.add_app(app)
                match_info.freeze()
                key = (route.method, resource.canonical)
                routes.setdefault(key, PlainRoute(route.handler, match_info, resource.canonical))
        return routes


REQUEST_HANDLING = web.AppKey("request_handling", Callable[[Handler], Handler])  # type: ignore[arg-type]


def _route(request: web.Request, trace: RequestTrace) -> None:
    """The trace's route: the template of the route the application matched."""
    match_info = request.match_info
    if match_info is not None:
        resource = match_info.route.resource
        if resource is not None:
            trace.route = resource.canonical


RATE_FIELDS = web.AppKey("rate_fields", RateLimitFields | None)  # type: ignore[arg-type]


async def prepare_streamed(request: web.Request, response: web.StreamResponse) -> None:
    """Send a streamed answer's status and headers, the standard ones included: a response
    the handler prepares itself has sent its headers before the request handling sees it."""
    standard_headers(response, current_trace.get(), request.app[RATE_FIELDS])  # type: ignore[arg-type]
    await response.prepare(request)


def standard_headers(
    response: web.StreamResponse | web.HTTPException,
    trace: RequestTrace,
    rate_fields: RateLimitFields | None,
) -> None:
    """Add the headers every answer of the application gets (see ``request_handling``)."""
    headers = response.headers
    if type(response) is Answer:
        response.block = RESOURCE_HEADERS
    else:
        html = headers.get(hdrs.CONTENT_TYPE, "").startswith("text/html")
        # No handler sets any of these, so they are added without looking for earlier values.
        headers.extend(_PAGE_HEADERS if html else RESOURCE_HEADERS.pairs)
    for name, value in trace_headers(trace, rate_fields):
        headers[name] = value


def record_answer(metrics: Metrics | None, method: str, status: int, trace: RequestTrace) -> None:
    """Count a request answered just now in the metrics."""
    if metrics is not None:
        metrics.answered(trace, method, status, perf_counter())
