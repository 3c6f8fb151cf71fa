"""Fire-and-forget writes: a failed one is logged and leaves nothing for the garbage collector."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from service.background import BackgroundWrites


async def a_write_that_times_out() -> None:
    async with asyncio.timeout(0.01):  # as redis-py's commands wait for a reply
        await asyncio.sleep(1)


async def test_a_write_that_times_out_is_logged_and_leaves_no_reference_cycle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Without clearing its frames, the failed task, its timeout and its traceback's frames hold
    # one another: garbage on the gateway's path, which is meant to make none.
    writes = BackgroundWrites()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage
    try:
        with caplog.at_level(logging.WARNING, logger="service.background"):
            writes.spawn("key last use", a_write_that_times_out())
            await writes.drain()
            await asyncio.sleep(0)  # the done callback
        gc.collect()
        left = [type(thing).__name__ for thing in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert "background write failed: key last use: TimeoutError" in caplog.text
    assert left == []
