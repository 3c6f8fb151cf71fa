"""Every test under tests/system spawns processes of its own (``serve``, the CLI, Redis
topologies, nginx, a compose client): each is marked ``system``, so ``-m "not system"`` (the
quick loop) leaves them out. A test elsewhere that spawns one carries
``@pytest.mark.system`` itself."""

from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    # Called through the item's own hook proxy: only for items under this folder.
    item.add_marker(pytest.mark.system)
