"""In-memory stores for the policy's unit tests: each implements one protocol of
``service.store.protocols`` in a few lines of Python, so that a policy runs without Redis in
milliseconds. Each is held to what the Redis store does by the same contract suite
(tests/store/test_store_contracts.py runs it on both), so a policy test cannot pass only on a
fake that behaves otherwise."""

from __future__ import annotations

import time
from collections.abc import Callable


class MemoryCounters:
    """``CounterStore``: counters with a window that starts at the first reservation."""

    def __init__(self, now_ms: Callable[[], int] | None = None) -> None:
        self._now_ms = now_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self.counts: dict[str, tuple[int, int]] = {}  # name: (count, window's end ms)

    def login_failures_by_email(self, email_digest: str) -> str:
        return f"login:email:{email_digest}"

    def login_failures_by_address(self, address: str) -> str:
        return f"login:ip:{address}"

    def leak_reports_by_address(self, address: str) -> str:
        return f"leaks:ip:{address}"

    def sso_starts_by_address(self, address: str) -> str:
        return f"sso:ip:{address}"

    def alias_guesses_by_alias_address(self, alias_id: str, address: str) -> str:
        return f"guesses:pair:{alias_id}:{address}"

    def alias_guesses_by_alias(self, alias_id: str) -> str:
        return f"guesses:alias:{alias_id}"

    def alias_guesses_by_address(self, address: str) -> str:
        return f"guesses:ip:{address}"

    def count(self, counter: str) -> int:
        """What ``counter`` holds now (0 once its window is over)."""
        count, end = self.counts.get(counter, (0, 0))
        return count if end > self._now_ms() else 0

    async def reserve(self, counters: list[tuple[str, int]], window_ms: int) -> list[int]:
        return [await self.reserve_one(counter, limit, window_ms) for counter, limit in counters]

    async def reserve_one(self, counter: str, limit: int, window_ms: int) -> int:
        now = self._now_ms()
        count, end = self.counts.get(counter, (0, 0))
        if end <= now:
            count, end = 0, now + window_ms
        if count >= limit:
            return max(end - now, 1)
        self.counts[counter] = (count + 1, end)
        return 0

    async def release(self, counters: list[str]) -> None:
        for counter in counters:
            count, end = self.counts.get(counter, (0, 0))
            if count > 0:
                self.counts[counter] = (count - 1, end)

    async def clear(self, counter: str) -> None:
        self.counts.pop(counter, None)
