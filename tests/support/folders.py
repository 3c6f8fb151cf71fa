"""Folders and settings as their tests drive them over HTTP, and what an account leaves in Redis and
on disk: the helpers the folder, settings and deletion tests share."""

from __future__ import annotations

from typing import Any

import redis as redis_sync

from tests.support.api import Api, bearer
from tests.support.blobs import stored_names
from tests.support.openapi import validator

FOLDERS = "/api/v1/folders"
SETTINGS = "/api/v1/settings"


def credential(token: str | None = None, key: str | None = None) -> dict[str, str]:
    return {"X-API-Key": key} if key is not None else bearer(token or "")


async def create_folder(
    api: Api, name: str, parent_id: str | None = None, *, token: str | None = None, **kwargs: Any
) -> Any:
    body: dict[str, Any] = {"name": name}
    if parent_id is not None:
        body["parent_id"] = parent_id
    return await api.client.post(FOLDERS, json=body, headers=credential(token, **kwargs))


async def folder(api: Api, name: str, parent_id: str | None = None, **kwargs: Any) -> dict:
    """A new folder (201, its answer checked against the document)."""
    response = await create_folder(api, name, parent_id, **kwargs)
    assert response.status == 201, await response.text()
    answer = await response.json()
    validator("/components/schemas/FolderEnvelope").validate(answer)
    assert response.headers["Location"] == f"{FOLDERS}/{answer['data']['id']}"
    return answer["data"]


async def chain(api: Api, depth: int, token: str, prefix: str = "level") -> list[dict]:
    """Folders nested ``depth`` levels deep, the top one first."""
    made: list[dict] = []
    for level in range(1, depth + 1):
        parent = made[-1]["id"] if made else None
        made.append(await folder(api, f"{prefix} {level}", parent, token=token))
    return made


async def children(api: Api, token: str, parent_id: str | None = None, **query: Any) -> dict:
    params = {k: str(v) for k, v in query.items()}
    if parent_id is not None:
        params["parent_id"] = parent_id
    response = await api.client.get(FOLDERS, params=params, headers=bearer(token))
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/FolderListEnvelope").validate(answer)
    return answer["data"]


async def folder_files(api: Api, token: str, folder_id: str) -> list[dict]:
    response = await api.client.get(
        "/api/v1/files", params={"folder_id": folder_id}, headers=bearer(token)
    )
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/FileListEnvelope").validate(answer)
    return answer["data"]["files"]


async def patch(api: Api, path: str, body: dict, token: str | None = None, **kwargs: Any) -> Any:
    return await api.client.patch(path, json=body, headers=credential(token, **kwargs))


async def settings_of(api: Api, token: str) -> dict:
    response = await api.client.get(SETTINGS, headers=bearer(token))
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/SettingsEnvelope").validate(answer)
    return answer["data"]


async def blob_names(api: Api) -> set[str]:
    """What the app's blob store holds (``tests.support.blobs.stored_names``)."""
    return set(await stored_names(api))


def account_keys(redis_client: redis_sync.Redis, user_id: str) -> set[str]:
    """Every Redis key under the account's hash tag."""
    return set(redis_client.keys(f"*{{{user_id}}}*"))


def folder_traces(redis_client: redis_sync.Redis, user_id: str) -> list[str]:
    """Whatever of folders, their indexes and pending removals the account still holds."""
    found = []
    for key in account_keys(redis_client, user_id):
        if any(part in key for part in (":folder", ":removed")):
            found.append(key)
    if redis_client.sismember("fh:folder-removals", user_id):
        found.append("fh:folder-removals")
    return sorted(found)
