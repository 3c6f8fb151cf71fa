"""Login throttling: bounds on failed logins per e-mail and per client address, kept in Redis so
they hold across workers and instances.

A login is checked before any password work: once an e-mail or an address has had its allowed
failures within the window, further logins for it are refused with 429 and ``Retry-After`` (the
time left in the window) without touching bcrypt. Every failure counts on both, whether or not the
e-mail has an account, so throttling tells nothing about which accounts exist. A successful login
clears its e-mail's count but never its address's, so one working account cannot be used to
reset the bound of an address guessing at others.

IPv6 clients are counted per /64, the block one subscriber usually holds.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math

from service.config import Settings
from service.errors import TooManyRequests
from service.store.redis_store import RedisStore


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
    def __init__(self, store: RedisStore, settings: Settings) -> None:
        self._store = store
        self._per_email = settings.login_failures_per_email
        self._per_address = settings.login_failures_per_address
        self._window_ms = settings.login_failure_window_seconds * 1000

    def _email_counter(self, email: str) -> str:
        # Hashed so that key names stay short and free of whatever characters an email holds.
        email_digest = hashlib.sha256(email.encode("utf-8")).hexdigest()
        return self._store.keys.login_failures_by_email(email_digest)

    def _counters(self, email: str, address: str | None) -> list[tuple[str, int]]:
        """(counter key, allowed failures) for each bound that applies."""
        counters = []
        if self._per_email:
            counters.append((self._email_counter(email), self._per_email))
        bucket = address_bucket(address)
        if self._per_address and bucket is not None:
            counters.append((self._store.keys.login_failures_by_address(bucket), self._per_address))
        return counters

    async def check(self, email: str, address: str | None) -> None:
        """Refuse with 429 when the e-mail or the address has used up its failures."""
        counters = self._counters(email, address)
        if not counters:
            return
        states = await self._store.login_failures([name for name, _ in counters])
        exhausted = [
            ttl for (count, ttl), (_, limit) in zip(states, counters, strict=True) if count >= limit
        ]
        if not exhausted:
            return
        wait_ms = max(exhausted)
        retry_after = max(1, math.ceil(wait_ms / 1000))
        raise TooManyRequests(
            f"Too many failed logins. Retry in {retry_after} s.",
            code="login_throttled",
            details={"retry_after_seconds": retry_after},
            headers={"Retry-After": str(retry_after)},
        )

    async def failed(self, email: str, address: str | None) -> None:
        counters = self._counters(email, address)
        if counters:
            await self._store.add_login_failure([name for name, _ in counters], self._window_ms)

    async def succeeded(self, email: str) -> None:
        if self._per_email:
            await self._store.clear_login_failures(self._email_counter(email))
