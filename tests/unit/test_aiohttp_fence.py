"""aiohttp's private names stay behind one fence (``service.api._aiohttp``): every name it uses is
on the installed aiohttp, the installed aiohttp is in the tested range the project states, and
no other module reaches into aiohttp's internals."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import aiohttp

from service.api._aiohttp import names

ROOT = Path(__file__).resolve().parents[2]
FENCE = ROOT / "service" / "api" / "_aiohttp"
# aiohttp modules that are not its public interface: only the fence may import them.
PRIVATE_MODULES = (
    "aiohttp.web_protocol",
    "aiohttp.web_urldispatcher",
    "aiohttp.web_response",
    "aiohttp.web_server",
    "aiohttp.web_runner",
    "aiohttp.http_parser",
    "aiohttp.http_writer",
    "aiohttp.helpers",
    "aiohttp.base_protocol",
)


def test_every_private_name_the_fence_uses_is_on_the_installed_aiohttp() -> None:
    assert names.missing_names() == []
    assert names.FAST_PATHS


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


def test_no_module_outside_the_fence_imports_aiohttps_private_modules() -> None:
    offenders = []
    for path in _service_modules_outside_the_fence():
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            for module in modules:
                if module.startswith(PRIVATE_MODULES):
                    offenders.append(f"{path.relative_to(ROOT)}: {module}")
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
