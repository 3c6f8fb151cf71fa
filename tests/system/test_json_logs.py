"""The logs of ``python -m service serve`` are JSON lines: every line on standard error parses,
each request has one access line with the documented fields, its request id is the one in the
response's ``X-Request-ID``, and records logged inside a request carry that id too."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from service.domain import aliases, credentials, recovery_codes, totp
from service.domain.credentials import generate_api_key, generate_session_token
from service.observability.log_lines import ACCESS_FIELDS, JsonFormatter
from service.observability.trace import (
    MASK,
    RequestTrace,
    current_trace,
    loggable_path,
    new_request_id,
)
from tests.support.clients import fresh_session, login
from tests.support.paths import REPO_ROOT
from tests.support.processes import create_user, running, service_env, wait_for_workers
from tests.support.redis import RedisServer, free_port

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
BASE_FIELDS = ("ts", "level", "pid", "logger", "msg")


def json_lines(text: str) -> list[dict[str, Any]]:
    entries = []
    for line in text.splitlines():
        entry = orjson.loads(line)  # every line: a non-JSON line fails the test here
        assert isinstance(entry, dict), line
        assert TIMESTAMP.fullmatch(entry["ts"]), line
        assert entry["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), line
        entries.append(entry)
    return entries


def refused_by_the_parser(port: int) -> bytes:
    """Send a request with a header line that has no colon; return the start of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /api/v1/files HTTP/1.1\r\nHost: x\r\nNot a header\r\n\r\n")
        return sock.recv(64)


async def call(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, str]:
    async with http.request(method, url, **kwargs) as response:
        await response.read()
        return response.status, response.headers["X-Request-ID"]


