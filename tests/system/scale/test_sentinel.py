"""Redis Sentinel (issue 15, part 2): ``serve --workers 2`` on a master with one replica and three
sentinels (tests/support/cluster.py), all on loopback. Keys and sessions are made, the master is
killed with SIGKILL, and the service answers again once the sentinels have promoted the replica:
meanwhile every answer is a 503 (never a pass, never a refusal of a good credential), afterwards
the keys and sessions made before the kill work (``FILEHOST_REPLICA_WAIT_MS`` had each on the
replica before it was acknowledged), and new logins, keys and revocations work on the new master.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from service.domain.credentials import digest
from tests.support.clients import create_key, fresh_session, login, request, wait_for_two_workers
from tests.support.cluster import DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS, MASTER_NAME, sentinel_set
from tests.support.processes import create_user, running, service_env
from tests.support.redis import free_port

EMAIL = "sentinel@example.com"
# The stated bound: the sentinels call the master down after DOWN_AFTER_MS, then agree and promote
# the replica (about a second here); the service follows at its next connection. Well within
# down-after plus the failover timeout plus the service's own timeouts.
RECOVERY_BOUND_SECONDS = (DOWN_AFTER_MS + FAILOVER_TIMEOUT_MS) / 1000 + 4


async def test_the_service_follows_a_failover(tmp_path: Path) -> None:
    with sentinel_set(tmp_path / "redis") as topology:
        port = free_port()
        env = service_env(
            None,
            port,
            FILEHOST_REDIS_MODE="sentinel",
            FILEHOST_SENTINELS=topology.addresses,
            FILEHOST_SENTINEL_MASTER=MASTER_NAME,
            FILEHOST_REPLICA_WAIT_MS="1000",
            FILEHOST_RATE_LIMIT_PER_SECOND="0",
        )
        with running(env, port, tmp_path, "--workers", "2") as server:
            async with fresh_session() as http:
                await wait_for_two_workers(http, server)
                create_user(env, EMAIL)  # the CLI finds the master through the sentinels too
                tokens = [await login(http, server, EMAIL) for _ in range(2)]
                keys = [await create_key(http, server, tokens[0]) for _ in range(3)]

                async def files(headers: dict[str, str]) -> int:
                    status, _ = await request(http, "GET", f"{server.base}/files", headers=headers)
                    return status

                def with_key(n: int) -> dict[str, str]:
                    return {"X-API-Key": keys[n]["secret_key"]}

                def bearer(n: int) -> dict[str, str]:
                    return {"Authorization": f"Bearer {tokens[n]}"}

                assert [await files(with_key(n)) for n in range(3)] == [200] * 3
                # Every acknowledged key and session is on the replica already.
                with topology.replica.client() as replica:
                    for key in keys:
                        assert replica.exists(f"fh:key:{digest(key['secret_key'])}")
                    for token in tokens:
                        assert replica.exists(f"fh:session:{digest(token)}")
                old_master = topology.master.port

                topology.master.kill()
                killed_at = time.monotonic()
                during: list[int] = []
                while time.monotonic() - killed_at < RECOVERY_BOUND_SECONDS:
                    status = await files(with_key(0))
                    during.append(status)
                    if status == 200:
                        break
                    await asyncio.sleep(0.05)
                recovered_after = time.monotonic() - killed_at

                after_keys = [await files(with_key(n)) for n in range(3) for _ in range(4)]
                after_sessions = [await files(bearer(n)) for n in range(2) for _ in range(4)]
                new_token = await login(http, server, EMAIL)
                new_key = await create_key(http, server, new_token)
                new_key_works = await files({"X-API-Key": new_key["secret_key"]})
                status, body = await request(
                    http,
                    "DELETE",
                    f"{server.base}/keys/{keys[1]['id']}",
                    headers=bearer(1),
                )
                assert status == 200, body
                revoked = [await files(with_key(1)) for _ in range(6)]
                status, body = await request(
                    http, "POST", f"{server.base}/auth/logout", headers=bearer(0)
                )
                assert status == 200, body
                logged_out = [await files(bearer(0)) for _ in range(6)]

            assert server.stop() == 0
        stderr = server.stderr()

        assert topology.master_port() == topology.replica.port != old_master

    print(f"answered again {recovered_after:.2f} s after the kill; meanwhile {during[:-1]}")
    assert during[-1] == 200, f"no answer within {RECOVERY_BOUND_SECONDS} s: {during}"
    # While there is no master: 503, never a pass and never a refusal of the good key.
    assert set(during[:-1]) <= {503}, during
    assert 503 in during, "the kill was not noticed"
    assert recovered_after < RECOVERY_BOUND_SECONDS
    assert after_keys == [200] * 12
    assert after_sessions == [200] * 8
    assert new_key_works == 200
    assert revoked == [401] * 6
    assert logged_out == [401] * 6
    assert "Traceback" not in stderr
    for secret in [key["secret_key"] for key in keys] + tokens:
        assert secret not in stderr
