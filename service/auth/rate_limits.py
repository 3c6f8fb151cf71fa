"""Request-rate limits per credential, as HTTP sees them.

The bucket itself lives in Redis and is taken from in the credential lookup (see
``service.store.lookup``); this module turns its verdict into a 429 and into the
``RateLimit-Policy`` and ``RateLimit`` fields of the IETF HTTPAPI draft "RateLimit header fields
for HTTP" (-09):

    RateLimit-Policy: "credential";q=200;w=2     up to q requests in w seconds (the burst, and
                                                 the time an empty bucket takes to refill)
    RateLimit: "credential";r=187;t=1            r requests left now; t seconds until full again

A refused request also gets ``Retry-After``: whole seconds until one more request is allowed.

A credential busy on one worker takes its requests from the shared bucket a few at a time
(``RateLeases``): the lookup is then a plain HMGET for the rest, which costs Redis a quarter of
the script. Nothing is admitted that the bucket did not grant, and the credential is still read
from Redis on every request, so a revocation stops it at once.

An API key may have a rate of its own (``KeyRate``, set by ``PATCH /keys/{id}``): its digest
entry holds it, the lookup script uses it instead of the deployment's, and a lease of the key is
sized by its burst. When limits are off for the deployment, they are off for every key.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from service.domain.records import RateLimit, RateVerdict
from service.errors import ApiError, Code, CorruptRecord

POLICY_NAME = "credential"

# The bounds of a key's own rate (``PATCH /keys/{id}``): whole numbers.
KEY_MAX_PER_SECOND = 10_000
KEY_MAX_BURST = 10_000


def _seconds(us: int) -> int:
    return math.ceil(us / 1_000_000)


def _policy(per_second: float, burst: int) -> str:
    window = max(1, math.ceil(burst / per_second))
    return f'"{POLICY_NAME}";q={burst};w={window}'


class RateLimitFields:
    """The header fields for one deployment's limit; the policy field is built once."""

    __slots__ = ("policy",)

    def __init__(self, limit: RateLimit) -> None:
        self.policy = _policy(limit.per_second, limit.burst)

    def current(self, verdict: RateVerdict) -> str:
        # On every accepted request: whole seconds rounded up, without a call to math.ceil.
        return f'"{POLICY_NAME}";r={verdict.remaining};t={-(-verdict.full_in_us // 1_000_000)}'

    def refusal(self, verdict: RateVerdict) -> ApiError:
        retry_after = max(1, _seconds(verdict.wait_us))
        return ApiError(
            Code.RATE_LIMITED,
            f"This credential is over its request rate. Retry in {retry_after} s.",
            details={"retry_after_seconds": retry_after},
            headers={
                "Retry-After": str(retry_after),
                "RateLimit-Policy": verdict.policy or self.policy,
                "RateLimit": self.current(verdict),
            },
        )


# A lease is used within this time or given back with the worker's next take.
LEASE_MS = 1000
# A worker holds at most this share of a credential's burst.
_LEASE_SHARE_OF_BURST = 16
_LEASE_MEMORY_LIMIT = 100_000


class KeyRate(NamedTuple):
    """A key's own rate, as its digest entry holds it (``stored``: "<per second>:<burst>")."""

    stored: str
    per_second: int
    burst: int
    policy: str  # its RateLimit-Policy field
    largest_lease: int
    interval_us: int  # as the lookup script works it out (store.lookup._LOOKUP_KEY_AND_TAKE)


