"""Structured logs: one JSON object per line on standard error, from the standard ``logging``.

Every record has ``ts`` (UTC, milliseconds), ``level``, ``pid``, ``logger`` and ``msg``; a record
logged while a request is being handled also has that request's ``request_id`` (a context
variable set by the request middleware in ``service.api.ops``), and ``exc`` holds a traceback
when there is one. The access log (``AccessLogger``) writes one line per request with ``msg``
``"request"`` and the fields of ``ACCESS_FIELDS``: the route template and the path (never the
query string; anything credential-shaped in it masked, see ``loggable_path``), status,
duration, the credential's type and key id when one was presented (never a secret: no header
value is ever logged), the credential check's outcome and the client's address.

A request's id is the client's ``X-Request-ID`` when that is 1-128 characters of
``[A-Za-z0-9._:-]`` (so a gateway's id carries through), else a new uuid4 in hex; it is returned
in ``X-Request-ID`` on every response the application answers.
"""

from __future__ import annotations

import logging
import random
import re
import sys
import time
from contextvars import ContextVar
from time import perf_counter

import orjson
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from service.api.client_address import client_address
from service.api.context import SETTINGS

REQUEST_ID_HEADER = "X-Request-ID"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
UNMATCHED_ROUTE = "unmatched"
_log = logging.getLogger("service.logs")
_MAX_LOGGED_PATH = 1024
# A credential pasted into a path (``DELETE /keys/<secret>``) must not reach the log: anything
# credential-shaped is masked, i.e. ``fhk_``/``fhs_`` and what follows, and any run of 40 or more
# letters and digits (a secret without its prefix, a SHA-256 digest). Ids (22 characters) stay.
_CREDENTIAL_SHAPED = re.compile(r"fh[ks]_[0-9A-Za-z]*|[0-9A-Za-z]{40,}")
MASK = "[masked]"

ACCESS_FIELDS = (
    "request_id",
    "method",
    "route",
    "path",
    "status",
    "duration_ms",
    "credential",
    "key_id",
    "auth",
    "remote",
)


def loggable_path(path: str) -> str:
    """The path as the access log shows it: credential-shaped pieces masked, then cut short."""
    return _CREDENTIAL_SHAPED.sub(MASK, path)[:_MAX_LOGGED_PATH]


_UUID4_CLEAR = ~((0xF << 76) | (0xC << 60)) & ((1 << 128) - 1)
_UUID4_SET = (0x4 << 76) | (0x8 << 60)  # version 4, RFC 4122 variant


def new_request_id() -> str:
    """A random (version 4) UUID in hex, made without a ``uuid.UUID`` object or a system call.

    Request ids need to be unique, not unpredictable, so ``random`` (seeded from the system's
    entropy in each process, and again after a fork) is enough and is on every request's path."""
    return f"{random.getrandbits(128) & _UUID4_CLEAR | _UUID4_SET:032x}"


def request_id_from(values: list[str]) -> str:
    """The client's request id when it sent exactly one sane one, else a fresh one."""
    if len(values) == 1 and _SANE_REQUEST_ID.fullmatch(values[0]):
        return values[0]
    return new_request_id()


class RequestTrace:
    """What one request's handling learned, for its access-log line and its metrics.

    ``credential`` is set when a credential check ran: ``api_key``, ``session``, ``both`` or
    ``none`` (from the headers presented), with ``outcome`` ``"ok"`` or the refusal's code.
    """

    __slots__ = (
        "auth_seconds",
        "credential",
        "key_id",
        "outcome",
        "request_id",
        "route",
        "started",
    )

    def __init__(self, request_id: str, route: str) -> None:
        self.request_id = request_id
        self.route = route
        self.started = perf_counter()
        self.credential: str | None = None
        self.outcome: str | None = None
        self.key_id: str | None = None
        self.auth_seconds = 0.0


TRACE = web.RequestKey("trace", RequestTrace)
# The trace of the request this task is handling, for the formatter's request id.
current_trace: ContextVar[RequestTrace | None] = ContextVar("filehost_trace", default=None)


def _timestamp(created: float) -> str:
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": _timestamp(record.created),
            "level": record.levelname,
            "pid": record.process,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = record.__dict__.get("fields")
        if fields is not None:
            entry.update(fields)
        else:
            trace = current_trace.get()
            if trace is not None:
                entry["request_id"] = trace.request_id
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(level: str) -> None:
    """JSON lines on standard error for every logger, at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)


class AccessLogger(AbstractAccessLogger):
    """One JSON line per request (see the module's docstring); nothing at WARNING and above."""

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        try:
            fields = _access_fields(request, response, time)
        except Exception as error:  # never let the log line break the answer's connection
            _log.error("could not describe a request for the access log: %s", type(error).__name__)
            return
        self.logger.info("request", extra={"fields": fields})


def _access_fields(
    request: web.BaseRequest, response: web.StreamResponse, time: float
) -> dict[str, object]:
    trace = request.get(TRACE)
    if trace is None:  # refused before the application ran (aiohttp's HTTP parser)
        return {
            "request_id": None,
            "method": request.method,
            "route": UNMATCHED_ROUTE,
            "path": loggable_path(request.path),
            "status": response.status,
            "duration_ms": round(time * 1000, 3),
            "credential": None,
            "key_id": None,
            "auth": None,
            "remote": request.remote,
        }
    return {
        "request_id": trace.request_id,
        "method": request.method,
        "route": trace.route,
        "path": loggable_path(request.path),
        "status": response.status,
        # Timed from the middleware: aiohttp's ``time`` uses the loop's clock, whole ms on uvloop.
        "duration_ms": round((perf_counter() - trace.started) * 1000, 3),
        "credential": trace.credential,
        "key_id": trace.key_id,
        "auth": trace.outcome,
        # The middleware ran, so the request knows its application and its settings.
        "remote": client_address(request, request.app[SETTINGS].trusted_proxies),  # type: ignore[attr-defined]
    }
