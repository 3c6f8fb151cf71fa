"""Uploader configurations (``POST /api/v1/uploaders``) as policy sees them: the key an uploader
uploads with, made for a signed-in person only, that may do nothing but upload (and alias each
upload when asked), bound to one folder when one is named.

The key is made by ``ApiKeys.create_key``, so it counts toward the account's key limit and is
recorded as ``key.created``, marked with the uploader's kind. Its text (``.sxcu``, shell script)
is ``service.domain.uploaders``'s, written by the HTTP layer, which knows the public address.
"""

from __future__ import annotations

from service.auth.api_keys import ApiKeys, CreatedKey
from service.auth.reach import Reach
from service.domain import audit_events as audit
from service.domain import uploaders
from service.domain.principal import Principal
from service.errors import ApiError, Code


class Uploaders:
    def __init__(self, api_keys: ApiKeys, reach: Reach) -> None:
        self._api_keys = api_keys
        self._reach = reach

    async def create(
        self,
        principal: Principal,
        kind: str,
        name: str,
        folder_id: str | None,
        alias: bool,
        expires_days: int | None = None,
        origin: audit.Origin = audit.NO_ORIGIN,
    ) -> CreatedKey:
        """A new upload-only key named ``name`` for an uploader of ``kind`` (checked by the
        caller), with ``files.write`` (and ``aliases.write`` with ``alias``), bound to
        ``folder_id`` when given, expiring after ``expires_days`` (None: the account's
        default, as for any key): 404 ``folder_not_found`` naming ``folder_id`` unless it is
        a live folder of the principal's (a session's: a key never gets here)."""
        folder_ids = None
        if folder_id is not None:
            await self._reach.folder(principal, folder_id, "folder_id")
            folder_ids = (folder_id,)
        try:
            return await self._api_keys.create_key(
                principal.user_id,
                name,
                uploaders.permissions(alias),
                expires_days,
                origin,
                folder_ids,
                uploader=kind,
            )
        except ApiError as refused:
            # The folder was deleted since it was read: named as this request names it.
            if refused.code is Code.FOLDER_NOT_FOUND:
                raise ApiError(Code.FOLDER_NOT_FOUND, details={"field": "folder_id"}) from None
            raise
