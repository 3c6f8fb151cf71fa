"""``POST /api/v1/uploaders``: a ShareX custom uploader or a curl script, with a key made for it
that may only upload, for a signed-in person only (a key never mints another) who authenticated
recently, as for every way of making a key (403 ``reauthentication_required``). The answer holds
the key as ``POST /keys`` answers it, secret included, and the file's name and text: the one
time the secret is shown. The address the uploader sends to is the one aliases' links use
(``alias_requests.public_origin``)."""

from __future__ import annotations

from aiohttp import web

from service.api.alias_requests import public_origin
from service.api.context import POLICY, PREFIX
from service.api.credentials import acting_recently, authenticate
from service.api.validation import parse_create_uploader, read_json_object
from service.api.views import created_key_view, ok
from service.domain import uploaders


async def create_uploader(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    asked = parse_create_uploader(await read_json_object(request))
    created = await request.app[POLICY].uploaders.create(
        principal,
        asked.kind,
        asked.name,
        asked.folder_id,
        asked.alias,
        asked.expires_days,
        await acting_recently(request, principal),
    )
    base_url = public_origin(request)
    if asked.kind == uploaders.SHAREX:
        content = uploaders.sharex(asked.name, base_url, created.secret, asked.alias)
    else:
        content = uploaders.curl_script(asked.name, base_url, created.secret, asked.alias)
    return ok(
        {
            "key": created_key_view(created.record, created.secret),
            "filename": uploaders.filename(asked.kind, asked.name),
            "content": content,
        },
        status=201,
    )


def add_uploader_routes(app: web.Application) -> None:
    app.router.add_post(f"{PREFIX}/uploaders", create_uploader)
