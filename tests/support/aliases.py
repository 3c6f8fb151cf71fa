"""Vanity aliases as their tests drive them: made and changed over the API, opened on the public
side, and what an account's aliases leave in Redis."""

from __future__ import annotations

from typing import Any

import redis as redis_sync

from service.api.context import POLICY
from service.domain.permissions import PERMISSIONS, to_mask
from service.domain.principal import CredentialType, Principal
from tests.support.api import Api
from tests.support.folders import credential
from tests.support.openapi import validator

ALIASES = "/api/v1/aliases"


def alias_part(value: str = "true", boundary: str = "xXxBoundaryxXx") -> bytes:
    """The ``alias`` field of an upload's form, for ``tests.support.files.multipart(extra=)``."""
    return (
        f'--{boundary}\r\nContent-Disposition: form-data; name="alias"\r\n\r\n{value}\r\n'
    ).encode()


async def create_alias(api: Api, body: dict[str, Any], **who: Any) -> Any:
    return await api.client.post(ALIASES, json=body, headers=credential(**who))


async def alias(api: Api, body: dict[str, Any], **who: Any) -> dict[str, Any]:
    """A new alias (201, its answer checked against the document)."""
    response = await create_alias(api, body, **who)
    assert response.status == 201, await response.text()
    answer = await response.json()
    validator("/components/schemas/AliasEnvelope").validate(answer)
    assert response.headers["Location"] == f"{ALIASES}/{answer['data']['id']}"
    return answer["data"]


async def edit_alias(api: Api, alias_id: str, body: dict[str, Any], **who: Any) -> Any:
    return await api.client.patch(f"{ALIASES}/{alias_id}", json=body, headers=credential(**who))


async def listed(api: Api, target_id: str | None = None, **who: Any) -> list[dict[str, Any]]:
    """Every alias of the account (with ``target_id``, of that file or folder), page after
    page, newest first."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": "2"} if cursor is None else {"limit": "2", "cursor": cursor}
        if target_id is not None:
            params["target_id"] = target_id
        response = await api.client.get(ALIASES, params=params, headers=credential(**who))
        assert response.status == 200, await response.text()
        answer = await response.json()
        validator("/components/schemas/AliasListEnvelope").validate(answer)
        found += answer["data"]["aliases"]
        cursor = answer["data"]["next_cursor"]
        if cursor is None:
            return found


async def public(api: Api, path: str, **headers: str) -> Any:
    """``GET`` of a public path (``/a/…``), without a credential."""
    return await api.client.get(path, headers=headers, allow_redirects=False)


def alias_keys(redis_client: redis_sync.Redis) -> set[str]:
    """Every alias entry in the store."""
    return set(redis_client.keys("fh:alias:*"))


async def alias_kept_before_the_bound(api: Api, user_id: str, file_id: str, seconds: int) -> str:
    """The id of a new alias of ``file_id`` living ``seconds``, made through the policy past the
    bound the API keeps (as an account's default lifetime once could): the alias and its
    ``alias.created`` event as an account may still hold them."""
    owner = Principal(user_id, CredentialType.SESSION, to_mask(PERMISSIONS), 0)
    made = await api.app[POLICY].aliases.create(
        owner, "file", file_id, "file_id", expires_in_seconds=seconds
    )
    return str(made.id)
