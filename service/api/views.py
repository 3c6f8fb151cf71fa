"""The JSON shapes of the API's answers: the success envelope and the views of its records.
What a client sees of a record is decided here, once; never a secret but in the one answer that
creates it."""

from __future__ import annotations

from typing import Any

import orjson

from service.api._aiohttp import Answer, Reply
from service.api.context import PREFIX
from service.clock import iso
from service.domain.files import THUMBNAIL_TYPES
from service.domain.permissions import to_names
from service.domain.records import AliasRecord, FileRecord, FolderRecord, KeyRecord

# Where a file's content is: a path on this host, not an absolute URL, so it is right behind any
# proxy without knowing the name and scheme the client used.
_FILES_PATH = f"{PREFIX}/files"


def ok(data: dict[str, Any], status: int = 200) -> Answer:
    return Answer(orjson.dumps({"success": True, "data": data}), status)


def ok_reply(data: dict[str, Any]) -> Reply:
    """``ok(data)`` as a gateway route's ``Reply``."""
    return Reply(200, orjson.dumps({"success": True, "data": data}))


def created_key_view(record: KeyRecord, secret: str) -> dict[str, Any]:
    """A key as ``POST /keys`` (and ``POST /uploaders``) answer it: with its secret, this once."""
    return {
        "id": record.id,
        "name": record.name,
        "key_prefix": record.key_prefix,
        "secret_key": secret,
        "permissions": to_names(record.permissions),
        "created_at": iso(record.created_at),
        "expires_at": iso(record.expires_at),
        "folder_ids": None if record.folder_ids is None else list(record.folder_ids),
        "uploader": record.uploader,
    }


def key_view(record: KeyRecord) -> dict[str, Any]:
    """A key as its owner sees it (the list, an edit's and a roll's answer); never a secret."""
    rate_limit = record.rate_limit
    return {
        "id": record.id,
        "name": record.name,
        "key_prefix": record.key_prefix,
        "permissions": to_names(record.permissions),
        "created_at": iso(record.created_at),
        "expires_at": iso(record.expires_at),
        "last_used_at": iso(record.last_used_at),
        "enabled": record.enabled,
        "allowed_ips": list(record.allowed_ips),
        "rate_limit": (
            None if rate_limit is None else {"per_second": rate_limit[0], "burst": rate_limit[1]}
        ),
        "previous_secret_expires_at": iso(record.previous_secret_expires_at),
        "folder_ids": None if record.folder_ids is None else list(record.folder_ids),
        "uploader": record.uploader,
    }


def file_view(record: FileRecord, origin: str) -> dict[str, Any]:
    """A file as its owner sees it (listed, read, uploaded, changed); its ``url`` absolute,
    under ``origin``: where people reach the service, as an alias's url is made
    (``service.api.alias_requests.public_origin``)."""
    return {
        "id": record.id,
        "name": record.name,
        "size": record.size,
        "content_type": record.content_type,
        "sha256": record.sha256,
        "created_at": iso(record.created_at),
        "folder_id": record.folder_id,
        "url": f"{origin}{_FILES_PATH}/{record.id}/content",
        # A path on the service's host, as the contract with the dashboard says (the dashboard
        # reads it from where it is served).
        "thumbnail_url": (
            f"{_FILES_PATH}/{record.id}/thumbnail"
            if record.content_type in THUMBNAIL_TYPES
            else None
        ),
    }


def folder_view(record: FolderRecord) -> dict[str, Any]:
    """A folder as its owner sees it (listed, created, changed)."""
    return {
        "id": record.id,
        "name": record.name,
        "parent_id": record.parent_id,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
    }


def folder_path_view(lineage: list[FolderRecord]) -> dict[str, Any]:
    """A folder (the first of ``lineage``) with ``path``: its ancestors from the top."""
    return {
        **folder_view(lineage[0]),
        "path": [{"id": record.id, "name": record.name} for record in reversed(lineage[1:])],
    }


def alias_url(origin: str, slug: str) -> str:
    """An alias's public address: absolute, from where people reach the service."""
    return f"{origin}/a/{slug}"


def alias_view(record: AliasRecord, origin: str) -> dict[str, Any]:
    """An alias as its owner sees it (listed, read, made, changed); never its password."""
    return {
        "id": record.id,
        "slug": record.slug,
        "url": alias_url(origin, record.slug),
        "target": {"type": record.target_type, "id": record.target_id},
        "created_at": iso(record.created_at),
        "expires_at": iso(record.expires_at),
        "max_views": record.max_views,
        "views": record.views,
        "password_protected": record.password_protected,
        "enabled": record.enabled,
    }
