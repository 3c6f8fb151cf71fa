"""Clients generated from the service's OpenAPI document, as integrators generate them: a Python
one (openapi-python-client, from the test extra's lock) and a TypeScript one (openapi-typescript's
types with openapi-fetch, from ``tests/system/clients/typescript``'s ``package-lock.json``).

Everything generated goes to a directory the caller gives (a test's ``tmp_path``); nothing is
written into the repository except the TypeScript project's ``node_modules`` (git-ignored),
installed with ``npm ci``. A generator's warning fails the generation: a schema or an operation it
skipped is a client that silently lacks it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.support.node import NODE_ENV, npm_ci, run_checked
from tests.support.paths import REPO_ROOT

TYPESCRIPT_PROJECT = REPO_ROOT / "tests" / "system" / "clients" / "typescript"
# The generator integrators run too (docs/api.md), kept with the project's scripts.
TYPESCRIPT_GENERATOR = REPO_ROOT / "scripts" / "generate-typescript-client.mjs"
# What the generator and flow.ts need beside them to be built and run.
TYPESCRIPT_SOURCES = ("package.json", "tsconfig.json", "flow.ts")
PYTHON_PACKAGE = "filehost_client"


def generate_python_client(document_url: str, into: Path) -> Path:
    """Generate the Python client into ``into/filehost_client``; any warning fails. The
    generator formats its output with ruff, found on ``PATH``: the test venv's, beside
    ``sys.executable``."""
    output = into / PYTHON_PACKAGE
    result = run_checked(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--url",
            document_url,
            "--meta",
            "none",
            "--output-path",
            str(output),
            "--fail-on-warning",
        ],
        cwd=into,
        timeout=120,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    said = result.stdout + result.stderr
    assert not re.search(r"warning|error|unable|skipp", said, re.IGNORECASE), said
    return output


class GeneratedPackage:
    """The generated Python client's modules by their dotted path inside it:
    ``package["api.files.upload_file"]``, ``package["models"]``."""

    def __init__(self, package: ModuleType) -> None:
        self.package = package

    def __getitem__(self, name: str) -> Any:
        return importlib.import_module(f"{self.package.__name__}.{name}")


@contextlib.contextmanager
def imported_python_client(into: Path) -> Iterator[GeneratedPackage]:
    """The package ``generate_python_client`` wrote, imported from ``into`` and forgotten after."""
    sys.path.insert(0, str(into))
    try:
        yield GeneratedPackage(importlib.import_module(PYTHON_PACKAGE))
    finally:
        sys.path.remove(str(into))
        for name in [n for n in sys.modules if n.split(".")[0] == PYTHON_PACKAGE]:
            del sys.modules[name]


def node_major_version() -> int:
    version = run_checked(["node", "--version"], cwd=REPO_ROOT, timeout=30).stdout.strip()
    return int(version.removeprefix("v").split(".")[0])


def install_typescript_tools() -> None:
    """``npm ci`` in the TypeScript project: exactly the locked versions, into its node_modules."""
    npm_ci(TYPESCRIPT_PROJECT)


def build_typescript_client(document_url: str, into: Path) -> Path:
    """Generate the types from the live document into ``into``, and type-check and compile
    ``flow.ts`` against them (tsc, no output on any error); the compiled ``flow.js``. Needs
    ``install_typescript_tools()`` first."""
    for name in TYPESCRIPT_SOURCES:
        shutil.copy(TYPESCRIPT_PROJECT / name, into / name)
    shutil.copy(TYPESCRIPT_GENERATOR, into / TYPESCRIPT_GENERATOR.name)
    (into / "node_modules").symlink_to(TYPESCRIPT_PROJECT / "node_modules")
    generated = run_checked(
        ["node", TYPESCRIPT_GENERATOR.name, document_url, "schema.d.ts"],
        cwd=into,
        timeout=120,
        **NODE_ENV,
    )
    assert generated.stderr == "", generated.stderr
    run_checked(["node", "node_modules/typescript/bin/tsc", "-p", "."], cwd=into, timeout=300)
    return into / "build" / "flow.js"


def run_typescript_flow(flow: Path, root_url: str, email: str, password: str) -> str:
    """Run the compiled flow against the service; what it printed."""
    result = run_checked(
        ["node", str(flow), root_url, email, password], cwd=flow.parent, timeout=120, **NODE_ENV
    )
    return result.stdout
