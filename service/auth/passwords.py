"""Password hashing with bcrypt, always off the event loop, with a bounded queue.

bcrypt is slow on purpose, so checks run in a small thread pool (bcrypt
releases the GIL) and at most ``queue_max`` more wait behind them; beyond that a login is refused
at once with 503 and Retry-After instead of piling up and starving other traffic.

Passwords are pre-hashed (SHA-256, base64) before bcrypt so that every byte of a long password
counts (bcrypt alone reads only 72 bytes) and no NUL byte can reach it. Never logs a password.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import bcrypt

from service.errors import ApiError, Code

Result = TypeVar("Result")

# Not a credential: the input of the stand-in hash checked when an email has no account.
_UNKNOWN_USER_PASSWORD = "timing-equaliser-for-unknown-accounts"  # noqa: S105


def _prepare(password: str) -> bytes:
    return base64.b64encode(hashlib.sha256(password.encode("utf-8")).digest())


def hash_password_sync(password: str, cost: int) -> str:
    return bcrypt.hashpw(_prepare(password), bcrypt.gensalt(rounds=cost)).decode("ascii")


def _check_sync(password: str, password_hash: str) -> bool:
    try:
        return bcrypt.checkpw(_prepare(password), password_hash.encode("ascii"))
    except ValueError:  # a malformed stored hash: refuse
        return False


def _lower_thread_priority() -> None:
    """bcrypt threads yield the CPU to the event loop (Linux niceness is per thread), so a login
    storm slows logins down rather than the gateway traffic next to it."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class PasswordHasher:
    """``busy``: the refusal when the queue is full (logins', or vanity aliases' passwords,
    which have a hasher of their own so that guessing at one never queues logins)."""

    def __init__(
        self, cost: int, concurrency: int, queue_max: int, busy: Code = Code.LOGIN_BUSY
    ) -> None:
        self._cost = cost
        self._busy = busy
        self._executor = ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="bcrypt", initializer=_lower_thread_priority
        )
        self._capacity = concurrency + queue_max
        self._pending = 0
        self._unknown_user_hash: str | None = None

    @property
    def pending(self) -> int:
        """Hash computations running or queued in this process."""
        return self._pending

    async def _run(self, func: Callable[..., Result], *args: Any) -> Result:
        if self._pending >= self._capacity:
            raise ApiError(self._busy)
        self._pending += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, func, *args)
        finally:
            self._pending -= 1

    async def hash(self, password: str) -> str:
        return await self._run(hash_password_sync, password, self._cost)

    async def verify(self, password: str, password_hash: str) -> bool:
        return await self._run(_check_sync, password, password_hash)

    async def warm_up(self) -> None:
        """Compute the stand-in hash used for unknown accounts (once, at start-up)."""
        if self._unknown_user_hash is None:
            self._unknown_user_hash = await self.hash(_UNKNOWN_USER_PASSWORD)

    async def verify_unknown_user(self, password: str) -> bool:
        """Spend the time of a real check, so unknown emails can't be told from wrong passwords."""
        await self.warm_up()
        assert self._unknown_user_hash is not None
        await self.verify(password, self._unknown_user_hash)
        return False

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
