"""Ending a credential is never rate limited, on two workers sharing one bucket (issue 11, #3):
a session that gets 429 for everything else still revokes a leaked key and logs out, and from
then on both are refused by either worker."""

from __future__ import annotations

from pathlib import Path

from tests.support.clients import create_key, fresh_session, login, request, wait_for_two_workers
from tests.support.processes import create_user, running, service_env
from tests.support.redis import free_port

EMAIL = "busy@example.com"


async def test_a_session_over_its_rate_on_two_workers_still_revokes_and_logs_out(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = service_env(
        redis_url, port, FILEHOST_RATE_LIMIT_PER_SECOND="1", FILEHOST_RATE_LIMIT_BURST="5"
    )
    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:  # a new connection, so either worker, each time
            await wait_for_two_workers(http, server)
            create_user(env, EMAIL)
            token = await login(http, server, EMAIL)
            bearer = {"Authorization": f"Bearer {token}"}
            key = await create_key(http, server, token)
            busy = [
                (await request(http, "GET", f"{server.base}/files", headers=bearer))[0]
                for _ in range(12)
            ]
            assert 429 in busy, busy  # the session is over its rate

            revoked, _ = await request(
                http, "DELETE", f"{server.base}/keys/{key['id']}", headers=bearer
            )
            logged_out, _ = await request(
                http, "POST", f"{server.base}/auth/logout", headers=bearer
            )
            after_key = [
                await request(
                    http, "GET", f"{server.base}/files", headers={"X-API-Key": key["secret_key"]}
                )
                for _ in range(10)
            ]
            after_session = [
                await request(http, "GET", f"{server.base}/files", headers=bearer)
                for _ in range(10)
            ]
        assert server.stop() == 0

    assert (revoked, logged_out) == (200, 200)
    assert {(status, body["error"]["code"]) for status, body in after_key} == {
        (401, "api_key_revoked")
    }
    assert {(status, body["error"]["code"]) for status, body in after_session} == {
        (401, "invalid_session")
    }
    served_by = {pid for pid, _m, path, _s in server.access_lines() if path == "/api/v1/files"}
    assert len(served_by) == 2, "one worker served every request"
