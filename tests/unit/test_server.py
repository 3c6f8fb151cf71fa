"""``service.server``'s parts that can be checked without starting processes (``test_serve``
runs them as an operator does)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from aiohttp import web

from service.server import YOUNG_GENERATION_THRESHOLD, _settle_heap


@pytest.fixture
def collector_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


async def test_a_started_worker_sets_its_start_up_heap_aside_and_collects_less_often(
    collector_restored: None,
) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    made_at_start_up = web.Application()  # stands for what a worker's start-up made
    older, oldest = gc.get_threshold()[1:]

    await _settle_heap(web.Application())

    assert gc.get_freeze_count() > 0
    # Frozen objects are in no generation: no collection walks them again.
    assert all(thing is not made_at_start_up for thing in gc.get_objects())
    assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD, older, oldest)
