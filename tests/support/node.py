"""Node.js programs the tests run: the npm projects under ``tests/system/clients/``, installed
exactly as their ``package-lock.json`` says, and commands run to their end with their output
kept, any failure failing the test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# Node.js's ExperimentalWarning for fetch on Node 18 is not the tools': silence process
# warnings so that whatever remains on stderr is the tools' own.
NODE_ENV = {"NODE_NO_WARNINGS": "1"}


def run_checked(
    command: list[str], cwd: Path, timeout: float, **env: str
) -> subprocess.CompletedProcess[str]:
    """``command`` run in ``cwd`` with ``env`` added; it must succeed."""
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, (command, result.stdout, result.stderr)
    return result


def npm_ci(project: Path) -> None:
    """``npm ci`` in ``project``: exactly the locked versions, into its node_modules."""
    run_checked(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=project,
        timeout=300,
        **NODE_ENV,
    )
