"""Login throttling: bounds on failed logins per e-mail and per client address, kept in Redis so
they hold across workers and instances.

Every login reserves one attempt on each bound before any password work: the check and the
count are one atomic step per counter (``CounterStore.reserve``), so however many
logins for one e-mail run at once, on however many workers, at most the bound of them reach
bcrypt in a window. A login refused there gets 429 and ``Retry-After`` (the time left in the
window) without touching bcrypt. A failed login keeps its reservations: they are its failure. A
successful login clears its e-mail's count and gives its own reservation on its address's count
back, never more, so one working account cannot be used to reset the bound of an address
guessing at others. A login that never reached its password check (refused by the other bound,
``login_busy``, a store error) gives its reservations back. Every failure counts on both, whether
or not the e-mail has an account, so throttling tells nothing about which accounts exist.

IPv6 clients are counted per /64, the block one subscriber usually holds.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math

from service.config import LoginSettings
from service.errors import ApiError, Code
from service.store.protocols import CounterStore


def address_bucket(address: str | None) -> str | None:
    """The unit an address is counted in: the IPv4 address, or its IPv6 /64."""
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class LoginThrottle:
    def __init__(self, counters: CounterStore, settings: LoginSettings) -> None:
        self._counter_store = counters
        self._per_email = settings.failures_per_email
        self._per_address = settings.failures_per_address
        self._window_ms = settings.failure_window_seconds * 1000

    def _email_counter(self, email: str) -> str:
        # Hashed so that key names stay short and free of whatever characters an email holds.
        email_digest = hashlib.sha256(email.encode("utf-8")).hexdigest()
        return self._counter_store.login_failures_by_email(email_digest)

    def _counters(self, email: str, address: str | None) -> list[tuple[str, int]]:
        """(counter key, allowed failures) for each bound that applies."""
        counters = []
        if self._per_email:
            counters.append((self._email_counter(email), self._per_email))
        bucket = address_bucket(address)
        if self._per_address and bucket is not None:
            counters.append(
                (self._counter_store.login_failures_by_address(bucket), self._per_address)
            )
        return counters

    async def reserve(self, email: str, address: str | None) -> Reservation:
        """Reserve this login's attempt on each bound, or refuse with 429 when the e-mail or the
        address has used up its attempts (nothing is counted then)."""
        counters = self._counters(email, address)
        if not counters:
            return Reservation(self, email, [])
        waits = await self._counter_store.reserve(counters, self._window_ms)
        reserved = [name for (name, _), wait in zip(counters, waits, strict=True) if not wait]
        if len(reserved) == len(counters):
            return Reservation(self, email, reserved)
        if reserved:
            await self._counter_store.release(reserved)
        retry_after = max(1, math.ceil(max(waits) / 1000))
        raise ApiError(
            Code.LOGIN_THROTTLED,
            f"Too many failed logins. Retry in {retry_after} s.",
            details={"retry_after_seconds": retry_after},
            headers={"Retry-After": str(retry_after)},
        )


class Reservation:
    """One login's reserved attempts; kept as a failure unless ``succeeded`` or ``release``."""

    __slots__ = ("_counters", "_email", "_throttle")

    def __init__(self, throttle: LoginThrottle, email: str, counters: list[str]) -> None:
        self._throttle = throttle
        self._email = email
        self._counters = counters

    async def release(self) -> None:
        """The login never reached its password check: it counts for nothing."""
        counters, self._counters = self._counters, []
        if counters:
            await self._throttle._counter_store.release(counters)

    async def succeeded(self) -> None:
        """The password was right: the e-mail's count is cleared, the address's reservation
        given back."""
        counters, self._counters = self._counters, []
        email_counter = self._throttle._email_counter(self._email)
        if email_counter in counters:
            await self._throttle._counter_store.clear(email_counter)
            counters.remove(email_counter)
        if counters:
            await self._throttle._counter_store.release(counters)
