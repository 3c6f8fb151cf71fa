"""Request-rate limits per credential, as HTTP sees them.

The bucket itself lives in Redis and is taken from in the credential lookup (see
``store.redis_store``); this module turns its verdict into a 429 and into the ``RateLimit-Policy``
and ``RateLimit`` fields of the IETF HTTPAPI draft "RateLimit header fields for HTTP" (-09):

    RateLimit-Policy: "credential";q=200;w=2     up to q requests in w seconds (the burst, and
                                                 the time an empty bucket takes to refill)
    RateLimit: "credential";r=187;t=1            r requests left now; t seconds until full again

A refused request also gets ``Retry-After``: whole seconds until one more request is allowed.

A credential busy on one worker takes its requests from the shared bucket a few at a time
(``RateLeases``): the lookup is then a plain HMGET for the rest, which costs Redis a quarter of
the script. Nothing is admitted that the bucket did not grant, and the credential is still read
from Redis on every request, so a revocation stops it at once.
"""

from __future__ import annotations

import math

from service.errors import TooManyRequests
from service.store.redis_store import RateLimit, RateVerdict

POLICY_NAME = "credential"


def _seconds(us: int) -> int:
    return math.ceil(us / 1_000_000)


class RateLimitFields:
    """The header fields for one deployment's limit; the policy field is built once."""

    __slots__ = ("policy",)

    def __init__(self, limit: RateLimit) -> None:
        window = max(1, math.ceil(limit.burst / limit.per_second))
        self.policy = f'"{POLICY_NAME}";q={limit.burst};w={window}'

    def current(self, verdict: RateVerdict) -> str:
        # On every accepted request: whole seconds rounded up, without a call to math.ceil.
        return f'"{POLICY_NAME}";r={verdict.remaining};t={-(-verdict.full_in_us // 1_000_000)}'

    def refusal(self, verdict: RateVerdict) -> TooManyRequests:
        retry_after = max(1, _seconds(verdict.wait_us))
        return TooManyRequests(
            f"This credential is over its request rate. Retry in {retry_after} s.",
            details={"retry_after_seconds": retry_after},
            headers={
                "Retry-After": str(retry_after),
                "RateLimit-Policy": self.policy,
                "RateLimit": self.current(verdict),
            },
        )


# A lease is used within this time or given back with the worker's next take.
LEASE_MS = 1000
# A worker holds at most this share of a credential's burst.
_LEASE_SHARE_OF_BURST = 16
_LEASE_MEMORY_LIMIT = 100_000


class RateLeases:
    """Requests one worker has taken from credentials' shared buckets ahead of use.

    A credential starts at one request per take; each time a worker uses up a lease within
    ``LEASE_MS`` the next one is twice as large, up to a sixteenth of the burst, and
    a lease that outlived ``LEASE_MS`` is given back and halves the next. So a credential making
    a few requests a second is counted exactly, one take per request, and only a busy one is
    taken in leases; a worker holds back at most a sixteenth of a burst, for at most a second.
    One take for the lease is in flight per credential and worker; requests arriving meanwhile
    are counted one by one. The ``RateLimit`` field of a request served from a lease is the
    bucket's count when the lease was taken plus what is left of the lease.
    """

    __slots__ = ("_held", "_largest")

    def __init__(self, limit: RateLimit) -> None:
        self._largest = max(1, limit.burst // _LEASE_SHARE_OF_BURST)
        # credential digest -> [left, bucket's remaining at the take, its full_in_us, expires,
        # size of the last take, start of the take in flight for the lease or 0]
        self._held: dict[str, list[int]] = {}

    def __len__(self) -> int:
        """Credentials this worker keeps lease state for."""
        return len(self._held)

    def plan(self, credential: str, now_ms: int) -> tuple[RateVerdict | None, int, int, bool]:
        """Before a request's lookup: its verdict when served from this worker's lease, else
        how many requests the lookup takes, how many unused ones it gives back, and whether the
        take is for the lease (then ``taken`` must follow the lookup's verdict)."""
        held = self._held
        lease = held.get(credential)
        if lease is None:
            if self._largest == 1:
                return None, 1, 0, False
            if len(held) >= _LEASE_MEMORY_LIMIT:
                held.clear()
            held[credential] = [0, 0, 0, 0, 1, now_ms]
            return None, 1, 0, True
        left, _, _, expires, size, taking_since = lease
        if left and now_ms < expires:
            left = lease[0] = left - 1
            return RateVerdict(True, lease[1] + left, 0, lease[2], 0), 0, 0, False
        if taking_since and now_ms - taking_since < LEASE_MS:
            return None, 1, 0, False  # the lease's take is in flight: count this one alone
        lease[0] = 0
        lease[5] = now_ms
        if left == 0 and now_ms < expires:
            size = lease[4] = min(size * 2, self._largest)
            return None, size, 0, True
        size = lease[4] = max(1, size // 2)
        return None, size, left, True

    def taken(
        self, credential: str, verdict: RateVerdict | None, now_ms: int
    ) -> RateVerdict | None:
        """After the lookup of a take for the lease: keep what it granted beyond the request
        that made it, and return that request's verdict as its client sees it (the kept requests
        counted as remaining)."""
        lease = self._held.get(credential)
        if verdict is None:  # no such credential: remember nothing of it
            self._held.pop(credential, None)
            return None
        if not verdict.allowed or lease is None:
            if lease is not None:
                lease[5] = 0
            return verdict
        kept = verdict.taken - 1
        lease[0] = kept
        lease[1] = verdict.remaining
        lease[2] = verdict.full_in_us
        lease[3] = now_ms + LEASE_MS
        lease[5] = 0
        if kept == 0:
            return verdict
        return RateVerdict(True, verdict.remaining + kept, 0, verdict.full_in_us, 1)
