"""The parts of a run, in the order ``__main__`` calls them: the rounds of every scenario beside
the floors, then single runs of b with rate limits off and during a login storm, g while a large
account is searched, g on a Redis Cluster, and b and c with a million keys and sessions loaded.
Each part starts the servers it needs and stops them when done."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import redis

from benchmark import processes
from benchmark.load import Measurer, start_login_storm, start_search_storm
from benchmark.report import ExtraRow, median_row, ratio_cell
from benchmark.scenarios import FLOORS, LABELS, PATHS, WITHOUT_LANE, scenario_headers
from benchmark.seeding import (
    alias_commands,
    key_commands,
    mass_insert,
    seed_account,
    seed_searched_account,
    session_commands,
)

Server = tuple[str, int]  # its URL and pid
Results = list[dict[str, float]]


@dataclass
class Bench:
    """What the parts of a run share: the options, the store and its bench account, and what
    the parts have measured so far."""

    args: argparse.Namespace
    scenarios: tuple[str, ...]
    workdir: Path
    redis_url: str
    client: redis.Redis
    entry: str  # the bench key's digest entry, which floor F1 reads
    measure: Measurer
    rows: dict[str, dict] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)
    extra_rows: list[ExtraRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str | None]:
        return self.measure.headers

    @property
    def service_log(self) -> Path:
        return self.measure.service_log

    @contextmanager
    def floors(self) -> Iterator[tuple[Server, Server]]:
        """F0 and F1, with the service's number of workers."""
        with (
            processes.floor("bare", self.redis_url, self.args.workers, self.entry) as f0,
            processes.floor("lookup", self.redis_url, self.args.workers, self.entry) as f1,
        ):
            yield f0, f1

    def service(
        self,
        *,
        redis_url: str | None = None,
        rate_limits: bool = True,
        mode: str = "single",
        lane: bool = True,
    ) -> AbstractContextManager[Server]:
        """The service on this run's store (or the one ``redis_url`` names), with the floors'
        number of workers, logging to the run's service log."""
        return processes.service(
            redis_url or self.redis_url,
            self.args.workers,
            log=self.service_log,
            rate_limits=rate_limits,
            mode=mode,
            lane=lane,
            data_dir=self.workdir / "data",
        )


def rounds(bench: Bench) -> None:
    """Every scenario, round after round, each run beside a run of F0 and of F1: the table's
    rows above its line."""
    per_round: dict[str, Results] = {name: [] for name in LABELS}
    # All three stay up; every scenario run sits beside a run of each floor, and each
    # ratio is taken within that triple, so the machine's drift (shared, noisy cores)
    # between runs further apart cannot pass for a cost of the service.
    beside: dict[str, dict[str, Results]] = {name: {"F0": [], "F1": []} for name in bench.scenarios}
    with bench.floors() as (f0, f1), bench.service() as svc, ExitStack() as more:
        targets = {"F0": f0, "F1": f1}
        for name in WITHOUT_LANE:
            if name in bench.scenarios:  # a second service, the same but for the gateway lane
                targets[name] = more.enter_context(bench.service(lane=False))
                bench.measure.warm_up(targets[name][0], bench.headers["b"])
        for name, target in (("F0", f0), ("F1", f1), ("b", svc)):  # warm-up
            bench.measure.warm_up(target[0], bench.headers[name])
        for round_number in range(1, bench.args.rounds + 1):
            print(f"round {round_number}/{bench.args.rounds}", flush=True)
            for name in bench.scenarios:
                # Floors first in odd rounds and last in even ones, so the order within
                # a triple cannot favour either side.
                order = ["F0", "F1", name] if round_number % 2 else [name, "F1", "F0"]
                for run in order:
                    result, bench.commands[run] = bench.measure(
                        LABELS[run], targets.get(run, svc), run
                    )
                    per_round[run].append(result)
                    if run in FLOORS:
                        beside[name][run].append(result)
    bench.rows = {
        "F0": median_row(per_round["F0"], per_round["F0"]),
        "F1": median_row(per_round["F1"], per_round["F0"], per_round["F1"]),
    }
    bench.rows["F0"]["ratios"].append(None)
    bench.rows.update(
        (name, median_row(per_round[name], beside[name]["F0"], beside[name]["F1"]))
        for name in bench.scenarios
    )


