"""The locks in requirements/ are what scripts/run, scripts/test and the Dockerfile install: they
must pin every dependency pyproject.toml names, at a version it allows, with hashes, so the same
commands install the same versions on every machine until someone runs scripts/lock."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from service.api._aiohttp import names
from tests.support.paths import REPO_ROOT

PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def pins(lock: str) -> dict[str, str]:
    text = (REPO_ROOT / "requirements" / lock).read_text()
    return {canonicalize_name(name): version for name, version in PIN.findall(text)}


def hashed_everywhere(lock: str) -> bool:
    entries = re.split(r"\n(?=[A-Za-z0-9])", (REPO_ROOT / "requirements" / lock).read_text())
    pinned = [entry for entry in entries if PIN.match(entry)]
    return bool(pinned) and all("--hash=sha256:" in entry for entry in pinned)


@pytest.mark.parametrize(
    ("lock", "requirements"),
    [
        ("run.txt", PROJECT["dependencies"]),
        ("test.txt", PROJECT["dependencies"] + PROJECT["optional-dependencies"]["test"]),
    ],
)
def test_every_dependency_is_locked_at_a_version_pyproject_allows(
    lock: str, requirements: list[str]
) -> None:
    locked = pins(lock)
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in requirements/{lock}: run scripts/lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"requirements/{lock} pins {name}=={locked[name]}, outside {requirement.specifier}: "
            "run scripts/lock"
        )
    assert hashed_everywhere(lock)


def test_the_test_lock_keeps_the_services_versions() -> None:
    """The tests run the versions the service runs with."""
    run, test = pins("run.txt"), pins("test.txt")
    assert {name: test.get(name) for name in run} == run


def test_the_installer_is_locked_at_the_version_scripts_lock_runs() -> None:
    """scripts/_venv.sh installs uv from requirements/uv.txt, then the locks with it."""
    version = re.search(r"^UV_VERSION=(\S+)$", (REPO_ROOT / "scripts" / "lock").read_text(), re.M)
    assert version is not None
    assert pins("uv.txt") == {"uv": version.group(1)}
    assert hashed_everywhere("uv.txt")


def test_the_oldest_aiohttp_lock_differs_from_the_test_lock_only_where_that_aiohttp_needs() -> None:
    """scripts/test runs the aiohttp fence's tests on the oldest aiohttp pyproject.toml allows."""
    aiohttp = next(
        Requirement(line) for line in PROJECT["dependencies"] if line.startswith("aiohttp")
    )
    lowest = min(
        (spec.version for spec in aiohttp.specifier if spec.operator == ">="), default=None
    )
    oldest, test = pins("test-oldest-aiohttp.txt"), pins("test.txt")
    assert oldest["aiohttp"] == lowest == names.TESTED_AIOHTTP[0]
    assert test["aiohttp"] != lowest, "test.txt should lock the newest aiohttp, not the oldest"
    assert oldest.keys() == test.keys()
    changed = {name for name in test if oldest[name] != test[name]}
    assert changed <= {"aiohttp", *aiohttp_dependencies()}, f"{changed}: run scripts/lock"
    assert hashed_everywhere("test-oldest-aiohttp.txt")


def aiohttp_dependencies() -> set[str]:
    """What aiohttp itself requires, as the installed release's metadata names it."""
    return {
        canonicalize_name(Requirement(line).name)
        for line in importlib.metadata.requires("aiohttp") or []
    }
