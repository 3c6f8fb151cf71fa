"""Fixtures the API tests share: the gateway lane's (a service with it and one without, on one
store; what the lane took)."""

from __future__ import annotations

from typing import Any

import pytest

from service.api.context import GATEWAY_LANE
from tests.support.api import Api
from tests.support.lane import LANE_PUBLIC_URL, count_lane_answers


@pytest.fixture
def lane_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests the lane took, in order (``count_lane_answers``)."""
    return count_lane_answers(monkeypatch)


@pytest.fixture
async def both(make_api: Any) -> tuple[Api, Api]:
    """The same service twice, on one store: with the gateway lane, and without it; both under
    a public URL, without which the lane leaves ``GET /files`` to aiohttp (a file's url is
    made from it)."""
    lane = await make_api(public_url=LANE_PUBLIC_URL)
    plain = await make_api(gateway_lane=False, public_url=LANE_PUBLIC_URL)
    assert GATEWAY_LANE in lane.app and GATEWAY_LANE not in plain.app
    return lane, plain
