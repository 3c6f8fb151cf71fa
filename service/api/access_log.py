"""The access log aiohttp writes through: one JSON line per request into the service's line
buffer (``service.observability.log_lines``), made from the request's trace; nothing at WARNING
and above, never a header value."""

from __future__ import annotations

import logging
import time

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from service.observability.log_lines import LINES, access_line
from service.observability.trace import UNMATCHED_ROUTE, current_trace

_log = logging.getLogger("service.logs")


class AccessLogger(AbstractAccessLogger):
    """One JSON line per request into ``LINES`` (see the module's docstring); nothing at WARNING
    and above. aiohttp makes one per connection."""

    enabled = False  # a plain attribute, not AbstractAccessLogger's property: read per request

    def __init__(self, logger: logging.Logger, log_format: str) -> None:
        super().__init__(logger, log_format)
        self.enabled = logger.isEnabledFor(logging.INFO)

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        try:
            trace = current_trace.get()  # the request's own: aiohttp runs each in its own task
            if trace is None:  # refused before the application ran (aiohttp's HTTP parser)
                LINES.add(_unmatched_line(request, response, time))
            else:
                LINES.add_access(trace, request.method, request.path, response.status)
        except Exception as error:  # never let the log line break the answer's connection
            _log.error("could not describe a request for the access log: %s", type(error).__name__)


def _unmatched_line(request: web.BaseRequest, response: web.StreamResponse, took: float) -> bytes:
    return access_line(
        None,
        request.method,
        UNMATCHED_ROUTE,
        request.path,
        response.status,
        took * 1000,
        None,
        None,
        None,
        None,
        request.remote,
        time.time(),
    )
