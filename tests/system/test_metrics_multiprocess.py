"""``/metrics`` with two workers: whichever worker answers a scrape, the totals are those of the
requests both workers served (prometheus-client's multiprocess mode, in a directory ``serve``
makes for its workers and removes when it exits)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp

from tests.support.clients import create_key, fresh_session, login, wait_for_two_workers
from tests.support.metrics import samples
from tests.support.processes import Server, create_user, running, service_env
from tests.support.redis import free_port

KEYED = 60
ANONYMOUS = 10


def files_requests(values: dict, status: str) -> float:
    labels = frozenset({"route": "/api/v1/files", "method": "GET", "status": status}.items())
    return values.get(("filehost_http_requests_total", labels), 0.0)


def auth_checks(values: dict, credential: str, outcome: str) -> float:
    labels = frozenset({"credential": credential, "outcome": outcome}.items())
    return values.get(("filehost_auth_checks_total", labels), 0.0)


async def scrape(http: aiohttp.ClientSession, port: int) -> dict:
    async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        return samples(await response.text())


def worker_environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if b"=" in item)


def metrics_pids(server: Server, after: int = 0) -> set[int]:
    """The workers that answered the scrapes after the first ``after`` ones."""
    scrapes = [pid for pid, _m, path, _s in server.access_lines() if path == "/metrics"]
    return set(scrapes[after:])


async def test_totals_add_up_across_two_workers(redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = service_env(redis_url, port)
    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:
            await wait_for_two_workers(http, server)
            workers = {pid for pid, *_ in server.access_lines()}
            directories = {worker_environment(pid)["PROMETHEUS_MULTIPROC_DIR"] for pid in workers}
            assert len(directories) == 1
            directory = Path(directories.pop())
            assert directory.is_dir()

            create_user(env, "metrics@example.com")
            token = await login(http, server, "metrics@example.com")
            key = await create_key(http, server, token)
            keyed = [
                http.get(f"{server.base}/files", headers={"X-API-Key": key["secret_key"]})
                for _ in range(KEYED)
            ]
            anonymous = [http.get(f"{server.base}/files") for _ in range(ANONYMOUS)]
            statuses = []
            for batch in (keyed[:30], keyed[30:], anonymous):
                for response in await asyncio.gather(*batch):
                    statuses.append(response.status)
                    response.release()
            assert sorted(statuses) == [200] * KEYED + [401] * ANONYMOUS
            served_by = {
                pid for pid, _m, path, _s in server.access_lines() if path == "/api/v1/files"
            }
            assert len(served_by) == 2, "one worker served every request"
            probes = sum(
                1
                for _p, _m, path, status in server.access_lines()
                if path == "/api/v1/auth/session" and status == 401
            )

            # Each worker writes its counts at least once a second; then every scrape, from
            # either worker, shows exactly the totals.
            deadline = time.monotonic() + 10
            while True:
                values = await scrape(http, port)
                if (
                    files_requests(values, "200") == KEYED
                    and files_requests(values, "401") == ANONYMOUS
                ):
                    break
                assert files_requests(values, "200") <= KEYED
                assert time.monotonic() < deadline, "the totals never added up"
                await asyncio.sleep(0.2)
            settled = len([line for line in server.access_lines() if line[2] == "/metrics"])
            for _ in range(40):
                values = await scrape(http, port)
                assert files_requests(values, "200") == KEYED
                assert files_requests(values, "401") == ANONYMOUS
                assert auth_checks(values, "api_key", "ok") == KEYED
                assert auth_checks(values, "none", "credential_missing") == ANONYMOUS + probes
                assert auth_checks(values, "session", "ok") == 1  # the key's creation
                count = (
                    "filehost_auth_check_duration_seconds_count",
                    frozenset({("credential", "api_key")}),
                )
                assert values[count] == KEYED
                assert values[("filehost_login_in_flight", frozenset())] == 0
                logins = ("filehost_logins_total", frozenset({("outcome", "succeeded")}))
                assert values[logins] == 1
                # One build series whatever the workers, and no _created series.
                built = [name for name, _ in values if name == "filehost_build_info"]
                assert built == ["filehost_build_info"]
                assert not any(name.endswith("_created") for name, _ in values)
                if len(metrics_pids(server, settled)) == 2:
                    break
            assert len(metrics_pids(server, settled)) == 2, "one worker answered every scrape"
            assert any(directory.glob("counter_*.db"))

        assert server.stop() == 0
    assert not directory.exists()
    assert "Traceback" not in server.stderr()
