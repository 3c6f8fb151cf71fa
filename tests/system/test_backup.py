"""``filehost-auth backup`` and ``restore`` as an operator runs them: a backup taken from a real
``serve`` while its users log in and out, create and revoke keys and upload and delete files,
restored into a fresh Redis and an empty data directory, and served again.

The traffic is logged with when each step happened relative to the backup: done before the
backup command was started (so in the backup), started after it ended (so not), or between
(either, but then consistently). What is checked on the restored service: every key the backup
holds is listed and authenticates, every key revoked in it answers ``api_key_revoked``; every
session in it is signed in (restored with ``--keep-sessions``, they stay valid) and listed;
every file listed downloads whole with its SHA-256, none is missing its bytes, and the data
directory holds exactly those; each account's audit trail is the live trail as it was up to
one moment, and agrees with the keys and files restored.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.support.clients import fresh_session, login, request
from tests.support.files import multipart
from tests.support.keys import as_an_earlier_release_made_it
from tests.support.processes import PASSWORD, create_user, run_cli_async, running, service_env
from tests.support.redis import RedisServer, aof_redis, free_port, stopped_at_exit

USERS = ("ana@example.com", "ben@example.com", "cyd@example.com")
# Each user's traffic: BEFORE rounds, then the backup starts; rounds go on while it runs, one
# every DURING_PACE seconds at most (so a slow machine's longer backup does not use them up),
# and AFTER more once it ended (one step of each kind), or stop at ROUNDS in all.
BEFORE, AFTER, ROUNDS = 12, 5, 1000
DURING_PACE = 0.01
# serve waits this long for Redis, past the backup's longest pause (--max-pause-ms): requests
# wait while the store is read, and none is refused for it.
REDIS_TIMEOUT = "6"
MAX_PAUSE_MS = "4000"

BEFORE_IT, DURING_IT, AFTER_IT = "before", "during", "after"


@dataclass
class Backup:
    """Where the backup command is: not started, running, ended."""

    state: str = "not started"
    started: asyncio.Event = field(default_factory=asyncio.Event)

    def phase(self, begun_in: str) -> str:
        """When a step that began in state ``begun_in`` and ends now happened."""
        if begun_in == "ended":
            return AFTER_IT
        return BEFORE_IT if self.state == "not started" else DURING_IT


@dataclass
class Log:
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)


class Traffic:
    """One user's steps against ``base``, logged with when each happened."""

    def __init__(self, http: aiohttp.ClientSession, base: str, email: str, backup: Backup) -> None:
        self.http, self.base, self.email, self.backup = http, base, email, backup
        self.log = Log()
        self.main = ""  # a session kept open throughout, for the steps that need one

    async def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        status, body = await request(self.http, method, f"{self.base}{path}", **kwargs)
        assert status in (200, 201), (method, path, status, body)
        return body["data"]

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.main}"}

    def alive(self, kind: str) -> list[str]:
        """The keys, sessions or files made and not yet ended, oldest first."""
        made: dict[str, dict[str, Any]] = getattr(self.log, kind)
        return [name for name, entry in made.items() if entry["ended"] is None]

    async def step(self, round_: int) -> None:
        begun_in, alive = self.backup.state, self.alive
        kind = round_ % 5
        if kind == 0:  # a login; every other time, a logout of an earlier one
            data = await self.call(
                "POST", "/auth/login", json={"email": self.email, "password": PASSWORD}
            )
            self.log.sessions[data["token"]] = {
                "opened": self.backup.phase(begun_in),
                "ended": None,
            }
            others = [token for token in alive("sessions") if token != self.main]
            if round_ % 10 == 0 and len(others) > 1:
                await self.call("POST", "/auth/logout", headers=self.auth(others[0]))
                self.log.sessions[others[0]]["ended"] = self.backup.phase(begun_in)
        elif kind == 1:
            permissions = ["files.read", "files.write"]
            data = await self.call(
                "POST",
                "/keys",
                json={"name": f"k{round_}", "permissions": permissions},
                headers=self.auth(),
            )
            self.log.keys[data["id"]] = {
                "secret": data["secret_key"],
                "opened": self.backup.phase(begun_in),
                "ended": None,
            }
        elif kind == 2:  # an upload, with a key when there is one
            content = os.urandom(1 + round_ * 97 % 32768)
            body, headers = multipart(content, filename=f"f{round_}.bin")
            keys = alive("keys")
            via = {"X-API-Key": self.log.keys[keys[-1]]["secret"]} if keys else self.auth()
            data = await self.call("POST", "/files", data=body, headers={**headers, **via})
            self.log.files[data["id"]] = {
                "sha256": hashlib.sha256(content).hexdigest(),
                "opened": self.backup.phase(begun_in),
                "ended": None,
            }
        elif kind == 3 and len(alive("files")) > 1:
            file_id = alive("files")[0]
            await self.call("DELETE", f"/files/{file_id}", headers=self.auth())
            self.log.files[file_id]["ended"] = self.backup.phase(begun_in)
        elif kind == 4 and len(alive("keys")) > 1:
            key_id = alive("keys")[0]
            await self.call("DELETE", f"/keys/{key_id}", headers=self.auth())
            self.log.keys[key_id]["ended"] = self.backup.phase(begun_in)

    async def run(self, ready: asyncio.Event, all_ready: Any) -> None:
        self.main = await login(self.http, _Base(self.base), self.email)
        self.log.sessions[self.main] = {"opened": BEFORE_IT, "ended": None}
        after = 0
        for round_ in range(ROUNDS):
            if round_ == BEFORE:
                ready.set()
                await all_ready()
            if self.backup.state == "ended":
                after += 1
                if after > AFTER:
                    return
            elif self.backup.state == "running":
                await asyncio.sleep(DURING_PACE)
            await self.step(round_)


