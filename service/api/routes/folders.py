"""The folders resource under /api/v1/folders: create, list a folder's folders by name (cursor
pages), read one with its path from the top, rename or move, and delete (``?recursive=true`` for
a folder that holds anything).

The HTTP layer only: the credential and its permission (``folders.read`` to list and read,
``folders.write`` to change; a recursive deletion, which deletes files too, also needs
``files.write``; a session may do everything), the request's fields, and the answer's shape.
What is decided (the bounds, the cycle check, names among siblings, 404 for another account's
folder) is ``service.auth.folders``.
"""

from __future__ import annotations

from aiohttp import web

from service.api.context import POLICY, PREFIX
from service.api.credentials import acting_with, authenticate
from service.api.folder_requests import (
    folder_query,
    parse_create_folder,
    parse_edit_folder,
)
from service.api.paging import page_cursor, page_size
from service.api.validation import read_json_object
from service.api.views import folder_path_view, folder_view, ok
from service.auth.authenticator import require
from service.clock import iso
from service.domain.cursors import decode_folder_cursor
from service.domain.records import Unset
from service.errors import ApiError, Code

FOLDERS_PATH = f"{PREFIX}/folders"


def _recursive(request: web.Request) -> bool:
    values = request.query.getall("recursive", [])
    if not values:
        return False
    if len(values) > 1 or values[0] not in ("true", "false"):
        raise ApiError(
            Code.VALIDATION_FAILED, details={"recursive": "must be given once: true or false"}
        )
    return values[0] == "true"


async def create_folder(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "folders.write")
    name, parent_id = parse_create_folder(await read_json_object(request))
    origin, actor = await acting_with(request, principal)
    record = await request.app[POLICY].folders.create(principal, name, parent_id, origin, actor)
    response = ok(folder_view(record), status=201)
    response.headers["Location"] = f"{FOLDERS_PATH}/{record.id}"
    return response


async def list_folders(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "folders.read")
    limit = page_size(request)
    after = page_cursor(request, decode_folder_cursor)
    parent = folder_query(request, "parent_id")
    parent_id = None if isinstance(parent, Unset) else parent
    page = await request.app[POLICY].folders.page(principal, parent_id, limit, after)
    return ok(
        {
            "folders": [folder_view(record) for record in page.folders],
            "next_cursor": page.next_cursor,
        }
    )


async def get_folder(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "folders.read")
    lineage = await request.app[POLICY].folders.get(principal, request.match_info["folder_id"])
    return ok(folder_path_view(lineage))


async def edit_folder(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "folders.write")
    name, parent = parse_edit_folder(await read_json_object(request))
    origin, actor = await acting_with(request, principal)
    record = await request.app[POLICY].folders.change(
        principal, request.match_info["folder_id"], name, parent, origin, actor
    )
    return ok(folder_view(record))


async def delete_folder(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "folders.write")
    recursive = _recursive(request)
    if recursive:
        require(principal, "files.write")  # it deletes the files of the subtree too
    folder_id = request.match_info["folder_id"]
    origin, actor = await acting_with(request, principal)
    deleted_at = await request.app[POLICY].folders.delete(
        principal, folder_id, recursive, origin, actor
    )
    return ok({"id": folder_id, "deleted_at": iso(deleted_at)})


def add_folder_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(FOLDERS_PATH, list_folders, allow_head=False),
            web.post(FOLDERS_PATH, create_folder),
            web.get(f"{FOLDERS_PATH}/{{folder_id}}", get_folder, allow_head=False),
            web.patch(f"{FOLDERS_PATH}/{{folder_id}}", edit_folder),
            web.delete(f"{FOLDERS_PATH}/{{folder_id}}", delete_folder),
        ]
    )
