"""Prometheus metrics, scraped at ``GET /metrics`` (see ``service.api.routes.ops``).

| metric | labels | what |
|---|---|---|
| ``filehost_http_requests_total`` | route, method, status | requests answered by the application |
| ``filehost_http_request_duration_seconds`` | route | time in the application per request |
| ``filehost_auth_checks_total`` | credential, outcome | credential checks and how they ended |
| ``filehost_auth_check_duration_seconds`` | credential | time of one credential check |
| ``filehost_login_in_flight`` | | logins being handled: bcrypt running or queued |
| ``filehost_redis_command_duration_seconds`` | | send to reply of each hot-path Redis command |
| ``filehost_logins_total`` | outcome | logins by outcome (``LOGIN_OUTCOMES``) |
| ``filehost_uploads_total`` | outcome | uploads by outcome: ``stored`` or the refusal's code |
| ``filehost_upload_bytes_total`` | | bytes of the files stored |
| ``filehost_store_errors_total`` | route, kind | requests the store failed: ``STORE_ERROR_KINDS`` |
| ``filehost_build_info`` | version, python, aiohttp | always 1: what is running |

``route`` is the route's template (``/api/v1/keys/{key_id}``), never the raw path, and
``unmatched`` for anything no route took (404, 405), so a scanner cannot make new series.
``method`` is one of the methods the API knows or ``other``. ``credential`` is what the request
presented: ``api_key``, ``session``, ``both`` or ``none`` (``download_ticket`` for a download by
a ticket); ``outcome`` is ``ok`` or the refusal's
error code (``invalid_api_key``, ``api_key_expired``, ``invalid_session``, ``session_expired``,
``credential_missing``, ``insufficient_permission``, ``session_required``, ``rate_limited``,
``store_unavailable``, …). For a well-formed credential the check is one Redis round trip
(``HMGET``) plus a SHA-256, so its histogram is the service's view of Redis latency on the hot
path; a malformed credential is refused before Redis and lands in the lowest bucket.

Cheap on the hot path: a request only appends an entry (its trace, method, status and when it
was answered) to a list in its worker. Every ``TALLY_EVERY`` entries are counted together into
plain dicts, and the counts are written into prometheus-client's metrics once a second
(``FLUSH_SECONDS``), before a scrape this worker answers, and at shutdown; a scrape answered by
this worker therefore counts every request it answered before. Counting each request as it
was answered cost the gateway's path a share of its throughput that batching takes away
(docs/performance.md).

With one process the metrics live in this object's registry. With several workers, ``serve``
points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before starting them; prometheus-client
then keeps each worker's values in files there, and a scrape answered by any worker sums every
worker's files (so a scrape can lag another worker's requests by up to ``FLUSH_SECONDS``).
Nothing here holds a user id, a key id or a secret, and no label says which emails have an
account (``filehost_logins_total`` counts unknown accounts apart, with no email anywhere).
prometheus-client's ``_created`` series (a second series per counter and histogram, holding when
it was first made) are turned off: they doubled the exposition and told nothing.
"""

from __future__ import annotations

import logging
import math
import os
import platform
import shutil
import struct
import tempfile
import time
from bisect import bisect_left
from collections.abc import Iterator
from importlib import metadata

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client import values as prometheus_values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from service.observability.trace import RequestTrace

log = logging.getLogger("service.observability.metrics")

# The classic text format, which generate_latest writes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MULTIPROC_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
FLUSH_SECONDS = 1.0
# How many answered requests (or Redis replies) wait as entries before they are counted together
# (as ``service.observability.log_lines.RENDER_EVERY``, and for the same reason).
TALLY_EVERY = 50
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_BOUNDS = (*DURATION_BUCKETS, math.inf)
_RENDER_ATTEMPTS = 3
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# How a login ended: a session opened; a wrong password for an account; an email without one
# (or deleted while its password was checked); refused before any check (login throttling); the
# queue of logins full (login_busy); the store failed.
LOGIN_OUTCOMES = (
    "succeeded",
    "wrong_password",
    "unknown_account",
    "throttled",
    "busy",
    "error",
    # A right password for an account with a second factor (the login goes on in a second
    # step), and a second step answered wrong.
    "second_factor_required",
    "wrong_second_factor",
)
# What a store error that failed a request was: Redis unreachable or its connection lost, too
# slow, an error reply (a script's, a cluster's), or a record that could not be read.
STORE_ERROR_KINDS = ("connection", "timeout", "error_reply", "corrupt_record", "other")
# The ways a file's bytes are downloaded, by path: its content address, or a vanity alias.
DOWNLOAD_WAYS = ("content", "alias", "archive")

