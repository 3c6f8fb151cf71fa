"""The error envelope, request-body limits, security headers, and failing closed when the
credential store is unreachable or returns data it cannot read.

Each test drives the service over HTTP as a client would, against the real Redis server of the
fixtures (which the outage tests stop and start again).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis as redis_sync

from service.domain.credentials import generate_api_key
from tests.support.api import PASSWORD, Api, assert_error, bearer
from tests.support.redis import RedisServer

LOGIN = "/api/v1/auth/login"
SESSION = "/api/v1/auth/session"
FILES = "/api/v1/files"
EMAIL = "alice@example.com"
JSON = {"Content-Type": "application/json"}


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


async def assert_envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    """The whole body is exactly the error envelope, plus the headers every response carries."""
    error = await assert_error(response, status, code)
    body = await response.json()
    assert set(body) == {"success", "error"}
    assert set(error) <= {"code", "message", "details"}
    assert_common_headers(response)
    assert "Traceback" not in await response.text()
    return error


def assert_common_headers(response: Any) -> None:
    assert response.headers.get("Cache-Control") == "no-store"
    assert response.headers.get("X-Content-Type-Options") == "nosniff"


async def chunks(data: bytes, size: int = 512) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def post_raw(api: Api, body: bytes, headers: dict[str, str] | None = None) -> Any:
    return await api.client.post(LOGIN, data=body, headers=headers if headers is not None else JSON)


# -- routing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/nope", "/api/v1", "/api/v1/nope", "/api/v2/files", "/api/v1/files/x/extra", "/api/v1/auth"],
)
async def test_unknown_routes_get_route_not_found(api: Api, path: str) -> None:
    response = await api.client.get(path)
    await assert_envelope(response, 404, "route_not_found")


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("path", ["/nope", "/keys/", "/static/nope.js", "/files/a/b"])
async def test_a_browser_asking_for_an_unknown_page_gets_the_dashboards_not_found_page(
    api: Api, path: str
) -> None:
    response = await api.client.get(path, headers={"Accept": BROWSER_ACCEPT})
    assert response.status == 404
    assert response.content_type == "text/html"
    assert "<title>Page not found · filehost</title>" in await response.text()
    assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert response.headers["X-Frame-Options"] == "DENY"
    assert_common_headers(response)
    head = await api.client.head(path, headers={"Accept": BROWSER_ACCEPT})
    assert head.status == 404 and head.content_type == "text/html"


@pytest.mark.parametrize(
    ("method", "path", "accept"),
    [
        ("GET", "/api/v1/nope", BROWSER_ACCEPT),  # the API's, whoever asks
        ("GET", "/api", BROWSER_ACCEPT),
        ("GET", "/nope", "*/*"),  # not asking for a page: a script, an asset
        ("GET", "/nope", "application/json"),
        ("GET", "/nope", "text/html;q=0"),
        ("DELETE", "/nope", BROWSER_ACCEPT),
    ],
)
async def test_anything_but_a_browsers_page_gets_the_envelope_for_an_unknown_path(
    api: Api, method: str, path: str, accept: str
) -> None:
    response = await api.client.request(method, path, headers={"Accept": accept})
    await assert_envelope(response, 404, "route_not_found")


async def test_unknown_routes_get_route_not_found_even_with_a_valid_session(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get("/api/v1/reports", headers=bearer(token))
    await assert_envelope(response, 404, "route_not_found")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", LOGIN, {"POST"}),
        ("PUT", LOGIN, {"POST"}),
        ("DELETE", FILES, {"GET", "POST"}),
        ("PUT", FILES, {"GET", "POST"}),
        ("HEAD", FILES, {"GET", "POST"}),
        ("PATCH", "/api/v1/keys", {"GET", "POST"}),
        ("GET", "/api/v1/keys/key_0000000000000000000000", {"DELETE", "PATCH"}),
        ("GET", "/api/v1/keys/key_0000000000000000000000/roll", {"POST"}),
        # POST reports leaked keys; DELETE and PATCH reach /keys/{id} (404 key_not_found).
        ("GET", "/api/v1/keys/leaked", {"POST", "DELETE", "PATCH"}),
    ],
)
async def test_wrong_method_gets_method_not_allowed_with_an_allow_header(
    api: Api, method: str, path: str, allowed: set[str]
) -> None:
    response = await api.client.request(method, path)
    assert response.status == 405
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allowed
    assert_common_headers(response)
    if method != "HEAD":  # a HEAD response has no body to check
        await assert_envelope(response, 405, "method_not_allowed")


# -- request bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "multipart/form-data; boundary=x"},
        {"Content-Type": "application/jsonp"},
        {},
    ],
    ids=["text-plain", "form", "multipart", "jsonp", "missing"],
)
async def test_login_without_a_json_content_type_is_unsupported_media_type(
    api: Api, headers: dict[str, str]
) -> None:
    await api.create_user(EMAIL)
    body = b'{"email": "alice@example.com", "password": "correct horse battery staple"}'
    skip = () if headers else ("Content-Type",)
    response = await api.client.post(LOGIN, data=body, headers=headers, skip_auto_headers=skip)
    if not headers:
        assert "Content-Type" not in response.request_info.headers
    await assert_envelope(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "application/vnd.x+json"],
)
async def test_login_accepts_json_content_types(api: Api, content_type: str) -> None:
    await api.create_user(EMAIL)
    body = b'{"email": "alice@example.com", "password": "correct horse battery staple"}'
    response = await post_raw(api, body, {"Content-Type": content_type})
    assert response.status == 200, await response.text()


async def test_body_over_the_limit_with_content_length_is_refused(make_api: Any) -> None:
    api = await make_api(max_body_bytes=2048)
    body = b'{"email": "alice@example.com", "password": "' + b"x" * 3000 + b'"}'
    response = await post_raw(api, body)
    assert response.request_info.headers.get("Content-Length") == str(len(body))
    await assert_envelope(response, 413, "payload_too_large")


async def test_chunked_body_over_the_limit_is_refused(make_api: Any) -> None:
    api = await make_api(max_body_bytes=2048)
    body = b'{"email": "alice@example.com", "password": "' + b"x" * 3000 + b'"}'
    response = await api.client.post(LOGIN, data=chunks(body), headers=JSON)
    assert "Content-Length" not in response.request_info.headers
    await assert_envelope(response, 413, "payload_too_large")


async def test_body_of_exactly_the_limit_is_accepted(make_api: Any) -> None:
    api = await make_api(max_body_bytes=2048)
    await api.create_user(EMAIL)
    body = b'{"email": "alice@example.com", "password": "' + PASSWORD.encode() + b'"}'
    body = body[:-1] + b" " * (2048 - len(body)) + b"}"
    assert len(body) == 2048
    response = await post_raw(api, body)
    assert response.status == 200, await response.text()
    chunked = await api.client.post(LOGIN, data=chunks(body), headers=JSON)
    assert chunked.status == 200, await chunked.text()


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b'{"email": "a@b.c",}', b"not json", b"{'email': 'a'}", b'{"a": 1} trailing'],
    ids=["empty", "unclosed", "trailing-comma", "text", "single-quotes", "trailing-data"],
)
async def test_invalid_json_is_malformed_json(api: Api, body: bytes) -> None:
    await assert_envelope(await post_raw(api, body), 400, "malformed_json")


@pytest.mark.parametrize(
    "body", [b"[]", b'["email", "password"]', b'"text"', b"42", b"null", b"true"]
)
async def test_json_that_is_not_an_object_is_body_not_object(api: Api, body: bytes) -> None:
    await assert_envelope(await post_raw(api, body), 400, "body_not_object")


async def test_deeply_nested_json_is_a_bad_request_not_a_crash(make_api: Any) -> None:
    api = await make_api(max_body_bytes=1024 * 1024)
    for body in (b"[" * 100_000, b'{"a":' * 100_000, b"[" * 100_000 + b"]" * 100_000):
        response = await post_raw(api, body)
        assert response.status == 400, await response.text()
        await assert_envelope(response, 400, "malformed_json")


async def test_deeply_nested_json_within_the_default_limit_is_a_bad_request(api: Api) -> None:
    response = await post_raw(api, b"[" * 60_000)
    assert response.status == 400, await response.text()
    await assert_envelope(response, 400, "malformed_json")


@pytest.mark.parametrize(
    "body",
    [
        b'{"email": "\xff\xfe@example.com", "password": "x"}',
        b'{"email": "alice@example.com", "password": "\xc3\x28"}',
        b"\x80\x81\x82",
        b'{"email": "\xed\xa0\x80@example.com", "password": "x"}',
    ],
    ids=["invalid-bytes", "bad-continuation", "only-garbage", "surrogate"],
)
async def test_invalid_utf8_body_is_a_bad_request(api: Api, body: bytes) -> None:
    response = await post_raw(api, body)
    assert response.status == 400, await response.text()
    await assert_envelope(response, 400, "malformed_json")


# -- fail closed: store outage -----------------------------------------------------------------


async def test_store_outage_refuses_every_credential_with_503_and_recovers(
    api: Api, redis_server: RedisServer, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["files.read"])
    assert (await api.files(key=key["secret_key"])).status == 200
    assert (await api.files(token=token)).status == 200

    redis_server.stop()
    try:
        outage = [
            await api.files(key=key["secret_key"]),
            await api.files(key=generate_api_key()),
            await api.files(token=token),
            await api.client.get(SESSION, headers={"X-API-Key": key["secret_key"]}),
            await api.client.get(SESSION, headers=bearer(token)),
            await api.client.get("/api/v1/keys", headers=bearer(token)),
            await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD}),
            await api.client.post(LOGIN, json={"email": EMAIL, "password": "wrong password"}),
        ]
        for response in outage:
            await assert_envelope(response, 503, "store_unavailable")
            assert response.headers.get("Retry-After")
    finally:
        redis_server.start()

    # Same app, no restart: it reconnects. The server lost its data (no persistence), so the
    # old credentials are simply unknown now, and a fresh account works end to end.
    await assert_envelope(await api.files(key=key["secret_key"]), 401, "invalid_api_key")
    await assert_envelope(await api.files(token=token), 401, "invalid_session")
    await api.create_user("bob@example.com")
    fresh = await api.login("bob@example.com")
    fresh_key = await api.create_key(fresh, permissions=["files.read"])
    assert (await api.files(token=fresh)).status == 200
    response = await api.files(key=fresh_key["secret_key"])
    assert response.status == 200
    assert await response.json() == {"success": True, "data": {"files": [], "next_cursor": None}}


async def test_store_killed_mid_flight_refuses_and_recovers(
    api: Api, redis_server: RedisServer
) -> None:
    token = await api.user_with_session(EMAIL)
    redis_server.stop(kill=True)
    try:
        await assert_envelope(await api.files(token=token), 503, "store_unavailable")
        await assert_envelope(
            await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD}),
            503,
            "store_unavailable",
        )
    finally:
        redis_server.start()
    await api.create_user(EMAIL)
    assert (await api.files(token=await api.login(EMAIL))).status == 200


# -- fail closed: unreadable stored data -------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"p": "notanumber"},
        {"e": "never"},
        {"p": "1.5"},
        {"e": ""},
    ],
    ids=["permissions-garbage", "expiry-garbage", "permissions-float", "expiry-empty"],
)
async def test_garbage_in_an_api_key_entry_fails_closed(
    api: Api, redis_client: redis_sync.Redis, fields: dict[str, str]
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["files.read"])
    entry = f"fh:key:{sha256_hex(key['secret_key'])}"
    assert redis_client.exists(entry)
    redis_client.hset(entry, mapping=fields)

    response = await api.files(key=key["secret_key"])

    await assert_envelope(response, 503, "store_unavailable")


@pytest.mark.parametrize("missing", ["u", "k", "p", "e"])
async def test_an_api_key_entry_missing_a_field_fails_closed(
    api: Api, redis_client: redis_sync.Redis, missing: str
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["files.read"])
    redis_client.hdel(f"fh:key:{sha256_hex(key['secret_key'])}", missing)
    await assert_envelope(await api.files(key=key["secret_key"]), 503, "store_unavailable")


async def test_an_api_key_entry_of_the_wrong_type_fails_closed(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["files.read"])
    entry = f"fh:key:{sha256_hex(key['secret_key'])}"
    redis_client.delete(entry)
    redis_client.set(entry, "garbage")
    await assert_envelope(await api.files(key=key["secret_key"]), 503, "store_unavailable")


@pytest.mark.parametrize(
    "fields", [{"i": "soon"}, {"a": "later"}, {"c": "x"}, {"u": ""}], ids=["idle", "abs", "c", "u"]
)
async def test_garbage_in_a_session_entry_fails_closed(
    api: Api, redis_client: redis_sync.Redis, fields: dict[str, str]
) -> None:
    token = await api.user_with_session(EMAIL)
    redis_client.hset(f"fh:session:{sha256_hex(token)}", mapping=fields)
    await assert_envelope(await api.files(token=token), 503, "store_unavailable")


async def test_a_corrupt_user_record_fails_closed_on_login(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    redis_client.hset(f"fh:{{{user.id}}}:user", "c", "yesterday")
    response = await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD})
    await assert_envelope(response, 503, "store_unavailable")


# -- every response ----------------------------------------------------------------------------


async def test_success_responses_carry_the_security_headers(api: Api) -> None:
    await api.create_user(EMAIL)
    login = await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD})
    assert login.status == 200
    assert_common_headers(login)
    token = (await login.json())["data"]["token"]
    for response in (
        await api.client.get(SESSION, headers=bearer(token)),
        await api.files(token=token),
        await api.client.get("/api/v1/keys", headers=bearer(token)),
        await api.client.post("/api/v1/auth/logout", headers=bearer(token)),
    ):
        assert response.status == 200, await response.text()
        assert_common_headers(response)
        assert "Traceback" not in await response.text()


async def test_no_error_response_leaks_a_traceback_or_lacks_the_security_headers(
    make_api: Any, redis_client: redis_sync.Redis
) -> None:
    api = await make_api(max_body_bytes=4096)
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["folders.read"])
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/nowhere", {}),
        ("PUT", FILES, {}),
        ("GET", FILES, {}),
        ("GET", FILES, {"headers": {"X-API-Key": "fhk_nope"}}),
        ("GET", FILES, {"headers": {"X-API-Key": key["secret_key"]}}),
        ("GET", FILES, {"headers": {"Authorization": "Basic abc"}}),
        ("GET", FILES, {"headers": {"Authorization": "Bearer fhs_nope"}}),
        ("GET", FILES, {"headers": {"Authorization": "Bearer", "X-API-Key": "x"}}),
        ("POST", "/api/v1/auth/logout", {"headers": {"X-API-Key": key["secret_key"]}}),
        ("POST", LOGIN, {"data": b"x" * 5000, "headers": JSON}),
        ("POST", LOGIN, {"data": b"{", "headers": JSON}),
        ("POST", LOGIN, {"data": b"[1]", "headers": JSON}),
        ("POST", LOGIN, {"data": b"\xff", "headers": JSON}),
        ("POST", LOGIN, {"data": b"[" * 4000, "headers": JSON}),
        ("POST", LOGIN, {"data": b"{}", "headers": {"Content-Type": "text/plain"}}),
        ("POST", LOGIN, {"json": {"email": EMAIL, "password": "wrong password"}}),
        ("POST", LOGIN, {"json": {"email": 1, "password": None, "extra": []}}),
        ("DELETE", "/api/v1/keys/not-a-key-id", {"headers": bearer(token)}),
        ("POST", "/api/v1/keys", {"json": {"name": ""}, "headers": bearer(token)}),
    ]
    for method, path, kwargs in requests:
        response = await api.client.request(method, path, **kwargs)
        text = await response.text()
        assert 400 <= response.status < 500, (method, path, response.status, text)
        assert "Traceback" not in text and 'File "' not in text
        assert_common_headers(response)
        body = await response.json()
        assert body["success"] is False
        assert isinstance(body["error"]["code"], str) and body["error"]["code"]
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        assert token not in text and key["secret_key"] not in text


async def test_compressed_body_over_the_limit_once_decompressed_is_refused(make_api: Any) -> None:
    api = await make_api(max_body_bytes=2048)
    body = gzip.compress(b'{"email": "' + b" " * 5_000_000 + b'"}')
    assert len(body) < 2048 * 4
    response = await api.client.post(LOGIN, data=body, headers={**JSON, "Content-Encoding": "gzip"})
    await assert_envelope(response, 413, "payload_too_large")


async def test_unresponsive_store_times_out_into_503_and_recovers(
    make_api: Any, redis_server: RedisServer
) -> None:
    api = await make_api(redis_timeout_seconds=1.0)  # the fixtures' bound is long for this
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["files.read"])
    assert redis_server.process is not None
    pid = redis_server.process.pid
    os.kill(pid, signal.SIGSTOP)  # the server keeps its sockets but answers nothing
    try:
        await assert_envelope(await api.files(key=key["secret_key"]), 503, "store_unavailable")
        await assert_envelope(
            await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD}),
            503,
            "store_unavailable",
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    # The data survived (the process was only paused): the same credentials work again.
    assert (await api.files(key=key["secret_key"])).status == 200
    assert (await api.files(token=token)).status == 200
    assert (await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD})).status == 200


@pytest.mark.parametrize("mask", ["-1", "65535"])
async def test_a_stored_permission_mask_out_of_range_fails_closed(
    api: Api, redis_client: redis_sync.Redis, mask: str
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["folders.read"])
    redis_client.hset(f"fh:key:{sha256_hex(key['secret_key'])}", "p", mask)

    response = await api.files(key=key["secret_key"])

    await assert_envelope(response, 503, "store_unavailable")


async def test_a_store_error_line_masks_a_secret_pasted_into_the_path(
    api: Api, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 11, #5: the access line masked it, the error line did not."""
    token = await api.user_with_session(EMAIL)
    secret = generate_api_key()
    caplog.set_level("DEBUG")

    redis_server.stop()
    try:
        response = await api.client.delete(f"/api/v1/keys/{secret}", headers=bearer(token))
    finally:
        redis_server.start()

    await assert_envelope(response, 503, "store_unavailable")
    assert "credential store error on DELETE /api/v1/keys/[masked]" in caplog.text
    assert secret[4:20] not in caplog.text
