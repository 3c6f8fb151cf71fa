"""Login throttling: failed logins bounded per e-mail and per client address, in Redis, refused
with 429 and Retry-After before any password work; X-Forwarded-For believed only from trusted
proxies."""

from __future__ import annotations

import asyncio
import ipaddress
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import service.auth.passwords
from tests.support.api import PASSWORD, Api, assert_error
from tests.support.clients import Recorder
from tests.support.processes import Server, create_user, env_for, line_mentions, started
from tests.support.redis import free_port

LOGIN = "/api/v1/auth/login"
EMAIL = "alice@example.com"


async def attempt(api: Api, email: str, password: str, **headers: str) -> Any:
    return await api.client.post(
        LOGIN, json={"email": email, "password": password}, headers=headers
    )


async def fail(api: Api, email: str, times: int, **headers: str) -> None:
    for _ in range(times):
        await assert_error(
            await attempt(api, email, "wrong password", **headers), 401, "invalid_credentials"
        )


@pytest.fixture
def bcrypt_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the bcrypt checks the service runs."""
    calls: list[int] = []
    real = service.auth.passwords._check_sync

    def counted(password: str, password_hash: str) -> bool:
        calls.append(1)
        return real(password, password_hash)

    monkeypatch.setattr(service.auth.passwords, "_check_sync", counted)
    return calls


async def test_an_email_is_throttled_after_its_failures_even_with_the_right_password(
    api: Api, bcrypt_checks: list[int]
) -> None:
    await api.create_user(EMAIL)
    await fail(api, EMAIL, 10)
    checks_before = len(bcrypt_checks)

    refused = await attempt(api, EMAIL, PASSWORD)

    error = await assert_error(refused, 429, "login_throttled")
    retry_after = int(refused.headers["Retry-After"])
    assert 890 <= retry_after <= 900  # what is left of the 15-minute window
    assert error["details"] == {"retry_after_seconds": retry_after}
    assert len(bcrypt_checks) == checks_before  # refused before any password work
    assert PASSWORD not in await refused.text()


async def test_unknown_emails_are_counted_and_throttled_like_known_ones(
    api: Api, bcrypt_checks: list[int]
) -> None:
    await fail(api, "nobody@example.com", 10)
    assert len(bcrypt_checks) == 10  # each failure did the stand-in bcrypt work

    await assert_error(await attempt(api, "nobody@example.com", "x" * 8), 429, "login_throttled")


async def test_emails_are_counted_case_insensitively(api: Api) -> None:
    await api.create_user(EMAIL)
    await fail(api, "Alice@Example.com", 5)
    await fail(api, " alice@example.COM ", 5)

    await assert_error(await attempt(api, EMAIL, PASSWORD), 429, "login_throttled")


async def test_a_successful_login_clears_its_emails_count(api: Api) -> None:
    await api.create_user(EMAIL)
    await fail(api, EMAIL, 9)
    assert (await attempt(api, EMAIL, PASSWORD)).status == 200
    await fail(api, EMAIL, 9)

    assert (await attempt(api, EMAIL, PASSWORD)).status == 200


async def test_one_throttled_email_leaves_other_accounts_alone(api: Api) -> None:
    await api.create_user(EMAIL)
    await api.create_user("bob@example.com")
    await fail(api, EMAIL, 10)

    assert (await attempt(api, "bob@example.com", PASSWORD)).status == 200


async def test_an_address_guessing_at_many_emails_is_throttled(make_api) -> None:
    api = await make_api(login_failures_per_email=0, login_failures_per_address=3)
    await api.create_user(EMAIL)
    for n in range(3):
        await fail(api, f"guess{n}@example.com", 1)

    await assert_error(await attempt(api, EMAIL, PASSWORD), 429, "login_throttled")


async def test_success_does_not_reset_the_address_count(make_api) -> None:
    api = await make_api(login_failures_per_email=0, login_failures_per_address=3)
    await api.create_user(EMAIL)
    await fail(api, "guess@example.com", 2)
    assert (await attempt(api, EMAIL, PASSWORD)).status == 200
    await fail(api, "guess@example.com", 1)

    await assert_error(await attempt(api, EMAIL, PASSWORD), 429, "login_throttled")


async def test_forwarded_for_is_ignored_without_trusted_proxies(make_api) -> None:
    api = await make_api(login_failures_per_email=0, login_failures_per_address=2)
    await fail(api, "a@example.com", 1, **{"X-Forwarded-For": "203.0.113.1"})
    await fail(api, "b@example.com", 1, **{"X-Forwarded-For": "203.0.113.2"})

    # Both counted against the real peer (127.0.0.1), whatever the header claimed.
    await assert_error(
        await attempt(api, "c@example.com", PASSWORD, **{"X-Forwarded-For": "203.0.113.3"}),
        429,
        "login_throttled",
    )


async def test_behind_a_trusted_proxy_each_client_address_has_its_own_count(make_api) -> None:
    api = await make_api(
        login_failures_per_email=0,
        login_failures_per_address=2,
        trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),),
    )
    await api.create_user(EMAIL)
    await fail(api, "a@example.com", 2, **{"X-Forwarded-For": "203.0.113.1"})

    throttled = await attempt(api, EMAIL, PASSWORD, **{"X-Forwarded-For": "203.0.113.1"})
    other = await attempt(api, EMAIL, PASSWORD, **{"X-Forwarded-For": "203.0.113.2"})
    # A client prepending its own entries can't escape: the proxy's entry (rightmost) counts.
    forged = await attempt(api, EMAIL, PASSWORD, **{"X-Forwarded-For": "198.51.100.7, 203.0.113.1"})

    await assert_error(throttled, 429, "login_throttled")
    assert other.status == 200
    await assert_error(forged, 429, "login_throttled")


async def test_every_instance_on_the_same_redis_shares_the_counts(make_api) -> None:
    one = await make_api()
    other = await make_api()
    await one.create_user(EMAIL)
    await fail(one, EMAIL, 5)
    await fail(other, EMAIL, 5)

    await assert_error(await attempt(one, EMAIL, PASSWORD), 429, "login_throttled")
    await assert_error(await attempt(other, EMAIL, PASSWORD), 429, "login_throttled")


async def test_counters_name_no_email(api: Api, redis_client) -> None:
    await fail(api, EMAIL, 1)

    names = redis_client.keys("fh:login-failures:*")
    assert sorted(name.rsplit(":", 1)[0] for name in names) == [
        "fh:login-failures:email",
        "fh:login-failures:ip",
    ]
    assert not any("alice" in name for name in names)
    assert "fh:login-failures:ip:127.0.0.1" in names


async def test_the_bounds_can_be_turned_off(make_api) -> None:
    api = await make_api(login_failures_per_email=0, login_failures_per_address=0)
    await api.create_user(EMAIL)
    await fail(api, EMAIL, 12)

    assert (await attempt(api, EMAIL, PASSWORD)).status == 200


# -- the bound under concurrency, across two workers -------------------------------------------


@pytest.mark.system  # two spawned serve workers
async def test_concurrent_wrong_logins_on_two_workers_reach_bcrypt_at_most_the_limit(
    redis_url: str, tmp_path: Path
) -> None:
    """40 wrong logins for one email at once, spread over two worker processes: at most 10 (the
    per-email bound) may get as far as a password check (401); every other is 429 before any."""
    port = free_port()
    # Room for every login in the queue, so nothing is refused as login_busy instead.
    env = env_for(redis_url, port, FILEHOST_LOGIN_QUEUE_MAX="100")
    create_user(env, EMAIL)
    server = Server(env, port, tmp_path, "--workers", "2")
    try:
        workers = started(server, 2)
        async with Recorder(server.base) as rec:
            body = {"email": EMAIL, "password": "wrong password"}
            outcomes = await asyncio.gather(
                *(rec.send("login", "POST", "/auth/login", json=body) for _ in range(40))
            )
        assert server.stop() == 0
    finally:
        server.stop()
    answers = Counter((o.status, o.code) for o in outcomes)
    assert set(answers) <= {(401, "invalid_credentials"), (429, "login_throttled")}, answers
    assert answers[(401, "invalid_credentials")] <= 10, answers
    assert answers[(401, "invalid_credentials")] == 10, answers  # and the bound is not undercut
    log = server.stderr()
    assert all(line_mentions(log, pid, "/api/v1/auth/login") for pid in workers)
