"""An API key sent as ``Authorization: Bearer fhk_…`` (how Stripe and GitHub take theirs) is that
API key: the same permissions, refusals, rate bucket, forward-auth identity and labels in the
metrics as in ``X-API-Key``. Each test sends the same request both ways and compares."""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.credentials import generate_api_key
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.keys import EMAIL, KEYS, WHOAMI, edit
from tests.support.metrics import value

FILES = "/api/v1/files"
VERIFY = "/api/v1/auth/verify"


def as_header(secret: str) -> dict[str, str]:
    return {"X-API-Key": secret}


CARRIERS = {"x-api-key": as_header, "bearer": bearer}


async def answer(api: Api, method: str, path: str, headers: dict[str, str]) -> tuple[int, Any]:
    response = await api.client.request(method, path, headers=headers)
    body = await response.json()
    if body["success"]:
        return response.status, body["data"]
    error = body["error"]
    return response.status, (error["code"], error["message"], error.get("details"))


async def test_a_key_sent_as_a_bearer_token_acts_as_that_key(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["files.read", "folders.read"])

    whoami = await api.client.get(WHOAMI, headers=bearer(key["secret_key"]))
    assert whoami.status == 200, await whoami.text()
    data = (await whoami.json())["data"]
    assert data["credential"] == {"type": "api_key", "key_id": key["id"]}
    assert data["permissions"] == ["files.read", "folders.read"]
    assert (await api.client.get(FILES, headers=bearer(key["secret_key"]))).status == 200


async def test_what_the_key_lacks_is_refused_as_in_x_api_key(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    writer = (await api.create_key(token, permissions=["files.write"]))["secret_key"]
    ways = [await answer(api, "GET", FILES, carry(writer)) for carry in CARRIERS.values()]
    assert ways[0] == ways[1]
    assert ways[0][0] == 403 and ways[0][1][0] == "insufficient_permission"


SESSION_ONLY = [
    ("GET", KEYS),
    ("POST", KEYS),
    ("DELETE", f"{KEYS}/{{key_id}}"),
    ("PATCH", f"{KEYS}/{{key_id}}"),
    ("POST", f"{KEYS}/{{key_id}}/roll"),
    ("POST", "/api/v1/auth/logout"),
    ("GET", "/api/v1/auth/sessions"),
    ("DELETE", "/api/v1/auth/sessions"),
    ("POST", "/api/v1/auth/password"),
    ("GET", "/api/v1/audit-events"),
]


@pytest.mark.parametrize(("method", "path"), SESSION_ONLY)
async def test_a_key_in_either_header_is_refused_wherever_keys_are(
    api: Api, method: str, path: str
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, permissions=["keys.read", "keys.write"])
    path = path.format(key_id=key["id"])
    for secret in (key["secret_key"], "fhk_not-a-key"):
        ways = [await answer(api, method, path, carry(secret)) for carry in CARRIERS.values()]
        assert ways[0] == ways[1]
        assert ways[0][0] == 403 and ways[0][1][0] == "session_required"
    listed = await api.client.get(KEYS, headers=bearer(token))
    assert [k["id"] for k in (await listed.json())["data"]["keys"]] == [key["id"]]


async def test_a_key_in_both_headers_is_ambiguous(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    secret = (await api.create_key(token))["secret_key"]
    response = await api.client.get(FILES, headers={**as_header(secret), **bearer(secret)})
    await assert_error(response, 400, "ambiguous_credentials")


@pytest.mark.parametrize(
    "secret",
    [
        "fhk_not-a-key",
        generate_api_key()[:-1] + "0",  # its checksum broken
        generate_api_key(),  # well-formed, never issued
        "fhk_",
    ],
    ids=["malformed", "bad-checksum", "unknown", "prefix-alone"],
)
async def test_a_bad_key_as_a_bearer_token_is_refused_as_a_bad_key(api: Api, secret: str) -> None:
    responses = [await api.client.get(FILES, headers=carry(secret)) for carry in CARRIERS.values()]
    for response in responses:
        error = await assert_error(response, 401, "invalid_api_key")
        assert response.headers["WWW-Authenticate"] == 'ApiKey realm="filehost"'
        assert secret not in await response.text() and "details" not in error
    session_token_shaped = await api.client.get(FILES, headers=bearer("fhs_" + secret[4:]))
    await assert_error(session_token_shaped, 401, "invalid_session")


@pytest.mark.parametrize("state", ["revoked", "expired", "disabled", "pinned elsewhere"])
async def test_a_refused_key_gets_the_same_refusal_in_either_header(
    api: Api, clock: FakeClock, state: str
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, expires_days=1)
    if state == "revoked":
        revoked = await api.client.delete(f"{KEYS}/{key['id']}", headers=bearer(token))
        assert revoked.status == 200
    elif state == "expired":
        clock.advance(days=2)
    elif state == "disabled":
        assert (await edit(api, token, key["id"], {"enabled": False})).status == 200
    else:
        assert (await edit(api, token, key["id"], {"allowed_ips": ["192.0.2.1"]})).status == 200
    ways = [
        await answer(api, "GET", FILES, carry(key["secret_key"])) for carry in CARRIERS.values()
    ]
    assert ways[0] == ways[1]
    assert ways[0][0] in (401, 403)


async def test_both_headers_take_from_the_keys_one_rate_bucket(make_api: Any) -> None:
    api = await make_api(rate_limit_per_second=1, rate_limit_burst=4)
    token = await api.user_with_session(EMAIL)
    secret = (await api.create_key(token))["secret_key"]
    statuses = []
    for n in range(6):
        carry = bearer if n % 2 else as_header
        statuses.append((await api.client.get(FILES, headers=carry(secret))).status)
    assert statuses == [200, 200, 200, 200, 429, 429]


async def test_forward_auth_names_the_same_key_for_either_header(api: Api) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    key = await api.create_key(token, permissions=["files.read"])
    identities = []
    for carry in CARRIERS.values():
        headers = {**carry(key["secret_key"]), "X-Required-Permission": "files.read"}
        response = await api.client.get(VERIFY, headers=headers)
        assert response.status == 200, await response.text()
        identities.append({k: v for k, v in response.headers.items() if k.startswith("X-Auth-")})
    assert (
        identities[0]
        == identities[1]
        == {
            "X-Auth-User-Id": user.id,
            "X-Auth-Credential": "api_key",
            "X-Auth-Key-Id": key["id"],
            "X-Auth-Permissions": "files.read",
        }
    )
    headers = {**bearer(key["secret_key"]), "X-Original-Method": "GET", "X-Original-URI": KEYS}
    refused = await api.client.get(VERIFY, headers=headers)
    await assert_error(refused, 403, "session_required")
    assert refused.headers["X-Auth-Error"] == "session_required"


async def test_the_metrics_count_a_bearer_key_as_an_api_key(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    secret = (await api.create_key(token))["secret_key"]
    assert (await api.client.get(FILES, headers=bearer(secret))).status == 200
    assert (await api.client.get(FILES, headers=bearer("fhk_typo"))).status == 401
    assert (await api.client.get(FILES, headers=bearer(token))).status == 200
    text = await (await api.client.get("/metrics")).text()
    checks = "filehost_auth_checks_total"
    assert value(text, checks, credential="api_key", outcome="ok") == 1
    assert value(text, checks, credential="api_key", outcome="invalid_api_key") == 1
    assert value(text, checks, credential="session", outcome="ok") == 2  # the key's creation too