@dataclass
class _Base:
    """What ``tests.support.clients.login`` needs of a server."""

    base: str


def must_be(log_entry: dict[str, Any]) -> bool | None:
    """Whether the backup must hold the thing (True), must not (False), or may (None)."""
    if log_entry["opened"] == AFTER_IT:
        return False
    if log_entry["ended"] == BEFORE_IT:
        return False
    if log_entry["opened"] == BEFORE_IT and log_entry["ended"] in (None, AFTER_IT):
        return True
    return None


async def audit_trail(http: aiohttp.ClientSession, base: str, token: str) -> list[dict[str, Any]]:
    """The account's whole trail, oldest first."""
    events: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = "?limit=100" + (f"&cursor={cursor}" if cursor else "")
        status, body = await request(
            http, "GET", f"{base}/audit-events{query}", headers={"Authorization": f"Bearer {token}"}
        )
        assert status == 200, body
        events += body["data"]["events"]
        cursor = body["data"]["next_cursor"]
        if cursor is None:
            return events[::-1]


async def test_a_backup_under_traffic_restores_into_a_fresh_store_whole_and_consistent(
    redis_url: str, tmp_path: Path
) -> None:
    live_dir, backup_dir, restored_dir = (
        tmp_path / "live",
        tmp_path / "backup",
        tmp_path / "restored",
    )
    port = free_port()
    env = service_env(
        redis_url,
        port,
        FILEHOST_DATA_DIR=str(live_dir),
        FILEHOST_REDIS_TIMEOUT_SECONDS=REDIS_TIMEOUT,
        FILEHOST_RATE_LIMIT_PER_SECOND="0",
    )
    backup = Backup()
    with running(env, port, tmp_path) as server:
        for email in USERS:
            create_user(env, email)
        async with fresh_session() as http:
            users = [Traffic(http, server.base, email, backup) for email in USERS]
            readiness = [asyncio.Event() for _ in users]

            async def all_ready() -> None:
                await backup.started.wait()

            async def take_backup() -> tuple[int, str]:
                for ready in readiness:
                    await ready.wait()
                backup.state = "running"
                backup.started.set()
                try:
                    return await run_cli_async(
                        "backup", "--to", str(backup_dir), "--max-pause-ms", MAX_PAUSE_MS, env=env
                    )
                finally:
                    backup.state = "ended"

            *_, (status, said) = await asyncio.gather(
                *(user.run(ready, all_ready) for user, ready in zip(users, readiness, strict=True)),
                take_backup(),
            )
            live_trails = {
                user.email: await audit_trail(http, server.base, user.main) for user in users
            }
        assert server.stop() == 0

    assert status == 0, said
    logs = {user.email: user.log for user in users}
    everything = [
        entry
        for log in logs.values()
        for kind in ("keys", "sessions", "files")
        for entry in getattr(log, kind).values()
    ]
    for phase in (BEFORE_IT, DURING_IT, AFTER_IT):  # what the test is about happened
        assert any(phase in (entry["opened"], entry["ended"]) for entry in everything), phase
    secrets = [k["secret"] for log in logs.values() for k in log.keys.values()]
    secrets += [token for log in logs.values() for token in log.sessions]
    for secret in secrets:  # never printed, nor their digests
        assert secret not in said and hashlib.sha256(secret.encode()).hexdigest() not in said
    for path in [backup_dir, *backup_dir.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path

    # -- restore into a fresh Redis and an empty data directory, and serve it ----------------
    fresh = aof_redis(tmp_path / "fresh-redis")
    with stopped_at_exit(fresh):
        restored_env = service_env(
            fresh.url,
            free_port(),
            FILEHOST_DATA_DIR=str(restored_dir),
            FILEHOST_RATE_LIMIT_PER_SECOND="0",
        )
        status, said = await run_cli_async(
            "restore", "--from", str(backup_dir), "--keep-sessions", env=restored_env
        )
        assert status == 0, said
        port = int(restored_env["FILEHOST_PORT"])
        with running(restored_env, port, tmp_path) as restored:
            async with fresh_session() as http:
                for user in users:
                    await check_account(http, restored.base, user, live_trails[user.email])
                listed = await every_file_listed(http, restored.base, users)
            assert restored.stop() == 0
    # No record points at missing bytes, and no bytes are there without a record.
    assert sorted(p.name for p in (restored_dir / "files").iterdir()) == sorted(listed)
    levels = {orjson.loads(line)["level"] for line in restored.stderr().splitlines()}
    assert not levels & {"ERROR", "CRITICAL"}  # a listed file without its bytes logs an error


async def check_account(
    http: aiohttp.ClientSession, base: str, user: Traffic, live_trail: list[dict[str, Any]]
) -> None:
    log, bearer = user.log, {"Authorization": f"Bearer {user.main}"}
    # The trail first (nothing below adds to it): the live one as it was up to a moment.
    trail = await audit_trail(http, base, user.main)
    assert [e["id"] for e in trail] == [e["id"] for e in live_trail[: len(trail)]]
    created = {e["target"]["key_id"] for e in trail if e["type"] == "key.created"}
    revoked = {e["target"]["key_id"] for e in trail if e["type"] == "key.revoked"}
    uploaded = {e["target"]["file_id"] for e in trail if e["type"] == "file.uploaded"}
    deleted = {e["target"]["file_id"] for e in trail if e["type"] == "file.deleted"}

    # Keys, as any state the service can be in has them (a change under way when the store was
    # read comes back as a crash then would leave it): a key that works is listed; one created
    # and not revoked in the trail works; one answered api_key_revoked was revoked in the trail.
    _, body = await request(http, "GET", f"{base}/keys", headers=bearer)
    listed_keys = {key["id"] for key in body["data"]["keys"]}
    for key_id, entry in log.keys.items():
        status, body = await request(
            http, "GET", f"{base}/files", headers={"X-API-Key": entry["secret"]}
        )
        code = None if status == 200 else body["error"]["code"]
        assert code in (None, "api_key_revoked", "invalid_api_key"), (key_id, entry, code)
        if code is None:
            assert key_id in listed_keys, (key_id, entry)
        if key_id in created and key_id not in revoked:
            assert code is None and key_id in listed_keys, (key_id, entry, code)
        if code == "api_key_revoked":
            assert key_id in revoked, (key_id, entry)
        if code == "invalid_api_key":  # its creation never finished in the backup
            assert key_id not in created, (key_id, entry)
        held = must_be(entry)
        if held is True:
            assert code is None and key_id in created - revoked, (key_id, entry, code)
        elif entry["ended"] == BEFORE_IT:
            assert code == "api_key_revoked" and key_id not in listed_keys, (key_id, entry)
        elif entry["opened"] == AFTER_IT:
            assert code == "invalid_api_key" and key_id not in listed_keys | created, key_id

    # Sessions: each signed in as it was (they stay valid), and listed.
    _, body = await request(http, "GET", f"{base}/auth/sessions", headers=bearer)
    listed_sessions = {session["id"] for session in body["data"]["sessions"]}
    signed_in = set()
    for token, entry in log.sessions.items():
        status, body = await request(
            http, "GET", f"{base}/auth/sessions", headers={"Authorization": f"Bearer {token}"}
        )
        if status == 200:
            [current] = [s["id"] for s in body["data"]["sessions"] if s["current"]]
            signed_in.add(current)
        else:
            assert body["error"]["code"] == "invalid_session", (entry, body)
        held = must_be(entry)
        if held is not None:
            assert (status == 200) == held, entry
    assert signed_in == listed_sessions

    # Files: listed ⟺ uploaded and not deleted in the trail; each whole.
    files = await list_files(http, base, bearer)
    assert set(files) == uploaded - deleted
    for file_id, entry in log.files.items():
        held = must_be(entry)
        if held is not None:
            assert (file_id in files) == held, (file_id, entry)
    for file_id, listed in files.items():
        assert listed["sha256"] == log.files[file_id]["sha256"]
        async with http.get(f"{base}/files/{file_id}/content", headers=bearer) as response:
            assert response.status == 200, file_id
            assert hashlib.sha256(await response.read()).hexdigest() == listed["sha256"]


async def list_files(
    http: aiohttp.ClientSession, base: str, headers: dict[str, str]
) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        query = "?limit=100" + (f"&cursor={cursor}" if cursor else "")
        status, body = await request(http, "GET", f"{base}/files{query}", headers=headers)
        assert status == 200, body
        files.update({entry["id"]: entry for entry in body["data"]["files"]})
        cursor = body["data"]["next_cursor"]
        if cursor is None:
            return files


async def every_file_listed(
    http: aiohttp.ClientSession, base: str, users: list[Traffic]
) -> list[str]:
    listed: list[str] = []
    for user in users:
        listed += await list_files(http, base, {"Authorization": f"Bearer {user.main}"})
    return listed


async def test_after_a_restore_everyone_signs_in_again_and_keys_since_a_time_are_revoked(
    redis_url: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    """A restore after a compromise: the backup's sessions are left out, and the keys it holds,
    revoked since or not, are listed with their last use and revoked by when they were made or
    used, recorded as revoked by the command line."""
    port = free_port()
    env = service_env(
        redis_url,
        port,
        FILEHOST_DATA_DIR=str(tmp_path / "live"),
        FILEHOST_RATE_LIMIT_PER_SECOND="0",
    )
    create_user(env, USERS[0])
    with running(env, port, tmp_path) as server:
        async with fresh_session() as http:
            token = await login(http, server, USERS[0])
            bearer = {"Authorization": f"Bearer {token}"}
            made = {}
            for name in ("old", "new"):
                _, body = await request(
                    http,
                    "POST",
                    f"{server.base}/keys",
                    json={"name": name, "permissions": ["files.read"]},
                    headers=bearer,
                )
                made[name] = body["data"]
                if name == "old":  # used, then the second key made a second later
                    key = {"X-API-Key": made["old"]["secret_key"]}
                    files = f"{server.base}/files"
                    assert (await request(http, "GET", files, headers=key))[0] == 200
                    await asyncio.sleep(1.1)
            status, said = await run_cli_async("backup", "--to", str(tmp_path / "backup"), env=env)
            assert status == 0, said
            # After the backup: the old key revoked, the session ended.
            await request(http, "DELETE", f"{server.base}/keys/{made['old']['id']}", headers=bearer)
            await request(http, "POST", f"{server.base}/auth/logout", headers=bearer)
        assert server.stop() == 0

    redis_server.flush()
    restored = {**env, "FILEHOST_DATA_DIR": str(tmp_path / "restored")}
    status, said = await run_cli_async("restore", "--from", str(tmp_path / "backup"), env=restored)
    assert status == 0, said
    assert "1 session left out: everyone signs in again" in said
    assert "keys revoke --since" in said
    status, said = await run_cli_async("keys", "list", "--json", env=restored)
    assert status == 0, said
    listed = {entry["name"]: entry for entry in map(orjson.loads, said.splitlines())}
    assert set(listed) == {"old", "new"}
    assert listed["old"]["last_used_at"] is not None and listed["new"]["last_used_at"] is None
    assert listed["old"]["email"] == USERS[0]
    # Without --yes and off a terminal: nothing is revoked.
    since = listed["new"]["created_at"]
    status, said = await run_cli_async("keys", "revoke", "--since", since, env=restored)
    assert status == 2 and "nothing revoked" in said, said

    status, said = await run_cli_async("keys", "revoke", "--since", since, "--yes", env=restored)
    assert status == 0 and "1 key revoked" in said, said

    with running(restored, port, tmp_path) as server:
        async with fresh_session() as http:
            status, body = await request(
                http, "GET", f"{server.base}/auth/sessions", headers=bearer
            )
            assert (status, body["error"]["code"]) == (401, "invalid_session")
            # Revoked after the backup, the old key is live again; the new one was revoked.
            old = {"X-API-Key": made["old"]["secret_key"]}
            assert (await request(http, "GET", f"{server.base}/files", headers=old))[0] == 200
            new = {"X-API-Key": made["new"]["secret_key"]}
            status, body = await request(http, "GET", f"{server.base}/files", headers=new)
            assert (status, body["error"]["code"]) == (401, "api_key_revoked")
            token = await login(http, server, USERS[0])
            trail = await audit_trail(http, server.base, token)
            [revoked] = [e for e in trail if e["type"] == "key.revoked"]
            assert revoked["target"]["key_id"] == made["new"]["id"]
            assert revoked["actor"] == {"type": "cli"}
        assert server.stop() == 0


async def test_the_documented_restore_into_a_started_empty_deployment_works_and_upgrades(
    redis_url: str, redis_server: RedisServer, redis_client: Any, tmp_path: Path
) -> None:
    """operating.md's compose restore, as plain processes: an empty deployment started, the
    backup streamed into its data directory with tar and restored while it serves. Its start
    marked an upgrade done over no data: that is no data to the restore, and the backup, made
    before that upgrade, still gets it without a restart."""
    port = free_port()
    env = service_env(redis_url, port, FILEHOST_DATA_DIR=str(tmp_path / "live"))
    create_user(env, USERS[0])
    with running(env, port, tmp_path) as server:
        async with fresh_session() as http:
            token = await login(http, server, USERS[0])
            status, body = await request(
                http,
                "POST",
                f"{server.base}/uploaders",
                json={"kind": "curl", "name": "old laptop"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert status == 201, body
            made = body["data"]["key"]
        user_id = redis_client.hget("fh:users:by-email", USERS[0])
        as_an_earlier_release_made_it(redis_client, user_id, made)
        status, said = await run_cli_async("backup", "--to", str(tmp_path / "b" / "1"), env=env)
        assert status == 0, said
    with tarfile.open(tmp_path / "filehost-1.tar", "w") as tar:
        tar.add(tmp_path / "b" / "1", arcname="1")

    redis_server.flush()  # a new host: an empty Redis, an empty data directory
    data_dir = tmp_path / "new"
    target = {**env, "FILEHOST_DATA_DIR": str(data_dir)}
    with running(target, port, tmp_path) as server:
        # What its start did, in a task of its own beside serving: it may land after ready.
        for _ in range(200):
            if redis_client.keys("fh:*"):
                break
            await asyncio.sleep(0.05)
        assert redis_client.keys("fh:*") == ["fh:upgraded:uploader-keys"]
        (data_dir / "restore").mkdir()
        with tarfile.open(tmp_path / "filehost-1.tar") as tar:
            tar.extractall(data_dir / "restore", filter="data")
        restore = str(data_dir / "restore" / "1")
        status, said = await run_cli_async("restore", "--from", restore, env=target)
        assert status == 0, said
        shutil.rmtree(data_dir / "restore")

        async with fresh_session() as http:
            key = {"X-API-Key": made["secret_key"]}
            body, headers = multipart(b"after the restore", filename="a.bin")
            status, sent = await request(
                http, "POST", f"{server.base}/files", data=body, headers={**headers, **key}
            )
            assert status == 201, sent
            url = f"{server.base}/files/{sent['data']['id']}"
            status, refused = await request(http, "DELETE", url, headers=key)
            assert status == 403, refused  # the key is upload-only without a restart
            assert refused["error"]["details"]["upload_only"]
        assert redis_client.exists("fh:upgraded:uploader-keys")


@pytest.mark.parametrize("target", ["redis", "data directory"])
async def test_restore_refuses_a_target_that_is_not_empty(
    redis_url: str, redis_server: RedisServer, tmp_path: Path, target: str
) -> None:
    env = service_env(redis_url, 0, FILEHOST_DATA_DIR=str(tmp_path / "live"))
    create_user(env, USERS[0])
    status, said = await run_cli_async("backup", "--to", str(tmp_path / "backup"), env=env)
    assert status == 0, said
    if target == "data directory":
        redis_server.flush()
        stray = tmp_path / "other" / "files" / ("fil_" + "z" * 22)
        stray.parent.mkdir(parents=True)
        stray.write_bytes(b"someone else's")
    other = {**env, "FILEHOST_DATA_DIR": str(tmp_path / "other")}

    status, said = await run_cli_async("restore", "--from", str(tmp_path / "backup"), env=other)

    assert status == 1
    assert said.startswith("error: the target is not empty"), said
    assert "Traceback" not in said


async def test_restore_refuses_what_is_not_a_finished_backup(
    redis_url: str, tmp_path: Path
) -> None:
    env = service_env(redis_url, 0, FILEHOST_DATA_DIR=str(tmp_path / "data"))
    (tmp_path / "unfinished").mkdir()
    (tmp_path / "unfinished" / "records.jsonl").write_text("")

    status, said = await run_cli_async("restore", "--from", str(tmp_path / "unfinished"), env=env)

    assert status == 1
    assert said.startswith("error: no manifest.json in"), said
    assert "did not finish" in said