async def test_every_line_is_json_and_each_request_has_one_access_line(
    redis_url: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    port = free_port()
    env = service_env(redis_url, port)
    with running(env, port, tmp_path) as server:
        root = f"http://127.0.0.1:{port}"
        create_user(env, "logs@example.com")
        async with fresh_session() as http:
            token = await login(http, server, "logs@example.com")
            async with http.post(
                f"{server.base}/keys",
                json={"name": "logs", "permissions": ["files.read"]},
                headers={"Authorization": f"Bearer {token}"},
            ) as response:
                key = (await response.json())["data"]
            sent = {
                "files-ok": await call(
                    http,
                    "GET",
                    f"{server.base}/files?token=QUERY-SECRET",
                    headers={"X-API-Key": key["secret_key"], "X-Request-ID": "gw.7f3a:01-x_y"},
                ),
                "files-401": await call(http, "GET", f"{server.base}/files"),
                "session": await call(
                    http,
                    "GET",
                    f"{server.base}/auth/session",
                    headers={"Authorization": f"Bearer {token}"},
                ),
                "revoke-404": await call(
                    http,
                    "DELETE",
                    f"{server.base}/keys/key_nope",
                    headers={"Authorization": f"Bearer {token}", "X-Request-ID": "bad id!"},
                ),
                "unknown-404": await call(http, "GET", f"{root}/nowhere/at-all"),
                "healthz": await call(http, "GET", f"{root}/healthz"),
            }
            malformed = refused_by_the_parser(port)
            redis_server.stop()
            try:
                sent["readyz-503"] = await call(http, "GET", f"{root}/readyz")
            finally:
                redis_server.start()
        assert server.stop() == 0

    entries = json_lines(server.stderr())
    access = [entry for entry in entries if entry["logger"] == "aiohttp.access"]
    by_id = {entry["request_id"]: entry for entry in access}
    assert len(by_id) == len(access), "request ids repeat"
    for entry in access:
        assert list(entry) == [*BASE_FIELDS, *ACCESS_FIELDS], entry
        assert entry["level"] == "INFO"
        assert entry["msg"] == "request"
        assert entry["pid"] == server.process.pid  # one worker: serve itself
        assert entry["remote"] == "127.0.0.1"
        assert isinstance(entry["duration_ms"], float) and entry["duration_ms"] >= 0
        assert "?" not in entry["path"]
    # Timed finer than uvloop's clock (whole milliseconds), which aiohttp's own timing uses.
    assert any(entry["duration_ms"] != round(entry["duration_ms"]) for entry in access)

    expected = {
        "files-ok": ("GET", "/api/v1/files", "/api/v1/files", 200, "api_key", key["id"], "ok"),
        "files-401": (
            "GET",
            "/api/v1/files",
            "/api/v1/files",
            401,
            "none",
            None,
            "credential_missing",
        ),
        "session": (
            "GET",
            "/api/v1/auth/session",
            "/api/v1/auth/session",
            200,
            "session",
            None,
            "ok",
        ),
        "revoke-404": (
            "DELETE",
            "/api/v1/keys/{key_id}",
            "/api/v1/keys/key_nope",
            404,
            "session",
            None,
            "ok",
        ),
        "unknown-404": ("GET", "unmatched", "/nowhere/at-all", 404, None, None, None),
        "healthz": ("GET", "/healthz", "/healthz", 200, None, None, None),
        "readyz-503": ("GET", "/readyz", "/readyz", 503, None, None, None),
    }
    assert sent["files-ok"] == (200, "gw.7f3a:01-x_y")  # a sane id carries through
    assert re.fullmatch(r"[0-9a-f]{32}", sent["revoke-404"][1])  # an insane one is replaced
    for name, (status, request_id) in sent.items():
        entry = by_id[request_id]
        method, route, path, expected_status, credential, key_id, outcome = expected[name]
        assert status == expected_status, name
        assert (
            entry["method"],
            entry["route"],
            entry["path"],
            entry["status"],
            entry["credential"],
            entry["key_id"],
            entry["auth"],
        ) == (method, route, path, status, credential, key_id, outcome), name

    # A record logged inside a request (the 503's warning) carries that request's id.
    readyz_id = sent["readyz-503"][1]
    warnings = [e for e in entries if e["level"] == "WARNING" and e.get("request_id") == readyz_id]
    assert [w["msg"] for w in warnings] == ["refused GET /readyz: store_unavailable"]
    assert warnings[0]["logger"] == "service.api"

    # A request aiohttp's parser refused never reached the application: no id, no route.
    assert malformed.split(b" ")[1] == b"400"
    [parser_refusal] = [e for e in access if e["request_id"] is None]
    assert (parser_refusal["status"], parser_refusal["route"]) == (400, "unmatched")
    assert parser_refusal["remote"] == "127.0.0.1"

    # The start-up line: where the dashboard is and how to create a user, once the port is bound.
    [banner] = [entry for entry in entries if "dashboard" in entry]
    assert (banner["level"], banner["pid"]) == ("INFO", server.process.pid)
    # A loopback address is shown as localhost, where passkeys work without a public URL.
    shown = root.replace("127.0.0.1", "localhost")
    assert banner["dashboard"] == f"{shown}/" and banner["dashboard"] in banner["msg"]
    assert banner["create_user"] == (
        "python -m service users create --email you@example.com --password-stdin"
    )
    assert banner["create_user"] in banner["msg"]
    assert entries.index(banner) < entries.index(access[0])
    assert server.stdout() == ""  # everything serve says is on standard error

    text = server.stderr() + server.stdout()
    assert "Traceback" not in text
    for secret in (key["secret_key"], token, "QUERY-SECRET"):
        assert secret not in text


def test_a_traceback_stays_on_one_line_with_the_request_id() -> None:
    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Capture()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.json_logs")
    logger.addHandler(handler)
    logger.propagate = False
    token = current_trace.set(RequestTrace("req-123", "/api/v1/files"))
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("unexpected error on %s %s", "GET", "/api/v1/files")
    finally:
        current_trace.reset(token)
        logger.removeHandler(handler)
    logger.warning("outside any request")  # no handler now: nothing captured

    assert len(records) == 1 and "\n" not in records[0]
    entry = orjson.loads(records[0])
    assert entry["msg"] == "unexpected error on GET /api/v1/files"
    assert entry["request_id"] == "req-123"
    assert entry["level"] == "ERROR"
    assert entry["exc"].startswith("Traceback") and "ValueError: boom" in entry["exc"]


def test_a_record_outside_a_request_has_no_request_id() -> None:
    record = logging.LogRecord("service", logging.INFO, __file__, 1, "started %d", (2,), None)

    entry = orjson.loads(JsonFormatter().format(record))

    assert list(entry) == list(BASE_FIELDS)
    assert entry["msg"] == "started 2"


async def test_with_several_workers_every_line_from_start_to_sigterm_is_json(
    redis_url: str, tmp_path: Path
) -> None:
    """The supervisor's lines (workers stopping, exiting) as much as the workers' own."""
    port = free_port()
    env = service_env(redis_url, port, FILEHOST_WORKERS="2")
    with running(env, port, tmp_path) as server:
        wait_for_workers(server, 2)
        create_user(env, "workers@example.com")
        async with fresh_session() as http:
            token = await login(http, server, "workers@example.com")
            for _ in range(4):
                status, _ = await call(
                    http,
                    "GET",
                    f"{server.base}/auth/session",
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert status == 200
        assert server.stop() == 0

    entries = json_lines(server.stderr())
    assert server.stdout() == ""
    [banner] = [entry for entry in entries if "dashboard" in entry]
    assert banner["workers"] == 2
    supervisor = [e["msg"] for e in entries if e["pid"] == server.process.pid]
    assert "SIGTERM: stopping 2 workers; requests in flight get 10s to finish" in supervisor
    assert sum(" exited with 0" in msg for msg in supervisor) == 2
    assert supervisor[-1].startswith("stopped (SIGTERM): draining 2 workers took "), supervisor
    assert sum(e["logger"] == "aiohttp.access" for e in entries) >= 5  # the login and 4 more


def test_warnings_and_uncaught_exceptions_are_json_lines_too() -> None:
    """Once logging is set up as serve sets it up, nothing else reaches standard error."""
    program = (
        "import threading, warnings\n"
        "from service.observability.log_lines import configure_logging\n"
        "configure_logging('INFO')\n"
        "warnings.warn('an old way of doing it', DeprecationWarning, stacklevel=1)\n"
        "thread = threading.Thread(target=lambda: 1 / 0, name='helper')\n"
        "thread.start(); thread.join()\n"
        "raise RuntimeError('nothing caught this')\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "always", "-c", program],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert result.returncode == 1
    warning, in_thread, uncaught = json_lines(result.stderr)
    assert (warning["level"], warning["logger"]) == ("WARNING", "py.warnings")
    assert "an old way of doing it" in warning["msg"]
    assert in_thread["msg"] == "uncaught exception in thread helper"
    assert "ZeroDivisionError" in in_thread["exc"]
    assert uncaught["level"] == "CRITICAL" and "nothing caught this" in uncaught["exc"]


@pytest.mark.parametrize("level", ["WARNING", "ERROR"])
async def test_access_lines_are_off_above_info(redis_url: str, tmp_path: Path, level: str) -> None:
    port = free_port()
    env = service_env(redis_url, port, FILEHOST_LOG_LEVEL=level)
    with running(env, port, tmp_path) as server:
        async with fresh_session() as http:
            assert (await call(http, "GET", f"http://127.0.0.1:{port}/healthz"))[0] == 200
        assert server.stop() == 0

    assert [e for e in json_lines(server.stderr()) if e["logger"] == "aiohttp.access"] == []


def test_credential_shaped_pieces_of_a_path_are_masked() -> None:
    key, token = generate_api_key(), generate_session_token()
    digest = hashlib.sha256(key.encode()).hexdigest()

    assert loggable_path(f"/api/v1/keys/{key}") == "/api/v1/keys/[masked]"
    assert loggable_path(f"/api/v1/files/{token}/x") == "/api/v1/files/[masked]/x"
    assert loggable_path(f"/x/{key[4:]}") == "/x/[masked]"  # without its prefix
    assert loggable_path(f"/x/{digest}") == "/x/[masked]"
    # Ids and ordinary names stay readable; long paths are cut after masking.
    assert loggable_path("/api/v1/keys/key_0a1B2c3D4e5F6g7H8i9J0k") == (
        "/api/v1/keys/key_0a1B2c3D4e5F6g7H8i9J0k"
    )
    assert loggable_path("/api/v1/files/q3 report.pdf") == "/api/v1/files/q3 report.pdf"
    assert loggable_path("/a" * 500 + key) == "/a" * 500 + "[masked]"  # masked, then cut
    assert len(loggable_path("/a" * 600)) == 1024


def test_recovery_codes_and_authenticator_secrets_in_a_path_are_masked() -> None:
    """As the service shows them: a recovery code with its hyphens (or spaces), an authenticator
    app's secret whole or grouped as the dashboard groups it; never the service's own ids and
    slugs, nor an ordinary name."""
    code, secret = recovery_codes.generate()[0], totp.new_secret()
    grouped = " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))
    for pasted in (code, code.replace("-", " "), secret, grouped, f"x{secret}"):
        assert MASK in loggable_path(f"/a/{pasted}/x")
        assert loggable_path(f"/a/{pasted}/x").replace(MASK, "") in ("/a//x", "/a/x/x")
    assert "4LGA" not in loggable_path("/a/4LGA-RLEP-EVG5-RWCF")
    assert loggable_path("/a/ITTDI5A4ENVPGI7G4AMY5APEVFAVVB4N") == "/a/[masked]"

    now = 1_700_000_000_000
    for _ in range(200):
        for path in (
            f"/api/v1/files/{credentials.new_id('fil')}",
            f"/api/v1/auth/sessions/{credentials.new_id('ses')}",
            f"/api/v1/aliases/{aliases.new_alias_id(now)}",
            f"/a/{aliases.generate_slug()}/{credentials.new_id('fil')}",
        ):
            assert loggable_path(path) == path
    for path in (
        "/api/v1/files/fil_ABCDEFGHIJKLMNOPQRSTUV",  # an id of upper case only: too short
        "/a/road-trip-with-mom2",  # lower case: a slug, as a code is never shown
        "/a/ABCD-EFGH-IJKL",  # three groups: no code
        "/api/v1/files/Q3 PLAN 2024.pdf",
        "/api/v1/auth/mfa/recovery-codes",
    ):
        assert loggable_path(path) == path


def test_request_ids_are_version_4_uuids_and_never_repeat_in_a_forked_worker() -> None:
    """Ids are made in batches: a worker forked with some of its parent's batch left must make
    its own, or two workers would hand out the same ids."""
    made = [new_request_id() for _ in range(300)]  # more than a batch: the parent holds spares
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        try:  # whatever happens, the child must not go on to run the rest of the suite
            os.write(write_end, " ".join(new_request_id() for _ in range(300)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        in_child = pipe.read().decode().split(" ")
    os.waitpid(child, 0)
    in_parent = [new_request_id() for _ in range(300)]

    every = made + in_child + in_parent
    assert len(in_child) == 300 and len(set(every)) == len(every)
    assert {uuid.UUID(hex=rid).version for rid in every} == {4}
    assert {uuid.UUID(hex=rid).variant for rid in every} == {uuid.RFC_4122}
    assert all(rid == uuid.UUID(hex=rid).hex for rid in every)  # lower-case hex, 32 digits
