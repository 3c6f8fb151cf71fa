"""An operator's way back in and the secrets key, on the command line as an operator runs it:
``users reset-mfa`` (confirmed like ``users delete``), ``secrets new-key``, ``secrets rotate``."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from typing import Any

from service.config.readers import secret_keys
from tests.support.api import assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.mfa import (
    OTHER_SECRETS_KEY,
    SECRETS_KEY,
    code_for,
    enable_totp,
    first_step,
    second_step,
)
from tests.support.paths import REPO_ROOT
from tests.support.processes import CLI_BOUND

EMAIL = "alice@example.com"


def cli(*args: str, redis_url: str, stdin: str = "", **extra: str) -> Any:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL" and not k.startswith("FILEHOST")}
    env.update(REDIS_URL=redis_url, FILEHOST_BCRYPT_COST="4", **extra)
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=REPO_ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=CLI_BOUND,
        check=False,
    )


async def test_reset_mfa_removes_every_factor_ends_sessions_and_is_audited(
    make_api: Any, redis_url: str, clock: FakeClock
) -> None:
    api = await make_api(secrets_key=secret_keys("K", SECRETS_KEY))
    token = await api.user_with_session(EMAIL)
    await enable_totp(api, token, clock)
    refused = cli("users", "reset-mfa", "--email", EMAIL, redis_url=redis_url)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert (await first_step(api, EMAIL))["mfa_required"]

    done = cli("users", "reset-mfa", "--email", EMAIL, "--yes", redis_url=redis_url)
    assert done.returncode == 0, done.stderr
    assert "1 session ended" in done.stdout
    await assert_error(
        await api.client.get("/api/v1/auth/session", headers=bearer(token)), 401, "invalid_session"
    )
    fresh = await api.login(EMAIL)  # one step again
    events = await api.client.get("/api/v1/audit-events", headers=bearer(fresh))
    [reset] = [e for e in (await events.json())["data"]["events"] if e["type"] == "mfa.reset"]
    assert reset["actor"] == {"type": "cli"}
    unknown = cli(
        "users", "reset-mfa", "--email", "nobody@example.com", "--yes", redis_url=redis_url
    )
    assert unknown.returncode == 1


def test_new_key_prints_32_random_bytes_in_base64(redis_url: str) -> None:
    first = cli("secrets", "new-key", redis_url=redis_url)
    second = cli("secrets", "new-key", redis_url=redis_url)
    assert first.returncode == 0
    assert len(base64.b64decode(first.stdout.strip())) == 32
    assert first.stdout != second.stdout
    assert secret_keys("K", first.stdout)


async def test_rotate_seals_every_secret_with_the_new_key_so_the_old_can_go(
    make_api: Any, redis_url: str, clock: FakeClock
) -> None:
    old = await make_api(secrets_key=secret_keys("K", SECRETS_KEY))
    token = await old.user_with_session(EMAIL)
    secret, _ = await enable_totp(old, token, clock)
    both = f"{OTHER_SECRETS_KEY},{SECRETS_KEY}"
    rotated = cli("secrets", "rotate", redis_url=redis_url, FILEHOST_SECRETS_KEY=both)
    assert rotated.returncode == 0, rotated.stderr
    assert "1 secret sealed again" in rotated.stdout
    again = cli("secrets", "rotate", redis_url=redis_url, FILEHOST_SECRETS_KEY=both)
    assert "0 secrets sealed again with the first key; 1 already were" in again.stdout
    new = await make_api(secrets_key=secret_keys("K", OTHER_SECRETS_KEY))
    step = await first_step(new, EMAIL)
    answer = await second_step(new, step["mfa_token"], code=code_for(secret, clock))
    assert answer.status == 200, await answer.text()
    # A key that opens nothing is reported, not guessed past.
    third = base64.b64encode(bytes(32)).decode()
    lost = cli("secrets", "rotate", redis_url=redis_url, FILEHOST_SECRETS_KEY=third)
    assert lost.returncode == 1 and EMAIL in lost.stderr
    assert secret not in lost.stdout + lost.stderr
