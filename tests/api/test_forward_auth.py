"""``GET /api/v1/auth/verify``, the gateway's sub-request, called directly: every answer, its
headers exactly, the route -> permission table, and the fail-closed rules."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from service.api.routes.forward_auth import READING_POSTS, ROUTE_PERMISSIONS, derive_permission
from service.domain.credentials import generate_api_key, generate_session_token
from tests.support.api import SPEC_PERMISSIONS, Api, assert_error, bearer
from tests.support.redis import RedisServer

VERIFY = "/api/v1/auth/verify"
AUTH_HEADERS = ("X-Auth-User-Id", "X-Auth-Key-Id", "X-Auth-Credential", "X-Auth-Permissions")


@dataclass
class Account:
    api: Api
    user_id: str
    token: str

    async def key(self, *permissions: str, **extra: Any) -> dict[str, Any]:
        return await self.api.create_key(self.token, permissions=list(permissions), **extra)


@pytest.fixture
async def account(api: Api) -> Account:
    user = await api.create_user("gateway@example.com")
    return Account(api, user.id, await api.login("gateway@example.com"))


async def verify(api: Api, headers: dict[str, str] | list[tuple[str, str]]) -> Any:
    return await api.client.get(VERIFY, headers=headers)


def nginx(method: str, uri: str) -> dict[str, str]:
    return {"X-Original-Method": method, "X-Original-URI": uri}


def traefik(method: str, uri: str) -> dict[str, str]:
    return {"X-Forwarded-Method": method, "X-Forwarded-Uri": uri}


async def assert_refused(response: Any, status: int, code: str) -> dict[str, Any]:
    error = await assert_error(response, status, code)
    assert response.headers["X-Auth-Error"] == code
    for name in AUTH_HEADERS:
        assert name not in response.headers
    return error


def assert_no_echo(response: Any, body: bytes, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in body.decode()
        for name, value in response.headers.items():
            assert secret not in value, name


# -- allowed -------------------------------------------------------------------------------------


async def test_a_key_with_the_permission_gets_exactly_the_identity_headers(
    account: Account,
) -> None:
    key = await account.key("folders.read", "files.read")

    response = await verify(
        account.api, {"X-API-Key": key["secret_key"], "X-Required-Permission": "files.read"}
    )

    assert response.status == 200
    body = await response.read()
    assert body == b""
    assert response.headers["X-Auth-User-Id"] == account.user_id
    assert response.headers["X-Auth-Key-Id"] == key["id"]
    assert response.headers["X-Auth-Credential"] == "api_key"
    assert response.headers["X-Auth-Permissions"] == "files.read,folders.read"  # spec order
    assert "X-Auth-Folder-Ids" not in response.headers  # a key bound to folders only
    assert "X-Auth-Error" not in response.headers
    assert len(response.headers["X-Request-ID"]) == 32
    assert response.headers["Cache-Control"] == "no-store"
    assert_no_echo(response, body, key["secret_key"])


async def test_a_session_gets_every_permission_and_no_key_id(account: Account) -> None:
    response = await verify(
        account.api, {**bearer(account.token), **nginx("DELETE", "/api/v1/settings/x")}
    )

    assert response.status == 200
    body = await response.read()
    assert response.headers["X-Auth-User-Id"] == account.user_id
    assert response.headers["X-Auth-Credential"] == "session"
    assert response.headers["X-Auth-Permissions"] == ",".join(SPEC_PERMISSIONS)
    assert "X-Auth-Key-Id" not in response.headers
    assert "X-Auth-Folder-Ids" not in response.headers
    assert_no_echo(response, body, account.token)


# -- the route -> permission table ---------------------------------------------------------------

DERIVED = [
    ("GET", "/api/v1/files", "files.read"),
    ("HEAD", "/api/v1/files/f_1", "files.read"),
    ("GET", "/api/v1/files?cursor=/../keys", "files.read"),
    ("GET", "/api/v1/files/my%20report.pdf", "files.read"),
    ("GET", "/api/v1/files?name=caf%C3%A9;v=%252e%252e&q=..;/x", "files.read"),
    ("GET", "/api/v1/files/v1.2.tar.gz", "files.read"),
    ("GET", "/api/v1/files/.profile", "files.read"),
    ("GET", "/api/v1/files/", "files.read"),
    ("POST", "/api/v1/files", "files.write"),
    # A selection's archive only reads, its ids in the body; nothing else below files does.
    ("POST", "/api/v1/files/archive", "files.read"),
    ("POST", "/api/v1/files/%61rchive?ids=fil_1", "files.read"),
    ("POST", "/api/v1/files/archive/", "files.write"),
    ("POST", "/api/v1/files/Archive", "files.write"),
    ("POST", "/api/v1/files/bulk", "files.write"),
    ("POST", "/api/v1/files/archive/fil_1", "files.write"),
    ("PUT", "/api/v1/files/f_1", "files.write"),
    ("PATCH", "/api/v1/files/f_1", "files.write"),
    ("DELETE", "/api/v1/files/f_1", "files.write"),
    ("GET", "/api/v1/folders/d_1/children", "folders.read"),
    ("GET", "/api/v1/folders?parent_id=root", "folders.read"),
    ("GET", "/api/v1/folders/fld_0a1B2c3D4e5F6g7H8i9J0k", "folders.read"),
    ("POST", "/api/v1/folders", "folders.write"),
    ("PATCH", "/api/v1/folders/fld_0a1B2c3D4e5F6g7H8i9J0k", "folders.write"),
    ("DELETE", "/api/v1/folders/fld_0a1B2c3D4e5F6g7H8i9J0k?recursive=true", "folders.write"),
    ("GET", "/api/v1/files?folder_id=root", "files.read"),
    ("GET", "/api/v1/aliases", "aliases.read"),
    ("DELETE", "/api/v1/aliases/a_1", "aliases.write"),
    ("GET", "/api/v1/settings", "settings.read"),
    ("PATCH", "/api/v1/settings", "settings.write"),
    ("PUT", "/api/v1/settings/theme", "settings.write"),
]


def test_the_table_maps_every_resource_to_its_read_and_write_permission() -> None:
    assert ROUTE_PERMISSIONS == {
        **{
            name: (f"{name}.read", f"{name}.write")
            for name in ("files", "folders", "aliases", "settings", "keys")
        },
        "uploaders": ("keys.read", "keys.write"),  # an uploader is a key, made by a session
        "uploads": ("files.write", "files.write"),  # asked where it is by whoever writes it
        "usage": ("settings.read", "settings.write"),  # account-wide, as the settings are
        "audit-events": ("settings.read", "settings.write"),
        "download-tickets": ("files.read", "files.read"),  # its POST only reads
    }
    assert READING_POSTS == {"files/archive": "files.read"}  # the one POST that only reads
    assert derive_permission("HEAD", "/api/v1/uploads/upl_1") == ("files.write", False)
    assert derive_permission("PATCH", "/api/v1/uploads/upl_1") == ("files.write", False)
    assert derive_permission("GET", "/api/v1/keys") == ("keys.read", True)
    assert derive_permission("DELETE", "/api/v1/keys/key_1") == ("keys.write", True)
    assert derive_permission("POST", "/api/v1/uploaders") == ("keys.write", True)
    assert derive_permission("GET", "/api/v1/usage") == ("settings.read", False)
    assert derive_permission("GET", "/api/v1/audit-events") == ("settings.read", True)
    assert derive_permission("POST", "/api/v1/download-tickets") == ("files.read", True)
    for method, uri, permission in DERIVED:
        assert derive_permission(method, uri) == (permission, False), (method, uri)


@pytest.mark.parametrize("family", [nginx, traefik], ids=["nginx", "traefik"])
@pytest.mark.parametrize(("method", "uri", "permission"), DERIVED)
async def test_the_permission_is_derived_from_the_original_request(
    account: Account, family: Any, method: str, uri: str, permission: str
) -> None:
    holder = await account.key(permission)
    others = await account.key(*[p for p in SPEC_PERMISSIONS if p != permission])

    allowed = await verify(account.api, {"X-API-Key": holder["secret_key"], **family(method, uri)})
    refused = await verify(account.api, {"X-API-Key": others["secret_key"], **family(method, uri)})

    assert allowed.status == 200, await allowed.text()
    assert allowed.headers["X-Auth-Key-Id"] == holder["id"]
    error = await assert_refused(refused, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": permission}


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_key_routes_take_only_a_session_as_the_service_does(
    account: Account, method: str
) -> None:
    key = await account.key("keys.read", "keys.write")

    as_key = await verify(
        account.api, {"X-API-Key": key["secret_key"], **nginx(method, "/api/v1/keys")}
    )
    as_session = await verify(
        account.api, {**bearer(account.token), **nginx(method, "/api/v1/keys")}
    )

    await assert_refused(as_key, 403, "session_required")
    assert as_session.status == 200


@pytest.mark.parametrize(
    ("method", "uri"), [("GET", "/api/v1/audit-events"), ("POST", "/api/v1/download-tickets")]
)
async def test_the_accounts_activity_and_download_tickets_take_only_a_session(
    account: Account, method: str, uri: str
) -> None:
    key = await account.key(*SPEC_PERMISSIONS)

    as_key = await verify(account.api, {"X-API-Key": key["secret_key"], **nginx(method, uri)})
    as_session = await verify(account.api, {**bearer(account.token), **nginx(method, uri)})

    await assert_refused(as_key, 403, "session_required")
    assert as_session.status == 200


async def test_the_accounts_usage_is_read_with_settings_read(account: Account) -> None:
    reader = await account.key("settings.read")
    other = await account.key("files.read")
    asked = nginx("GET", "/api/v1/usage")

    allowed = await verify(account.api, {"X-API-Key": reader["secret_key"], **asked})
    refused = await verify(account.api, {"X-API-Key": other["secret_key"], **asked})

    assert allowed.status == 200
    error = await assert_refused(refused, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": "settings.read"}


@pytest.mark.parametrize(
    ("method", "uri"),
    [
        ("GET", "/api/v1/reports"),
        ("GET", "/api/v1/filesystem"),
        ("GET", "/api/v1"),
        ("GET", "/api/v1/"),
        ("GET", "/api/v10/files"),
        ("GET", "/api/v2/files"),
        ("GET", "/API/v1/files"),
        ("GET", "/"),
        ("OPTIONS", "/api/v1/files"),
        ("TRACE", "/api/v1/files"),
        ("get", "/api/v1/files"),
    ],
)
async def test_an_unmapped_route_is_refused_whatever_the_credential_holds(
    account: Account, method: str, uri: str
) -> None:
    response = await verify(account.api, {**bearer(account.token), **nginx(method, uri)})

    await assert_refused(response, 403, "no_permission_mapping")


@pytest.mark.parametrize(
    "uri",
    [
        "/api/v1/files/../keys",
        "/api/v1/files/..",
        "/api/v1/files/./x",
        "/api/v1/files/%2e%2e/keys",
        "/api/v1/files/%2E%2E",
        "/api/v1/files%2F..%2Fkeys",
        "/api/v1//files",
        "//api/v1/files",
        "/api/v1/files\\..\\keys",
        "/api/v1/files/%5c..",
        "/api/v1/files/%00",
        "http://example.com/api/v1/files",
        "api/v1/files",
        "",
    ],
)
async def test_a_path_not_in_plain_form_is_refused_even_with_a_named_permission(
    account: Account, uri: str
) -> None:
    headers = {**bearer(account.token), **nginx("GET", uri), "X-Required-Permission": "files.read"}

    response = await verify(account.api, headers)

    await assert_refused(response, 403, "no_permission_mapping")


# Paths an upstream (Tomcat/Spring, a second URL decoder, an NFKC or "best fit" normaliser, a
# lenient UTF-8 decoder, a URL parser that honours a fragment) could read as another resource.
READ_DIFFERENTLY = {
    "dot-dot-semicolon": "/api/v1/files/..;/settings",
    "encoded-dot-dot-semicolon": "/api/v1/files/%2e%2e;/settings",
    "encoded-semicolon": "/api/v1/files/%2e%2e%3b/settings",
    "path-parameter": "/api/v1/files;jsessionid=x",
    "double-encoded-dots": "/api/v1/files/%252e%252e/settings",
    "encoded-percent": "/api/v1/files/%25",
    "malformed-escape": "/api/v1/files/%2",
    "iis-u-escape": "/api/v1/files/%u002e%u002e/settings",
    "overlong-utf8-dots": "/api/v1/files/%C0%AE%C0%AE/settings",
    "overlong-utf8-slash": "/api/v1/files%C0%AFsettings",
    "invalid-utf8": "/api/v1/files/%ff",
    "fullwidth-dots": "/api/v1/files/\uff0e\uff0e/settings",
    "fullwidth-dots-encoded": "/api/v1/files/%EF%BC%8E%EF%BC%8E/settings",
    "fullwidth-solidus": "/api/v1/files\uff0f..\uff0fsettings",
    "division-slash": "/api/v1/files/..%E2%88%95settings",
    "two-dot-leader": "/api/v1/files/%E2%80%A5/settings",
    "any-non-ascii": "/api/v1/files/caf%C3%A9",
    "fragment": "/api/v1/files#/../settings",
    "fragment-in-query": "/api/v1/files?x=#/../settings",
    "encoded-fragment": "/api/v1/files%23/x",
    "three-dots": "/api/v1/files/.../settings",
    "dot-dot-space": "/api/v1/files/..%20/settings",
    "tab": "/api/v1/files/%09",
    "delete-char": "/api/v1/files/%7f",
    "encoded-question-mark": "/api/v1/files%3F/fil_x",
}


@pytest.mark.parametrize("uri", READ_DIFFERENTLY.values(), ids=READ_DIFFERENTLY.keys())
@pytest.mark.parametrize("family", [nginx, traefik], ids=["nginx", "traefik"])
async def test_a_path_an_upstream_may_read_differently_is_refused(
    account: Account, family: Any, uri: str
) -> None:
    headers = {**bearer(account.token), **family("GET", uri), "X-Required-Permission": "files.read"}

    response = await verify(account.api, headers)

    await assert_refused(response, 403, "no_permission_mapping")


@pytest.mark.parametrize(
    "raw_path",
    [
        b"/api/v1/files/\xc0\xae\xc0\xae/settings",
        b"/api/v1/files/\xff",
        b"/api/v1/files/\xe2\x80\xa5",
    ],
    ids=["overlong-dots", "invalid-byte", "two-dot-leader"],
)
async def test_raw_bytes_that_are_not_plain_ascii_are_refused(
    account: Account, raw_path: bytes
) -> None:
    # As nginx sends $request_uri: the client's bytes, undecoded. aiohttp reads a header value as
    # UTF-8 with surrogate escapes, so every byte reaches the check.
    request = (
        b"GET " + VERIFY.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Authorization: Bearer " + account.token.encode() + b"\r\n"
        b"X-Required-Permission: files.read\r\nX-Original-Method: GET\r\n"
        b"X-Original-URI: " + raw_path + b"\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", account.api.client.port)
    try:
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 "), head
    assert b"\r\nX-Auth-Error: no_permission_mapping\r\n" in head + b"\r\n"
    assert b"X-Auth-User-Id" not in head
    assert b'"no_permission_mapping"' in body


async def test_a_named_permission_covers_a_route_the_table_does_not_map(account: Account) -> None:
    holder = await account.key("settings.read")
    other = await account.key("files.read")
    route = {**nginx("GET", "/api/v1/reports/2026"), "X-Required-Permission": "settings.read"}

    assert (await verify(account.api, {"X-API-Key": holder["secret_key"], **route})).status == 200
    refused = await verify(account.api, {"X-API-Key": other["secret_key"], **route})
    error = await assert_refused(refused, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": "settings.read"}


async def test_a_named_and_a_derived_permission_are_both_required(account: Account) -> None:
    reader = await account.key("files.read")
    writer = await account.key("files.read", "files.write")
    spoofed = {**nginx("POST", "/api/v1/files"), "X-Required-Permission": "files.read"}

    refused = await verify(account.api, {"X-API-Key": reader["secret_key"], **spoofed})
    allowed = await verify(account.api, {"X-API-Key": writer["secret_key"], **spoofed})

    error = await assert_refused(refused, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": "files.write"}
    assert allowed.status == 200


# -- a misconfigured gateway: 400, fail closed ---------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"X-Required-Permission": "files.admin"}, "unknown_permission"),
        ({"X-Required-Permission": "FILES.READ"}, "unknown_permission"),
        ({"X-Required-Permission": ""}, "unknown_permission"),
        ({"X-Required-Permission": "files.read,files.write"}, "unknown_permission"),
        ({}, "permission_unspecified"),
        ({"X-Original-Method": "GET"}, "incomplete_original_request"),
        ({"X-Forwarded-Uri": "/api/v1/files"}, "incomplete_original_request"),
        (
            {**nginx("GET", "/api/v1/files"), **traefik("GET", "/api/v1/files")},
            "ambiguous_original_request",
        ),
        (
            {**nginx("POST", "/api/v1/files"), "X-Forwarded-Uri": "/api/v1/files"},
            "ambiguous_original_request",
        ),
    ],
)
async def test_gateway_misconfiguration_is_a_400(
    account: Account, headers: dict[str, str], code: str
) -> None:
    response = await verify(account.api, {**bearer(account.token), **headers})

    await assert_refused(response, 400, code)


@pytest.mark.parametrize("name", ["X-Required-Permission", "X-Original-URI", "X-Forwarded-Method"])
async def test_a_repeated_gateway_header_is_refused(account: Account, name: str) -> None:
    values = {
        "X-Required-Permission": ("files.write", "files.read"),
        "X-Original-URI": ("/api/v1/files", "/api/v1/aliases"),
        "X-Forwarded-Method": ("POST", "GET"),
    }[name]
    headers = [*bearer(account.token).items(), *[(name, value) for value in values]]

    response = await verify(account.api, headers)

    await assert_refused(response, 400, "duplicate_header")


# -- refused credentials -------------------------------------------------------------------------

FILES_READ = {"X-Required-Permission": "files.read"}


async def test_no_credential_is_a_401_with_a_challenge(api: Api) -> None:
    response = await verify(api, FILES_READ)

    await assert_refused(response, 401, "credential_missing")
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="filehost"'


@pytest.mark.parametrize(
    "secret",
    ["fhk_short", generate_api_key()[:-1] + "0", generate_api_key(), "x" * 5000],
    ids=["truncated", "bad-checksum", "unknown", "huge"],
)
async def test_a_malformed_or_unknown_key_is_a_401_and_is_not_echoed(api: Api, secret: str) -> None:
    response = await verify(api, {"X-API-Key": secret, **FILES_READ})

    await assert_refused(response, 401, "invalid_api_key")
    assert response.headers["WWW-Authenticate"] == 'ApiKey realm="filehost"'
    assert_no_echo(response, await response.read(), secret)


async def test_a_revoked_key_is_refused_from_the_next_request(account: Account) -> None:
    key = await account.key("files.read")
    headers = {"X-API-Key": key["secret_key"], **FILES_READ}
    assert (await verify(account.api, headers)).status == 200

    revoked = await account.api.client.delete(
        f"/api/v1/keys/{key['id']}", headers=bearer(account.token)
    )
    assert revoked.status == 200

    await assert_refused(await verify(account.api, headers), 401, "api_key_revoked")


async def test_an_expired_key_is_refused(account: Account, clock: Any) -> None:
    key = await account.key("files.read", expires_days=1)
    clock.advance(days=1, seconds=1)

    response = await verify(account.api, {"X-API-Key": key["secret_key"], **FILES_READ})

    await assert_refused(response, 401, "api_key_expired")


async def test_an_unknown_or_logged_out_session_is_refused(account: Account) -> None:
    unknown = await verify(account.api, {**bearer(generate_session_token()), **FILES_READ})
    await assert_refused(unknown, 401, "invalid_session")

    logout = await account.api.client.post("/api/v1/auth/logout", headers=bearer(account.token))
    assert logout.status == 200
    gone = await verify(account.api, {**bearer(account.token), **FILES_READ})
    await assert_refused(gone, 401, "invalid_session")


async def test_two_credentials_or_a_repeated_one_are_a_401_not_a_400(account: Account) -> None:
    """nginx turns anything but 2xx/401/403 into a 500; these are the client's doing."""
    key = await account.key("files.read")

    both = await verify(
        account.api, {"X-API-Key": key["secret_key"], **bearer(account.token), **FILES_READ}
    )
    twice = await verify(
        account.api,
        [("X-API-Key", key["secret_key"]), ("X-API-Key", key["secret_key"]), *FILES_READ.items()],
    )

    await assert_refused(both, 401, "ambiguous_credentials")
    await assert_refused(twice, 401, "duplicate_header")
    for response in (both, twice):
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="filehost"'
        assert_no_echo(response, await response.read(), key["secret_key"], account.token)


