"""schemathesis against the live service: ``python -m service serve`` on a loopback port, on the
tests' real Redis, exercised through every operation of ``service/api/openapi.json`` with
generated valid and invalid input, with real credentials (a session, and an API key holding every
permission), and checked for: no 5xx, only documented statuses, documented content types,
documented headers (``WWW-Authenticate``, ``Retry-After``) and bodies that match their schemas.

Repeatable: Hypothesis is derandomized (examples depend only on the document) and the example
count is bounded, so a CI run does the same requests every time. Rate limits and login throttling
are switched off for the run: they are timing-dependent and not what this test is about.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import redis as redis_sync
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.api import SPEC_PERMISSIONS
from tests.support.mfa import SECRETS_KEY
from tests.support.openapi import DOCUMENT_PATH
from tests.support.processes import Server, run_cli, running, service_env
from tests.support.raw_http import MALFORMED, exchange, parse_responses
from tests.support.redis import RedisServer, free_port

DOCUMENT = json.loads(DOCUMENT_PATH.read_text())
# The document's own login example, so the examples phase logs in successfully.
EMAIL = "you@example.com"
PASSWORD = "a long password"
MAX_EXAMPLES = 60
# Operations on one key: a generated id is never one of ours, so a quarter of their cases get a
# key of their own (never the run's) to read, change, roll or revoke.
KEY_ID_PATHS = {
    "/api/v1/keys/{key_id}",
    "/api/v1/keys/{key_id}/roll",
    "/api/v1/keys/{key_id}/usage",
}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

schema = schemathesis.openapi.from_path(DOCUMENT_PATH)
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=MAX_EXAMPLES,
    deterministic=True,
    with_security_parameters=False,  # the test sends real credentials itself
)


@dataclass
class Live:
    """The running service and the credentials the run authenticates with."""

    server: Server
    http: requests.Session
    token: str
    key: str
    turn: Iterator[int] = field(default_factory=itertools.count)
    statuses: set[int] = field(default_factory=set)  # every status the generated cases got
    # (method, path template) -> the statuses its cases got
    by_operation: dict[tuple[str, str], set[int]] = field(default_factory=dict)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    def login(self) -> str:
        response = self.http.post(
            f"{self.root}/api/v1/auth/login",
            json={"email": EMAIL, "password": PASSWORD},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return response.json()["data"]["token"]

    def disposable_key_id(self) -> str:
        response = self.http.post(
            f"{self.root}/api/v1/keys",
            json={"name": "disposable", "permissions": ["files.read"]},
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=10,
        )
        assert response.status_code in (201, 409), response.text
        return response.json()["data"]["id"] if response.status_code == 201 else "key_gone"

    def credentials_for(self, method: str, path: str) -> dict[str, str]:
        """The credential header for one request. Logout gets a fresh session of its own, so
        the run's session outlives it; where both kinds are accepted they take turns."""
        security = DOCUMENT["paths"][path][method.lower()]["security"]
        schemes = {name for requirement in security for name in requirement}
        if not schemes:
            return {}
        if path == "/api/v1/auth/logout":
            return {"Authorization": f"Bearer {self.login()}"}
        if "ApiKey" in schemes and next(self.turn) % 2 == 0:
            return {"X-API-Key": self.key}
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture(scope="module")
def live(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    if redis_server.process is None:  # an outage test stopped it and failed before restarting
        redis_server.start()
    url = redis_server.url
    port = free_port()
    env = service_env(
        url,
        port,
        FILEHOST_RATE_LIMIT_PER_SECOND="0",
        FILEHOST_LOGIN_FAILURES_PER_EMAIL="0",
        FILEHOST_LOGIN_FAILURES_PER_ADDRESS="0",
        FILEHOST_DATA_DIR=str(tmp_path_factory.mktemp("files")),  # its uploads, not the repo's
        # Every second factor configured, so that its operations answer as they do in use.
        FILEHOST_SECRETS_KEY=SECRETS_KEY,
        FILEHOST_PUBLIC_URL=f"http://localhost:{port}",
    )
    with redis_sync.Redis.from_url(url) as client:
        client.flushall()
    created = run_cli(
        "users", "create", "--email", EMAIL, "--password-stdin", env=env, stdin=PASSWORD + "\n"
    )
    assert created.returncode == 0, created.stderr
    with running(env, port, tmp_path_factory.mktemp("live")) as server, requests.Session() as http:
        live = Live(server, http, token="", key="")
        live.token = live.login()
        response = http.post(
            f"{live.root}/api/v1/keys",
            json={"name": "schemathesis", "permissions": SPEC_PERMISSIONS, "expires_days": 1},
            headers={"Authorization": f"Bearer {live.token}"},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        live.key = response.json()["data"]["secret_key"]
        yield live


@schema.parametrize()
@settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_live_service_conforms_to_its_document(case: schemathesis.Case, live: Live) -> None:
    method, path = case.operation.method.upper(), case.operation.path
    if path in KEY_ID_PATHS and next(live.turn) % 4 == 0:
        case.path_parameters = {"key_id": live.disposable_key_id()}  # the 2xx path too
    response = case.call_and_validate(
        base_url=live.root,
        session=live.http,
        headers=live.credentials_for(method, path),
        checks=CHECKS,
        timeout=10,
    )
    live.statuses.add(response.status_code)
    live.by_operation.setdefault((method, path), set()).add(response.status_code)


def test_the_run_was_authenticated_and_met_valid_and_invalid_input(live: Live) -> None:
    assert {200, 201, 202, 400, 404} <= live.statuses, live.statuses


def test_the_key_lifecycle_operations_were_met_on_their_success_path_too(live: Live) -> None:
    expected = {
        ("PATCH", "/api/v1/keys/{key_id}"): 200,
        ("POST", "/api/v1/keys/{key_id}/roll"): 201,
        ("POST", "/api/v1/keys/leaked"): 202,
        ("DELETE", "/api/v1/keys/{key_id}"): 200,
        ("GET", "/api/v1/keys/{key_id}/usage"): 200,
    }
    for operation, success in expected.items():
        assert success in live.by_operation.get(operation, set()), (operation, live.by_operation)


def test_the_run_left_the_credentials_working(live: Live) -> None:
    for headers in ({"X-API-Key": live.key}, {"Authorization": f"Bearer {live.token}"}):
        response = live.http.get(f"{live.root}/api/v1/files", headers=headers, timeout=10)
        assert response.status_code == 200, response.text


async def test_the_served_process_answers_parser_errors_with_the_envelope(live: Live) -> None:
    """``service.server`` serves through ``service.api._aiohttp.run_app``: checked on the real
    process."""
    data = (
        b"GET /api/v1/files HTTP/1.1\r\nHost: x\r\nX-API-Key: "
        + live.key.encode()
        + b"\x01\r\n\r\n"
    )
    received = await exchange(live.server.port, data)
    [response] = parse_responses(received)
    assert response.status == 400
    assert response.json() == MALFORMED
    assert live.key[4:].encode() not in received


def test_the_run_logged_no_credential_and_no_traceback(live: Live) -> None:
    logs = live.server.stdout() + live.server.stderr()
    assert "Traceback" not in logs
    assert live.key not in logs and live.key[4:20] not in logs
    assert live.token not in logs and live.token[4:20] not in logs
