"""The hourly sweep of what failed uploads left ends when the worker stops, even when a store's
client swallows the cancellation that should have ended it."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

import pytest

from service import app as service_app


class LosesCancellation:
    """A blob store whose sweep swallows a cancellation that lands while it runs, as a store's
    client may: the sweep ends as if nothing had happened."""

    def __init__(self) -> None:
        self.sweeping = asyncio.Event()
        self.sweeps = 0

    async def sweep(self, keep: Any) -> int:
        self.sweeps += 1
        self.sweeping.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.2)
        return 0


class NoUploads:
    async def live_file_ids(self) -> set[str]:
        return set()

    async def sweep(self) -> int:
        return 0


async def test_a_stop_ends_the_sweeping_even_if_a_store_loses_its_cancellation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(service_app, "SWEEP_SECONDS", 0.6)  # the first sweep at 10–20 ms
    blobs = LosesCancellation()
    policy = SimpleNamespace(uploads=NoUploads())
    stopping = asyncio.Event()
    sweeping = asyncio.ensure_future(service_app._sweep_every_hour(policy, blobs, stopping))  # type: ignore[arg-type]
    await asyncio.wait_for(blobs.sweeping.wait(), 5)
    stopping.set()
    sweeping.cancel()
    done, _ = await asyncio.wait({sweeping}, timeout=5)
    if not done:  # the loop never ended: end it, to fail with the assertion below
        stopping.clear()
        while not sweeping.done():
            sweeping.cancel()
            await asyncio.sleep(0.05)
    assert done, "the stop waited on a sweeping loop that never ends"
    assert blobs.sweeps == 1


async def test_the_sweep_runs_again_after_its_pause_until_the_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(service_app, "SWEEP_SECONDS", 0.05)
    blobs = LosesCancellation()
    policy = SimpleNamespace(uploads=NoUploads())
    stopping = asyncio.Event()
    sweeping = asyncio.ensure_future(service_app._sweep_every_hour(policy, blobs, stopping))  # type: ignore[arg-type]
    for _ in range(100):
        if blobs.sweeps >= 3:
            break
        await asyncio.sleep(0.05)
    stopping.set()
    await asyncio.wait_for(sweeping, 5)
    assert blobs.sweeps >= 3
