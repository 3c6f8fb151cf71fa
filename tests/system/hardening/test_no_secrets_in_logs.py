"""Secrets stay secret: a full flow at DEBUG level, every log line of ``serve`` (two workers) and
of the CLI searched as plain text, and every response body checked.

Searched for: each API key secret and session token (issued, or mangled and sent back as a bad
credential), each password (right, wrong, too short; a vanity alias's too), their SHA-256
digests (the store's keys are the digests of credentials), the bcrypt input and the stored bcrypt
hashes, an HTTP Basic value, and any 12-character piece of any of them, which catches a
truncated or partly masked secret. The log format is not assumed: the text is searched as it
is.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import aiohttp
import redis as redis_sync

from service.domain.credentials import generate_api_key, generate_session_token
from service.store.keys import RedisKeys
from tests.support.api import bearer
from tests.support.clients import Outcome, Recorder
from tests.support.processes import PASSWORD, Server, env_for, run_cli, started
from tests.support.redis import aof_redis, free_port, stopped_at_exit

EMAIL = "secrets@example.com"
WRONG_PASSWORD = "Wrong-Password-Kq83nZ1x"
SHORT_PASSWORD = "Qz7!xK2"  # under the minimum length: refused by the CLI
WINDOW = 12
ALIAS_PASSWORD = "Qu4rtz-Vn8mT2pL6xR"
WRONG_ALIAS_PASSWORD = "Zeph7-Gw3kD9sH1cB"


def _body(secret: str) -> str:
    """The random part of a credential (between the kind prefix and the checksum)."""
    return secret[4:-6] if secret.startswith(("fhk_", "fhs_")) else secret


def forbidden_forms(secret: str) -> set[str]:
    """The secret, its SHA-256 digest (hex, both cases) and every 12-character piece of its
    random body and of its digest."""
    digest = hashlib.sha256(secret.encode()).hexdigest()
    forms = {secret, digest, digest.upper()}
    for text in (_body(secret), digest):
        forms.update(text[i : i + WINDOW] for i in range(len(text) - WINDOW + 1))
    return forms


def leaks(text: str, secrets: dict[str, str]) -> list[str]:
    """Names of the secrets of which some forbidden form occurs in ``text``."""
    found = []
    for name, secret in secrets.items():
        forms = forbidden_forms(secret)
        short = {form for form in forms if len(form) == WINDOW}
        if any(form in text for form in forms - short) or any(
            text[i : i + WINDOW] in short for i in range(len(text) - WINDOW + 1)
        ):
            found.append(name)
    return found


async def test_no_secret_reaches_a_log_or_an_error_body(tmp_path: Path) -> None:
    port = free_port()
    secrets: dict[str, str] = {
        "password": PASSWORD,
        "wrong password": WRONG_PASSWORD,
        "short password": SHORT_PASSWORD,
        "bcrypt input": base64.b64encode(hashlib.sha256(PASSWORD.encode()).digest()).decode(),
        "basic credentials": base64.b64encode(f"{EMAIL}:{PASSWORD}".encode()).decode(),
    }
    cli_output: list[str] = []

    def cli(*args: str, stdin: str = "") -> int:
        result = run_cli(*args, env=env, stdin=stdin)
        cli_output.append(result.stdout + result.stderr)
        return result.returncode

    with stopped_at_exit(aof_redis(tmp_path / "redis")) as redis:
        env = env_for(
            redis.url, port, FILEHOST_LOG_LEVEL="DEBUG", FILEHOST_REDIS_TIMEOUT_SECONDS="0.5"
        )
        assert (
            cli("users", "create", "--email", EMAIL, "--password-stdin", stdin=SHORT_PASSWORD) == 1
        )
        assert cli("users", "create", "--email", EMAIL, "--password-stdin", stdin=PASSWORD) == 0
        assert cli("users", "list") == 0
        store = redis_sync.Redis.from_url(redis.url, decode_responses=True)
        names = RedisKeys("fh")
        user_id = store.hget(names.users_by_email, EMAIL) or ""
        secrets["bcrypt hash"] = store.hget(names.user(user_id), "pw") or ""
        store.close()
        assert secrets["bcrypt hash"].startswith("$2"), "the user record moved: update the test"

        server = Server(env, port, tmp_path, "--workers", "2")
        try:
            started(server, 2)
            async with Recorder(server.base) as rec:
                await _flow(rec, secrets, redis)
            assert server.stop() == 0
        finally:
            server.stop()
        # The CLI while the store is down.
        redis.stop()
        assert (
            cli("users", "create", "--email", "x@example.com", "--password-stdin", stdin=PASSWORD)
            == 1
        )

    logs = server.stdout() + server.stderr() + "".join(cli_output)
    assert "GET /api/v1/files" in logs or '"/api/v1/files"' in logs, "no access log captured"
    assert "503" in logs, "the outage left no trace in the log"
    assert len([s for s in secrets if s.startswith("key ")]) >= 3
    assert not leaks(logs, secrets), f"in the logs: {leaks(logs, secrets)}"

    issued = {secret for name, secret in secrets.items() if name.startswith(("key ", "token "))}
    for outcome in rec.outcomes:
        own = {s for s in issued if s in outcome.body.decode()} if outcome.ok else set()
        # A response may carry only the secret it issues (login: the token; POST /keys and a
        # roll: the key).
        if own:
            assert outcome.kind in ("login", "create key", "roll key") and len(own) == 1, (
                outcome.kind
            )
        # ...and the bad credentials made from it share its pieces: not counted against it.
        others = {n: s for n, s in secrets.items() if not any(leaks(s, {"own": o}) for o in own)}
        found = leaks(outcome.body.decode(), others)
        assert not found, f"{outcome.kind} answered {outcome.status} with {found}"
    refusals = [o for o in rec.outcomes if not o.ok]
    assert len(refusals) >= 20, len(refusals)


async def _flow(rec: Recorder, secrets: dict[str, str], redis) -> None:  # type: ignore[no-untyped-def]
    async def send(kind: str, method: str, path: str, expected: int, **kwargs) -> Outcome:  # type: ignore[no-untyped-def]
        outcome = await rec.send(kind, method, path, **kwargs)
        assert outcome.status == expected, (kind, outcome.status, outcome.body)
        return outcome

    def login_body(password: str, email: str = EMAIL) -> dict:
        return {"json": {"email": email, "password": password}}

    token = (await send("login", "POST", "/auth/login", 200, **login_body(PASSWORD))).json()
    token = token["data"]["token"]
    secrets["token main"] = token
    await send("wrong password", "POST", "/auth/login", 401, **login_body(WRONG_PASSWORD))
    await send(
        "unknown email", "POST", "/auth/login", 401, **login_body(PASSWORD, "no@example.com")
    )
    await send("short login", "POST", "/auth/login", 401, **login_body(SHORT_PASSWORD))
    other = (await send("login", "POST", "/auth/login", 200, **login_body(PASSWORD))).json()
    secrets["token other"] = other["data"]["token"]

    keys = []
    for n, permissions in enumerate((["files.read"], ["folders.read"], ["files.read"])):
        created = await send(
            "create key",
            "POST",
            "/keys",
            201,
            json={"name": f"k{n}", "permissions": permissions},
            headers=bearer(token),
        )
        keys.append(created.json()["data"])
        secrets[f"key {n}"] = keys[-1]["secret_key"]
    key, narrow, doomed = (k["secret_key"] for k in keys)
    await send("list", "GET", "/keys", 200, headers=bearer(token))
    await send("files", "GET", "/files", 200, headers={"X-API-Key": key})
    await send("whoami", "GET", "/auth/session", 200, headers={"X-API-Key": key})
    await send("files", "GET", "/files", 200, headers=bearer(token))

    # Bad and misused credentials; each mangled one is a secret too.
    bad_checksum = key[:-1] + ("A" if key[-1] != "A" else "B")
    unknown = generate_api_key()
    secrets.update({"bad checksum": bad_checksum, "unknown key": unknown})
    for kind, headers, status in [
        ("bad checksum", {"X-API-Key": bad_checksum}, 401),
        ("truncated", {"X-API-Key": key[:-3]}, 401),
        ("unknown", {"X-API-Key": unknown}, 401),
        ("garbage", {"X-API-Key": "fhk_" + key[4:] + key[4:]}, 401),
        ("token as key", {"X-API-Key": token}, 401),
        ("key as bearer", bearer(key), 200),  # a key sent as Stripe's and GitHub's are
        ("bad key as bearer", bearer(bad_checksum), 401),
        ("basic", {"Authorization": "Basic " + secrets["basic credentials"]}, 401),
        ("lowercase", {"X-API-Key": key.lower()}, 401),
        ("narrow", {"X-API-Key": narrow}, 403),
        ("both", {"X-API-Key": key, "Authorization": f"Bearer {token}"}, 400),
    ]:
        await send(kind, "GET", "/files", status, headers=headers)
    await send("key on keys", "GET", "/keys", 403, headers={"X-API-Key": key})
    await send("bearer key on keys", "GET", "/keys", 403, headers=bearer(key))
    await send("key in query", "GET", f"/files?api_key={key}&token={token}", 401)
    await send(
        "broken json",
        "POST",
        "/auth/login",
        400,
        data=f'{{"email": "{EMAIL}", "password": "{PASSWORD}"',
        headers={"Content-Type": "application/json"},
    )
    await send("bad field", "POST", "/auth/login", 400, json={"email": EMAIL, "pw": PASSWORD})

    await send("revoke", "DELETE", f"/keys/{keys[2]['id']}", 200, headers=bearer(token))
    await send("revoked", "GET", "/files", 401, headers={"X-API-Key": doomed})
    await send("logout", "POST", "/auth/logout", 200, headers=bearer(secrets["token other"]))
    await send("logged out", "GET", "/files", 401, headers=bearer(secrets["token other"]))

    # The key lifecycle (issue 13): a roll issues a new secret, shown in its answer only; a
    # disabled key, a key used from outside its networks and a leak report (its body holds
    # secrets) are refused or answered without any.
    rolled = await send(
        "roll key",
        "POST",
        f"/keys/{keys[0]['id']}/roll",
        201,
        json={"grace_seconds": 600},
        headers=bearer(token),
    )
    secrets["key rolled"] = rolled.json()["data"]["secret_key"]
    await send("old in grace", "GET", "/files", 200, headers={"X-API-Key": key})
    await send("rolled", "GET", "/files", 200, headers={"X-API-Key": secrets["key rolled"]})
    narrow_id = keys[1]["id"]
    await send(
        "disable",
        "PATCH",
        f"/keys/{narrow_id}",
        200,
        json={"enabled": False},
        headers=bearer(token),
    )
    await send("disabled", "GET", "/files", 401, headers={"X-API-Key": narrow})
    pin = {"enabled": True, "allowed_ips": ["192.0.2.0/24"]}
    await send("pin", "PATCH", f"/keys/{narrow_id}", 200, json=pin, headers=bearer(token))
    await send("outside", "GET", "/files", 403, headers={"X-API-Key": narrow})
    await send(
        "leak report",
        "POST",
        "/keys/leaked",
        202,
        json={"secrets": [narrow, unknown, bad_checksum, token]},
    )
    await send("reported", "GET", "/files", 401, headers={"X-API-Key": narrow})
    await send("bad report", "POST", "/keys/leaked", 400, json={"secrets": [narrow], "x": 1})

    await _alias_flow(rec, send, secrets, redis, token)

    redis.stop()
    try:
        await send("outage key", "GET", "/files", 503, headers={"X-API-Key": key})
        await send("outage session", "GET", "/files", 503, headers=bearer(token))
        await send("outage keys", "GET", "/keys", 503, headers=bearer(token))
        await send("outage login", "POST", "/auth/login", 503, **login_body(PASSWORD))
        await send(
            "outage create",
            "POST",
            "/keys",
            503,
            json={"name": "x", "permissions": []},
            headers=bearer(token),
        )
    finally:
        redis.start()
    await send("after outage", "GET", "/files", 200, headers={"X-API-Key": key})


async def _alias_flow(rec: Recorder, send, secrets: dict[str, str], redis, token: str) -> None:  # type: ignore[no-untyped-def]
    """A vanity alias's password: set, sent right and wrong in its header, in the form and in
    the query string (never read there), changed; its bcrypt hash read back from the store."""
    secrets["alias password"] = ALIAS_PASSWORD
    secrets["wrong alias password"] = WRONG_ALIAS_PASSWORD
    form = aiohttp.FormData()
    form.add_field("file", b"shared bytes", filename="shared.txt", content_type="text/plain")
    up = await send("upload", "POST", "/files", 201, data=form, headers=bearer(token))
    body = {"file_id": up.json()["data"]["id"], "slug": "secretive", "password": ALIAS_PASSWORD}
    made = await send("create alias", "POST", "/aliases", 201, json=body, headers=bearer(token))
    store = redis_sync.Redis.from_url(redis.url, decode_responses=True)
    secrets["alias bcrypt hash"] = store.hget("fh:alias:secretive", "p") or ""
    store.close()
    assert secrets["alias bcrypt hash"].startswith("$2"), "the alias entry moved: update the test"
    async with Recorder(rec.base.removesuffix("/api/v1")) as public:
        for kind, headers, status in [
            ("alias without", {}, 401),
            ("alias wrong", {"X-Alias-Password": WRONG_ALIAS_PASSWORD}, 401),
            ("alias right", {"X-Alias-Password": ALIAS_PASSWORD}, 200),
        ]:
            outcome = await public.send(kind, "GET", "/a/secretive", headers=headers)
            assert outcome.status == status, (kind, outcome.status)
        for kind, password, status in [
            ("alias form wrong", WRONG_ALIAS_PASSWORD, 401),
            ("alias form right", ALIAS_PASSWORD, 303),  # to the file, with the cookie
        ]:
            outcome = await public.send(
                kind, "POST", "/a/secretive", data={"password": password}, allow_redirects=False
            )
            assert outcome.status == status, (kind, outcome.status)
        query = await public.send(
            "alias in query", "GET", f"/a/secretive?password={ALIAS_PASSWORD}"
        )
        assert query.status == 401
    rec.outcomes += public.outcomes
    await send(
        "alias password changed",
        "PATCH",
        f"/aliases/{made.json()['data']['id']}",
        200,
        json={"password": WRONG_ALIAS_PASSWORD},
        headers=bearer(token),
    )


async def test_a_credential_pasted_into_the_path_is_not_logged(
    redis_url: str, tmp_path: Path
) -> None:
    """A key's secret sent where its id belongs (``DELETE /keys/<secret>``), or in any other path,
    is a leak waiting in the access log: the path is logged, so a credential-shaped piece of it
    must be masked there. The answer itself is an ordinary refusal."""
    port = free_port()
    env = env_for(redis_url, port)
    key, token = generate_api_key(), generate_session_token()
    server = Server(env, port, tmp_path)
    try:
        started(server, 1)
        async with Recorder(server.base) as rec:
            for path in (f"/keys/{key}", f"/files/{token}", f"/{key}/x"):
                outcome = await rec.send("pasted", "DELETE", path)
                assert outcome.status in (401, 404, 405), outcome
                assert not leaks(outcome.body.decode(), {"key": key, "token": token})
        assert server.stop() == 0
    finally:
        server.stop()
    logs = server.stdout() + server.stderr()
    assert "/api/v1/keys/" in logs, "no access log captured"
    assert not leaks(logs, {"key": key, "token": token}), "a credential in the path was logged"
