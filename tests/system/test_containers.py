"""The container set-up: docker-compose.yml as a compose client renders it, and the package the
Dockerfile installs.

No Docker engine is needed (CI has none): ``docker compose config`` (or Debian's
``docker-compose``, which scripts/test installs when the plugin is missing) validates and renders
the file, and the properties that keep data safe are checked on what it rendered. The image's
``pip install .`` is stood in for by building the same wheel and looking inside it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.config import load_settings
from tests.support.compose import answers, compose_clients
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    for client in compose_clients():
        if not answers(client):
            continue
        result = subprocess.run(
            [*client, "-f", str(ROOT / "docker-compose.yml"), "config"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert result.returncode == 0, f"{' '.join(client)} config refused it:\n{result.stderr}"
        return yaml.safe_load(result.stdout)
    pytest.fail("no compose client (docker compose, docker-compose) to check docker-compose.yml")


def test_redis_fsyncs_every_write_to_its_append_only_file(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command
    assert "--appendfsync always" in command
    assert any(
        str(volume).endswith(":/data") or "/data" in str(volume) for volume in redis["volumes"]
    )


def test_redis_has_a_healthcheck_and_the_service_waits_for_it(compose: dict[str, Any]) -> None:
    redis, auth = compose["services"]["redis"], compose["services"]["auth"]
    assert redis["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]
    assert auth["depends_on"]["redis"]["condition"] == "service_healthy"


def test_the_service_runs_one_worker_per_core_against_the_redis_service(
    compose: dict[str, Any],
) -> None:
    environment = compose["services"]["auth"]["environment"]
    settings = load_settings({key: str(value) for key, value in environment.items()})
    assert environment["FILEHOST_WORKERS"] == "auto"
    assert settings.workers >= 1
    assert re.fullmatch(r"redis://redis:6379/\d+", settings.redis_url or "")


def test_docker_waits_for_a_graceful_shutdown(compose: dict[str, Any]) -> None:
    grace = load_settings({}).shutdown_grace_seconds
    period = str(compose["services"]["auth"]["stop_grace_period"])
    assert re.fullmatch(r"\d+s", period), period
    assert int(period[:-1]) >= 2 * grace + 5  # aiohttp may take twice the grace, then cleanup


def test_uploaded_files_live_on_a_volume_the_service_may_write(compose: dict[str, Any]) -> None:
    """The image's working directory belongs to root: files must go to a directory the
    service's user owns, kept on a volume so they outlive the container."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "FILEHOST_DATA_DIR=/data" in dockerfile
    assert "chown filehost /data" in dockerfile
    volumes = compose["services"]["auth"]["volumes"]
    assert any(
        (volume.get("target") if isinstance(volume, dict) else str(volume).split(":")[1]) == "/data"
        for volume in volumes
    ), volumes


def test_the_port_is_published_on_loopback_only(compose: dict[str, Any]) -> None:
    # Behind a reverse proxy on the same host; never open to the network by accident.
    ports = compose["services"]["auth"]["ports"]
    assert ports and all(str(port).startswith("127.0.0.1:") for port in ports)


def test_the_image_installs_a_package_with_every_file_the_service_serves(tmp_path: Path) -> None:
    """The Dockerfile installs the locked versions, then copies the sources and runs ``pip
    install --no-deps .``; the same build must carry the dashboard's files and the OpenAPI
    document, which are not Python modules."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --no-cache-dir --require-hashes -r requirements/run.txt" in dockerfile
    assert "pip install --no-cache-dir --no-deps ." in dockerfile
    assert 'CMD ["filehost-auth", "serve"]' in dockerfile  # the installed command
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("filehost_auth-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        path.relative_to(ROOT).as_posix()
        for folder in ("service/dashboard/static",)
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
    }
    assert sources and sources <= names
    assert "service/api/openapi.json" in names
    [entry_points] = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "filehost-auth = service.cli:main" in scripts
