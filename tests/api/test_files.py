"""GET /api/v1/files: who may list files, and that each account sees only its own.

Each test drives the service over HTTP as a client would, against the real Redis server of the
fixtures.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis as redis_sync

from service.auth.credentials import generate_api_key, generate_session_token
from tests.conftest import Api, assert_error, bearer

FILES = "/api/v1/files"


def with_bad_checksum(secret: str) -> str:
    last = secret[-1]
    return secret[:-1] + ("A" if last != "A" else "B")


def store_files(redis_client: redis_sync.Redis, user_id: str, files: list[dict[str, Any]]) -> None:
    redis_client.hset(
        f"fh:{{{user_id}}}:files", mapping={record["id"]: json.dumps(record) for record in files}
    )


async def test_files_with_a_session_lists_an_empty_account(api: Api) -> None:
    token = await api.user_with_session()
    response = await api.files(token=token)
    assert response.status == 200, await response.text()
    assert response.content_type == "application/json"
    assert await response.json() == {"success": True, "data": {"files": []}}


async def test_files_with_a_key_holding_files_read_is_allowed(api: Api) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token, permissions=["files.read"])
    response = await api.files(key=key["secret_key"])
    assert response.status == 200, await response.text()
    assert await response.json() == {"success": True, "data": {"files": []}}


async def test_files_with_a_key_holding_files_read_among_others_is_allowed(api: Api) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token, permissions=["settings.write", "files.read", "keys.read"])
    response = await api.files(key=key["secret_key"])
    assert response.status == 200, await response.text()


@pytest.mark.parametrize(
    "permissions",
    [["folders.read"], ["files.write"], ["folders.read", "folders.write", "settings.read"]],
)
async def test_files_with_a_key_lacking_files_read_is_forbidden(
    api: Api, permissions: list[str]
) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token, permissions=permissions)
    response = await api.files(key=key["secret_key"])
    error = await assert_error(response, 403, "insufficient_permission")
    assert error["details"]["required_permission"] == "files.read"
    assert "files" not in await response.json()


async def test_files_without_a_credential_is_refused(api: Api) -> None:
    response = await api.files()
    await assert_error(response, 401, "credential_missing")
    assert "WWW-Authenticate" in response.headers


@pytest.mark.parametrize(
    "mangle",
    [
        lambda k: "fhx_" + k[4:],
        lambda k: "fhs_" + k[4:],
        lambda k: k[4:],
        with_bad_checksum,
        lambda k: k[:-1],
        lambda k: k[:12],
        lambda k: k + "0",
        lambda k: k[:10] + "-" + k[11:],
        lambda k: "",
        lambda k: "fhk_",
    ],
    ids=[
        "wrong-prefix",
        "session-prefix",
        "no-prefix",
        "bad-checksum",
        "truncated-by-one",
        "truncated",
        "extended",
        "bad-char",
        "empty",
        "prefix-only",
    ],
)
async def test_files_with_a_malformed_api_key_is_refused(api: Api, mangle: Any) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token)
    response = await api.files(key=mangle(key["secret_key"]))
    error = await assert_error(response, 401, "invalid_api_key")
    assert key["secret_key"][4:16] not in error["message"]
    assert response.headers["WWW-Authenticate"].startswith("ApiKey")


async def test_files_with_a_well_formed_but_unknown_api_key_is_refused(api: Api) -> None:
    token = await api.user_with_session()
    await api.create_key(token)
    response = await api.files(key=generate_api_key())
    await assert_error(response, 401, "invalid_api_key")


async def test_files_with_a_well_formed_but_unknown_session_is_refused(api: Api) -> None:
    await api.user_with_session()
    response = await api.files(token=generate_session_token())
    await assert_error(response, 401, "invalid_session")


async def test_files_records_of_an_account_are_listed_for_that_account(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    alice = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    records = [
        {"id": "fil_old", "name": "old.txt", "size": 3, "created_at": "2024-01-01T00:00:00Z"},
        {"id": "fil_new", "name": "new.png", "size": 9, "created_at": "2025-06-01T00:00:00Z"},
    ]
    store_files(redis_client, alice.id, records)

    response = await api.files(token=token)

    assert response.status == 200, await response.text()
    files = (await response.json())["data"]["files"]
    assert files == [records[1], records[0]]  # newest first


async def test_files_of_one_account_are_never_listed_for_another(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    alice = await api.create_user("alice@example.com")
    bob = await api.create_user("bob@example.com")
    alice_token = await api.login("alice@example.com")
    bob_token = await api.login("bob@example.com")
    alice_key = await api.create_key(alice_token, permissions=["files.read"])
    bob_key = await api.create_key(bob_token, permissions=["files.read"])
    alice_file = {"id": "fil_alice", "name": "alice-secret.pdf", "created_at": "2025-01-01"}
    bob_file = {"id": "fil_bob", "name": "bob-notes.txt", "created_at": "2025-01-02"}
    store_files(redis_client, alice.id, [alice_file])
    store_files(redis_client, bob.id, [bob_file])

    for credential in ({"token": alice_token}, {"key": alice_key["secret_key"]}):
        response = await api.files(**credential)
        assert response.status == 200, await response.text()
        assert (await response.json())["data"]["files"] == [alice_file]

    for credential in ({"token": bob_token}, {"key": bob_key["secret_key"]}):
        response = await api.files(**credential)
        assert response.status == 200, await response.text()
        body = await response.text()
        assert json.loads(body)["data"]["files"] == [bob_file]
        assert "fil_alice" not in body and "alice-secret" not in body


async def test_account_without_files_sees_none_while_another_has_files(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    alice = await api.create_user("alice@example.com")
    await api.create_user("carol@example.com")
    store_files(redis_client, alice.id, [{"id": "fil_1", "name": "a.txt"}])
    carol_token = await api.login("carol@example.com")

    response = await api.files(token=carol_token)

    assert await response.json() == {"success": True, "data": {"files": []}}


async def test_a_revoked_key_no_longer_lists_files(api: Api) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token)
    assert (await api.files(key=key["secret_key"])).status == 200
    revoked = await api.client.delete(f"/api/v1/keys/{key['id']}", headers=bearer(token))
    assert revoked.status == 200
    await assert_error(await api.files(key=key["secret_key"]), 401, "invalid_api_key")


async def test_corrupt_file_record_fails_closed(api: Api, redis_client: redis_sync.Redis) -> None:
    alice = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    redis_client.hset(f"fh:{{{alice.id}}}:files", "fil_bad", "{not json")
    response = await api.files(token=token)
    await assert_error(response, 503, "store_unavailable")
