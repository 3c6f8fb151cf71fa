"""The vanity aliases resource under /api/v1/aliases: create one of a file or folder, list them
newest first (cursor pages; ``target_id`` lists one file's or folder's only), read, change
(slug, expiry, view limit, password, enabled) and delete one.

The HTTP layer only: the credential and its permissions (``aliases.read`` to list and read,
``aliases.write`` to change; creating also needs read permission on the target, ``files.read``
or ``folders.read``; a session may do everything), the request's fields, and the answer's shape,
whose ``url`` is absolute (``alias_requests.public_origin``). What is decided is
``service.auth.aliases``. The public side of an alias is ``routes.public_aliases``.
"""

from __future__ import annotations

from aiohttp import web

from service.api.alias_requests import (
    parse_create_alias,
    parse_edit_alias,
    public_origin,
    target_query,
)
from service.api.context import POLICY, PREFIX
from service.api.credentials import acting_with, authenticate
from service.api.paging import page_cursor, page_size
from service.api.validation import read_json_object
from service.api.views import alias_view, ok
from service.auth.authenticator import require
from service.clock import iso
from service.domain.cursors import decode_alias_cursor

ALIASES_PATH = f"{PREFIX}/aliases"


async def create_alias(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "aliases.write")
    asked = parse_create_alias(await read_json_object(request))
    require(principal, "folders.read" if asked.kind == "folder" else "files.read")
    origin, actor = await acting_with(request, principal)
    record = await request.app[POLICY].aliases.create(
        principal,
        asked.kind,
        asked.target_id,
        asked.field,
        slug=asked.slug,
        expires_in_seconds=asked.expires_in_seconds,
        max_views=asked.max_views,
        password=asked.password,
        enabled=asked.enabled,
        origin=origin,
        actor=actor,
    )
    response = ok(alias_view(record, public_origin(request)), status=201)
    response.headers["Location"] = f"{ALIASES_PATH}/{record.id}"
    return response


async def list_aliases(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "aliases.read")
    limit = page_size(request)
    after = page_cursor(request, decode_alias_cursor)
    target_id = target_query(request)
    page = await request.app[POLICY].aliases.page(principal, limit, after, target_id)
    origin = public_origin(request)
    return ok(
        {
            "aliases": [alias_view(record, origin) for record in page.aliases],
            "next_cursor": page.next_cursor,
        }
    )


async def get_alias(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "aliases.read")
    record = await request.app[POLICY].aliases.get(principal, request.match_info["alias_id"])
    return ok(alias_view(record, public_origin(request)))


async def edit_alias(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "aliases.write")
    changes = parse_edit_alias(await read_json_object(request))
    origin, actor = await acting_with(request, principal)
    record = await request.app[POLICY].aliases.change(
        principal, request.match_info["alias_id"], changes, origin, actor
    )
    return ok(alias_view(record, public_origin(request)))


async def delete_alias(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "aliases.write")
    alias_id = request.match_info["alias_id"]
    origin, actor = await acting_with(request, principal)
    deleted_at = await request.app[POLICY].aliases.delete(principal, alias_id, origin, actor)
    return ok({"id": alias_id, "deleted_at": iso(deleted_at)})


def add_alias_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(ALIASES_PATH, list_aliases, allow_head=False),
            web.post(ALIASES_PATH, create_alias),
            web.get(f"{ALIASES_PATH}/{{alias_id}}", get_alias, allow_head=False),
            web.patch(f"{ALIASES_PATH}/{{alias_id}}", edit_alias),
            web.delete(f"{ALIASES_PATH}/{{alias_id}}", delete_alias),
        ]
    )