disable_created_metrics()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


class BuildInfo(Collector):
    """``filehost_build_info{version, python, aiohttp} 1``: what this process runs, made once."""

    def __init__(self) -> None:
        self._labels = [_version("filehost-auth"), platform.python_version(), _version("aiohttp")]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily(
            "filehost_build_info",
            "The running service's version, and the Python and aiohttp it runs on; always 1.",
            labels=("version", "python", "aiohttp"),
        )
        info.add_metric(self._labels, 1)
        yield info


def multiprocess_dir() -> str | None:
    """The directory prometheus-client's multiprocess mode writes to, when this process runs in
    that mode (decided by the environment when prometheus-client was first imported)."""
    if prometheus_values.ValueClass is prometheus_values.MutexValue:
        return None
    return os.environ.get(MULTIPROC_DIR_VARIABLE)


def _add_observations(histogram: Histogram, counts: list[float]) -> None:
    """Add pre-bucketed observations to one labelled child of a histogram: ``counts`` holds a
    count per bucket of ``_BOUNDS`` and, last, the sum of the observed values.

    prometheus-client has no public call for this, so this writes the child's bucket and sum
    values as ``Histogram.observe`` does; ``tests/api/test_ops.py`` checks the result is the
    exposition ``observe`` would give, so a change of those internals fails loudly there."""
    histogram._sum.inc(counts[-1])
    buckets = histogram._buckets
    for index in range(len(_BOUNDS)):
        if counts[index]:
            buckets[index].inc(counts[index])


