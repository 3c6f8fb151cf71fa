"""Ending sessions under ``serve --workers 2`` (issue 14): a session ended through one worker is
refused by both on the next request, whichever worker answers it. Real processes and sockets, as
in tests/system/test_serve.py; the helpers are tests/support's."""

from __future__ import annotations

from pathlib import Path

from tests.support.clients import fresh_session, login, request, wait_for_two_workers
from tests.support.processes import create_user, running, service_env
from tests.support.redis import free_port

EMAIL = "sessions.workers@example.com"
LIST_OK = ("GET", "/api/v1/auth/sessions", 200)
LIST_REFUSED = ("GET", "/api/v1/auth/sessions", 401)


async def test_two_workers_refuse_ended_sessions_from_the_next_request(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = service_env(redis_url, port)

    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:
            await wait_for_two_workers(http, server)
            create_user(env, EMAIL)
            mine = await login(http, server, EMAIL)
            ended_by_id = await login(http, server, EMAIL)
            ended_with_the_rest = await login(http, server, EMAIL)

            def who(token: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {token}"}

            async def sessions_list(token: str) -> tuple[int, dict]:
                return await request(
                    http, "GET", f"{server.base}/auth/sessions", headers=who(token)
                )

            async def whoami(token: str) -> tuple[int, dict]:
                return await request(http, "GET", f"{server.base}/auth/session", headers=who(token))

            # Both workers answer both doomed tokens before they are ended.
            for token in (ended_by_id, ended_with_the_rest):
                for _ in range(20):
                    status, body = await sessions_list(token)
                    assert status == 200, body
            status, body = await request(
                http, "GET", f"{server.base}/auth/sessions", headers=who(mine)
            )
            assert status == 200, body
            # Newest first: the one to end by id is the second login.
            target = body["data"]["sessions"][1]["id"]

            status, body = await request(
                http, "DELETE", f"{server.base}/auth/sessions/{target}", headers=who(mine)
            )
            assert status == 200, body
            by_id = [await sessions_list(ended_by_id) for _ in range(40)]
            still = [await whoami(ended_with_the_rest) for _ in range(10)]

            status, body = await request(
                http, "DELETE", f"{server.base}/auth/sessions", headers=who(mine)
            )
            assert (status, body["data"]) == (200, {"ended": 1})
            rest = [await sessions_list(ended_with_the_rest) for _ in range(40)]
            mine_after = [await whoami(mine) for _ in range(10)]

        assert server.stop() == 0

    assert [status for status, _ in still] == [200] * 10
    for results in (by_id, rest):
        assert [status for status, _ in results] == [401] * 40
        assert {body["error"]["code"] for _, body in results} == {"invalid_session"}
    assert [status for status, _ in mine_after] == [200] * 10
    lines = server.access_lines()
    served = {pid for pid, m, path, status in lines if (m, path, status) == LIST_OK}
    refused = [pid for pid, m, path, status in lines if (m, path, status) == LIST_REFUSED]
    assert len(served) == 2, "one worker answered every list before the sessions were ended"
    assert len(refused) == 80
    assert len(set(refused)) == 2, f"all 80 refusals came from {set(refused)}"
    assert server.process.pid not in refused
