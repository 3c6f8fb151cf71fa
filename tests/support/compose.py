"""The compose clients that can render docker-compose files without a Docker engine."""

from __future__ import annotations

import subprocess


def compose_clients() -> list[list[str]]:
    return [["docker", "compose"], ["docker-compose"]]


def answers(client: list[str]) -> bool:
    try:
        return subprocess.run([*client, "version"], capture_output=True, timeout=60).returncode == 0
    except FileNotFoundError:
        return False
