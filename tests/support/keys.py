"""The API key endpoints as the key-management tests call them: list, edit, roll, the audit
events they leave, and the fields each answer carries."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from service.domain import credentials
from tests.support.api import Api, bearer

KEYS = "/api/v1/keys"
EVENTS = "/api/v1/audit-events"
WHOAMI = "/api/v1/auth/session"
EMAIL = "alice@example.com"
# What GET /keys shows of each key.
LIST_FIELDS = {
    "id",
    "name",
    "key_prefix",
    "permissions",
    "created_at",
    "expires_at",
    "last_used_at",
    "enabled",
    "allowed_ips",
    "rate_limit",
    "previous_secret_expires_at",
    "folder_ids",
    "uploader",
}
# What an edit answers: exactly a listed key's fields.
VIEW_FIELDS = LIST_FIELDS
# What a roll answers: those, and the new secret.
ROLLED_FIELDS = VIEW_FIELDS | {"secret_key"}


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


async def key_and_session(api: Api, **extra: Any) -> tuple[str, dict[str, Any]]:
    token = await api.user_with_session(EMAIL)
    return token, await api.create_key(token, **extra)


async def edit(api: Api, token: str, key_id: str, body: Any) -> Any:
    return await api.client.patch(f"{KEYS}/{key_id}", json=body, headers=bearer(token))


async def edited(api: Api, token: str, key_id: str, body: Any) -> dict[str, Any]:
    response = await edit(api, token, key_id, body)
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert set(data) == VIEW_FIELDS
    return data


async def listed(api: Api, token: str, key_id: str) -> dict[str, Any]:
    response = await api.client.get(KEYS, headers=bearer(token))
    assert response.status == 200, await response.text()
    keys = (await response.json())["data"]["keys"]
    for key in keys:
        assert set(key) == VIEW_FIELDS
    return next(key for key in keys if key["id"] == key_id)


async def roll(api: Api, token: str, key_id: str, body: Any = None) -> Any:
    return await api.client.post(
        f"{KEYS}/{key_id}/roll",
        json=body if body is not None else {},
        headers=bearer(token),
    )


async def rolled(api: Api, token: str, key_id: str, grace: int | None = None) -> dict[str, Any]:
    body = {} if grace is None else {"grace_seconds": grace}
    response = await roll(api, token, key_id, body)
    assert response.status == 201, await response.text()
    assert response.headers["Cache-Control"] == "no-store"
    data = (await response.json())["data"]
    assert set(data) == ROLLED_FIELDS
    return data


async def status_of(api: Api, secret: str) -> int:
    return (await api.files(key=secret)).status


async def audit_events(api: Api, token: str, kind: str | None = None) -> list[dict[str, Any]]:
    params = {"limit": "1000", **({"type": kind} if kind else {})}
    response = await api.client.get(EVENTS, params=params, headers=bearer(token))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]["events"]


def as_an_earlier_release_made_it(redis_client: Any, user_id: str, key: dict[str, Any]) -> None:
    """An uploader configuration's key as a release before the upload-only mark wrote it, in a
    deployment not upgraded yet: no mark in its metadata or its entry, no upgrade noted."""
    listing = f"fh:{{{user_id}}}:keys"
    meta = json.loads(redis_client.hget(listing, key["id"]))
    del meta["up"]
    redis_client.hset(listing, key["id"], json.dumps(meta))
    redis_client.hset(f"fh:key:{credentials.digest(key['secret_key'])}", "p", meta["p"])
    redis_client.delete("fh:upgraded:uploader-keys")
