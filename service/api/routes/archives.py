"""ZIP archives of the account's files: ``GET /files/archive?ids=…`` (a selection, side by side;
``files.read``) and ``GET /folders/{id}/archive`` (a folder's whole subtree, by folder names;
``folders.read`` and ``files.read``). A vanity alias's folder has its own at
``GET /a/{slug}/archive`` (``routes.public_aliases``).

The HTTP layer only: the credential and its permissions, the request's ids, and the answer,
streamed by ``service.api.zip_answers``. What the archive holds is
``service.auth.archives``'s to decide.
"""

from __future__ import annotations

from aiohttp import web

from service.api.context import POLICY, PREFIX
from service.api.credentials import authenticate
from service.api.file_queries import archive_ids
from service.api.zip_answers import send_archive
from service.auth.authenticator import require

# The archive of a selection: its name is what it holds, as no one folder names it.
SELECTION_NAME = "files"


async def selection_archive(request: web.Request) -> web.StreamResponse:
    principal = await authenticate(request)
    require(principal, "files.read")
    archives = request.app[POLICY].archives
    entries = await archives.selection(principal, archive_ids(request))
    return await send_archive(request, SELECTION_NAME, entries, archives.open)


async def folder_archive(request: web.Request) -> web.StreamResponse:
    principal = await authenticate(request)
    require(principal, "folders.read")
    require(principal, "files.read")
    archives = request.app[POLICY].archives
    name, entries = await archives.folder(principal, request.match_info["folder_id"])
    return await send_archive(request, name, entries, archives.open)


def add_archive_routes(app: web.Application) -> None:
    """Before the files' and folders' routes with an id: ``archive`` is no id."""
    app.router.add_routes(
        [
            web.get(f"{PREFIX}/files/archive", selection_archive, allow_head=False),
            web.get(f"{PREFIX}/folders/{{folder_id}}/archive", folder_archive, allow_head=False),
        ]
    )
