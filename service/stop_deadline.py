"""The most a worker's stop may take once a stop signal came, and what happens when it takes
longer: serve kills a spawned worker still running then (``service.server``), and every worker
keeps a deadline of its own (``StopDeadline``) that logs where it is stuck and ends it.

Why a worker needs its own: with one worker, serve is the worker, and nothing else would end a
stop that hangs (on a connection, a task ignoring its cancellation, a thread of the default
executor); a deploy would stall on it without a word."""

from __future__ import annotations

import asyncio
import faulthandler
import inspect
import logging
import os
import sys
import threading
import traceback
from typing import Any

log = logging.getLogger("service")

# How long a worker may still take once aiohttp's shutdown is over (that waits up to twice the
# grace period: for a request, then for it to take its cancellation): it closes its Redis
# connections and drains its background writes after its last request.
MARGIN_SECONDS = 10.0
# A spawned worker gives up this long before serve would kill it, so that its stacks are logged.
_SPAWNED_GIVES_UP_SOONER_SECONDS = 1.0
# How long after the deadline faulthandler ends a worker whose deadline thread cannot run (a
# thread holding the GIL), writing the stacks as text.
_FALLBACK_SECONDS = 5.0


def most_a_stop_takes(grace_seconds: float) -> float:
    """From the stop signal to the end of a worker that stops as it should, at the most."""
    return 2 * grace_seconds + MARGIN_SECONDS


class StopDeadline:
    """A worker's deadline for its own stop (``most_a_stop_takes``; a spawned worker's a little
    sooner, before serve kills it): armed by the stop signal, disarmed once the worker has
    stopped. A worker still stopping then logs one ERROR line with the stacks of its threads
    (``stacks``) and of its event loop's tasks (``tasks``: what each one awaits) and exits 1."""

    def __init__(self, grace_seconds: float, spawned: bool) -> None:
        self.seconds = most_a_stop_takes(grace_seconds)
        if spawned:
            self.seconds -= _SPAWNED_GIVES_UP_SOONER_SECONDS
        self._timer: threading.Timer | None = None

    def arm(self, cause: str) -> None:
        """Called on the worker's event loop, by the stop signal's handler."""
        loop = asyncio.get_running_loop()

        def give_up() -> None:
            frames = sys._current_frames()
            stacks = {
                thread.name: "".join(traceback.format_stack(frames[thread.ident]))
                for thread in threading.enumerate()
                if thread.ident in frames and thread is not threading.current_thread()
            }
            log.error(
                "did not stop within %gs of %s: exiting; the stacks of its threads and tasks say "
                "where it was stuck",
                self.seconds,
                cause,
                extra={"fields": {"stacks": stacks, "tasks": _task_stacks(loop)}},
            )
            os._exit(1)

        self._timer = threading.Timer(self.seconds, give_up)
        self._timer.daemon = True
        self._timer.start()
        faulthandler.dump_traceback_later(self.seconds + _FALLBACK_SECONDS, exit=True)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            faulthandler.cancel_dump_traceback_later()


def _task_stacks(loop: asyncio.AbstractEventLoop) -> dict[str, str]:
    """What each task of ``loop`` awaits, outermost first, down the chain of awaits to the future
    it waits on (``Task.print_stack`` shows a suspended task's outermost frame only). Read from
    another thread while the loop is stuck: at worst a task's stack is one step stale."""
    stacks = {}
    for task in asyncio.all_tasks(loop):
        lines: list[str] = []
        awaited: Any = task.get_coro()
        frame = None
        while awaited is not None:
            last, frame = frame, _frame_of(awaited)
            if frame is None and last is not None:  # an async generator's step, perhaps
                generator = _generator_stepped_in(last)
                if generator is not None:
                    awaited, frame = generator, generator.ag_frame
            if frame is None:  # a future, or what the chain ends in
                lines.append(f"  awaiting {awaited!r}\n")
                break
            lines.extend(traceback.format_stack(frame))
            awaited = (
                getattr(awaited, "cr_await", None)
                or getattr(awaited, "ag_await", None)
                or getattr(awaited, "gi_yieldfrom", None)
            )
        stacks[task.get_name()] = "".join(lines)
    return stacks


def _frame_of(awaited: Any) -> Any:
    return (
        getattr(awaited, "cr_frame", None)
        or getattr(awaited, "ag_frame", None)
        or getattr(awaited, "gi_frame", None)
    )


def _generator_stepped_in(frame: Any) -> Any:
    """The async generator ``frame`` awaits a step of (a cleanup context's ``__aexit__``, whose
    ``anext(self.gen)`` awaits an ``asend`` that does not name its generator); None for any
    other frame."""
    generator = getattr(frame.f_locals.get("self"), "gen", None)
    return generator if inspect.isasyncgen(generator) else None
