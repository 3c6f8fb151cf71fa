"""The topology settings (FILEHOST_REDIS_MODE and its companions) and the hot connection's
refusal to use a replica, on real servers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from service.config import ConfigError, load_settings
from service.store.pipelined import PipelinedRedis
from tests.support.cluster import data_node, wait_until


def test_the_default_is_one_server() -> None:
    settings = load_settings({"REDIS_URL": "redis://127.0.0.1:6379/0"})
    assert (settings.redis_mode, settings.sentinels, settings.cluster_seeds) == ("single", (), ())
    assert settings.replica_wait_ms == 0


def test_sentinel_mode_names_the_sentinels_and_the_master() -> None:
    settings = load_settings(
        {
            "FILEHOST_REDIS_MODE": "Sentinel",
            "FILEHOST_SENTINELS": "10.0.0.1:26379, 10.0.0.2 [::1]:26380",
            "FILEHOST_SENTINEL_MASTER": "filehost",
        }
    )
    assert settings.redis_mode == "sentinel"
    assert settings.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380))
    assert settings.sentinel_master == "filehost"
    assert settings.redis_url == "redis://10.0.0.1:26379/0"  # never the embedded store
    assert settings.replica_wait_ms == 500  # credential writes wait for a replica by default


def test_sentinel_mode_takes_credentials_from_redis_url() -> None:
    settings = load_settings(
        {
            "FILEHOST_REDIS_MODE": "sentinel",
            "FILEHOST_SENTINELS": "s1:26379",
            "FILEHOST_SENTINEL_MASTER": "m",
            "REDIS_URL": "redis://:pw@ignored/2",
            "FILEHOST_REPLICA_WAIT_MS": "0",
        }
    )
    assert settings.redis_url == "redis://:pw@ignored/2"
    assert settings.replica_wait_ms == 0


@pytest.mark.parametrize("sentinels", ["[::1]:26380", "[::1]:26380 10.0.0.1"])
def test_an_ipv6_sentinel_in_brackets_is_read_and_named_in_brackets(sentinels: str) -> None:
    settings = load_settings(
        {
            "FILEHOST_REDIS_MODE": "sentinel",
            "FILEHOST_SENTINELS": sentinels,
            "FILEHOST_SENTINEL_MASTER": "m",
        }
    )
    assert settings.sentinels[0] == ("::1", 26380)
    assert settings.redis_url == "redis://[::1]:26380/0"


def test_sentinel_mode_may_leave_the_host_out_of_redis_url() -> None:
    settings = load_settings(
        {
            "FILEHOST_REDIS_MODE": "sentinel",
            "FILEHOST_SENTINELS": "[::1]",
            "FILEHOST_SENTINEL_MASTER": "m",
            "REDIS_URL": "redis://:pw@/2",
        }
    )
    assert settings.sentinels == (("::1", 26379),)
    assert settings.redis_url == "redis://:pw@/2"


def test_cluster_mode_takes_seed_nodes() -> None:
    settings = load_settings(
        {
            "FILEHOST_REDIS_MODE": "cluster",
            "REDIS_URL": "redis://10.0.0.1:7000",
            "FILEHOST_CLUSTER_SEEDS": "10.0.0.2:7000,10.0.0.3",
        }
    )
    assert settings.redis_mode == "cluster"
    assert settings.cluster_seeds == (("10.0.0.2", 7000), ("10.0.0.3", 6379))


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"FILEHOST_REDIS_MODE": "ring"}, "FILEHOST_REDIS_MODE"),
        ({"FILEHOST_REDIS_MODE": "sentinel", "FILEHOST_SENTINELS": "a:1"}, "FILEHOST_SENTINEL"),
        ({"FILEHOST_REDIS_MODE": "sentinel", "FILEHOST_SENTINEL_MASTER": "m"}, "FILEHOST_SENTI"),
        ({"FILEHOST_SENTINELS": "a:1", "FILEHOST_SENTINEL_MASTER": "m"}, "FILEHOST_REDIS_MODE"),
        (
            {
                "FILEHOST_REDIS_MODE": "sentinel",
                "FILEHOST_SENTINELS": "a:99999",
                "FILEHOST_SENTINEL_MASTER": "m",
            },
            "FILEHOST_SENTINELS",
        ),
        (
            {
                "FILEHOST_REDIS_MODE": "sentinel",
                "FILEHOST_SENTINELS": "a:1",
                "FILEHOST_SENTINEL_MASTER": "m",
                "REDIS_URL": "unix:///tmp/r.sock",
            },
            "REDIS_URL",
        ),
        *(
            (
                {
                    "FILEHOST_REDIS_MODE": "sentinel",
                    "FILEHOST_SENTINELS": sentinels,
                    "FILEHOST_SENTINEL_MASTER": "m",
                },
                named,
            )
            for sentinels, named in (
                ("::1", "IPv6 address in brackets"),  # host ":", port 1 until now
                ("10.0.0.1 fe80::1:26379", "IPv6 address in brackets"),
                ("[::1", "FILEHOST_SENTINELS must list host:port"),
                ("[::1]26379", "FILEHOST_SENTINELS must list host:port"),
                ("[sentinel-a]:26379", "FILEHOST_SENTINELS must list host:port"),
                ("a:²", "FILEHOST_SENTINELS must list host:port"),
            )
        ),
        ({"FILEHOST_REDIS_MODE": "cluster"}, "REDIS_URL"),
        ({"FILEHOST_REDIS_MODE": "cluster", "REDIS_URL": "redis://a:1/3"}, "database 0"),
        ({"FILEHOST_REDIS_MODE": "cluster", "REDIS_URL": "redis://a:1?db=3"}, "database 0"),
        ({"REDIS_URL": "redis://:pw@/2"}, "REDIS_URL must name the server's host"),
        ({"FILEHOST_CLUSTER_SEEDS": "a:1", "REDIS_URL": "redis://a:1"}, "FILEHOST_REDIS_MODE"),
        (
            {
                "FILEHOST_REDIS_MODE": "cluster",
                "REDIS_URL": "redis://a:1",
                "FILEHOST_REPLICA_WAIT_MS": "100",
            },
            "FILEHOST_REPLICA_WAIT_MS",
        ),
    ],
)
def test_inconsistent_topologies_are_refused(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_settings(env)


async def test_the_hot_connection_never_uses_a_replica(tmp_path: Path) -> None:
    master = data_node(tmp_path / "master")
    replica = data_node(tmp_path / "replica")
    replica.args += ("--replicaof", "127.0.0.1", str(master.port))
    try:
        master.start()
        replica.start()

        def synced() -> bool:
            with replica.client() as client:
                return client.info("replication").get("master_link_status") == "up"

        wait_until("the replica to sync", synced)
        where = {"port": replica.port}

        async def locate() -> tuple[str, int]:
            return "127.0.0.1", where["port"]

        hot = PipelinedRedis("redis://x/0", 1.0, locate=locate, require_master=True)
        try:
            # Told the replica is the master (a stale answer): refused at connection.
            with pytest.raises(RedisConnectionError):
                await hot.execute("GET", "k")
            where["port"] = master.port
            assert await hot.execute("SET", "k", "v") == "OK"

            # The master is demoted while connected: the write's READONLY drops the connection
            # (every command on it fails), and the next command finds the master again.
            with master.client() as client:
                client.replicaof("127.0.0.1", replica.port)
            with replica.client() as client:
                client.replicaof("NO", "ONE")
            with pytest.raises(RedisConnectionError):
                await asyncio.gather(hot.execute("SET", "k", "w"), hot.execute("GET", "k"))
            where["port"] = replica.port
            assert await hot.execute("SET", "k", "w") == "OK"
        finally:
            await hot.aclose()
    finally:
        replica.stop()
        master.stop()


async def test_credential_writes_wait_for_a_replica_and_say_when_none_has_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from service.store.topology import ReplicaWait, connect_redis

    class Store:
        """Stands in for a store: the writes it names in WAITS_FOR_REPLICA wait, others not."""

        WAITS_FOR_REPLICA = ("revoke",)

        def __init__(self) -> None:
            self.calls: list[str] = []

        async def revoke(self) -> str:
            self.calls.append("revoke")
            return "revoked"

        async def find(self) -> str:
            self.calls.append("find")
            return "found"

    master = data_node(tmp_path / "master")
    replica = data_node(tmp_path / "replica")
    replica.args += ("--replicaof", "127.0.0.1", str(master.port))
    caplog.set_level("WARNING", logger="service.store")
    try:
        master.start()
        client = connect_redis(f"redis://127.0.0.1:{master.port}/0", 2.0)
        try:
            store = Store()
            ReplicaWait(client, "fh", 300).wrap([store])
            # No replica: the write is answered all the same, and the warning says so.
            assert await store.revoke() == "revoked"
            assert [r.getMessage() for r in caplog.records] == [
                "a write is on no replica after 300 ms"
            ]
            caplog.clear()
            assert await store.find() == "found"  # reads never wait
            assert caplog.records == []

            replica.start()

            def synced() -> bool:
                # As the master sees it: WAIT counts only replicas the master has online, which
                # may come a moment after the replica reports its link up.
                with master.client() as sync:
                    info = sync.info("replication")
                replica_state = info.get("slave0")
                return isinstance(replica_state, dict) and replica_state.get("state") == "online"

            wait_until("the replica to sync", synced)
            # Waiting up to 10 s: a busy machine's replica may ack later than 300 ms, and a
            # replica that has it returns at once.
            synced_store = Store()
            ReplicaWait(client, "fh", 10_000).wrap([synced_store])
            assert await synced_store.revoke() == "revoked"
            assert caplog.records == []  # the replica had it in time
            with replica.client() as sync:
                assert sync.exists("fh:replicated")  # the marker that WAIT followed
            assert (store.calls, synced_store.calls) == (["revoke", "find"], ["revoke"])
        finally:
            await client.aclose()
    finally:
        replica.stop()
        master.stop()
