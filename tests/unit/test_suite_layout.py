"""The test suite's own house rules: what the tests share lives in ``tests/support``, and nothing
else under ``tests/`` is imported. A test module that imports another drags that module's tests,
fixtures and import-time work along, and moving or renaming a test then breaks an unrelated one.
``conftest.py`` files hold fixtures and pytest hooks only; their helpers are in ``tests/support``
too. Imports are read with ``ast``, relative ones resolved, function-level ones included."""

from __future__ import annotations

import ast
import functools
import os
import tomllib
from pathlib import Path

import pytest

from service.store.embedded import bundled_server_binary
from tests.support.redis import SERVER_VARIABLE, server_binary

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SUPPORT = "tests.support"
# What starts processes of a test's own, and what drives a browser: a test module that imports
# any of these belongs in tests/system (or marks its tests ``system``) or in tests/browser, so
# the quick loop (-m "not system and not browser") stays free of them.
SPAWNING = (
    "subprocess",
    "tests.support.processes",
    "tests.support.clients",
    "tests.support.cluster",
    "tests.support.compose",
    "tests.support.generated_clients",
    "tests.support.proxies",
)
BROWSING = ("playwright", "tests.support.browser")


def module_of(path: Path) -> str:
    """The dotted name ``path`` is imported as (a package by its ``__init__.py``)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module name ``source`` (the text of ``module``) imports: ``import a.b`` names
    ``a.b``; ``from a import b`` names ``a`` and ``a.b`` (``b`` may be a module), relative
    imports resolved against ``module``'s package."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            found.add(origin)
            found.update(f"{origin}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def forbidden(names: set[str]) -> set[str]:
    """The names among ``names`` that reach into ``tests/`` other than through ``tests/support``,
    shortest first: ``from tests.api.test_ops import value`` is reported as ``tests.api.test_ops``.
    The ``tests`` package itself is allowed, as the way to ``tests.support``."""
    bad = {
        name
        for name in names
        if name.startswith("tests.") and name != SUPPORT and not name.startswith(SUPPORT + ".")
    }
    return {name for name in bad if not any(name.startswith(other + ".") for other in bad)}


def python_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


@functools.cache
def imports_of(path: Path) -> frozenset[str]:
    return frozenset(
        imported(path.read_text(), module_of(path), is_package=path.name == "__init__.py")
    )


def test_no_file_under_tests_imports_a_test_module_or_a_conftest() -> None:
    offenders = {}
    for path in python_files():
        bad = forbidden(set(imports_of(path)))
        if bad:
            offenders[path.relative_to(ROOT).as_posix()] = sorted(bad)
    assert offenders == {}, "import these from tests/support instead"


def test_conftest_files_hold_fixtures_and_hooks_only() -> None:
    """No helper class or function in a conftest.py: each function is a fixture or a
    ``pytest_*`` hook (constants a hook reads may stay beside it)."""
    offenders = []
    for path in TESTS.rglob("conftest.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                offenders.append(f"{path.relative_to(ROOT)}: class {node.name}")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                fixture = any("fixture" in ast.unparse(d) for d in node.decorator_list)
                if not fixture and not node.name.startswith("pytest_"):
                    offenders.append(f"{path.relative_to(ROOT)}: def {node.name}")
    assert offenders == []


def _uses(names: set[str], modules: tuple[str, ...]) -> bool:
    return any(name == m or name.startswith(m + ".") for name in names for m in modules)


def test_modules_that_spawn_processes_or_drive_a_browser_are_in_their_folders() -> None:
    misplaced = []
    for path in python_files():
        if path.name == "conftest.py" or path.name == "__init__.py":
            continue
        folder = path.relative_to(TESTS).parts[0]
        if folder in ("support", "system", "browser") or path == Path(__file__).resolve():
            continue
        source = path.read_text()
        names = set(imports_of(path))
        if _uses(names, SPAWNING) and "pytest.mark.system" not in source:
            misplaced.append(f"{path.relative_to(ROOT)}: spawns processes, not marked system")
        if _uses(names, BROWSING):
            misplaced.append(f"{path.relative_to(ROOT)}: drives a browser outside tests/browser")
    assert misplaced == []


def test_pytest_knows_the_markers_and_refuses_unknown_ones() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in config["addopts"].split()
    assert {entry.split(":")[0] for entry in config["markers"]} >= {"system", "browser"}


def test_ci_runs_the_suite_and_then_the_api_suite_on_a_cluster() -> None:
    """The API suite's run on a Redis Cluster is a step of scripts/test (a second pytest run),
    not a test that nests pytest; CI runs scripts/test, so it runs both."""
    assert "exec scripts/test -p no:cacheprovider" in (ROOT / ".ci" / "run").read_text()
    script = (ROOT / "scripts" / "test").read_text()
    assert "tests/api tests/store tests/system/test_schemathesis.py --redis cluster" in script


def test_support_modules_are_found_where_the_rule_says() -> None:
    support = {module_of(path) for path in (TESTS / "support").glob("*.py")}
    assert {"tests.support.redis", "tests.support.api", "tests.support.processes"} <= support
    assert all(not name.split(".")[-1].startswith("test_") for name in support)


def test_the_check_notices_every_way_of_importing_a_test_module() -> None:
    module = "tests.api.test_example"
    assert forbidden(imported("from tests.api.test_ops import value\n", module)) == {
        "tests.api.test_ops"
    }
    assert forbidden(imported("from tests.api import test_ops\n", module)) == {"tests.api"}
    assert forbidden(imported("from tests import conftest\n", module)) == {"tests.conftest"}
    assert forbidden(imported("import tests.test_serve\n", module)) == {"tests.test_serve"}
    assert forbidden(imported("from tests.conftest import Api\n", module)) == {"tests.conftest"}
    assert forbidden(imported("from .test_keys import LIST_FIELDS\n", module)) == {
        "tests.api.test_keys"
    }
    assert forbidden(imported("from ..browser.conftest import Tab\n", module)) == {
        "tests.browser.conftest"
    }
    inside = "def test_x():\n    from tests.api.test_files import uploaded\n"
    assert forbidden(imported(inside, module)) == {"tests.api.test_files"}
    # What is allowed: the support package, its modules, and anything outside tests/.
    allowed = (
        "from tests.support.api import Api\n"
        "from tests.support import metrics\n"
        "from tests import support\n"
        "import tests.support.redis\n"
        "from service.app import create_app\n"
        "import pytest\n"
    )
    assert forbidden(imported(allowed, module)) == set()


def test_the_tests_server_is_the_pinned_one_whatever_is_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redis-server on PATH is not what the fixtures start; the variable is."""
    for name in ("redis-server", "valkey-server"):
        (tmp_path / name).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    monkeypatch.delenv(SERVER_VARIABLE, raising=False)
    assert server_binary() == bundled_server_binary()

    monkeypatch.setenv(SERVER_VARIABLE, "redis-server")
    assert server_binary() == str(tmp_path / "redis-server")
    monkeypatch.setenv(SERVER_VARIABLE, str(tmp_path / "missing"))
    with pytest.raises(RuntimeError, match=SERVER_VARIABLE):
        server_binary()


def test_every_test_run_case_by_case_on_the_cluster_is_a_parametrized_api_test() -> None:
    # Read, not imported (tests/support/cluster starts processes): a renamed test would else
    # drop to its first case on the cluster without a word.
    tree = ast.parse((TESTS / "support" / "cluster.py").read_text())
    listed = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == "EVERY_CASE_ON_THE_CLUSTER" for t in node.targets)
    )
    names = [c.value for c in ast.walk(listed) if isinstance(c, ast.Constant)]
    assert len(names) > 10
    for name in names:
        path, _, test = name.partition("::")
        module = ast.parse((ROOT / path).read_text())
        found = [
            node
            for node in module.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == test
        ]
        assert found, name
        assert any("parametrize" in ast.unparse(d) for d in found[0].decorator_list), name
