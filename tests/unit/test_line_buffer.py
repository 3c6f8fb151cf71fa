"""``LineBuffer``: access lines wait as entries and are serialised in batches, yet every line is
written, in the order it was added, with the time its request was answered."""

from __future__ import annotations

import calendar
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from service.observability.log_lines import ACCESS_FIELDS, FLUSH_BYTES, RENDER_EVERY, LineBuffer
from service.observability.trace import RequestTrace, current_trace, new_request_id

ROUTE = "/api/v1/files"


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[tuple[LineBuffer, Path]]:
    path = tmp_path / "lines.log"
    with path.open("wb") as output:
        yield LineBuffer(output.fileno()), path


def written(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def answered_trace(**fields: Any) -> RequestTrace:
    trace = RequestTrace(new_request_id(), ROUTE, "192.0.2.7")
    for name, value in fields.items():
        setattr(trace, name, value)
    return trace


def test_an_access_line_holds_its_trace_and_the_time_it_was_answered(
    log_file: tuple[LineBuffer, Path],
) -> None:
    lines, path = log_file
    trace = answered_trace(credential="api_key", key_id="key_0a1B2c3D4e5F6g7H8i9J0k", outcome="ok")
    before = time.time()
    lines.add_access(trace, "GET", ROUTE, 200)
    after = time.time()
    time.sleep(0.5)  # serialised well after it was answered
    lines.flush()

    [entry] = written(path)
    assert list(entry)[5:] == list(ACCESS_FIELDS)
    assert entry["request_id"] == trace.request_id
    assert (entry["method"], entry["route"], entry["path"], entry["status"]) == (
        "GET",
        ROUTE,
        ROUTE,
        200,
    )
    assert (entry["credential"], entry["key_id"], entry["auth"]) == (
        "api_key",
        "key_0a1B2c3D4e5F6g7H8i9J0k",
        "ok",
    )
    assert entry["remote"] == "192.0.2.7"
    assert 0 <= entry["duration_ms"] < (after - trace.started + 1) * 1000
    # ``ts`` is when the request was answered, to the millisecond, not when the line was made.
    stamp = time.strptime(entry["ts"][:19], "%Y-%m-%dT%H:%M:%S")
    logged_at = calendar.timegm(stamp) + int(entry["ts"][20:23]) / 1000
    assert int(before * 1000) / 1000 - 0.002 <= logged_at <= after + 0.002


def test_lines_keep_the_order_they_were_added_in(log_file: tuple[LineBuffer, Path]) -> None:
    lines, path = log_file
    first, second, third = (answered_trace() for _ in range(3))
    lines.add_access(first, "GET", ROUTE, 200)
    lines.add_access(second, "GET", ROUTE, 401)
    lines.add(b'{"msg":"between"}\n')  # another record, written after the two before it
    lines.add_access(third, "GET", ROUTE, 403)
    lines.flush()

    entries = written(path)
    assert [e.get("request_id", e["msg"]) for e in entries] == [
        first.request_id,
        second.request_id,
        "between",
        third.request_id,
    ]
    assert [e.get("status") for e in entries] == [200, 401, None, 403]


def test_a_path_that_is_not_its_route_is_masked(log_file: tuple[LineBuffer, Path]) -> None:
    lines, path = log_file
    lines.add_access(answered_trace(), "DELETE", "/api/v1/keys/fhk_secretsecret", 404)
    lines.flush()

    assert written(path)[0]["path"] == "/api/v1/keys/[masked]"
    assert b"fhk_secret" not in path.read_bytes()


def test_a_full_buffer_is_written_without_waiting_for_a_flush(
    log_file: tuple[LineBuffer, Path],
) -> None:
    lines, path = log_file
    added = 0
    while path.stat().st_size == 0:
        lines.add_access(answered_trace(), "GET", ROUTE, 200)
        added += 1
        assert added <= FLUSH_BYTES // 100 + RENDER_EVERY, "nothing was written"
    assert path.stat().st_size >= FLUSH_BYTES
    lines.flush()
    assert len(written(path)) == added


def test_an_entry_that_cannot_be_serialised_leaves_an_error_line_and_the_others(
    log_file: tuple[LineBuffer, Path],
) -> None:
    lines, path = log_file
    good = answered_trace()
    lines.add_access(answered_trace(key_id=object()), "GET", ROUTE, 200)  # orjson refuses it
    lines.add_access(good, "GET", ROUTE, 200)
    # Serialised while another request is being handled: its id is not the failed one's.
    token = current_trace.set(answered_trace())
    try:
        lines.flush()
    finally:
        current_trace.reset(token)

    broken, entry = written(path)
    assert list(broken) == ["ts", "level", "pid", "logger", "msg"]  # as any record, no id
    assert broken["level"] == "ERROR" and "could not describe a request" in broken["msg"]
    assert entry["request_id"] == good.request_id


def test_no_line_is_lost_when_threads_add_while_another_flushes(
    log_file: tuple[LineBuffer, Path],
) -> None:
    """bcrypt's threads log while the event loop adds access lines and flushes."""
    lines, path = log_file
    per_thread, threads = 2_000, 4
    start = threading.Barrier(threads + 1)

    def other_records(number: int) -> None:
        start.wait()
        for n in range(per_thread):
            lines.add(orjson.dumps({"msg": f"thread {number} record {n}"}) + b"\n")
            if n % 50 == 0:
                lines.flush()

    workers = [threading.Thread(target=other_records, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    traces = [answered_trace() for _ in range(5 * RENDER_EVERY + 7)]
    for n, trace in enumerate(traces):
        lines.add_access(trace, "GET", ROUTE, 200)
        if n % 97 == 0:
            lines.flush()
    for worker in workers:
        worker.join()
    lines.flush()

    entries = written(path)
    assert len(entries) == len(traces) + threads * per_thread
    access = [e["request_id"] for e in entries if "request_id" in e]
    assert access == [trace.request_id for trace in traces]  # each once, in order
    for number in range(threads):
        mine = [e["msg"] for e in entries if e["msg"].startswith(f"thread {number} ")]
        assert mine == [f"thread {number} record {n}" for n in range(per_thread)]
