"""The shape the code keeps so a reader finds one thing per module: no module of the service
(Python or the dashboard's JavaScript) grows past 600 lines; one that would is split by what it
holds, as ``service/store/`` is by aggregate."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import REPO_ROOT as ROOT

LIMIT = 600


def modules() -> list[Path]:
    service = ROOT / "service"
    return sorted([*service.rglob("*.py"), *service.rglob("*.js")])


def test_no_module_of_the_service_passes_600_lines() -> None:
    sizes = {path: len(path.read_text().splitlines()) for path in modules()}
    assert len(sizes) > 50, "the walk found the service's modules"
    too_long = {
        str(path.relative_to(ROOT)): lines for path, lines in sizes.items() if lines > LIMIT
    }
    assert not too_long, too_long
