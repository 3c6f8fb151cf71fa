"""The compose files of the scaled-out topologies (deploy/compose/, docs/scaling.md), as a compose
client renders them (``docker compose config`` or Debian's ``docker-compose``; no engine needed):
every Redis data node fsyncs every write, the service's settings load and name the topology, and
the sentinels, the cluster and the object store are wired as the docs say."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from service.config import load_settings
from tests.support.compose import answers, compose_clients
from tests.support.paths import REPO_ROOT

COMPOSE = REPO_ROOT / "deploy" / "compose"


def render(name: str) -> dict[str, Any]:
    for client in compose_clients():
        if not answers(client):
            continue
        result = subprocess.run(
            [*client, "-f", str(COMPOSE / name), "config"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=COMPOSE,
        )
        assert result.returncode == 0, f"{' '.join(client)} config refused {name}:\n{result.stderr}"
        return yaml.safe_load(result.stdout)
    pytest.fail("no compose client (docker compose, docker-compose) to check the compose files")


def command(service: dict[str, Any]) -> str:
    return " ".join(service["command"])


def auth_settings(compose: dict[str, Any]) -> list[Any]:
    found = []
    for name, service in compose["services"].items():
        if name.startswith("auth"):
            environment = {key: str(value) for key, value in service["environment"].items()}
            found.append(load_settings(environment))
            assert int(str(service["stop_grace_period"]).removesuffix("s")) >= 25
    assert len(found) == 2  # two instances of the service
    return found


def test_sentinel_compose() -> None:
    compose = render("sentinel.yml")
    services = compose["services"]
    for name in ("redis-master", "redis-replica"):
        assert "--appendfsync always" in command(services[name])
    assert "--replicaof redis-master 6379" in command(services["redis-replica"])
    sentinels = [name for name in services if name.startswith("sentinel-")]
    assert len(sentinels) == 3
    for name in sentinels:
        assert "sentinel monitor filehost redis-master 6379 2" in command(services[name])
    for settings in auth_settings(compose):
        assert settings.redis_mode == "sentinel"
        assert settings.sentinel_master == "filehost"
        assert {host for host, _ in settings.sentinels} == set(sentinels)
        assert settings.replica_wait_ms > 0


def test_cluster_compose() -> None:
    compose = render("cluster.yml")
    services = compose["services"]
    nodes = [name for name in services if name.startswith("redis-")]
    assert len(nodes) == 6
    for name in nodes:
        assert "--cluster-enabled yes" in command(services[name])
        assert "--cluster-require-full-coverage no" in command(services[name])
        assert "--appendfsync always" in command(services[name])
    assert "--cluster-replicas 1" in command(services["cluster-create"])
    for settings in auth_settings(compose):
        assert settings.redis_mode == "cluster"
        assert settings.redis_url == "redis://redis-1:6379/0"
        assert len(settings.cluster_seeds) == 2


def test_object_storage_compose() -> None:
    compose = render("object-storage.yml")
    services = compose["services"]
    assert "--appendfsync always" in command(services["redis"])
    store = " ".join(services["seaweedfs"]["entrypoint"])
    assert "weed mini" in store and "-bucket=filehost" in store
    for settings, name in zip(auth_settings(compose), ("auth-1", "auth-2"), strict=True):
        assert settings.blob_store == "s3" and settings.object_store is not None
        assert settings.object_store.endpoint == "http://seaweedfs:8333"
        assert settings.object_store.bucket == "filehost"
        assert settings.object_store.access_key_id is not None
        # Nothing shared but Redis and the bucket: a data directory each.
        [volume] = services[name]["volumes"]
        source = volume["source"] if isinstance(volume, dict) else volume.split(":", 1)[0]
        assert source.endswith(f"{name}-data")