def limits_off(bench: Bench) -> None:
    """b on a service with rate limits off, beside one run of each floor."""
    with bench.floors() as (f0, f1), bench.service(rate_limits=False) as svc:
        bench.measure.warm_up(svc[0], bench.headers["b"])
        floor0, _ = bench.measure("F0 (beside limits off)", f0, "F0")
        floor1, _ = bench.measure("F1 (beside limits off)", f1, "F1")
        result, used = bench.measure("b with rate limits off", svc, "b")
        bench.extra_rows.append(
            (
                "b X-API-Key, rate limits off",
                result,
                used,
                f"{result['rps'] / floor0['rps']:.2f} (one run) | "
                f"{result['rps'] / floor1['rps']:.2f} (one run)",
            )
        )


def login_storm(bench: Bench) -> None:
    """b just before and during a storm of logins, each a bcrypt check: the worst case for the
    CPU, since every client sends the right password and so passes throttling."""
    clients, seconds = bench.args.storm_clients, bench.args.seconds
    with bench.service() as svc:
        bench.measure.warm_up(svc[0], bench.headers["b"])
        unloaded, _ = bench.measure("b before the storm", svc, "b")
        storm = start_login_storm(svc[0], clients, seconds + 2)
        time.sleep(1)  # let the storm fill the login queues before measuring
        stormy, used = bench.measure(f"b during {clients}-client login storm", svc, "b")
        storm_out, _ = storm.communicate(timeout=seconds + 60)
    kept = stormy["rps"] / unloaded["rps"]
    bench.extra_rows.append(
        (
            f"b during a {clients}-client login storm",
            stormy,
            used,
            f"{kept:.2f} of b just before | –",
        )
    )
    storm_counts = orjson.loads(storm_out)
    slowest_refusal = storm_counts.pop("slowest_refusal_ms")
    bench.notes.append(
        f"login storm: X-API-Key kept {kept:.2f} of its "
        f"throughput just before the storm, p99 {stormy['p99']:.2f} ms; login "
        f"responses: {', '.join(f'{k}: {v}' for k, v in sorted(storm_counts.items()))}"
        + (
            f"; the slowest refusal came back in {slowest_refusal} ms"
            if slowest_refusal
            else "; no login was refused"
        )
    )


def search_storm(bench: Bench) -> None:
    """g just before and while one person searches an account of ``--searched-files`` files
    back to back: a search reads and searches the whole account in the worker that answers it,
    so what it costs the gateway's requests beside it is measured here."""
    count, seconds = bench.args.searched_files, bench.args.seconds
    seed_searched_account(bench.redis_url, count)
    label = f"g while {count:,} files are searched back to back"
    with bench.service() as svc:
        bench.measure.warm_up(svc[0], bench.headers["g"], PATHS["g"])
        calm, _ = bench.measure("g before the searches", svc, "g")
        storm = start_search_storm(svc[0], seconds + 2)
        time.sleep(1)  # the searcher signs in and is searching when wrk starts
        stormy, used = bench.measure(label, svc, "g")
        storm_out, _ = storm.communicate(timeout=seconds + 60)
    kept = stormy["rps"] / calm["rps"]
    bench.extra_rows.append((label, stormy, used, f"{kept:.2f} of g just before | –"))
    counts = orjson.loads(storm_out)
    bench.notes.append(
        f"search storm: beside one client searching an account of {count:,} files back to back "
        f"({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))} searches in "
        f"{seconds + 2} s), g kept {kept:.2f} of its throughput just before, p99 "
        f"{stormy['p99']:.2f} ms against {calm['p99']:.2f} ms"
    )


