"""``Metrics``: answered requests wait as entries and are counted in batches, yet a flush counts
every one, once, with the duration from its start to its answer."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from service.observability.metrics import (
    DOWNLOAD_WAYS,
    LOGIN_OUTCOMES,
    STORE_ERROR_KINDS,
    TALLY_EVERY,
    Metrics,
)
from service.observability.trace import RequestTrace, new_request_id
from tests.support import metrics as exposition
from tests.support.paths import REPO_ROOT

ROUTE = "/api/v1/files"


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return exposition.samples(metrics.render().decode())


def answer(
    metrics: Metrics, seconds: float, status: int = 200, method: str = "GET", **fields: Any
) -> None:
    trace = RequestTrace(new_request_id(), ROUTE)
    for name, value in fields.items():
        setattr(trace, name, value)
    metrics.answered(trace, method, status, trace.started + seconds)


def test_every_request_is_counted_once_across_batches() -> None:
    metrics = Metrics()
    count = 2 * TALLY_EVERY + 7  # two full batches and a partial one
    for index in range(count):
        answer(metrics, 0.002, status=200 if index % 3 else 403, credential="api_key", outcome="ok")
        metrics.redis_command(0.0003)

    found = samples(metrics)
    ok = found[
        (
            "filehost_http_requests_total",
            frozenset({("route", ROUTE), ("method", "GET"), ("status", "200")}),
        )
    ]
    refused = found[
        (
            "filehost_http_requests_total",
            frozenset({("route", ROUTE), ("method", "GET"), ("status", "403")}),
        )
    ]
    assert ok + refused == count
    assert refused == len(range(0, count, 3))
    assert found[("filehost_http_request_duration_seconds_sum", frozenset({("route", ROUTE)}))] == (
        pytest.approx(0.002 * count, rel=1e-6)
    )
    # 2 ms is above the 1 ms bucket's bound and within the 2.5 ms one
    bucket = "filehost_http_request_duration_seconds_bucket"
    assert found[(bucket, frozenset({("route", ROUTE), ("le", "0.001")}))] == 0
    assert found[(bucket, frozenset({("route", ROUTE), ("le", "0.0025")}))] == count
    checks = (
        "filehost_auth_checks_total",
        frozenset({("credential", "api_key"), ("outcome", "ok")}),
    )
    assert found[checks] == count
    redis = ("filehost_redis_command_duration_seconds_bucket", frozenset({("le", "0.0005")}))
    assert found[redis] == count

    # A second flush counts nothing twice.
    assert samples(metrics)[checks] == count


def test_a_request_without_a_credential_check_counts_no_check() -> None:
    metrics = Metrics()
    answer(metrics, 0.001, status=404, method="BREW")

    found = samples(metrics)
    key = (
        "filehost_http_requests_total",
        frozenset({("route", ROUTE), ("method", "other"), ("status", "404")}),
    )
    assert found[key] == 1
    assert not any(name == "filehost_auth_checks_total" for name, _ in found)


def test_an_entry_that_cannot_be_counted_costs_no_other_its_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    answer(metrics, 0.001)
    broken = RequestTrace(new_request_id(), ROUTE)
    broken.started = "not a clock reading"  # type: ignore[assignment]
    metrics.answered(broken, "GET", 200, 1.0)
    answer(metrics, 0.001)

    with caplog.at_level(logging.ERROR, logger="service.observability.metrics"):
        found = samples(metrics)

    key = (
        "filehost_http_requests_total",
        frozenset({("route", ROUTE), ("method", "GET"), ("status", "200")}),
    )
    assert found[key] == 2
    assert [record.getMessage() for record in caplog.records] == [
        "could not count a request in the metrics"
    ]


def test_the_operating_guide_names_every_value_a_label_takes() -> None:
    # Operators write alerts from the table in docs/operating.md: a value it leaves out is one
    # nobody alerts on.
    guide = (REPO_ROOT / "docs" / "operating.md").read_text().splitlines()
    rows = {
        line.split("|")[1].strip(" `"): line for line in guide if line.startswith("| `filehost_")
    }
    for metric, values in (
        ("filehost_logins_total", LOGIN_OUTCOMES),
        ("filehost_store_errors_total", STORE_ERROR_KINDS),
        ("filehost_download_bytes_total", DOWNLOAD_WAYS),
    ):
        for value in values:
            assert f"`{value}`" in rows[metric], (metric, value)
