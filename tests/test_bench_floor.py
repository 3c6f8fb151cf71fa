"""The benchmark's auth bypass can never be switched on in a deployment."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from service.bench_floor import is_loopback, main
from service.config import Settings, load_settings
from tests.conftest import Api, assert_error

ROOT = Path(__file__).resolve().parent.parent


def test_no_setting_or_environment_variable_enables_the_bypass() -> None:
    assert not any("bench" in f.name or "bypass" in f.name for f in fields(Settings))
    env = {"FILEHOST_BENCH_FLOOR": "1", "FILEHOST_AUTH_BYPASS": "1", "BENCH_FLOOR_USER": "u"}
    assert load_settings(env) == Settings()


def test_the_cli_has_no_way_to_start_the_floor() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "bench" not in help_text and "bypass" not in help_text


def test_the_floor_refuses_to_listen_beyond_loopback(monkeypatch, capsys) -> None:
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com"):
        assert not is_loopback(host)
        monkeypatch.setenv("FILEHOST_HOST", host)
        monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
        assert main(["--user-id", "usr_x"]) == 2
        assert "loopback" in capsys.readouterr().err
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")


def test_the_floor_needs_an_explicit_store(monkeypatch, capsys) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("FILEHOST_HOST", "127.0.0.1")
    assert main(["--user-id", "usr_x"]) == 2


async def test_the_normal_app_still_demands_a_credential(api: Api) -> None:
    await assert_error(await api.files(), 401, "credential_missing")
    assert "FILEHOST_BENCH_FLOOR" not in os.environ


async def test_the_floor_app_serves_files_without_a_credential(aiohttp_client, settings) -> None:
    from service.app import create_app

    client = await aiohttp_client(create_app(settings, bench_floor_user="usr_floor"))
    response = await client.get("/api/v1/files")
    assert response.status == 200
    assert await response.json() == {"success": True, "data": {"files": []}}