async def test_a_key_lacking_the_named_permission_is_a_403_naming_it(account: Account) -> None:
    key = await account.key("files.read")

    response = await verify(
        account.api, {"X-API-Key": key["secret_key"], "X-Required-Permission": "files.write"}
    )

    error = await assert_refused(response, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": "files.write"}
    assert_no_echo(response, await response.read(), key["secret_key"])


# -- methods and the store -----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["HEAD", "POST", "PUT", "DELETE"])
async def test_only_get_is_served(account: Account, method: str) -> None:
    response = await account.api.client.request(
        method, VERIFY, headers={**bearer(account.token), **FILES_READ}
    )

    assert response.status == 405
    assert response.headers["Allow"] == "GET"
    assert "X-Auth-User-Id" not in response.headers
    if method != "HEAD":
        await assert_error(response, 405, "method_not_allowed")


async def test_store_outage_is_a_503_with_the_code_for_the_gateway(
    account: Account, redis_server: RedisServer
) -> None:
    key = await account.key("files.read")
    redis_server.stop()
    try:
        response = await verify(account.api, {"X-API-Key": key["secret_key"], **FILES_READ})
        await assert_refused(response, 503, "store_unavailable")
        assert response.headers["Retry-After"] == "1"
    finally:
        redis_server.start()


async def test_a_credential_over_its_rate_is_a_429_for_the_gateway(make_api: Any) -> None:
    api = await make_api(rate_limit_per_second=0.01, rate_limit_burst=1)
    await api.create_user("rate@example.com")
    token = await api.login("rate@example.com")
    key = await api.create_key(token, permissions=["files.read"])
    headers = {"X-API-Key": key["secret_key"], **FILES_READ}

    assert (await verify(api, headers)).status == 200
    response = await verify(api, headers)

    await assert_refused(response, 429, "rate_limited")
    assert int(response.headers["Retry-After"]) >= 1


# Spellings of a write to a mapped resource that an upstream routing without regard to case (as
# Express and ASP.NET Core do by default) or trimming trailing dots reads as that write.
SPELLED_OTHERWISE = [
    ("DELETE", "/api/v1/FILES/fil_x"),
    ("DELETE", "/api/v1/Files/fil_x"),
    ("DELETE", "/API/V1/files/fil_x"),
    ("DELETE", "/Api/v1/files/fil_x"),
    ("DELETE", "/api/v1/files./fil_x"),
    ("POST", "/API/V1/files"),
    ("POST", "/api/v1/FILES"),
    ("delete", "/api/v1/files/fil_x"),
    ("Delete", "/api/v1/files/fil_x"),
    ("post", "/api/v1/files"),
    ("MOVE", "/api/v1/files"),
    ("PROPPATCH", "/api/v1/files"),
    ("MKCOL", "/api/v1/folders"),
    ("COPY", "/api/v1/files/fil_x"),
    ("OPTIONS", "/api/v1/files"),
    ("get", "/api/v1/files"),
    ("GET", "/API/v1/reports"),
    ("GET", "/api/v1"),
    ("GET", "/api/v1/"),
    # The prefix's own segments read as a lenient upstream reads them, and NTFS streams.
    ("DELETE", "/api/v1./files/fil_x"),
    ("DELETE", "/api./v1/files/fil_x"),
    ("DELETE", "/api/v1.../files/fil_x"),
    ("DELETE", "/api/v1%2E/files/fil_x"),
    ("DELETE", "/api/v1%20/files/fil_x"),
    ("DELETE", "/api/v1. ./keys/key_x"),
    ("DELETE", "/api:$DATA/v1/files/fil_x"),
    ("DELETE", "/api/v1/files:$DATA/fil_x"),
    ("GET", "/api/v1/files::$INDEX_ALLOCATION"),
    ("GET", "/api/v1."),
]


@pytest.mark.parametrize(("method", "uri"), SPELLED_OTHERWISE)
@pytest.mark.parametrize("family", [nginx, traefik], ids=["nginx", "traefik"])
async def test_a_read_permission_never_covers_a_mapped_resource_spelled_otherwise(
    account: Account, family: Any, method: str, uri: str
) -> None:
    reader = await account.key("files.read", "folders.read")
    headers = {
        "X-API-Key": reader["secret_key"],
        **family(method, uri),
        "X-Required-Permission": "files.read",
    }

    response = await verify(account.api, headers)

    await assert_refused(response, 403, "no_permission_mapping")


@pytest.mark.parametrize(("method", "uri"), SPELLED_OTHERWISE)
def test_every_spelling_of_a_mapped_resource_fails_closed(method: str, uri: str) -> None:
    with pytest.raises(Exception) as refused:
        derive_permission(method, uri)
    assert getattr(refused.value, "code", None) == "no_permission_mapping"


@pytest.mark.parametrize(
    ("method", "uri"),
    [("DELETE", "/api/v1/reports/x"), ("get", "/api/v1/reports"), ("PURGE", "/elsewhere")],
)
def test_resources_the_table_does_not_know_are_left_to_the_named_permission(
    method: str, uri: str
) -> None:
    assert derive_permission(method, uri) is None