class Metrics:
    """The service's metrics for one process; see the module's docstring."""

    def __init__(self) -> None:
        self.multiprocess_dir = multiprocess_dir()
        # In multiprocess mode the values live in files, and a scrape reads them all through a
        # registry of its own; registering the metrics themselves anywhere is not needed. No
        # auto-describe: it would read every worker's files at start-up, while a worker starting
        # beside this one may have created its file but not yet written its header.
        self.registry = CollectorRegistry(auto_describe=False)
        own = None if self.multiprocess_dir else self.registry
        if self.multiprocess_dir:
            MultiProcessCollector(self.registry, path=self.multiprocess_dir)
        # One series whatever the number of workers: never in the workers' shared files.
        self.registry.register(BuildInfo())
        self._requests = Counter(
            "filehost_http_requests",
            "Requests answered by the application, by route template, method and status.",
            ("route", "method", "status"),
            registry=own,
        )
        self._request_seconds = Histogram(
            "filehost_http_request_duration_seconds",
            "Time the application spent on a request, by route template.",
            ("route",),
            buckets=DURATION_BUCKETS,
            registry=own,
        )
        self._auth = Counter(
            "filehost_auth_checks",
            "Credential checks, by the credential presented and the outcome (ok or error code).",
            ("credential", "outcome"),
            registry=own,
        )
        self._auth_seconds = Histogram(
            "filehost_auth_check_duration_seconds",
            "Time of one credential check: one Redis round trip for a well-formed credential.",
            ("credential",),
            buckets=DURATION_BUCKETS,
            registry=own,
        )
        self.login_in_flight = Gauge(
            "filehost_login_in_flight",
            "Logins being handled (bcrypt running or queued), summed over live workers.",
            multiprocess_mode="livesum",
            registry=own,
        )
        self._redis_seconds = Histogram(
            "filehost_redis_command_duration_seconds",
            "Send to reply of each hot-path Redis command (credential lookups, the files read).",
            buckets=DURATION_BUCKETS,
            registry=own,
        )
        # Rarer events, counted as they happen (each costs far more than its count).
        self._logins = Counter(
            "filehost_logins",
            "Logins by outcome: succeeded, wrong_password, unknown_account, throttled, busy or "
            "error.",
            ("outcome",),
            registry=own,
        )
        self._uploads = Counter(
            "filehost_uploads",
            "Uploads by a credential allowed to upload, by outcome: stored, or the refusal's code.",
            ("outcome",),
            registry=own,
        )
        self._upload_bytes = Counter(
            "filehost_upload_bytes",
            "Bytes of the files stored by uploads.",
            registry=own,
        )
        self._download_bytes = Counter(
            "filehost_download_bytes",
            "Bytes of file content sent by downloads (200 and 206), by the way they came: "
            "content (GET /files/{id}/content) or alias (GET /a/{slug}).",
            ("via",),
            registry=own,
        )
        self._store_errors = Counter(
            "filehost_store_errors",
            "Requests failed by the store (503), by route template and kind of failure.",
            ("route", "kind"),
            registry=own,
        )
        for outcome in LOGIN_OUTCOMES:  # present from the start, so a rate can be taken at once
            self._logins.labels(outcome)
        self._uploads.labels("stored")
        for via in DOWNLOAD_WAYS:
            self._download_bytes.labels(via)
        self._downloaded = dict.fromkeys(DOWNLOAD_WAYS, 0)
        if tuple(self._request_seconds._upper_bounds) != _BOUNDS:  # see _add_observations
            raise RuntimeError("prometheus-client's histogram buckets are not as expected")
        # (route, method, status, credential, outcome) -> a ``_new_row`` of that kind's requests
        self._pending: dict[tuple[str, str, int, str | None, str | None], list[float]] = {}
        self._pending_redis_counts = _no_observations()
        # Answered requests and Redis commands' seconds not yet counted into the rows above.
        self._answers: list[tuple[RequestTrace, str, int, float]] = []
        self._redis_commands: list[float] = []
        # (route, kind) -> requests the store failed, not yet counted.
        self._pending_store_errors: dict[tuple[str, str], int] = {}

    # -- the hot path: one append per request ------------------------------------------------

    def answered(self, trace: RequestTrace, method: str, status: int, at: float) -> None:
        """A request answered at ``at`` (a ``perf_counter`` reading) and, when its trace has an
        outcome, its credential check. Kept as an entry and counted with up to
        ``TALLY_EVERY`` others in one go (``_tally``): the request's own path pays for an append.
        """
        answers = self._answers
        answers.append((trace, method, status, at))
        if len(answers) >= TALLY_EVERY:
            self._tally()

    def login(self, outcome: str) -> None:
        """A login ended so (one of ``LOGIN_OUTCOMES``)."""
        self._logins.labels(outcome).inc()

    def upload(self, outcome: str, size: int = 0) -> None:
        """An upload ended so: ``stored`` (``size`` bytes) or the code it was refused with."""
        self._uploads.labels(outcome).inc()
        if size:
            self._upload_bytes.inc(size)

    def downloaded(self, via: str, size: int) -> None:
        """A download's body of ``size`` bytes was sent, ``via`` one of ``DOWNLOAD_WAYS``:
        added up here and written into the counter with the rest at the next ``flush`` (a
        public alias's small file is a request as busy as any)."""
        self._downloaded[via] += size

    def redis_command(self, seconds: float) -> None:
        # Called for every reply on the hot connection.
        commands = self._redis_commands
        commands.append(seconds)
        if len(commands) >= TALLY_EVERY:
            self._tally()

    # -- off the hot path -------------------------------------------------------------------

    def _tally(self) -> None:
        """Add the entries waiting since the last tally to the pending rows: a dict lookup per
        request, in one loop."""
        answers, self._answers = self._answers, []
        pending = self._pending
        bounds = _BOUNDS
        for trace, method, status, at in answers:
            try:
                if method not in KNOWN_METHODS:
                    method = "other"
                outcome = trace.outcome
                key = (trace.route, method, status, trace.credential, outcome)
                row = pending.get(key)
                if row is None:
                    row = pending[key] = _new_row()
                seconds = at - trace.started
                row[bisect_left(bounds, seconds)] += 1
                row[_REQUEST_SUM] += seconds
                if outcome is not None:
                    auth_seconds = trace.auth_seconds
                    row[_AUTH_BUCKETS + bisect_left(bounds, auth_seconds)] += 1
                    row[_AUTH_SUM] += auth_seconds
                if status >= 500:  # set only by a refusal the store caused (never on success)
                    kind = getattr(trace, "store_error", None)
                    if kind is not None:
                        errors = self._pending_store_errors
                        errors[trace.route, kind] = errors.get((trace.route, kind), 0) + 1
            except Exception:  # one bad entry must not cost the others their counts
                log.exception("could not count a request in the metrics")
        commands, self._redis_commands = self._redis_commands, []
        counts = self._pending_redis_counts
        for seconds in commands:
            counts[bisect_left(bounds, seconds)] += 1
            counts[-1] += seconds

    def flush(self) -> None:
        """Write the counts gathered since the last flush into the metrics."""
        self._tally()
        downloaded, self._downloaded = self._downloaded, dict.fromkeys(DOWNLOAD_WAYS, 0)
        for via, size in downloaded.items():
            if size:
                self._download_bytes.labels(via).inc(size)
        pending, self._pending = self._pending, {}
        request_seconds: dict[str, list[float]] = {}
        auth_seconds: dict[str, list[float]] = {}
        for (route, method, status, credential, outcome), row in pending.items():
            self._requests.labels(route, method, str(status)).inc(sum(row[:_REQUEST_SUM]))
            _add_row(request_seconds, route, row[:_AUTH_BUCKETS])
            if outcome is not None:
                credential = credential or "none"
                self._auth.labels(credential, outcome).inc(sum(row[_AUTH_BUCKETS:_AUTH_SUM]))
                _add_row(auth_seconds, credential, row[_AUTH_BUCKETS:])
        for route, counts in request_seconds.items():
            _add_observations(self._request_seconds.labels(route), counts)
        for credential, counts in auth_seconds.items():
            _add_observations(self._auth_seconds.labels(credential), counts)
        store_errors, self._pending_store_errors = self._pending_store_errors, {}
        for (route, kind), count in store_errors.items():
            self._store_errors.labels(route, kind).inc(count)
        redis_counts, self._pending_redis_counts = self._pending_redis_counts, _no_observations()
        if any(redis_counts):
            _add_observations(self._redis_seconds, redis_counts)

    def render(self) -> bytes:
        """The exposition of every worker's metrics (this one's flushed first)."""
        self.flush()
        for attempt in range(_RENDER_ATTEMPTS):
            try:
                return generate_latest(self.registry)
            except struct.error:
                # Another worker created a value file this instant and has not written its
                # header yet; it takes microseconds.
                if attempt == _RENDER_ATTEMPTS - 1:
                    raise
                time.sleep(0.005)
        raise AssertionError("unreachable")