class KeyRates:
    """A key's own rate from its stored form, parsed once per worker and form (bounded). A
    damaged one refuses the request (fail closed), as the lookup script does."""

    __slots__ = ("_known",)

    _MEMORY_LIMIT = 4096

    def __init__(self) -> None:
        self._known: dict[str, KeyRate] = {}

    def of(self, stored: str) -> KeyRate:
        rate = self._known.get(stored)
        if rate is not None:
            return rate
        per_second, colon, burst = stored.partition(":")
        if not (colon and per_second.isdigit() and burst.isdigit()):
            raise CorruptRecord()
        rate_per_second, rate_burst = int(per_second), int(burst)
        if not (1 <= rate_per_second and 1 <= rate_burst):
            raise CorruptRecord()
        if len(self._known) >= self._MEMORY_LIMIT:
            self._known.clear()
        rate = self._known[stored] = KeyRate(
            stored,
            rate_per_second,
            rate_burst,
            _policy(rate_per_second, rate_burst),
            max(1, rate_burst // _LEASE_SHARE_OF_BURST),
            max(1, math.floor(1_000_000 / rate_per_second + 0.5)),
        )
        return rate


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

    A key with a rate of its own is leased a sixteenth of its own burst, learnt from the take
    (the lookup reads the rate with the key). A request served from the lease that finds the
    key's rate changed (``stale``) gives the lease back and is taken again under the new rate
    (a second lookup, once per change and worker), so a change of rate is in force from the
    next request, as every other change of a key is.
    """

    __slots__ = ("_held", "_largest")

    def __init__(self, limit: RateLimit) -> None:
        self._largest = max(1, limit.burst // _LEASE_SHARE_OF_BURST)
        # credential digest -> [left, bucket's remaining at the take, its full_in_us, expires,
        # size of the last take, start of the take in flight for the lease or 0, largest lease,
        # the key's own rate when it has one (KeyRate) or None, and its policy or None]
        self._held: dict[str, list[Any]] = {}

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
            held[credential] = [0, 0, 0, 0, 1, now_ms, self._largest, None, None]
            return None, 1, 0, True
        left, _, _, expires, size, taking_since, largest, _, policy = lease
        if left and now_ms < expires:
            left = lease[0] = left - 1
            return RateVerdict(True, lease[1] + left, 0, lease[2], 0, policy), 0, 0, False
        if taking_since and now_ms - taking_since < LEASE_MS:
            return None, 1, 0, False  # the lease's take is in flight: count this one alone
        lease[0] = 0
        lease[5] = now_ms
        if left == 0 and now_ms < expires:
            size = lease[4] = min(size * 2, largest)
            return None, size, 0, True
        size = lease[4] = max(1, size // 2)
        return None, size, left, True

    def taken(
        self,
        credential: str,
        verdict: RateVerdict | None,
        now_ms: int,
        own: KeyRate | None = None,
    ) -> RateVerdict | None:
        """After the lookup of a take for the lease: keep what it granted beyond the request
        that made it, and return that request's verdict as its client sees it (the kept requests
        counted as remaining). ``own``: the key's own rate, which the take was made under."""
        lease = self._held.get(credential)
        if verdict is None:  # no such credential: remember nothing of it
            self._held.pop(credential, None)
            return None
        if own is not None:
            verdict = verdict._replace(policy=own.policy)
        if lease is not None:
            largest = self._largest if own is None else own.largest_lease
            lease[6] = largest
            lease[7] = own
            lease[8] = None if own is None else own.policy
            lease[4] = min(lease[4], largest)
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
        return RateVerdict(True, verdict.remaining + kept, 0, verdict.full_in_us, 1, verdict.policy)

    def give_back(self, credential: str) -> None:
        """A request served from the lease was refused for its credential: it took nothing, so
        the lease has it again."""
        lease = self._held.get(credential)
        if lease is not None:
            lease[0] += 1

    def given_back_interval_us(self, credential: str) -> int:
        """The interval the requests a plan gives back were taken at: the key's own rate's, or 0
        for the deployment's. Each is worth that much of the bucket, whatever the rate now."""
        lease = self._held.get(credential)
        own = lease[7] if lease is not None else None
        return 0 if own is None else own.interval_us

    def stale(self, credential: str, own: str | None) -> tuple[int, int] | None:
        """After the lookup of a request served from the lease: None while the key's own rate
        (``own``, as stored; None for the deployment's) is the one the lease was taken under;
        else the lease is dropped and this returns what to give back: how many requests (what
        was left of it, and this request, which is taken again under the new rate) and the
        interval they were taken at (0: the deployment's)."""
        lease = self._held.get(credential)
        if lease is None:
            return None
        held = lease[7]
        if (own is None) if held is None else (held.stored == own):
            return None
        del self._held[credential]
        return lease[0] + 1, 0 if held is None else held.interval_us
