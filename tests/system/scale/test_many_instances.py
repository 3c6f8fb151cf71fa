"""Many instances on one Redis (issue 15, part 3): two ``serve`` processes, two workers each,
share nothing but Redis. A key made through one works on the other; revoked on one, it is refused
by the other from the very next request; a logout likewise; the request-rate buckets and the
login-failure counts are one per credential and per email, whichever instance counts.

Real processes and sockets (tests/support/processes.py); each request opens a new connection,
so either worker of an instance may answer it, and the access logs show that both did."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.clients import create_key, fresh_session, login, request, wait_for_two_workers
from tests.support.processes import PASSWORD, Server, create_user, running, service_env
from tests.support.redis import free_port

EMAIL = "two.instances@example.com"


@contextlib.contextmanager
def two_instances(redis_url: str, tmp_path: Path, **extra: str) -> Iterator[list[Server]]:
    """Two ``serve --workers 2`` on the same Redis, each on its own port."""
    with contextlib.ExitStack() as stack:
        servers = []
        for name in ("a", "b"):
            port = free_port()
            logs = tmp_path / name
            logs.mkdir()
            env = service_env(redis_url, port, **extra)
            servers.append(stack.enter_context(running(env, port, logs, "--workers", "2")))
        yield servers


def env_of(redis_url: str, **extra: str) -> dict[str, str]:
    return service_env(redis_url, free_port(), **extra)


def pids_answering(server: Server, path: str) -> set[int]:
    return {pid for pid, _m, p, _s in server.access_lines() if p == path}


async def test_keys_and_sessions_work_across_instances(redis_url: str, tmp_path: Path) -> None:
    no_limits = {"FILEHOST_RATE_LIMIT_PER_SECOND": "0"}
    with two_instances(redis_url, tmp_path, **no_limits) as (a, b):
        async with fresh_session() as http:
            await wait_for_two_workers(http, a)
            await wait_for_two_workers(http, b)
            create_user(env_of(redis_url), EMAIL)
            token = await login(http, a, EMAIL)
            bearer = {"Authorization": f"Bearer {token}"}
            key = await create_key(http, a, token)
            with_key = {"X-API-Key": key["secret_key"]}

            async def files(server: Server, headers: dict[str, str]) -> tuple[int, dict]:
                return await request(http, "GET", f"{server.base}/files", headers=headers)

            # Made through a, used through b (both of b's workers), and the session too.
            before = [await files(b, with_key) for _ in range(20)]
            session_on_b = [await files(b, bearer) for _ in range(10)]
            status, listed = await request(http, "GET", f"{b.base}/keys", headers=bearer)
            assert status == 200, listed
            assert [k["id"] for k in listed["data"]["keys"]] == [key["id"]]

            # Revoked through a: b refuses it from the very next request, on both workers.
            status, body = await request(
                http, "DELETE", f"{a.base}/keys/{key['id']}", headers=bearer
            )
            assert status == 200, body
            after = [await files(b, with_key) for _ in range(20)]
            # And the other way round: revoked on b, refused by a.
            second = await create_key(http, a, token)
            assert (await files(a, {"X-API-Key": second["secret_key"]}))[0] == 200
            status, body = await request(
                http, "DELETE", f"{b.base}/keys/{second['id']}", headers=bearer
            )
            assert status == 200, body
            second_after = [await files(a, {"X-API-Key": second["secret_key"]}) for _ in range(20)]

            # Logged out through b: a refuses the session from the very next request.
            status, body = await request(http, "POST", f"{b.base}/auth/logout", headers=bearer)
            assert status == 200, body
            logged_out = [await files(a, bearer) for _ in range(20)]

        assert a.stop() == 0
        assert b.stop() == 0

    assert [status for status, _ in before] == [200] * 20
    assert [status for status, _ in session_on_b] == [200] * 10
    for results, code in (
        (after, "api_key_revoked"),
        (second_after, "api_key_revoked"),
        (logged_out, "invalid_session"),
    ):
        assert [status for status, _ in results] == [401] * 20
        assert {body["error"]["code"] for _, body in results} == {code}
    # Both workers of each instance answered the requests under test.
    assert len(pids_answering(a, "/api/v1/files")) == 2
    assert len(pids_answering(b, "/api/v1/files")) == 2
    for server in (a, b):
        assert key["secret_key"] not in server.stderr() + server.stdout()
        assert "Traceback" not in server.stderr()


async def test_rate_limits_and_login_throttling_count_across_instances(
    redis_url: str, tmp_path: Path
) -> None:
    rate, burst, failures = 2, 32, 4
    limits = {
        "FILEHOST_RATE_LIMIT_PER_SECOND": str(rate),
        "FILEHOST_RATE_LIMIT_BURST": str(burst),
        "FILEHOST_LOGIN_FAILURES_PER_EMAIL": str(failures),
    }
    with two_instances(redis_url, tmp_path, **limits) as (a, b):
        async with fresh_session() as http:
            await wait_for_two_workers(http, a)
            await wait_for_two_workers(http, b)
            create_user(env_of(redis_url), EMAIL)
            token = await login(http, a, EMAIL)
            key = await create_key(http, b, token)
            with_key = {"X-API-Key": key["secret_key"]}

            # 80 requests with one key, alternating between the instances (and so, over new
            # connections, between all four workers). One bucket: at most the burst plus what
            # refills while they run. A bucket per instance would let through up to twice the burst.
            started = time.monotonic()
            statuses: dict[str, list[int]] = {"a": [], "b": []}
            for n in range(80):
                name, server = ("a", a) if n % 2 == 0 else ("b", b)
                status, _ = await request(http, "GET", f"{server.base}/files", headers=with_key)
                statuses[name].append(status)
            elapsed = time.monotonic() - started

            # Failed logins: two through each instance reach the email's bound, and then even the
            # right password is refused by both.
            wrong = {"email": EMAIL, "password": "not the password"}
            failed = [
                (await request(http, "POST", f"{server.base}/auth/login", json=wrong))[0]
                for server in (a, b, a, b)
            ]
            right = {"email": EMAIL, "password": PASSWORD}
            throttled = [
                await request(http, "POST", f"{server.base}/auth/login", json=right)
                for server in (a, b)
            ]

        assert a.stop() == 0
        assert b.stop() == 0

    admitted = statuses["a"].count(200) + statuses["b"].count(200)
    assert set(statuses["a"] + statuses["b"]) == {200, 429}
    assert admitted <= burst + rate * elapsed + 1, (admitted, elapsed)
    assert admitted >= burst // 2, admitted  # the bucket did admit its burst's worth, shared
    assert 429 in statuses["a"] and 429 in statuses["b"], statuses
    assert failed == [401] * failures
    for status, body in throttled:
        assert status == 429, body
        assert body["error"]["code"] == "login_throttled"
