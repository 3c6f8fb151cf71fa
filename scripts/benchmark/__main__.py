"""``python -m benchmark`` (what ``scripts/bench`` runs): the options, and the order of a run."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson
import redis

import benchmark
from benchmark import ROOT, runs
from benchmark.load import Measurer, count_instructions, login_storm, search_storm
from benchmark.object_store import OBJECT_TRANSFERS, object_part
from benchmark.processes import redis_server
from benchmark.report import (
    main_section,
    nginx_version,
    object_section,
    object_table,
    object_verdicts,
    print_report,
    report_table,
    resumable_section,
    target_verdicts,
    transfer_section,
    transfer_table,
    transfer_verdicts,
    versions,
    write_markdown,
)
from benchmark.resumable import CHUNK_BYTES, TUS_FILE_BYTES, resumable_part, resumable_table
from benchmark.scenarios import SCENARIOS, scenario_headers
from benchmark.seeding import (
    OBJECT_STORE_EMAIL,
    RESUMABLE_EMAIL,
    key_entry,
    seed_account,
    seed_transfer_key,
)
from benchmark.transfers import FILE_BYTES, MEMORY_FILE_BYTES, TRANSFERS, _source, transfer_part

# The --only letter of the resumable uploads' part (benchmark.resumable).
RESUMABLE = "t"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description=benchmark.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # A shared machine's noise comes in bursts of seconds: a longer run does not average it out
    # (measured interleaved, the verify-to-F1 ratio of a pair of 1-s runs had a standard deviation
    # of 0.07, of 2-s runs 0.10), so the same time buys twice the triples, and about half the
    # median's error, as 1-s runs.
    parser.add_argument("--seconds", type=int, default=1, help="length of each wrk run")
    parser.add_argument(
        "--rounds",
        type=int,
        default=10,
        help="rounds of the scenarios, each run beside a run of F0 and of F1; the table shows "
        "medians",
    )
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    everything = "".join(SCENARIOS) + "".join(TRANSFERS) + "".join(OBJECT_TRANSFERS) + RESUMABLE
    parser.add_argument(
        "--only",
        default=everything,
        help="the scenarios to run, e.g. 'gb' (default all: "
        f"{everything}); the gateway part runs when it names one of {''.join(SCENARIOS)}, "
        f"the transfer part when it names one of {''.join(TRANSFERS)}",
    )
    parser.add_argument(
        "--transfer-rounds",
        type=int,
        default=5,
        help="rounds of the transfer scenarios, each run beside its nginx runs",
    )
    parser.add_argument(
        "--large",
        type=int,
        default=1_000_000,
        help="keys and sessions loaded for the scale runs (0 skips them)",
    )
    parser.add_argument("--storm-clients", type=int, default=50)
    parser.add_argument(
        "--cluster",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the verify path (g) on a 3-master Redis Cluster beside the floors (default on)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=ROOT / "docs" / "benchmarks.md",
        help="where the markdown report goes ('-' for nowhere)",
    )
    parser.add_argument(
        "--_login-storm",
        nargs=3,
        metavar=("URL", "CLIENTS", "SECONDS"),
        help=argparse.SUPPRESS,
        dest="login_storm",
    )
    parser.add_argument(
        "--_search-storm",
        nargs=2,
        metavar=("URL", "SECONDS"),
        help=argparse.SUPPRESS,
        dest="search_storm",
    )
    parser.add_argument(
        "--searched-files",
        type=int,
        default=10_000,
        help="files of the account the search storm searches (FILEHOST_MAX_FILES_PER_ACCOUNT's "
        "default; 0 skips the storm)",
    )
    parser.add_argument(
        "--instructions",
        type=int,
        metavar="REQUESTS",
        help="instead of the load runs, count the server's instructions per request over this "
        "many requests per scenario (valgrind; about a minute per scenario; not written out)",
    )
    parser.add_argument(
        "--profiles",
        type=Path,
        metavar="DIR",
        help="with --instructions: keep each server's callgrind profile in DIR "
        "(callgrind.<scenario>.1, for callgrind_annotate --inclusive=yes)",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.only) - set(everything))
    if unknown:
        parser.error(f"--only: no scenario {', '.join(unknown)} (there are {everything})")
    return args


def main() -> int:
    args = parse_args()
    scenarios = tuple(name for name in SCENARIOS if name in args.only)
    transfers = "".join(name for name in TRANSFERS if name in args.only)
    objects = "".join(name for name in OBJECT_TRANSFERS if name in args.only)
    resumable = RESUMABLE in args.only
    if args.login_storm:
        url, clients, seconds = args.login_storm
        counts = asyncio.run(login_storm(url, int(clients), float(seconds)))
        print(orjson.dumps(counts).decode())
        return 0
    if args.search_storm:
        url, seconds = args.search_storm
        print(orjson.dumps(asyncio.run(search_storm(url, float(seconds)))).decode())
        return 0
    if args.instructions:
        return count_instructions(args.instructions, scenarios, args.profiles)
    if scenarios and shutil.which("wrk") is None:
        print("wrk is not installed (Debian: apt-get install wrk)", file=sys.stderr)
        return 2
    if transfers and not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        print("nginx is not installed (Debian: apt-get install nginx)", file=sys.stderr)
        return 2

    gateway_text = transfer_text = object_text = resumable_text = None
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        workdir = Path(tmp)
        with redis_server(workdir) as (redis_url, client):
            print(
                f"benchmark: {args.workers} workers, {os.cpu_count()} cores; "
                f"scenarios {''.join(scenarios) or 'none'}, transfers {transfers or 'none'}"
                f"{', resumable uploads' if resumable else ''}",
                flush=True,
            )
            if scenarios:
                gateway_text = gateway_part(args, scenarios, workdir, redis_url, client)
            if transfers:
                transfer_text = transfer_report(args, transfers, workdir, redis_url)
            if objects:
                object_text = object_report(args, objects, workdir, redis_url)
            if resumable:
                resumable_text = resumable_report(args, workdir, redis_url)
    if str(args.output) != "-":
        write_markdown(args.output, gateway_text, transfer_text, object_text, resumable_text)
        print(f"wrote {args.output}")
    return 0


def gateway_part(
    args: argparse.Namespace,
    scenarios: tuple[str, ...],
    workdir: Path,
    redis_url: str,
    client: redis.Redis,
) -> str:
    """The wrk scenarios in rounds beside F0 and F1, then the single runs; prints the table and
    answers the gateway part of ``docs/benchmarks.md``."""
    started = time.monotonic()
    seed = seed_account(redis_url, data_dir=workdir / "data")
    run_versions = versions(client)
    measure = Measurer(
        client,
        workdir / "service.log",
        scenario_headers(seed),
        args.seconds,
        args.connections,
    )
    bench = runs.Bench(args, scenarios, workdir, redis_url, client, key_entry(seed), measure)
    print(
        f"gateway: {args.connections} connections, {args.seconds}s per run, {args.rounds} rounds",
        flush=True,
    )
    runs.rounds(bench)
    runs.limits_off(bench)
    runs.login_storm(bench)
    if args.searched_files:
        runs.search_storm(bench)
    if args.cluster:
        runs.cluster(bench)
    if args.large:
        runs.scale(bench)
    log_lines = bench.service_log.read_bytes().count(b"\n")
    bench.notes.append(
        f"the service wrote {log_lines:,} log lines in this run, one per request "
        "answered (access log at INFO, its production default)"
    )
    elapsed = time.monotonic() - started
    table = report_table(bench.rows, bench.commands, bench.extra_rows)
    notes = [*target_verdicts(bench.rows, args.connections), *bench.notes]
    print_report(table, notes, elapsed)
    return main_section(
        table,
        notes,
        elapsed,
        run_versions,
        connections=args.connections,
        seconds=args.seconds,
        workers=args.workers,
        rounds=args.rounds,
    )


def transfer_report(args: argparse.Namespace, transfers: str, workdir: Path, redis_url: str) -> str:
    """The transfer scenarios beside nginx and the memory runs; prints the table and answers
    the transfer section of ``docs/benchmarks.md``."""
    started = time.monotonic()
    rows, notes = transfer_part(workdir, redis_url, args.workers, transfers, args.transfer_rounds)
    elapsed = time.monotonic() - started
    table = transfer_table(rows)
    notes = [*transfer_verdicts(rows), *notes]
    print_report(table, notes)
    return transfer_section(
        table,
        notes,
        elapsed,
        workers=args.workers,
        rounds=args.transfer_rounds,
        nginx=nginx_version(),
    )


def object_report(args: argparse.Namespace, names: str, workdir: Path, redis_url: str) -> str:
    """The object-store scenarios beside the plain S3 client, and their memory runs."""
    started = time.monotonic()
    source = workdir / "object-transfer.bin"
    _source(source, FILE_BYTES)
    env = {"FILEHOST_MAX_UPLOAD_BYTES": str(2 * MEMORY_FILE_BYTES)}
    key = seed_transfer_key(redis_url, OBJECT_STORE_EMAIL)
    rows, notes = object_part(
        workdir, redis_url, args.workers, names, args.transfer_rounds, key, source, env
    )
    table = object_table(rows)
    notes = [*object_verdicts(rows), *notes]
    print_report(table, notes)
    elapsed = time.monotonic() - started
    return object_section(table, notes, elapsed, workers=args.workers, rounds=args.transfer_rounds)


def resumable_report(args: argparse.Namespace, workdir: Path, redis_url: str) -> str:
    """Resumable uploads beside POST /files on each blob store, and one resumed upload."""
    started = time.monotonic()
    source = workdir / "resumable.bin"
    _source(source, TUS_FILE_BYTES)
    key = seed_transfer_key(redis_url, RESUMABLE_EMAIL)
    try:
        rows = resumable_part(workdir, redis_url, args.workers, args.transfer_rounds, key, source)
    finally:
        source.unlink()
    table = resumable_table(rows)
    notes = [f"{row.store}: {row.resume}" for row in rows]
    notes += [f"{row.store}: {error}" for row in rows for error in row.errors]
    print_report(table, notes)
    elapsed = time.monotonic() - started
    return resumable_section(
        table, notes, elapsed, workers=args.workers, rounds=args.transfer_rounds, chunk=CHUNK_BYTES
    )


if __name__ == "__main__":
    raise SystemExit(main())
