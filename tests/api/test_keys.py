"""The API key endpoints: POST /api/v1/keys, GET /api/v1/keys, DELETE /api/v1/keys/{id}.

Each test drives the service over HTTP as a client would, against the real Redis server of the
fixtures; time moves only through the injected ``clock``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
import redis as redis_sync

from service.app import STORE
from service.domain import credentials
from service.store.fields import KEY_EXPIRED_GRACE_MS
from tests.support.api import SPEC_PERMISSIONS, Api, assert_error, bearer
from tests.support.clock import FakeClock, iso_of, parse_iso
from tests.support.keys import LIST_FIELDS, sha256_hex

KEYS = "/api/v1/keys"
CREATE_FIELDS = {
    "id",
    "name",
    "key_prefix",
    "secret_key",
    "permissions",
    "created_at",
    "expires_at",
    "folder_ids",
    "uploader",
}
EMAIL = "alice@example.com"
VALID_BODY: dict[str, Any] = {"name": "ci", "permissions": ["files.read"]}


async def post_key(api: Api, token: str, body: Any) -> Any:
    return await api.client.post(KEYS, json=body, headers=bearer(token))


async def list_keys(api: Api, token: str) -> list[dict[str, Any]]:
    response = await api.client.get(KEYS, headers=bearer(token))
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["success"] is True
    return body["data"]["keys"]


async def revoke(api: Api, token: str, key_id: str) -> Any:
    return await api.client.delete(f"{KEYS}/{key_id}", headers=bearer(token))


async def validation_details(api: Api, token: str, body: Any) -> dict[str, Any]:
    error = await assert_error(await post_key(api, token, body), 400, "validation_failed")
    assert isinstance(error.get("details"), dict), error
    # The message says it all too, for a client that shows the message alone.
    for field, problem in error["details"].items():
        if isinstance(problem, str):
            assert f"{field} {problem}" in error["message"], error
    return error["details"]


def all_redis_text(client: redis_sync.Redis) -> list[str]:
    """Every key name and every stored value (hash fields and values, set and list members)."""
    texts: list[str] = []
    for name in client.scan_iter("*"):
        texts.append(name)
        kind = client.type(name)
        if kind == "string":
            texts.append(client.get(name) or "")
        elif kind == "hash":
            for field, value in client.hgetall(name).items():
                texts.extend((field, value))
        elif kind == "zset":
            texts.extend(member for member, _ in client.zrange(name, 0, -1, withscores=True))
        elif kind == "set":
            texts.extend(client.smembers(name))
        elif kind == "list":
            texts.extend(client.lrange(name, 0, -1))
        elif kind == "none":
            continue  # expired since the scan: rate buckets live only milliseconds after use
        else:
            raise AssertionError(f"unexpected Redis type {kind} for {name}")
    return texts


# -- create -------------------------------------------------------------------------------------


async def test_create_returns_201_with_exactly_the_documented_fields(api: Api) -> None:
    token = await api.user_with_session()
    response = await post_key(api, token, {"name": "ci", "permissions": ["files.read"]})
    assert response.status == 201, await response.text()
    assert response.content_type == "application/json"
    body = await response.json()
    assert body["success"] is True
    data = body["data"]
    assert set(data) == CREATE_FIELDS
    assert data["name"] == "ci"
    assert data["permissions"] == ["files.read"]
    assert data["folder_ids"] is None  # the whole account
    assert data["id"].startswith("key_")


async def test_create_response_is_never_cached(api: Api) -> None:
    token = await api.user_with_session()
    response = await post_key(api, token, VALID_BODY)
    assert response.status == 201
    assert response.headers["Cache-Control"] == "no-store"


async def test_secret_starts_with_fhk_and_key_prefix_is_its_first_12_chars_plus_dots(
    api: Api,
) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    secret = data["secret_key"]
    assert secret.startswith("fhk_")
    assert len(secret) > 12
    assert data["key_prefix"] == secret[:12] + "..."
    assert secret not in data["key_prefix"]


async def test_each_created_key_has_a_distinct_id_and_secret(api: Api) -> None:
    token = await api.user_with_session()
    first = await api.create_key(token)
    second = await api.create_key(token)
    assert first["id"] != second["id"]
    assert first["secret_key"] != second["secret_key"]


async def test_created_secret_works_as_an_api_key(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, permissions=["files.read"])
    response = await api.files(key=data["secret_key"])
    assert response.status == 200, await response.text()


async def test_key_acts_only_with_the_permissions_it_was_created_with(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, permissions=["files.write"])
    error = await assert_error(
        await api.files(key=data["secret_key"]), 403, "insufficient_permission"
    )
    assert error["details"] == {"required_permission": "files.read"}


async def test_permissions_are_deduplicated_and_returned_in_spec_order(api: Api) -> None:
    token = await api.user_with_session()
    requested = ["settings.read", "files.write", "keys.write", "files.read", "files.write"]
    data = await api.create_key(token, permissions=requested)
    assert data["permissions"] == ["files.read", "files.write", "keys.write", "settings.read"]
    [listed] = await list_keys(api, token)
    assert listed["permissions"] == data["permissions"]


async def test_all_ten_permissions_in_reverse_come_back_in_spec_order(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, permissions=list(reversed(SPEC_PERMISSIONS)))
    assert data["permissions"] == SPEC_PERMISSIONS


async def test_expires_at_defaults_to_90_days_after_created_at(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    created = parse_iso(data["created_at"])
    assert data["created_at"] == iso_of(clock)
    assert parse_iso(data["expires_at"]) - created == timedelta(days=90)


@pytest.mark.parametrize("days", [1, 30, 365, 3650])
async def test_expires_at_is_created_at_plus_expires_days(api: Api, days: int) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, expires_days=days)
    delta = parse_iso(data["expires_at"]) - parse_iso(data["created_at"])
    assert delta == timedelta(days=days)


async def test_name_is_trimmed(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, name="  deploy bot \t")
    assert data["name"] == "deploy bot"
    [listed] = await list_keys(api, token)
    assert listed["name"] == "deploy bot"


async def test_name_of_exactly_100_chars_is_accepted(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, name="n" * 100)
    assert data["name"] == "n" * 100


async def test_name_of_100_chars_with_surrounding_spaces_is_accepted_after_trimming(
    api: Api,
) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, name="  " + "n" * 100 + "  ")
    assert data["name"] == "n" * 100


async def test_non_ascii_name_is_kept(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, name="Clé de déploiement ✓")
    assert data["name"] == "Clé de déploiement ✓"
    [listed] = await list_keys(api, token)
    assert listed["name"] == "Clé de déploiement ✓"


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"permissions": ["files.read"]},
        {"name": "", "permissions": ["files.read"]},
        {"name": "   \t ", "permissions": ["files.read"]},
        {"name": "n" * 101, "permissions": ["files.read"]},
        {"name": "line\nbreak", "permissions": ["files.read"]},
        {"name": "nul\x00byte", "permissions": ["files.read"]},
        {"name": "del\x7fchar", "permissions": ["files.read"]},
        {"name": 42, "permissions": ["files.read"]},
        {"name": None, "permissions": ["files.read"]},
        {"name": ["ci"], "permissions": ["files.read"]},
        {"name": {"x": 1}, "permissions": ["files.read"]},
        {"name": True, "permissions": ["files.read"]},
    ],
    ids=[
        "missing",
        "empty",
        "whitespace",
        "101-chars",
        "newline",
        "nul",
        "del",
        "number",
        "null",
        "array",
        "object",
        "bool",
    ],
)
async def test_invalid_name_is_refused_naming_the_name_field(
    api: Api, body: dict[str, Any]
) -> None:
    token = await api.user_with_session()
    details = await validation_details(api, token, body)
    assert set(details) == {"name"}, details
    assert await list_keys(api, token) == []


@pytest.mark.parametrize(
    "body",
    [
        {"name": "ci"},
        {"name": "ci", "permissions": []},
        {"name": "ci", "permissions": "files.read"},
        {"name": "ci", "permissions": {"files.read": True}},
        {"name": "ci", "permissions": None},
        {"name": "ci", "permissions": ["files.read", 1]},
        {"name": "ci", "permissions": ["files.read", None]},
        {"name": "ci", "permissions": [["files.read"]]},
    ],
    ids=[
        "missing",
        "empty",
        "string",
        "object",
        "null",
        "number-item",
        "null-item",
        "nested-array",
    ],
)
async def test_invalid_permissions_are_refused_naming_the_permissions_field(
    api: Api, body: dict[str, Any]
) -> None:
    token = await api.user_with_session()
    details = await validation_details(api, token, body)
    assert set(details) == {"permissions"}, details
    assert await list_keys(api, token) == []


async def test_unknown_permission_names_are_listed_in_the_details(api: Api) -> None:
    token = await api.user_with_session()
    body = {
        "name": "ci",
        "permissions": ["files.read", "files.delete", "admin", "files.delete", "FILES.READ"],
    }
    details = await validation_details(api, token, body)
    assert set(details) == {"permissions"}
    problem = details["permissions"]
    assert problem["unknown"] == ["files.delete", "admin", "FILES.READ"]
    assert "files.read" not in problem["unknown"]
    assert await list_keys(api, token) == []


@pytest.mark.parametrize(
    "expires_days",
    [0, -1, 3651, 1.5, 30.0, "30", True, False, None, [30], {"days": 30}],
    ids=[
        "zero",
        "negative",
        "3651",
        "fraction",
        "float-whole",
        "string",
        "true",
        "false",
        "null",
        "array",
        "object",
    ],
)
async def test_invalid_expires_days_is_refused_naming_the_field(
    api: Api, expires_days: Any
) -> None:
    token = await api.user_with_session()
    body = {"name": "ci", "permissions": ["files.read"], "expires_days": expires_days}
    details = await validation_details(api, token, body)
    assert set(details) == {"expires_days"}, details
    assert await list_keys(api, token) == []


@pytest.mark.parametrize("expires_days", [1, 3650])
async def test_expires_days_bounds_1_and_3650_are_accepted(api: Api, expires_days: int) -> None:
    token = await api.user_with_session()
    response = await post_key(
        api, token, {"name": "ci", "permissions": ["files.read"], "expires_days": expires_days}
    )
    assert response.status == 201, await response.text()


async def test_unknown_fields_are_refused_by_name(api: Api) -> None:
    token = await api.user_with_session()
    body = {"name": "ci", "permissions": ["files.read"], "scope": "all", "user_id": "usr_x"}
    details = await validation_details(api, token, body)
    assert set(details) == {"scope", "user_id"}, details
    assert await list_keys(api, token) == []


async def test_several_problems_are_reported_together(api: Api) -> None:
    token = await api.user_with_session()
    body = {"name": "", "permissions": ["nope"], "expires_days": 0, "extra": 1}
    details = await validation_details(api, token, body)
    assert set(details) == {"name", "permissions", "expires_days", "extra"}, details
    assert details["permissions"]["unknown"] == ["nope"]


async def test_validation_error_does_not_echo_the_rejected_name(api: Api) -> None:
    token = await api.user_with_session()
    response = await post_key(api, token, {"name": "x" * 90 + "SECRETISH\x01", "permissions": []})
    await assert_error(response, 400, "validation_failed")
    assert "SECRETISH" not in await response.text()


async def test_malformed_json_is_refused(api: Api) -> None:
    token = await api.user_with_session()
    response = await api.client.post(
        KEYS,
        data=b'{"name": "ci", "permissions": [',
        headers={**bearer(token), "Content-Type": "application/json"},
    )
    await assert_error(response, 400, "malformed_json")
    assert await list_keys(api, token) == []


async def test_empty_body_is_malformed_json(api: Api) -> None:
    token = await api.user_with_session()
    response = await api.client.post(
        KEYS, data=b"", headers={**bearer(token), "Content-Type": "application/json"}
    )
    await assert_error(response, 400, "malformed_json")


@pytest.mark.parametrize("raw", [b'["ci", ["files.read"]]', b'"ci"', b"42", b"null", b"true"])
async def test_body_that_is_not_an_object_is_refused(api: Api, raw: bytes) -> None:
    token = await api.user_with_session()
    response = await api.client.post(
        KEYS, data=raw, headers={**bearer(token), "Content-Type": "application/json"}
    )
    await assert_error(response, 400, "body_not_object")
    assert await list_keys(api, token) == []


async def test_body_that_is_not_json_content_type_is_refused(api: Api) -> None:
    token = await api.user_with_session()
    response = await api.client.post(
        KEYS,
        data=b'{"name": "ci", "permissions": ["files.read"]}',
        headers={**bearer(token), "Content-Type": "text/plain"},
    )
    await assert_error(response, 415, "unsupported_media_type")
    assert await list_keys(api, token) == []


# -- list ---------------------------------------------------------------------------------------


async def test_list_is_empty_for_a_new_account(api: Api) -> None:
    token = await api.user_with_session()
    response = await api.client.get(KEYS, headers=bearer(token))
    assert response.status == 200
    assert await response.json() == {"success": True, "data": {"keys": []}}


async def test_list_items_have_exactly_the_documented_fields_and_match_creation(
    api: Api,
) -> None:
    token = await api.user_with_session()
    created = await api.create_key(token, name="ci", permissions=["files.read", "keys.read"])
    [item] = await list_keys(api, token)
    assert set(item) == LIST_FIELDS
    shared = CREATE_FIELDS - {"secret_key"}
    assert {field: item[field] for field in shared} == {field: created[field] for field in shared}
    assert item["last_used_at"] is None
    # A new key's settings (issue 13): enabled, from anywhere, at the deployment's rate.
    assert (item["enabled"], item["allowed_ips"], item["rate_limit"]) == (True, [], None)
    assert item["previous_secret_expires_at"] is None


async def test_list_is_newest_first(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    ids = []
    for name in ("first", "second", "third"):
        ids.append((await api.create_key(token, name=name))["id"])
        clock.advance(seconds=5)
    listed = await list_keys(api, token)
    assert [item["id"] for item in listed] == list(reversed(ids))
    assert [item["name"] for item in listed] == ["third", "second", "first"]
    created = [parse_iso(item["created_at"]) for item in listed]
    assert created == sorted(created, reverse=True)


async def test_list_never_contains_a_secret_or_its_digest(api: Api) -> None:
    token = await api.user_with_session()
    secrets = [(await api.create_key(token, name=f"k{i}"))["secret_key"] for i in range(3)]
    # A use makes last_used_at appear; the listing still must not reveal anything secret.
    assert (await api.files(key=secrets[0])).status == 200
    response = await api.client.get(KEYS, headers=bearer(token))
    assert response.status == 200
    text = await response.text()
    body = await response.json()
    assert len(body["data"]["keys"]) == 3
    for item in body["data"]["keys"]:
        assert "secret_key" not in item
    for secret in secrets:
        assert secret not in text
        assert secret[12:] not in text  # not even the part the prefix does not show
        assert sha256_hex(secret) not in text


async def test_list_shows_only_the_callers_own_keys(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    alice_key = await api.create_key(alice, name="alice-key")
    bob_key = await api.create_key(bob, name="bob-key")
    assert [item["id"] for item in await list_keys(api, alice)] == [alice_key["id"]]
    assert [item["id"] for item in await list_keys(api, bob)] == [bob_key["id"]]


async def test_last_used_at_is_null_before_use_and_set_after_a_use(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    [item] = await list_keys(api, token)
    assert item["last_used_at"] is None

    clock.advance(hours=2)  # so the use time differs from the creation time
    used_at = iso_of(clock)
    assert (await api.files(key=data["secret_key"])).status == 200

    # The write is fire-and-forget: poll a bounded number of times.
    last_used = None
    for _ in range(100):
        [item] = await list_keys(api, token)
        last_used = item["last_used_at"]
        if last_used is not None:
            break
        await asyncio.sleep(0.01)
    assert last_used == used_at
    assert last_used != item["created_at"]


async def test_refused_request_does_not_set_last_used_at(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, permissions=["files.write"])
    # Authenticated but lacking the permission: still a use of the key...
    await assert_error(await api.files(key=data["secret_key"]), 403, "insufficient_permission")
    # ...whereas a mistyped secret is no use of any key.
    other = await api.create_key(token, name="untouched")
    wrong = other["secret_key"][:-1] + ("A" if other["secret_key"][-1] != "A" else "B")
    await assert_error(await api.files(key=wrong), 401, "invalid_api_key")
    for _ in range(100):
        items = {item["id"]: item for item in await list_keys(api, token)}
        if items[data["id"]]["last_used_at"] is not None:
            break
        await asyncio.sleep(0.01)
    assert items[data["id"]]["last_used_at"] is not None
    assert items[other["id"]]["last_used_at"] is None


# -- revoke -------------------------------------------------------------------------------------


async def test_revoke_returns_200_with_id_and_revoked_at(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    clock.advance(hours=1)
    response = await revoke(api, token, data["id"])
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body == {"success": True, "data": {"id": data["id"], "revoked_at": iso_of(clock)}}
    assert parse_iso(body["data"]["revoked_at"]) > parse_iso(data["created_at"])


async def test_revoked_key_is_refused_on_the_next_request(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    assert (await api.files(key=data["secret_key"])).status == 200
    assert (await revoke(api, token, data["id"])).status == 200
    response = await api.files(key=data["secret_key"])
    await assert_error(response, 401, "api_key_revoked")
    assert "WWW-Authenticate" in response.headers


async def test_revoked_key_disappears_from_the_list(api: Api) -> None:
    token = await api.user_with_session()
    keep = await api.create_key(token, name="keep")
    gone = await api.create_key(token, name="gone")
    assert (await revoke(api, token, gone["id"])).status == 200
    assert [item["id"] for item in await list_keys(api, token)] == [keep["id"]]


async def test_revoking_one_key_leaves_the_others_working(api: Api) -> None:
    token = await api.user_with_session()
    keep = await api.create_key(token, name="keep")
    gone = await api.create_key(token, name="gone")
    assert (await revoke(api, token, gone["id"])).status == 200
    assert (await api.files(key=keep["secret_key"])).status == 200


async def test_revoking_again_is_key_not_found(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    assert (await revoke(api, token, data["id"])).status == 200
    await assert_error(await revoke(api, token, data["id"]), 404, "key_not_found")


async def test_revoking_an_unknown_but_well_formed_id_is_key_not_found(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    unknown = "key_" + "A" * 22
    assert unknown != data["id"] and len(unknown) == len(data["id"])
    await assert_error(await revoke(api, token, unknown), 404, "key_not_found")
    assert [item["id"] for item in await list_keys(api, token)] == [data["id"]]


@pytest.mark.parametrize(
    "key_id",
    ["nope", "key_", "key_short", "usr_" + "A" * 22, "key_" + "A" * 21 + "!", "key_" + "A" * 23],
)
async def test_revoking_a_malformed_id_is_key_not_found(api: Api, key_id: str) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    await assert_error(await revoke(api, token, key_id), 404, "key_not_found")
    assert (await api.files(key=data["secret_key"])).status == 200


async def test_revoking_by_the_secret_instead_of_the_id_does_nothing(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    await assert_error(await revoke(api, token, data["secret_key"]), 404, "key_not_found")
    assert (await api.files(key=data["secret_key"])).status == 200


async def test_revoking_another_accounts_key_is_not_found_and_the_key_keeps_working(
    api: Api,
) -> None:
    alice = await api.user_with_session("alice@example.com")
    mallory = await api.user_with_session("mallory@example.com")
    alice_key = await api.create_key(alice)
    await assert_error(await revoke(api, mallory, alice_key["id"]), 404, "key_not_found")
    assert (await api.files(key=alice_key["secret_key"])).status == 200
    assert [item["id"] for item in await list_keys(api, alice)] == [alice_key["id"]]
    # And its owner can still revoke it.
    assert (await revoke(api, alice, alice_key["id"])).status == 200


# -- session-only -------------------------------------------------------------------------------


async def _request(api: Api, method: str, path: str, headers: dict[str, str]) -> Any:
    if method == "POST":
        return await api.client.post(path, json=VALID_BODY, headers=headers)
    return await api.client.request(method, path, headers=headers)


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_api_key_with_keys_permissions_is_refused_on_key_endpoints(
    api: Api, method: str
) -> None:
    token = await api.user_with_session()
    powerful = await api.create_key(token, name="powerful", permissions=list(SPEC_PERMISSIONS))
    target = await api.create_key(token, name="target")
    path = f"{KEYS}/{target['id']}" if method == "DELETE" else KEYS
    response = await _request(api, method, path, {"X-API-Key": powerful["secret_key"]})
    await assert_error(response, 403, "session_required")
    assert powerful["secret_key"] not in await response.text()
    # Nothing changed: no key created, none revoked.
    listed = await list_keys(api, token)
    assert sorted(item["id"] for item in listed) == sorted([powerful["id"], target["id"]])
    assert (await api.files(key=target["secret_key"])).status == 200


async def test_api_key_cannot_revoke_itself(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, permissions=["keys.read", "keys.write"])
    response = await api.client.delete(
        f"{KEYS}/{data['id']}", headers={"X-API-Key": data["secret_key"]}
    )
    await assert_error(response, 403, "session_required")
    assert (await api.files(key=data["secret_key"])).status == 403  # alive, lacks files.read


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_no_credential_is_credential_missing_with_www_authenticate(
    api: Api, method: str
) -> None:
    token = await api.user_with_session()
    target = await api.create_key(token)
    path = f"{KEYS}/{target['id']}" if method == "DELETE" else KEYS
    response = await _request(api, method, path, {})
    await assert_error(response, 401, "credential_missing")
    assert response.headers.get("WWW-Authenticate", "").startswith("Bearer")
    assert [item["id"] for item in await list_keys(api, token)] == [target["id"]]


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_logged_out_session_is_refused_on_key_endpoints(api: Api, method: str) -> None:
    token = await api.user_with_session()
    target = await api.create_key(token)
    response = await api.client.post("/api/v1/auth/logout", headers=bearer(token))
    assert response.status == 200
    path = f"{KEYS}/{target['id']}" if method == "DELETE" else KEYS
    await assert_error(await _request(api, method, path, bearer(token)), 401, "invalid_session")
    assert (await api.files(key=target["secret_key"])).status == 200


async def test_api_key_sent_as_a_bearer_token_is_still_refused_on_key_endpoints(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, permissions=["keys.read", "keys.write"])
    response = await api.client.get(KEYS, headers=bearer(data["secret_key"]))
    await assert_error(response, 403, "session_required")
    assert data["secret_key"] not in await response.text()


async def test_session_and_api_key_together_are_ambiguous(api: Api) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    response = await api.client.get(
        KEYS, headers={**bearer(token), "X-API-Key": data["secret_key"]}
    )
    await assert_error(response, 400, "ambiguous_credentials")


# -- limit --------------------------------------------------------------------------------------


async def test_creating_beyond_the_limit_is_refused(make_api: Any) -> None:
    api = await make_api(max_keys_per_account=3)
    token = await api.user_with_session()
    for i in range(3):
        await api.create_key(token, name=f"k{i}")
    error = await assert_error(
        await post_key(api, token, {"name": "k3", "permissions": ["files.read"]}),
        409,
        "key_limit_reached",
    )
    assert error["details"] == {"limit": 3}
    assert len(await list_keys(api, token)) == 3


async def test_concurrent_creates_never_exceed_the_limit(make_api: Any) -> None:
    api = await make_api(max_keys_per_account=3)
    token = await api.user_with_session()
    responses = await asyncio.gather(
        *(post_key(api, token, {"name": f"k{i}", "permissions": ["files.read"]}) for i in range(8))
    )
    assert sorted(response.status for response in responses) == [201] * 3 + [409] * 5
    assert len(await list_keys(api, token)) == 3


async def test_limit_is_per_account(make_api: Any) -> None:
    api = await make_api(max_keys_per_account=3)
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    for i in range(3):
        await api.create_key(alice, name=f"k{i}")
    await api.create_key(bob, name="bob")


async def test_after_revoking_one_key_creating_works_again(make_api: Any) -> None:
    api = await make_api(max_keys_per_account=3)
    token = await api.user_with_session()
    created = [await api.create_key(token, name=f"k{i}") for i in range(3)]
    await assert_error(await post_key(api, token, VALID_BODY), 409, "key_limit_reached")
    assert (await revoke(api, token, created[0]["id"])).status == 200
    replacement = await api.create_key(token, name="replacement")
    assert (await api.files(key=replacement["secret_key"])).status == 200
    await assert_error(await post_key(api, token, VALID_BODY), 409, "key_limit_reached")


async def test_expired_keys_do_not_count_toward_the_limit(make_api: Any, clock: FakeClock) -> None:
    api = await make_api(max_keys_per_account=3)
    token = await api.user_with_session()
    await api.create_key(token, name="short", expires_days=1)
    await api.create_key(token, name="long-1", expires_days=30)
    await api.create_key(token, name="long-2", expires_days=30)
    await assert_error(await post_key(api, token, VALID_BODY), 409, "key_limit_reached")

    clock.advance(days=1, seconds=1)
    token = await api.login(EMAIL)  # the first session went idle meanwhile
    await api.create_key(token, name="new")  # the expired key freed one slot...
    await assert_error(await post_key(api, token, VALID_BODY), 409, "key_limit_reached")
    names = sorted(item["name"] for item in await list_keys(api, token))
    assert names == ["long-1", "long-2", "new"]  # ...and only one


# -- expiry -------------------------------------------------------------------------------------


async def test_key_still_works_just_before_it_expires(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, expires_days=30)
    clock.advance(days=30, seconds=-1)
    assert (await api.files(key=data["secret_key"])).status == 200


async def test_key_is_refused_as_expired_after_expires_days(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, expires_days=30)
    clock.advance(days=30)
    response = await api.files(key=data["secret_key"])
    await assert_error(response, 401, "api_key_expired")
    clock.advance(days=1)
    await assert_error(await api.files(key=data["secret_key"]), 401, "api_key_expired")


async def test_default_expiry_key_is_refused_after_90_days(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token)
    clock.advance(days=89, hours=23)
    assert (await api.files(key=data["secret_key"])).status == 200
    clock.advance(hours=1, seconds=1)
    await assert_error(await api.files(key=data["secret_key"]), 401, "api_key_expired")


async def test_expired_key_is_absent_from_the_list(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    short = await api.create_key(token, name="short", expires_days=1)
    long = await api.create_key(token, name="long", expires_days=2)
    clock.advance(days=1, seconds=1)
    token = await api.login(EMAIL)
    assert [item["id"] for item in await list_keys(api, token)] == [long["id"]]
    assert short["id"] != long["id"]


async def test_revoking_an_expired_key_is_key_not_found(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, expires_days=1)
    clock.advance(days=2)
    token = await api.login(EMAIL)
    await assert_error(await revoke(api, token, data["id"]), 404, "key_not_found")


# -- storage ------------------------------------------------------------------------------------


async def test_no_redis_key_name_or_value_contains_the_raw_secret(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    secrets = [(await api.create_key(token, name=f"k{i}"))["secret_key"] for i in range(2)]
    assert (await api.files(key=secrets[0])).status == 200
    texts = all_redis_text(redis_client)
    assert texts, "the service stored nothing?"
    assert any(sha256_hex(secrets[0]) in text for text in texts)  # the scan does see digests
    for secret in secrets:
        assert not [text for text in texts if secret in text]
        assert not [text for text in texts if secret[12:] in text]


async def test_digest_entry_exists_with_a_ttl_after_creation(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    data = await api.create_key(token, expires_days=30)
    entry = f"fh:key:{sha256_hex(data['secret_key'])}"
    assert redis_client.exists(entry) == 1
    ttl_ms = redis_client.pttl(entry)
    assert ttl_ms > 0
    # Kept past the expiry only for the documented grace, to be answered api_key_expired.
    assert ttl_ms <= 30 * 86_400_000 + KEY_EXPIRED_GRACE_MS


async def test_digest_entry_is_gone_after_revocation(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    keep = await api.create_key(token, name="keep")
    gone = await api.create_key(token, name="gone")
    gone_entry = f"fh:key:{sha256_hex(gone['secret_key'])}"
    keep_entry = f"fh:key:{sha256_hex(keep['secret_key'])}"
    assert redis_client.exists(gone_entry) == 1
    assert (await revoke(api, token, gone["id"])).status == 200
    assert redis_client.exists(gone_entry) == 0
    assert redis_client.exists(keep_entry) == 1
    # Nothing of it is left but its audit trail's events (created, revoked), by design.
    left = [text for text in all_redis_text(redis_client) if gone["id"] in text]
    assert sorted(text.split(":", 1)[0] for text in left) == ["key.created", "key.revoked"]


async def test_refused_create_stores_nothing(make_api: Any, redis_client: redis_sync.Redis) -> None:
    api = await make_api(max_keys_per_account=1)
    token = await api.user_with_session()
    await api.create_key(token)
    # Rate buckets are left out: they live milliseconds and may expire between the two scans.
    before = sorted(name for name in redis_client.scan_iter("*") if ":rate:" not in name)
    await assert_error(await post_key(api, token, VALID_BODY), 409, "key_limit_reached")
    await validation_details(api, token, {"name": "", "permissions": ["files.read"]})
    assert sorted(name for name in redis_client.scan_iter("*") if ":rate:" not in name) == before
    assert len([name for name in before if name.startswith("fh:key:")]) == 1


async def test_concurrent_revocations_of_one_key_succeed_exactly_once(api: Api) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token)
    responses = await asyncio.gather(
        *(api.client.delete(f"/api/v1/keys/{key['id']}", headers=bearer(token)) for _ in range(8))
    )
    assert sorted(r.status for r in responses) == [200] + [404] * 7


async def test_a_key_past_its_expiry_in_real_time_is_answered_api_key_expired(
    api: Api, clock: FakeClock, redis_client: redis_sync.Redis
) -> None:
    """Redis's own clock passes the expiry too: the entry must still be there (for a grace), so
    the answer is api_key_expired, never invalid_api_key, and never a pass."""
    user = await api.create_user(EMAIL)
    secret = credentials.generate_api_key()
    now = time.time_ns() // 1_000_000
    assert await api.app[STORE].api_keys.add(
        user_id=user.id,
        key_id=credentials.new_id("key"),
        secret_digest=credentials.digest(secret),
        name="short-lived",
        key_prefix=credentials.display_prefix(secret),
        permissions=1,
        created_at=now,
        expires_at=now + 800,
        max_active=100,
    )
    clock.ms = now
    assert (await api.files(key=secret)).status == 200

    await asyncio.sleep(1.2)
    clock.catch_up()

    await assert_error(await api.files(key=secret), 401, "api_key_expired")
    ttl = redis_client.pttl(f"fh:key:{sha256_hex(secret)}")
    assert 0 < ttl < KEY_EXPIRED_GRACE_MS, ttl  # kept the grace, then removed by Redis


async def test_a_key_is_not_created_for_a_user_deleted_after_the_session_was_checked(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    redis_client.delete(f"fh:{{{user.id}}}:user")  # a deletion's first step, mid-request
    before = sorted(name for name in redis_client.scan_iter("*") if ":rate:" not in name)

    await assert_error(await post_key(api, token, VALID_BODY), 401, "account_gone")

    after = sorted(name for name in redis_client.scan_iter("*") if ":rate:" not in name)
    assert after == before  # no listing, no digest entry
