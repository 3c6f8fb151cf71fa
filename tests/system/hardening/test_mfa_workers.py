"""Second factors under ``serve --workers 2``: one TOTP code sent to many second steps at once,
through both workers, opens one session; wrong answers sent at once through both workers are
throttled at the account's bound, not at each worker's. Real processes, sockets and clock."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from service.domain import totp
from tests.support.clients import fresh_session, login, request, wait_for_two_workers
from tests.support.mfa import SECRETS_KEY
from tests.support.processes import PASSWORD, create_user, running, service_env
from tests.support.redis import free_port

EMAIL = "mfa.workers@example.com"
OTHER = "mfa.guessed@example.com"


def code(secret: str, steps: int = 0) -> str:
    return totp.code_at(secret, totp.step_at(time.time_ns() // 1_000_000) + steps)


async def test_one_code_opens_one_session_and_wrong_answers_are_throttled_once_for_both(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = service_env(
        redis_url,
        port,
        FILEHOST_SECRETS_KEY=SECRETS_KEY,
        FILEHOST_LOGIN_FAILURES_PER_EMAIL="5",
        FILEHOST_LOGIN_FAILURES_PER_ADDRESS="1000",
    )
    with running(env, port, tmp_path, "--workers", "2") as server:
        async with fresh_session() as http:
            await wait_for_two_workers(http, server)

            async def enrolled(email: str) -> str:
                create_user(env, email)
                token = await login(http, server, email)
                auth = {"Authorization": f"Bearer {token}"}
                status, body = await request(
                    http, "POST", f"{server.base}/auth/mfa/totp", headers=auth
                )
                assert status == 201, body
                secret = body["data"]["secret"]
                # Confirmed with the previous step's code, so the next step's is still unused.
                status, body = await request(
                    http,
                    "POST",
                    f"{server.base}/auth/mfa/totp/confirm",
                    json={"code": code(secret, -1)},
                    headers=auth,
                )
                assert status == 200, body
                return secret

            async def first_step(email: str) -> str:
                status, body = await request(
                    http,
                    "POST",
                    f"{server.base}/auth/login",
                    json={"email": email, "password": PASSWORD},
                )
                assert status == 200, body
                return body["data"]["mfa_token"]

            secret = await enrolled(EMAIL)
            other = await enrolled(OTHER)

            async def answer(mfa_token: str, sent: str) -> tuple[int, str]:
                status, body = await request(
                    http,
                    "POST",
                    f"{server.base}/auth/login/mfa",
                    json={"mfa_token": mfa_token, "code": sent},
                )
                return status, body.get("error", {}).get("code", "ok")

            # As many as the account's bound: the reused code's refusals don't throttle the race.
            tokens = [await first_step(EMAIL) for _ in range(5)]
            same = code(secret, 1)
            raced = await asyncio.gather(*(answer(t, same) for t in tokens))

            wrong = str((int(code(other)) + 500_000) % 1_000_000).zfill(6)
            tokens = [await first_step(OTHER) for _ in range(10)]
            guessed = await asyncio.gather(*(answer(t, wrong) for t in tokens))
        assert server.stop() == 0

    assert sorted(raced) == sorted([(200, "ok")] + [(401, "mfa_code_invalid")] * 4)
    assert sorted(guessed) == sorted(
        [(401, "mfa_code_invalid")] * 5 + [(429, "login_throttled")] * 5
    )
    pids = {
        pid for pid, method, path, _ in server.access_lines() if path.endswith("/auth/login/mfa")
    }
    assert len(pids) == 2, "one worker answered every second step"
