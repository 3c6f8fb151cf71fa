"""aiohttp's private names stay behind one fence (``service.api._aiohttp``): every name it uses is
on the installed aiohttp, the installed aiohttp is in the tested range the project states, no
other module of the service imports an aiohttp module beyond the public ones or reaches into
aiohttp's internals, and the fence imports nothing of the service (what it needs is handed in).

Every module of ``service/`` is read (``ast``), so a new one is covered as it is written."""

from __future__ import annotations

import ast
import pkgutil
import re
import tomllib
from pathlib import Path

import aiohttp

from service.api._aiohttp import names

ROOT = Path(__file__).resolve().parents[2]
FENCE = ROOT / "service" / "api" / "_aiohttp"
FENCE_PACKAGE = "service.api._aiohttp"
# aiohttp's public modules, the ones its documentation tells applications to import: the package
# itself (its ``__all__``), ``web``, ``hdrs``, ``abc`` (the abstract classes to subclass, such as
# the access logger), ``typedefs`` (the ``Handler`` and ``Middleware`` aliases it gives for
# annotating them) and the testing ones. Every other module of aiohttp is its own business: only
# the fence may import it.
PUBLIC_MODULES = frozenset(
    {
        "aiohttp",
        "aiohttp.web",
        "aiohttp.hdrs",
        "aiohttp.abc",
        "aiohttp.typedefs",
        "aiohttp.test_utils",
        "aiohttp.pytest_plugin",
    }
)
AIOHTTP_MODULES = frozenset(
    f"aiohttp.{module.name}" for module in pkgutil.iter_modules(aiohttp.__path__)
)


def test_every_private_name_the_fence_uses_is_on_the_installed_aiohttp() -> None:
    assert names.missing_names() == []
    assert names.FAST_PATHS


def test_the_names_the_protections_need_are_listed_and_installed() -> None:
    for owner, needed in names.PROTECTION_NAMES.items():
        assert set(needed) <= set(names.PRIVATE_NAMES[owner]), owner
    assert names.missing_protection_names() == []


def test_every_private_name_listed_is_used_by_the_fence() -> None:
    """The list is what the fence relies on, no more: a name no longer used leaves it."""
    source = "\n".join(
        path.read_text() for path in sorted(FENCE.glob("*.py")) if path.name != "names.py"
    )
    unused = [
        f"{owner}.{name}"
        for owner, listed in names.PRIVATE_NAMES.items()
        for name in listed
        if not re.search(rf"[.\"']{re.escape(name)}\b", source)
    ]
    assert unused == []


def test_the_installed_aiohttp_is_in_the_range_pyproject_requires() -> None:
    low, high = names.TESTED_AIOHTTP
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirement = next(
        item for item in project["project"]["dependencies"] if item.startswith("aiohttp")
    )
    assert requirement.replace(" ", "") == f"aiohttp>={low},<{high}"
    installed = names._version(aiohttp.__version__)
    assert names._version(low) <= installed < names._version(high)


def _service_modules_outside_the_fence() -> list[Path]:
    return [
        path
        for path in (ROOT / "service").rglob("*.py")
        if FENCE not in path.parents and path.parent != FENCE
    ]


def _is_private(module: str) -> bool:
    return module.split(".")[0] == "aiohttp" and module not in PUBLIC_MODULES


def private_modules_used(tree: ast.AST) -> list[str]:
    """The aiohttp modules beyond the public ones that ``tree`` imports or reaches through
    ``aiohttp.<module>``, with their line numbers."""
    used = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module]
            if node.module == "aiohttp":  # ``from aiohttp import http``: a module too
                modules += [
                    f"aiohttp.{alias.name}"
                    for alias in node.names
                    if f"aiohttp.{alias.name}" in AIOHTTP_MODULES
                ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "aiohttp"
            and f"aiohttp.{node.attr}" in AIOHTTP_MODULES
        ):
            modules = [f"aiohttp.{node.attr}"]
        used += [f"{node.lineno}: {module}" for module in modules if _is_private(module)]
    return used


def test_no_module_outside_the_fence_imports_aiohttps_private_modules() -> None:
    modules = _service_modules_outside_the_fence()
    assert len(modules) > 50, "the walk found the service's modules"
    offenders = [
        f"{path.relative_to(ROOT)}:{used}"
        for path in modules
        for used in private_modules_used(ast.parse(path.read_text()))
    ]
    assert offenders == []


def test_the_check_notices_every_way_of_reaching_a_private_module() -> None:
    source = (
        "import aiohttp\n"
        "import aiohttp.web_protocol\n"
        "from aiohttp import http, web\n"
        "from aiohttp.http import RawRequestMessage\n"
        "from aiohttp.streams import StreamReader\n"
        "from aiohttp.hdrs import METH_GET\n"
        "from aiohttp.typedefs import Handler\n"
        "error = aiohttp.http_exceptions.HttpProcessingError\n"
        "reader = aiohttp.StreamReader\n"
    )
    assert private_modules_used(ast.parse(source)) == [
        "2: aiohttp.web_protocol",
        "3: aiohttp.http",
        "4: aiohttp.http",
        "5: aiohttp.streams",
        "8: aiohttp.http_exceptions",
    ]


def test_the_fence_imports_nothing_of_the_service_outside_itself() -> None:
    """Not even for type checking: what it needs of the service is handed in (the app keys it
    defines, the ``Lane`` protocol)."""
    offenders = []
    for path in sorted(FENCE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.ImportFrom):
                package = FENCE_PACKAGE.split(".")[: FENCE_PACKAGE.count(".") + 2 - node.level]
                base = ".".join(package) if node.level else ""
                modules = [".".join(part for part in (base, node.module) if part)]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {module}"
                for module in modules
                if module.split(".")[0] == "service"
                and module != FENCE_PACKAGE
                and not module.startswith(f"{FENCE_PACKAGE}.")
            ]
    assert offenders == []


def test_no_module_outside_the_fence_touches_a_private_name_of_aiohttps_objects() -> None:
    private = {name for listed in names.PRIVATE_NAMES.values() for name in listed}
    private -= {"feed_data", "message_consumed", "rfc822_formatted_time"}
    offenders = []
    for path in _service_modules_outside_the_fence():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert offenders == []


def test_the_check_notices_a_missing_name(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(
        names.PRIVATE_NAMES, "aiohttp.web_protocol.RequestHandler", ("_no_such_name",)
    )
    assert names.missing_names() == ["aiohttp.web_protocol.RequestHandler._no_such_name"]
