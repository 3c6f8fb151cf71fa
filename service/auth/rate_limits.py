"""Request-rate limits per credential, as HTTP sees them.

The bucket itself lives in Redis and is taken from in the credential lookup (see
``store.redis_store``); this module turns its verdict into a 429 and into the ``RateLimit-Policy``
and ``RateLimit`` fields of the IETF HTTPAPI draft "RateLimit header fields for HTTP" (-09):

    RateLimit-Policy: "credential";q=200;w=2     up to q requests in w seconds (the burst, and
                                                 the time an empty bucket takes to refill)
    RateLimit: "credential";r=187;t=1            r requests left now; t seconds until full again

A refused request also gets ``Retry-After``: whole seconds until one more request is allowed.
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
        return f'"{POLICY_NAME}";r={verdict.remaining};t={_seconds(verdict.full_in_us)}'

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
