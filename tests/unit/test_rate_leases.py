"""RateLeases: how many requests a worker takes from a credential's bucket at once."""

from __future__ import annotations

from service.auth.rate_limits import LEASE_MS, RateLeases
from service.domain.records import RateLimit, RateVerdict

NOW = 1_700_000_000_000
CREDENTIAL = "ab" * 32


def granted(taken: int, remaining: int = 100) -> RateVerdict:
    return RateVerdict(True, remaining, 0, 1_000_000, taken)


def drain(leases: RateLeases, now: int = NOW) -> tuple[tuple, int]:
    """Serve requests from the lease until it is empty: the plan of the first request it could
    not serve, and how many it served."""
    served = 0
    while True:
        plan = leases.plan(CREDENTIAL, now)
        if plan[0] is None:
            return plan, served
        served += 1


def test_a_credential_starts_with_single_takes_for_its_lease() -> None:
    leases = RateLeases(RateLimit(per_second=100, burst=200))
    assert leases.plan(CREDENTIAL, NOW) == (None, 1, 0, True)


def test_a_lease_used_up_in_time_doubles_up_to_a_sixteenth_of_the_burst() -> None:
    leases = RateLeases(RateLimit(per_second=100, burst=200))  # 200 // 16 = 12
    plan = leases.plan(CREDENTIAL, NOW)
    sizes = []
    for _ in range(6):
        lent, take, give_back, for_lease = plan
        assert (lent, give_back, for_lease) == (None, 0, True)
        sizes.append(take)
        leases.taken(CREDENTIAL, granted(take), NOW)
        plan, served = drain(leases)
        assert served == take - 1
    assert sizes == [1, 2, 4, 8, 12, 12]


def test_requests_from_a_lease_show_the_bucket_count_plus_what_is_left() -> None:
    leases = RateLeases(RateLimit(per_second=1000, burst=1000))
    leases.plan(CREDENTIAL, NOW)
    first = leases.taken(CREDENTIAL, granted(4, remaining=50), NOW)
    assert first.remaining == 53
    served = [leases.plan(CREDENTIAL, NOW)[0].remaining for _ in range(3)]
    assert served == [52, 51, 50]
    assert leases.plan(CREDENTIAL, NOW)[0] is None


def test_while_a_take_for_the_lease_is_in_flight_other_requests_are_counted_alone() -> None:
    leases = RateLeases(RateLimit(per_second=1000, burst=1000))
    assert leases.plan(CREDENTIAL, NOW) == (None, 1, 0, True)
    assert leases.plan(CREDENTIAL, NOW) == (None, 1, 0, False)
    assert leases.plan(CREDENTIAL, NOW) == (None, 1, 0, False)
    leases.taken(CREDENTIAL, granted(1), NOW)
    assert leases.plan(CREDENTIAL, NOW) == (None, 2, 0, True)
    # A take that never came back (Redis failed) stops holding the lease after LEASE_MS.
    assert leases.plan(CREDENTIAL, NOW + LEASE_MS - 1) == (None, 1, 0, False)
    assert leases.plan(CREDENTIAL, NOW + LEASE_MS)[3] is True


def test_a_lease_not_used_up_in_time_is_given_back_and_halves_the_next() -> None:
    leases = RateLeases(RateLimit(per_second=1000, burst=1000))
    leases.plan(CREDENTIAL, NOW)
    leases.taken(CREDENTIAL, granted(1), NOW)
    assert leases.plan(CREDENTIAL, NOW) == (None, 2, 0, True)
    leases.taken(CREDENTIAL, granted(2), NOW)
    assert leases.plan(CREDENTIAL, NOW)[0] is not None
    assert leases.plan(CREDENTIAL, NOW) == (None, 4, 0, True)
    leases.taken(CREDENTIAL, granted(4), NOW)
    assert leases.plan(CREDENTIAL, NOW)[0] is not None  # one of three used, two left
    assert leases.plan(CREDENTIAL, NOW + LEASE_MS) == (None, 2, 2, True)


def test_a_refused_take_keeps_nothing() -> None:
    leases = RateLeases(RateLimit(per_second=1000, burst=1000))
    leases.plan(CREDENTIAL, NOW)
    refused = RateVerdict(False, 0, 1000, 1_000_000, 0)
    assert leases.taken(CREDENTIAL, refused, NOW) is refused
    assert leases.plan(CREDENTIAL, NOW)[0] is None


def test_small_bursts_are_always_counted_one_request_at_a_time() -> None:
    leases = RateLeases(RateLimit(per_second=10, burst=20))
    for _ in range(5):
        assert leases.plan(CREDENTIAL, NOW) == (None, 1, 0, False)


def test_no_lease_is_larger_than_a_sixteenth_of_the_burst() -> None:
    leases = RateLeases(RateLimit(per_second=10_000, burst=1000))
    plan = leases.plan(CREDENTIAL, NOW)
    for _ in range(10):
        _, take, _, _ = plan
        leases.taken(CREDENTIAL, granted(take), NOW)
        plan, _ = drain(leases)
    assert plan[1] == 62


def test_unknown_credentials_leave_nothing_behind() -> None:
    leases = RateLeases(RateLimit(per_second=1000, burst=1000))
    for n in range(100):
        unknown = f"{n:064x}"
        assert leases.plan(unknown, NOW)[3] is True
        assert leases.taken(unknown, None, NOW) is None  # the lookup found no such credential
    assert len(leases) == 0