def cluster(bench: Bench) -> None:
    """The verify path (g) on a 3-master Redis Cluster on this machine, each run beside a run of
    F0 and of F1 (which read the single node), so it is reported against the same floors as the
    rows above."""
    from tests.support.cluster import ClusterServer

    servers = ClusterServer(bench.workdir / "cluster")
    servers.start()
    try:
        header = scenario_headers(seed_account(servers.url, "cluster"))["g"]
        label = "g forward-auth verify, X-API-Key, 3-master cluster"
        runs: dict[str, Results] = {"F0": [], "F1": [], "g": []}
        with (
            bench.floors() as (f0, f1),
            bench.service(redis_url=servers.url, mode="cluster") as svc,
        ):
            bench.measure.warm_up(svc[0], header, PATHS["g"])
            for round_number in range(1, bench.args.rounds + 1):
                order = ["F0", "F1", "g"] if round_number % 2 else ["g", "F1", "F0"]
                for run in order:
                    target = {"F0": f0, "F1": f1}.get(run, svc)
                    result, _ = bench.measure(
                        label if run == "g" else f"{run} (beside the cluster)",
                        target,
                        run,
                        header if run == "g" else None,
                    )
                    runs[run].append(result)
        row = median_row(runs["g"], runs["F0"], runs["F1"])
        bench.extra_rows.append(
            (
                label,
                row,
                "1 per request, on one of 3 nodes",
                " | ".join(ratio_cell(ratio) for ratio in row["ratios"]),
            )
        )
    finally:
        servers.stop()


def scale(bench: Bench) -> None:
    """b and c before and after loading ``--large`` keys and sessions. The runs are paired with
    runs of F0 (which reads nothing from Redis): what is compared is each run's ratio to F0,
    before and after loading."""
    large, client = bench.args.large, bench.client
    with (
        processes.floor("bare", bench.redis_url, bench.args.workers, bench.entry) as f0,
        bench.service() as svc,
    ):
        bench.measure.warm_up(f0[0], None)
        bench.measure.warm_up(svc[0], bench.headers["b"])

        def paired(label: str, name: str) -> tuple[dict[str, float], str, float]:
            bare, _ = bench.measure(f"F0 (for {label})", f0, "F0")
            result, used = bench.measure(label, svc, name)
            return result, used, result["rps"] / bare["rps"]

        small = {name: paired(f"{name} before loading", name)[2] for name in ("b", "c")}
        client.config_resetstat()
        before = client.info("memory")["used_memory"]
        loaded = time.monotonic()
        mass_insert(bench.redis_url, key_commands(large))
        after_keys = client.info("memory")["used_memory"]
        mass_insert(bench.redis_url, session_commands(large))
        after_sessions = client.info("memory")["used_memory"]
        mass_insert(bench.redis_url, alias_commands(large))
        after_aliases = client.info("memory")["used_memory"]
        bench.notes.append(
            f"loaded {large:,} keys, {large:,} sessions and {large:,} aliases in "
            f"{time.monotonic() - loaded:.1f} s; Redis memory per key "
            f"{(after_keys - before) / large:.0f} B (digest entry + listing), "
            f"per session {(after_sessions - after_keys) / large:.0f} B "
            f"(entry + account index), per alias {(after_aliases - after_sessions) / large:.0f} B "
            f"(entry + account index; under 300 is the target); dbsize {client.dbsize():,}"
        )
        for name, what in (("b", "keys"), ("c", "sessions")):
            label = f"{LABELS[name].split(',')[0]}, {large:,} {what} loaded"
            result, used, ratio = paired(label, name)
            bench.extra_rows.append((label, result, used, f"{ratio:.2f} (one run) | –"))
            bench.notes.append(
                f"scale: {LABELS[name]}: ratio to F0 with {large:,} {what} "
                f"loaded = {ratio / small[name]:.2f} of its ratio with the benchmark's own "
                "few just before loading (each run paired with an F0 run)"
            )
