"""The login throttle's policy on an in-memory counter store (no Redis: these run in
milliseconds): which counters a login reserves, when it is refused, and what a success, a
failure and a login that never reached its password leave behind."""

from __future__ import annotations

import pytest

from service.auth.login_throttle import LoginThrottle, address_bucket
from service.config import LoginSettings
from service.errors import ApiError, Code
from tests.support.memory_stores import MemoryCounters

EMAIL, ADDRESS = "ada@example.com", "203.0.113.9"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def throttle(
    per_email: int = 3, per_address: int = 5
) -> tuple[LoginThrottle, MemoryCounters, Clock]:
    clock = Clock()
    counters = MemoryCounters(clock)
    settings = LoginSettings(per_email, per_address, 60, 8)
    return LoginThrottle(counters, settings), counters, clock


def email_counts(counters: MemoryCounters) -> list[int]:
    """What each e-mail's counter holds (they are named by a digest of the e-mail)."""
    return [counters.count(name) for name in counters.counts if name.startswith("login:email:")]


async def test_failures_count_on_the_email_and_the_address_until_the_email_is_refused() -> None:
    logins, counters, _ = throttle(per_email=3)
    for _ in range(3):
        await logins.reserve(EMAIL, ADDRESS)  # each kept: a failure

    with pytest.raises(ApiError) as refused:
        await logins.reserve(EMAIL, ADDRESS)

    assert refused.value.code is Code.LOGIN_THROTTLED
    assert refused.value.headers["Retry-After"] == "60"
    assert counters.count(counters.login_failures_by_address(ADDRESS)) == 3  # refusal: nothing


async def test_a_refusal_by_one_bound_gives_back_what_the_other_reserved() -> None:
    logins, counters, _ = throttle(per_email=10, per_address=2)
    await logins.reserve("a@example.com", ADDRESS)
    await logins.reserve("b@example.com", ADDRESS)

    with pytest.raises(ApiError):
        await logins.reserve("c@example.com", ADDRESS)

    assert email_counts(counters) == [1, 1, 0]  # c's reservation given back


async def test_a_success_clears_the_email_and_gives_back_only_its_own_address_reservation() -> None:
    logins, counters, _ = throttle()
    await logins.reserve(EMAIL, ADDRESS)  # a failure, kept
    reservation = await logins.reserve(EMAIL, ADDRESS)

    await reservation.succeeded()

    assert email_counts(counters) == []
    assert counters.count(counters.login_failures_by_address(ADDRESS)) == 1


async def test_a_login_that_never_reached_its_password_counts_for_nothing() -> None:
    logins, counters, _ = throttle()
    reservation = await logins.reserve(EMAIL, ADDRESS)

    await reservation.release()

    assert all(counters.count(name) == 0 for name in counters.counts)


async def test_the_window_starts_at_the_first_failure_and_then_lets_logins_in_again() -> None:
    logins, _, clock = throttle(per_email=1)
    await logins.reserve(EMAIL, ADDRESS)
    clock.ms += 59_000
    with pytest.raises(ApiError) as refused:
        await logins.reserve(EMAIL, ADDRESS)
    assert refused.value.headers["Retry-After"] == "1"

    clock.ms += 1_000
    await logins.reserve(EMAIL, ADDRESS)


async def test_no_bound_configured_reserves_nothing() -> None:
    logins, counters, _ = throttle(per_email=0, per_address=0)
    for _ in range(100):
        await logins.reserve(EMAIL, ADDRESS)
    assert counters.counts == {}


@pytest.mark.parametrize(
    ("address", "bucket"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("not an address", None),
        (None, None),
    ],
)
def test_an_address_is_counted_by_itself_or_by_its_ipv6_64(
    address: str | None, bucket: str | None
) -> None:
    assert address_bucket(address) == bucket
