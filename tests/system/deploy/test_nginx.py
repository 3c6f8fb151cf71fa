"""``deploy/nginx.conf`` run for real: Debian's nginx on a free loopback port, rendered from the
shipped file, in front of a tiny upstream that echoes the identity headers it received, with the
auth service (the real app, on a real port, on the test Redis) answering nginx's sub-requests.

nginx runs in the foreground under this test (``daemon off``) with its pid file, logs and
temporary files in the test's directory, and is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

from service.app import create_app
from service.config import Settings
from tests.support.api import PASSWORD, Api, serve_app
from tests.support.clock import FakeClock
from tests.support.paths import REPO_ROOT
from tests.support.redis import RedisServer, free_port

TEMPLATE = REPO_ROOT / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
ECHOED = ("X-Auth-User-Id", "X-Auth-Key-Id", "X-Auth-Credential", "X-Auth-Permissions")
# Headers some frameworks read as the method or the path instead of the request line's.
OVERRIDES = (
    "X-HTTP-Method-Override",
    "X-Method-Override",
    "X-HTTP-Method",
    "X-Original-URL",
    "X-Rewrite-URL",
)


@dataclass
class Upstream:
    """The file service stand-in: records what reached it and echoes the identity headers."""

    seen: list[dict[str, Any]] = field(default_factory=list)
    headers: list[CIMultiDict[str]] = field(default_factory=list)  # every request's, in full

    async def handle(self, request: web.Request) -> web.Response:
        self.headers.append(request.headers.copy())
        seen = {name: request.headers.get(name) for name in ECHOED}
        seen |= {
            "method": request.method,
            "path": request.path_qs,
            "credential_headers": sorted(
                name
                for name in ("X-API-Key", "Authorization", "X-Required-Permission")
                if name in request.headers
            ),
            "request_id": request.headers.get("X-Request-ID"),
        }
        self.seen.append(seen)
        return web.json_response({"upstream": seen})


@pytest.fixture
async def upstream(aiohttp_server: Any) -> tuple[Upstream, int]:
    echo = Upstream()
    app = web.Application()
    app.router.add_route("*", "/api/v1/{tail:.*}", echo.handle)
    server = await aiohttp_server(app, port=free_port())
    return echo, server.port


@dataclass
class Nginx:
    base: str
    directory: Path
    process: subprocess.Popen[bytes]

    def error_log(self) -> str:
        path = self.directory / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


def render(listen: str, auth: str, app: str, runtime: Path) -> str:
    text = TEMPLATE.read_text()
    for name, value in {
        "LISTEN": listen,
        "AUTH_SERVICE": auth,
        "APP_SERVICE": app,
        "RUNTIME_DIR": str(runtime),
    }.items():
        assert "{{" + name + "}}" in text, name
        text = text.replace("{{" + name + "}}", value)
    assert "{{" not in text
    return text


@contextlib.contextmanager
def running_nginx(directory: Path, auth_port: int, app_port: int) -> Iterator[Nginx]:
    if not os.access(NGINX, os.X_OK):
        pytest.fail(f"{NGINX} is missing: install Debian's nginx (scripts/test does)")
    port = free_port()
    directory.mkdir()
    conf = directory / "nginx.conf"
    conf.write_text(
        render(f"127.0.0.1:{port}", f"127.0.0.1:{auth_port}", f"127.0.0.1:{app_port}", directory)
    )
    globals_ = f"daemon off; pid {directory}/nginx.pid; error_log {directory}/error.log info;"
    process = subprocess.Popen(
        [
            NGINX,
            "-p",
            str(directory),
            "-c",
            str(conf),
            "-e",
            str(directory / "error.log"),
            "-g",
            globals_,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    nginx = Nginx(f"http://127.0.0.1:{port}", directory, process)
    try:
        deadline = time.monotonic() + 15
        while True:
            if process.poll() is not None:
                raise AssertionError(f"nginx exited with {process.returncode}: {nginx.error_log()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"nginx did not listen: {nginx.error_log()}") from None
                time.sleep(0.05)
        yield nginx
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # fast shutdown of the master and its workers
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@dataclass
class Gateway:
    api: Api  # the auth service, for setting up users and keys directly
    nginx: Nginx
    upstream: Upstream
    http: aiohttp.ClientSession

    async def call(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, Any]:
        async with self.http.request(method, self.nginx.base + path, headers=headers) as response:
            body = await response.json(content_type=None)
            return response.status, body, response.headers


@pytest.fixture
async def gateway(
    make_api: Any, upstream: tuple[Upstream, int], tmp_path: Path
) -> AsyncIterator[Gateway]:
    api = await make_api()
    echo, app_port = upstream
    with running_nginx(tmp_path / "nginx", api.client.server.port, app_port) as nginx:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            yield Gateway(api, nginx, echo, http)
    assert "[emerg]" not in nginx.error_log()


async def user_and_key(gateway: Gateway, permissions: list[str]) -> tuple[str, str, dict[str, Any]]:
    user = await gateway.api.create_user("gateway@example.com")
    token = await gateway.api.login("gateway@example.com")
    key = await gateway.api.create_key(token, permissions=permissions)
    return user.id, token, key


def refusal(body: Any) -> str:
    assert body["success"] is False
    assert isinstance(body["error"]["message"], str)
    return body["error"]["code"]


# -- tests ---------------------------------------------------------------------------------------


async def test_allowed_refused_and_revoked_through_nginx(gateway: Gateway) -> None:
    user_id, token, key = await user_and_key(gateway, ["files.read"])
    secret = key["secret_key"]

    # Allowed: a key with files.read lists files; the upstream gets who, not the credential.
    status, body, headers = await gateway.call("GET", "/api/v1/files?page=2", {"X-API-Key": secret})
    assert status == 200, body
    assert body["upstream"] == {
        "X-Auth-User-Id": user_id,
        "X-Auth-Key-Id": key["id"],
        "X-Auth-Credential": "api_key",
        "X-Auth-Permissions": "files.read",
        "method": "GET",
        "path": "/api/v1/files?page=2",
        "credential_headers": [],
        "request_id": body["upstream"]["request_id"],
    }
    assert len(body["upstream"]["request_id"]) == 32  # nginx's $request_id, sent to both

    status, body, _ = await gateway.call(
        "GET", "/api/v1/files", {"Authorization": f"Bearer {token}"}
    )
    assert status == 200, body
    assert body["upstream"]["X-Auth-User-Id"] == user_id
    assert body["upstream"]["X-Auth-Credential"] == "session"
    assert body["upstream"]["X-Auth-Key-Id"] is None
    assert body["upstream"]["X-Auth-Permissions"].split(",")[0:2] == ["files.read", "files.write"]
    reached = len(gateway.upstream.seen)
    assert reached == 2

    # Refused: no files.write for a POST; no credential; a malformed key; the wrong scheme.
    status, body, headers = await gateway.call("POST", "/api/v1/files", {"X-API-Key": secret})
    assert (status, refusal(body)) == (403, "insufficient_permission")
    assert headers["Content-Type"] == "application/json"
    status, body, headers = await gateway.call("GET", "/api/v1/files")
    assert (status, refusal(body)) == (401, "credential_missing")
    assert headers["WWW-Authenticate"] == 'Bearer realm="filehost"'
    status, body, _ = await gateway.call("GET", "/api/v1/files", {"X-API-Key": secret[:-2]})
    assert (status, refusal(body)) == (401, "invalid_api_key")
    status, body, _ = await gateway.call("DELETE", "/api/v1/folders/d1", {"X-API-Key": secret})
    assert (status, refusal(body)) == (403, "insufficient_permission")
    status, body, _ = await gateway.call("GET", "/api/v1/reports", {"X-API-Key": secret})
    assert (status, refusal(body)) == (403, "no_permission_mapping")
    assert len(gateway.upstream.seen) == reached  # nothing refused reached the upstream

    # Revoked through the gateway (the key endpoints are the service's own): refused next time.
    status, body, _ = await gateway.call(
        "DELETE", f"/api/v1/keys/{key['id']}", {"Authorization": f"Bearer {token}"}
    )
    assert status == 200, body
    assert body["data"]["id"] == key["id"]
    status, body, _ = await gateway.call("GET", "/api/v1/files", {"X-API-Key": secret})
    assert (status, refusal(body)) == (401, "api_key_revoked")
    assert len(gateway.upstream.seen) == reached
    assert secret not in gateway.nginx.error_log()


async def test_a_client_cannot_choose_what_is_checked_or_who_it_is(gateway: Gateway) -> None:
    user_id, _token, key = await user_and_key(gateway, ["files.read"])
    forged = {
        "X-API-Key": key["secret_key"],
        "X-Required-Permission": "files.read",
        "X-Original-Method": "GET",
        "X-Original-URI": "/api/v1/files",
        "X-Forwarded-Method": "GET",
        "X-Forwarded-Uri": "/api/v1/files",
        "X-Auth-User-Id": "usr_someone_else",
        "X-Auth-Permissions": "files.write",
    }

    status, body, _ = await gateway.call("POST", "/api/v1/files", forged)
    assert (status, refusal(body)) == (403, "insufficient_permission")
    # Unmapped, so only a client-sent X-Required-Permission could let this through: none does.
    status, body, _ = await gateway.call("GET", "/api/v1/reports", forged)
    assert (status, refusal(body)) == (403, "no_permission_mapping")
    assert gateway.upstream.seen == []

    status, body, _ = await gateway.call("GET", "/api/v1/files", forged)
    assert status == 200, body
    assert body["upstream"]["X-Auth-User-Id"] == user_id
    assert body["upstream"]["X-Auth-Permissions"] == "files.read"
    assert body["upstream"]["credential_headers"] == []

    status, body, _ = await gateway.call(
        "GET", "/api/v1/auth/verify", {"X-API-Key": key["secret_key"]}
    )
    assert (status, refusal(body)) == (404, "route_not_found")


async def test_two_credentials_are_a_401_not_a_gateway_error(gateway: Gateway) -> None:
    _user_id, token, key = await user_and_key(gateway, ["files.read"])

    status, body, _ = await gateway.call(
        "GET", "/api/v1/files", {"X-API-Key": key["secret_key"], "Authorization": f"Bearer {token}"}
    )

    assert (status, refusal(body)) == (401, "ambiguous_credentials")
    assert gateway.upstream.seen == []


async def test_store_outage_is_a_503_to_the_client(
    gateway: Gateway, redis_server: RedisServer
) -> None:
    _user_id, _token, key = await user_and_key(gateway, ["files.read"])
    redis_server.stop()
    try:
        status, body, headers = await gateway.call(
            "GET", "/api/v1/files", {"X-API-Key": key["secret_key"]}
        )
    finally:
        redis_server.start()

    assert (status, refusal(body)) == (503, "auth_unavailable")
    assert headers["Retry-After"] == "1"
    assert gateway.upstream.seen == []


async def test_a_credential_over_its_rate_gets_a_429_with_retry_after(
    make_api: Any, upstream: tuple[Upstream, int], tmp_path: Path
) -> None:
    api = await make_api(rate_limit_per_second=0.01, rate_limit_burst=2)
    echo, app_port = upstream
    await api.create_user("rate@example.com")
    token = await api.login("rate@example.com")
    key = await api.create_key(token, permissions=["files.read"])
    with running_nginx(tmp_path / "nginx", api.client.server.port, app_port) as nginx:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            gateway = Gateway(api, nginx, echo, http)
            answers = [
                await gateway.call("GET", "/api/v1/files", {"X-API-Key": key["secret_key"]})
                for _ in range(3)
            ]

    assert [status for status, _b, _h in answers] == [200, 200, 429]
    _status, body, headers = answers[2]
    assert refusal(body) == "rate_limited"
    assert int(headers["Retry-After"]) >= 1
    assert len(echo.seen) == 2


# -- the client's address, and headers that would override the method or the path --------------


@dataclass
class Recorder:
    """What reached the auth service: each request's path and headers, in order."""

    seen: list[tuple[str, CIMultiDict[str]]] = field(default_factory=list)

    def headers_of(self, path: str) -> list[CIMultiDict[str]]:
        return [headers for seen_path, headers in self.seen if seen_path == path]


