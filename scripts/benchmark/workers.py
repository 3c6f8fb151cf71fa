"""Run a floor's workers: each a process of its own (``spawn``) sharing the port, all stopped
on SIGTERM or SIGINT."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable
from typing import Any


def run_workers(target: Callable[..., None], args: tuple[Any, ...], count: int) -> int:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=target, args=args) for _ in range(count)]
    for process in workers:
        process.start()

    def stop(signum: int, _frame: object) -> None:
        for process in workers:
            if process.exitcode is None:
                process.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for process in workers:
        process.join()
    return 0