def _no_observations() -> list[float]:
    """A count per bucket of ``_BOUNDS`` and, last, the sum of the observed values."""
    return [0.0] * (len(_BOUNDS) + 1)


# A row of pending counts: the requests by duration bucket of ``_BOUNDS`` and their durations'
# sum, then the same for their credential checks.
_REQUEST_SUM = len(_BOUNDS)
_AUTH_BUCKETS = _REQUEST_SUM + 1
_AUTH_SUM = _AUTH_BUCKETS + len(_BOUNDS)


def _new_row() -> list[float]:
    return [0.0] * (_AUTH_SUM + 1)


def _add_row(totals: dict[str, list[float]], label: str, counts: list[float]) -> None:
    """Add ``counts`` (a ``_no_observations`` list) to ``label``'s in ``totals``."""
    total = totals.get(label)
    if total is None:
        totals[label] = counts
    else:
        totals[label] = [a + b for a, b in zip(total, counts, strict=True)]


# -- several workers: serve's part ---------------------------------------------------------------


class WorkerMetricsDir:
    """The directory the workers of one ``serve`` share for multiprocess mode.

    ``open`` makes a fresh private directory and sets ``PROMETHEUS_MULTIPROC_DIR`` to it in this
    (the parent) process, so every worker spawned afterwards inherits it; any value the
    environment had is replaced, so files of an earlier run are never counted. ``worker_gone``
    drops a dead worker's live gauges; ``close`` removes the directory and restores the variable.
    """

    def __init__(self) -> None:
        self._previous = os.environ.get(MULTIPROC_DIR_VARIABLE)
        self.path = tempfile.mkdtemp(prefix="filehost-metrics-")
        os.environ[MULTIPROC_DIR_VARIABLE] = self.path

    def worker_gone(self, pid: int | None) -> None:
        if pid is not None:
            mark_process_dead(pid, self.path)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._previous is None:
            os.environ.pop(MULTIPROC_DIR_VARIABLE, None)
        else:
            os.environ[MULTIPROC_DIR_VARIABLE] = self._previous