@pytest.fixture
async def make_recorded_api(aiohttp_client: Any, settings: Settings, clock: FakeClock) -> Any:
    """The auth service with these setting overrides, recording what reaches it."""

    async def build(**overrides: Any) -> tuple[Api, Recorder]:
        recorder = Recorder()

        @web.middleware
        async def record(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            recorder.seen.append((request.path, request.headers.copy()))
            return await handler(request)

        app = create_app(replace(settings, **overrides), clock=clock)
        app.middlewares.insert(0, record)
        return Api(await serve_app(aiohttp_client, app), app), recorder

    return build


def session_from(address: str) -> aiohttp.ClientSession:
    """A client whose connections come from this loopback address (all of 127/8 is local)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(local_addr=(address, 0), force_close=True),
        timeout=aiohttp.ClientTimeout(total=10),
    )


async def login_through(
    http: aiohttp.ClientSession, nginx: Nginx, email: str, password: str, forged: str
) -> tuple[int, str]:
    async with http.post(
        nginx.base + "/api/v1/auth/login",
        json={"email": email, "password": password},
        headers={"X-Forwarded-For": forged, "Forwarded": f"for={forged}"},
    ) as response:
        body = await response.json(content_type=None)
        return response.status, (body.get("error") or {}).get("code", "")


async def test_login_throttling_counts_the_real_client_address_behind_nginx(
    make_recorded_api: Any, upstream: tuple[Upstream, int], tmp_path: Path
) -> None:
    # As README says to deploy it: nginx's address listed in FILEHOST_TRUSTED_PROXIES.
    api, recorder = await make_recorded_api(
        trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),), login_failures_per_address=3
    )
    await api.create_user("victim@example.com")
    _echo, app_port = upstream
    with running_nginx(tmp_path / "nginx", api.client.server.port, app_port) as nginx:
        async with session_from("127.0.0.2") as attacker, session_from("127.0.0.3") as other:
            # Failures with a fresh email and a fresh forged address each time.
            failures = [
                await login_through(
                    attacker, nginx, f"guess{n}@example.com", "wrong", f"203.0.113.{n}"
                )
                for n in range(3)
            ]
            # Had nginx passed the forged header on, each would be a new address: not throttled.
            throttled = await login_through(
                attacker, nginx, "victim@example.com", PASSWORD, "198.51.100.7"
            )
            # Another client address is counted apart, so the victim can still log in.
            allowed = await login_through(other, nginx, "victim@example.com", PASSWORD, "127.0.0.2")

    assert failures == [(401, "invalid_credentials")] * 3
    assert throttled == (429, "login_throttled")
    assert allowed == (200, "")
    logins = recorder.headers_of("/api/v1/auth/login")
    assert [headers.getall("X-Forwarded-For") for headers in logins] == [["127.0.0.2"]] * 4 + [
        ["127.0.0.3"]
    ]
    assert all("Forwarded" not in headers for headers in logins)


async def test_override_headers_are_cleared_and_the_address_set_in_every_location(
    make_recorded_api: Any, upstream: tuple[Upstream, int], tmp_path: Path
) -> None:
    api, recorder = await make_recorded_api(trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),))
    echo, app_port = upstream
    await api.create_user("gateway@example.com")
    token = await api.login("gateway@example.com")
    key = await api.create_key(token, permissions=["files.read"])
    recorder.seen.clear()
    hostile = {
        "X-HTTP-Method-Override": "DELETE",
        "X-Method-Override": "DELETE",
        "X-HTTP-Method": "DELETE",
        "X-Original-URL": "/api/v1/keys",
        "X-Rewrite-URL": "/api/v1/keys",
        "X-Forwarded-For": "203.0.113.9",
        "Forwarded": "for=203.0.113.9",
    }
    calls = [
        ("GET", "/api/v1/files", {"X-API-Key": key["secret_key"]}, 200),
        ("GET", "/api/v1/auth/session", {"Authorization": f"Bearer {token}"}, 200),
        ("GET", "/api/v1/keys", {"Authorization": f"Bearer {token}"}, 200),
        ("POST", "/api/v1/auth/logout", {"Authorization": f"Bearer {token}"}, 200),
    ]
    with running_nginx(tmp_path / "nginx", api.client.server.port, app_port) as nginx:
        async with session_from("127.0.0.4") as http:
            for method, path, credential, expected in calls:
                async with http.request(
                    method, nginx.base + path, headers={**hostile, **credential}
                ) as response:
                    assert response.status == expected, await response.text()

    # The auth service: login-free routes, and the verify sub-request behind /api/v1/files.
    reached = [path for path, _headers in recorder.seen]
    assert reached == [
        "/api/v1/auth/verify",
        "/api/v1/auth/session",
        "/api/v1/keys",
        "/api/v1/auth/logout",
    ]
    # ... and the file service behind the check.
    assert len(echo.headers) == 1
    for headers in [headers for _path, headers in recorder.seen] + echo.headers:
        assert headers.getall("X-Forwarded-For") == ["127.0.0.4"]
        for name in (*OVERRIDES, "Forwarded"):
            assert name not in headers, name


def test_every_location_that_proxies_sets_the_address_and_clears_the_overrides() -> None:
    # The check above covers each location as the file is today; this one also covers a new one.
    locations = re.findall(
        r"\n        location ([^{]+)\{(.*?)\n        \}", TEMPLATE.read_text(), re.S
    )
    proxied = {name.strip(): body for name, body in locations if "proxy_pass" in body}
    assert set(proxied) == {"/api/v1/auth/", "/api/v1/keys", "/api/v1/", "= /_filehost_verify"}
    for name, body in proxied.items():
        assert "proxy_set_header X-Forwarded-For $remote_addr;" in body, name
        for header in (*OVERRIDES, "Forwarded"):
            assert f'proxy_set_header {header} "";' in body, (name, header)
    assert "FILEHOST_TRUSTED_PROXIES" in TEMPLATE.read_text()


async def raw_get(nginx: Nginx, target: bytes, headers: bytes) -> bytes:
    host, port = nginx.base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n")
        writer.write(headers + b"\r\n\r\n")
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize(
    "target",
    [
        b"/api/v1/files/..;/settings",
        b"/api/v1/files/%2e%2e;/settings",
        b"/api/v1/files/%252e%252e/settings",
        b"/api/v1/files/%C0%AE%C0%AE/settings",
        b"/api/v1/files/\xc0\xae\xc0\xae/settings",
        b"/api/v1/files/%EF%BC%8E%EF%BC%8E/settings",
        b"/api/v1/files/\xef\xbc\x8e\xef\xbc\x8e/settings",
        b"/api/v1/files#/../settings",
    ],
)
async def test_a_path_the_file_service_may_read_differently_never_reaches_it(
    gateway: Gateway, target: bytes
) -> None:
    _user_id, _token, key = await user_and_key(gateway, ["files.read"])

    answer = await raw_get(gateway.nginx, target, b"X-API-Key: " + key["secret_key"].encode())

    head, _, body = answer.partition(b"\r\n\r\n")
    # nginx passes $request_uri on as the client sent it; verify refuses it.
    assert head.startswith(b"HTTP/1.1 403 "), head
    assert b'"code":"no_permission_mapping"' in body
    assert gateway.upstream.seen == []
