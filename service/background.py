"""Fire-and-forget writes that must not delay a response (last use of a key, session renewal).

Each task is kept referenced until done, its failure is logged (never with a secret), and the
app waits for pending ones at shutdown so nothing acknowledged is dropped.
"""

from __future__ import annotations

import asyncio
import logging
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
        if not task.cancelled() and task.exception() is not None:
            log.warning("background write failed: %s: %s", what, type(task.exception()).__name__)

    async def drain(self, seconds: float = 5.0) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=seconds)
