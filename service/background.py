"""Fire-and-forget writes that must not delay a response (last use of a key, session renewal).

Each task is kept referenced until done, its failure is logged (never with a secret), and the
app waits for pending ones at shutdown so nothing acknowledged is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("service.background")


class BackgroundWrites:
    def __init__(self, limit: int = 10_000) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._limit = limit

    def spawn(self, what: str, coroutine: Coroutine[Any, Any, Any]) -> None:
        if len(self._tasks) >= self._limit:
            # Redis is slow or down; these writes are advisory, so shed them rather than pile up.
            coroutine.close()
            return
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._finished(what, done))

    def _finished(self, what: str, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is None:
            return
        log.warning("background write failed: %s: %s", what, type(error).__name__)
        # The failed frames would otherwise outlive the task in a cycle (a timeout's context
        # manager, a local of one of them, holds the task, which holds the error's traceback),
        # left for the collector: on the gateway's path, requests are meant to make no garbage.
        seen: set[int] = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            traceback.clear_frames(error.__traceback__)
            error = error.__cause__ or error.__context__

    async def drain(self, seconds: float = 5.0) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=seconds)
