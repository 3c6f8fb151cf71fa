"""Structured logs: one JSON object per line on standard error, from the standard ``logging``.

Every record has ``ts`` (UTC, milliseconds), ``level``, ``pid``, ``logger`` and ``msg``; a record
logged while a request is being handled also has that request's ``request_id`` (a context
variable set by ``service.api.handling.request_handling``, or by the gateway lane for the
requests it answers), and ``exc`` holds a traceback
when there is one. The access log (``AccessLogger``) writes one line per request with ``msg``
``"request"`` and the fields of ``ACCESS_FIELDS``: the route template and the path (never the
query string; anything credential-shaped in it masked, see ``loggable_path``), status,
duration, the credential's type, and for an accepted one its user's id and (an API key's) key
id (never a secret: no header value is ever logged), the credential check's outcome and the
client's address.

Lines are gathered in memory (``LineBuffer``) and written to standard error in one ``write``:
every ``FLUSH_SECONDS``, whenever ``FLUSH_BYTES`` have gathered, before any other record (so
lines keep their order), and when the worker stops. The standard ``logging`` machinery (a
``LogRecord``, a formatter and a stream write per line) cost more than the rest of a gateway
request; the access line is serialised straight from the request's trace instead, in batches of
``RENDER_EVERY`` (``LineBuffer``). So an access line can appear up to ``FLUSH_SECONDS`` after its
answer was sent (its ``ts`` is still when it was answered), and none is lost on SIGTERM or
SIGINT; a worker killed with SIGKILL loses at most that last fraction of a second.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import sys
import threading
import time
from time import perf_counter
from typing import Any

import orjson

from service.observability.trace import (
    RequestTrace,
    current_trace,
    loggable_path,
)

_log = logging.getLogger("service.logs")

ACCESS_FIELDS = (
    "request_id",
    "method",
    "route",
    "path",
    "status",
    "duration_ms",
    "credential",
    "user_id",
    "key_id",
    "auth",
    "remote",
)


def _timestamp(created: float) -> str:
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


# How late a buffered line may be written, and how much may gather before it is written at once.
FLUSH_SECONDS = 0.1
FLUSH_BYTES = 64 * 1024
# How many requests' access lines wait as entries before they are serialised together. At two
# workers, 50 gave the throughput of 200 (of 25: 2% less) and 0.3-0.4 ms less p99: a batch is
# serialised while the requests in hand wait, and a smaller one keeps them waiting less.
RENDER_EVERY = 50

# A request's access line before it is serialised: its trace, method, path, status and the
# ``perf_counter`` reading when it was answered.
AccessEntry = tuple[RequestTrace, str, str, int, float]


class LineBuffer:
    """Log lines on their way to a file descriptor, written together (see the module's
    docstring).

    An access line is kept as an entry (``add_access``: the request's trace and what the line
    adds to it, one tuple) and serialised with up to ``RENDER_EVERY`` others in one go, so the
    request's own path pays for an append only: the same serialising work, done together,
    runs at a higher rate (docs/performance.md has the figures).

    Lines may be added from any thread (bcrypt's threads log too). Appending is one atomic
    operation; serialising and writing happen under a lock and take only what was there when
    they started, so a line added meanwhile waits for the next flush and none is lost. Other
    records serialise the entries before them first, so lines keep their order.
    """

    __slots__ = ("_entries", "_fd", "_lock", "_out", "_timer")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._entries: list[AccessEntry] = []
        self._out = bytearray()
        self._lock = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, line: bytes) -> None:
        """A serialised line, after every access line added before it."""
        with self._lock:
            self._render()
            out = self._out
            out += line
            if len(out) >= FLUSH_BYTES:
                self._write()

    def add_access(
        self, trace: RequestTrace, method: str, path: str, status: int, at: float | None = None
    ) -> None:
        """The access line of a request the application answered at ``at`` (a ``perf_counter``
        reading; just now when not given), from its trace."""
        entries = self._entries
        entries.append((trace, method, path, status, perf_counter() if at is None else at))
        if len(entries) >= RENDER_EVERY:
            with self._lock:
                self._render()
                if len(self._out) >= FLUSH_BYTES:
                    self._write()

    def flush(self) -> None:
        with self._lock:
            self._render()
            self._write()

    def _render(self) -> None:
        # Under the lock. Takes the entries there now; any appended meanwhile stay for the next.
        entries = self._entries
        count = len(entries)
        if not count:
            return
        batch = entries[:count]
        del entries[:count]
        out = self._out
        # ``perf_counter`` to the wall clock, once per batch: a line's ``ts`` is when it was
        # answered, not when it was serialised.
        to_wall_clock = time.time() - perf_counter()
        for trace, method, path, status, answered in batch:
            try:
                out += access_line(
                    trace.request_id,
                    method,
                    trace.route,
                    path,
                    status,
                    (answered - trace.started) * 1000,
                    trace.credential,
                    trace.user_id,
                    trace.key_id,
                    trace.outcome,
                    trace.remote,
                    answered + to_wall_clock,
                )
            except Exception as error:  # one bad entry must not cost the others their lines
                out += _unloggable_request(error)

    def _write(self) -> None:
        # Under the lock.
        out = self._out
        if not out:
            return
        data = memoryview(bytes(out))
        out.clear()
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError:  # standard error closed or full: nothing better to do with a log line
            pass

    def start_flushing(self, loop: asyncio.AbstractEventLoop) -> None:
        """Flush every ``FLUSH_SECONDS`` on ``loop`` until ``stop_flushing``."""

        def tick() -> None:
            self.flush()
            self._timer = loop.call_later(FLUSH_SECONDS, tick)

        self.stop_flushing()
        self._timer = loop.call_later(FLUSH_SECONDS, tick)

    def stop_flushing(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()


# Every line this process logs, once ``configure_logging`` ran. Written out at exit too.
LINES = LineBuffer(2)
atexit.register(LINES.flush)


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


class JsonLinesHandler(logging.Handler):
    """A record as one JSON line into ``LINES``, written out at once with what gathered before
    it: records other than access lines are rare and may matter now (errors, start-up)."""

    def __init__(self, lines: LineBuffer) -> None:
        super().__init__()
        self.lines = lines
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record).encode() + b"\n"
        except Exception:
            self.handleError(record)
            return
        self.lines.add(line)
        self.lines.flush()


def configure_logging(level: str) -> None:
    """JSON lines on standard error for every logger, at ``level``; Python's warnings and any
    exception nothing caught become such lines too, so that nothing else reaches standard
    error."""
    global _pid, _LINE_HEADS
    _pid = os.getpid()
    _LINE_HEADS = _line_heads(_pid)
    LINES.flush()
    LINES._fd = sys.stderr.fileno()
    logging.basicConfig(level=level, handlers=[JsonLinesHandler(LINES)], force=True)
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(kind: type[BaseException], error: BaseException, trace: Any) -> None:
    logging.getLogger("service").critical("uncaught exception", exc_info=(kind, error, trace))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    logging.getLogger("service").critical(
        "uncaught exception in thread %s",
        args.thread.name if args.thread is not None else "?",
        exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
    )


def write_line(level: int, logger: str, message: str, **fields: Any) -> None:
    """One record as a JSON line on standard error, at once, without ``configure_logging``:
    for what ``serve`` must say before its settings (the log level among them) are read."""
    record = logging.LogRecord(logger, level, __file__, 0, message, None, None)
    record.fields = fields
    line = JsonFormatter().format(record).encode() + b"\n"
    LINES.flush()
    try:
        os.write(sys.stderr.fileno(), line)
    except OSError:  # standard error closed: nothing better to do with a log line
        pass


_pid = os.getpid()
ACCESS_LOGGER_NAME = "aiohttp.access"


def _line_heads(pid: int) -> tuple[bytes, ...]:
    """What an access line holds after its timestamp's second and before its own fields, by
    millisecond: the milliseconds, then the fields every access line of this process shares."""
    shared = f'"level":"INFO","pid":{pid},"logger":"{ACCESS_LOGGER_NAME}","msg":"request",'
    return tuple(f'.{millis:03d}Z",{shared}'.encode() for millis in range(1000))


_LINE_HEADS = _line_heads(_pid)
# The start of an access line down to the second of its timestamp, made once a second.
_second = -1
_second_start = b""


def _line_start(now: float) -> bytes:
    """An access line up to its own fields, for one logged at ``now``."""
    global _second, _second_start
    seconds = int(now)
    if seconds != _second:
        _second_start = (
            f'{{"ts":"{time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))}'.encode()
        )
        _second = seconds
    return _second_start + _LINE_HEADS[int((now - seconds) * 1000)]


def _unloggable_request(error: Exception) -> bytes:
    """An ERROR line, written as any record is, in place of an access line that could not be
    made."""
    record = _log.makeRecord(
        _log.name,
        logging.ERROR,
        __file__,
        0,
        "could not describe a request for the access log: %s",
        (type(error).__name__,),
        None,
        # No request id: the request being handled now (if any) is not the one that failed.
        extra={"fields": {}},
    )
    return JsonFormatter().format(record).encode() + b"\n"


def access_line(
    request_id: str | None,
    method: str,
    route: str,
    path: str,
    status: int,
    duration_ms: float,
    credential: str | None,
    user_id: str | None,
    key_id: str | None,
    outcome: str | None,
    remote: str | None,
    wall_time: float,
) -> bytes:
    # A matched route without parameters matched its template exactly: nothing to mask there.
    if path != route:
        path = loggable_path(path)
    # The fields every line shares come pre-serialised (``_line_start``); this request's own
    # follow, serialised by orjson, whose opening brace the start already has.
    return (
        _line_start(wall_time)
        + orjson.dumps(
            {
                "request_id": request_id,
                "method": method,
                "route": route,
                "path": path,
                "status": status,
                # To the µs, without round(), which works out a float's digits as text.
                "duration_ms": int(duration_ms * 1000 + 0.5) / 1000,
                "credential": credential,
                "user_id": user_id,
                "key_id": key_id,
                "auth": outcome,
                "remote": remote,
            },
            option=orjson.OPT_APPEND_NEWLINE,
        )[1:]
    )
