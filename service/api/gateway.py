"""The gateway lane: the requests an API gateway sends over and over, answered straight from the
parsed request, without aiohttp's per-request objects.

Which requests: a keep-alive HTTP/1.1 ``GET`` without a body to exactly one of the lane's paths
(``GET /api/v1/auth/verify``, the forward-auth sub-request, and ``GET /api/v1/files`` without a
query), or to ``GET /a/{slug}`` of a vanity alias this worker last served a small file through
without a password (``routes.public_aliases.lane_route``). Every connection begins in the lane
(``service.api._aiohttp``'s ``LaneConnection``, on the ``httptools`` parser): the first request
it does not take (another method or path, a query string, HTTP/1.0, ``Connection: close``,
``Expect``, a body, a head its parser refuses) goes to aiohttp with everything after it, once the
answers owed before it are written, and aiohttp serves the rest of that connection. A route may
also hand its request back (its reply is None, before anything of it was counted or sent):
aiohttp then handles it, and the rest of the connection, as if the lane had never seen it.

What it does is what ``service.api.handling.request_handling`` does for those routes, through
the same functions: the trace (request id, client address with trusted proxies), the route
(``forward_auth.verify_reply``, ``files.first_page_reply``: the aiohttp handlers of the same
routes call them too), refusals as the error envelope (``envelope.refusal``), the headers (the
security block and ``headers.trace_headers``), the metrics and the access line. So the answer
is the same, byte for byte but for ``Date`` and the request id; ``tests/api/test_gateway_lane.py``
sends every case both ways and compares.

What it leaves out is aiohttp's machinery around a request: its parser's message, the ``Request``
and ``StreamWriter`` objects, the router, the ``Response`` object with its multidict of headers,
the two task switches of the connection's loop and the separate write of the answer's end. On
the gateway's path that machinery cost more than the credential check itself
(``docs/performance.md``).
``FILEHOST_GATEWAY_LANE=off`` sends every request through aiohttp instead.

Never logs or echoes a credential: it hands the headers to the same credential check as every
route, and logs only what the access log's lines hold (``service.observability.log_lines``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from time import perf_counter

from aiohttp import web
from multidict import CIMultiDictProxy

from service.api._aiohttp import EMPTY_BODY_STATUSES, Reply, serialise_head
from service.api.access_log import AccessLogger
from service.api.client_address import ClientAddresses
from service.api.credentials import count_refused_key
from service.api.envelope import error_body, refusal
from service.api.headers import RESOURCE_HEADERS, trace_headers
from service.auth.rate_limits import RateLimitFields
from service.observability.log_lines import LINES
from service.observability.metrics import Metrics
from service.observability.trace import RequestTrace, current_trace, request_id_from

# A gateway route: the application, the request's headers and its trace to the answer, or None
# to hand the request to aiohttp. Raises what any handler raises (an ``ApiError``, a Redis
# error), answered as the envelope.
LaneRoute = Callable[
    [web.Application, CIMultiDictProxy[str], RequestTrace], Awaitable[Reply | None]
]
# The route, if any, for a path under a prefix the lane serves some of (its rest and the
# request's headers).
PrefixRoutes = Callable[[str, CIMultiDictProxy[str]], LaneRoute | None]


_GET = "GET"
_CONTENT_TYPE = "Content-Type"


class GatewayLane:
    """The lane's routes by path, and how it answers one request (see the module)."""

    __slots__ = ("_addresses", "_app", "_metrics", "_prefixed", "_rate_fields", "routes")

    # Its access lines are this logger's (``log_access``): a server logging through another
    # leaves the lane unused (``service.api._aiohttp.Lane``).
    access_log_class = AccessLogger

    def __init__(
        self,
        app: web.Application,
        routes: dict[str, LaneRoute],
        addresses: ClientAddresses,
        metrics: Metrics | None,
        rate_fields: RateLimitFields | None,
        prefixed: tuple[str, PrefixRoutes] | None = None,
    ) -> None:
        self._app = app
        self.routes = routes
        self._addresses = addresses
        self._metrics = metrics
        self._rate_fields = rate_fields
        self._prefixed = prefixed

    def route_for(self, path: str, headers: CIMultiDictProxy[str]) -> LaneRoute | None:
        """The route for a ``GET`` of ``path`` (the request target as sent): one of ``routes``
        exactly, or one under the prefix whose routes are asked (``prefixed``); None when the
        lane does not take it."""
        route = self.routes.get(path)
        if route is None and self._prefixed is not None:
            prefix, routes = self._prefixed
            if path.startswith(prefix):
                return routes(path[len(prefix) :], headers)
        return route

    async def answer(
        self,
        route: LaneRoute,
        path: str,
        headers: CIMultiDictProxy[str],
        remote: str | None,
        log_access: bool,
    ) -> bytes | None:
        """The whole answer to a ``GET`` of ``path`` with ``headers`` (a request the lane takes,
        from the peer ``remote``), to be written as it is; counted in the metrics and, with
        ``log_access``, logged. None when the route hands the request to aiohttp (then nothing
        is counted or logged)."""
        trace = RequestTrace(
            request_id_from(headers), path, self._addresses.of_peer(remote, headers)
        )
        # The protocol runs each request of the lane in a context of its own (as aiohttp runs
        # each of its requests in a task): log records made while it is handled carry its id.
        current_trace.set(trace)
        try:
            reply = await route(self._app, headers, trace)
        except Exception as exc:  # as request_handling answers it
            reply = _refused(exc, trace, path)
            count_refused_key(self._app, trace)
        if reply is None:
            return None
        status, body, own, content_type = reply
        pairs = [(_CONTENT_TYPE, content_type), *own] if body is not None else [*own]
        pairs += trace_headers(trace, self._rate_fields)
        if status in EMPTY_BODY_STATUSES or status < 200:
            length, body = None, None
        else:
            length = 0 if body is None else len(body)
        head = serialise_head(status, RESOURCE_HEADERS, pairs, len(pairs), length, True)
        answered = perf_counter()  # one clock read for the metrics and the access line
        metrics = self._metrics
        if metrics is not None:
            metrics.answered(trace, _GET, status, answered)
        if log_access:
            LINES.add_access(trace, _GET, path, status, answered)
        return head + body if body else head


def _refused(exc: Exception, trace: RequestTrace, path: str) -> Reply:
    # Kept apart so that no frame of the lane holds the exception: with its traceback it would
    # make a reference cycle per refusal for the garbage collector.
    error = refusal(exc, trace, _GET, path)
    return Reply(error.status, error_body(error), tuple(error.headers.items()))
