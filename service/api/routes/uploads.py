"""Resumable uploads under /api/v1/uploads: the tus 1.0 protocol (core, and the creation,
creation-with-upload, creation-defer-length, termination, expiration and checksum extensions),
so any tus client uploads a large file in pieces and resumes it after a dropped connection, on
any instance; and ``GET`` of one upload as JSON, for a client that is not a tus client.

The HTTP layer only: reads the tus headers (``service.api.upload_requests``), checks the
credential (``files.write`` for every request but ``OPTIONS``, which tells the protocol without
one; an upload-only key may upload so), and shapes the answer; the uploads themselves are
``service.auth.uploads``'. Every answer carries ``Tus-Resumable``, refusals included; a refusal
keeps the error envelope (a ``HEAD``'s without its body).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from email.utils import formatdate
from typing import Any

from aiohttp import hdrs, web

from service.api._aiohttp import Answer, RequestBody
from service.api.alias_requests import public_origin
from service.api.context import METRICS, POLICY, PREFIX
from service.api.credentials import acting_with, authenticate
from service.api.envelope import error_response, refusal
from service.api.routes.files import FILES_PATH, check_upload_alias
from service.api.upload_requests import (
    TUS_HEADERS,
    TUS_VERSION,
    check_patch_type,
    check_version,
    checksum,
    later_length,
    upload_length,
    upload_metadata,
    upload_offset,
)
from service.api.views import alias_url, file_view, ok
from service.auth.authenticator import require_for_upload
from service.auth.uploads import CHECKSUMS, Appended
from service.clock import iso
from service.domain.audit_events import Origin
from service.domain.principal import Principal
from service.domain.records import FileRecord
from service.domain.uploads import UploadRecord
from service.errors import ApiError, Code
from service.observability.trace import current_trace

UPLOADS_PATH = f"{PREFIX}/uploads"
EXTENSIONS = "creation,creation-with-upload,creation-defer-length,termination,expiration,checksum"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _tus(handler: Handler) -> Handler:
    """``handler``, its answers and refusals with ``Tus-Resumable``."""

    async def answer(request: web.Request) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException:
            raise
        except Exception as error:
            response = _refused(request, error)
        response.headers.update(TUS_HEADERS)
        if response.status == 460:  # tus's own status, which HTTP names no phrase for
            response.set_status(460, "Checksum Mismatch")
        return response

    return answer


def _refused(request: web.Request, error: Exception) -> web.Response:
    """The envelope's answer to ``error``, logged as ``request_handling`` would."""
    trace = current_trace.get()
    assert trace is not None  # set by request_handling, around every handler
    return error_response(refusal(error, trace, request.method, request.path))


def _expires(record: UploadRecord) -> str:
    return formatdate(record.expires_at / 1000, usegmt=True)


def _upload_view(record: UploadRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.meta.get("name"),
        "offset": record.offset,
        "length": record.length,
        "expires_at": iso(record.expires_at),
        "url": f"{UPLOADS_PATH}/{record.id}",
        "file": None,
    }


async def _uploader(request: web.Request) -> Principal:
    check_version(request)
    principal = await authenticate(request)
    require_for_upload(principal, "files.write")
    return principal


# -- handlers ---------------------------------------------------------------------------------


async def options(request: web.Request) -> web.StreamResponse:
    """What the service speaks of tus (no credential needed)."""
    response = Answer(status=204)
    response.headers.update(
        {
            "Tus-Version": TUS_VERSION,
            "Tus-Extension": EXTENSIONS,
            "Tus-Max-Size": str(request.app[POLICY].uploads.settings.max_bytes),
            "Tus-Checksum-Algorithm": ",".join(CHECKSUMS),
        }
    )
    return response


async def create(request: web.Request) -> web.StreamResponse:
    """A new upload (201, its URL in ``Location``), with its first bytes when the request
    carries them (creation-with-upload). An upload of no bytes is finished at once, its file
    in the answer as a last ``PATCH``'s would be: tus clients send no ``PATCH`` for it.

    Its first bytes refused as malformed (400: more than ``Upload-Length``, say) end the upload
    made for them, so nothing half-made is left; any other failure (a checksum, the store
    unavailable, the client gone) leaves it for the client to go on from its offset, and the
    refusal names it in ``Location``."""
    principal = await _uploader(request)
    length = upload_length(request)
    meta = upload_metadata(request)
    if meta.alias:
        await check_upload_alias(request, principal)
    has_body = request.body_exists
    if has_body:
        check_patch_type(request)
    uploads = request.app[POLICY].uploads
    record = await uploads.create(principal, length, meta)
    location: dict[str, str] = {
        hdrs.LOCATION: f"{public_origin(request)}{UPLOADS_PATH}/{record.id}"
    }
    if not has_body and length != 0:
        answer = ok(_upload_view(record), status=201)
        answer.headers.update({**location, "Upload-Expires": _expires(record)})
        return answer
    try:
        appended = await _append(request, principal, record.id, 0, None)
    except Exception as failure:
        if isinstance(failure, ApiError) and failure.status == 400:
            await uploads.terminate(principal, record.id)
            raise
        refused = _refused(request, failure)  # the upload stays, to go on from its offset
        refused.headers.update(location)
        return refused
    answer = ok(_finished_view(appended, public_origin(request)), status=201)
    answer.headers.update(location)
    _progress_headers(answer, appended, public_origin(request))
    return answer


async def head(request: web.Request) -> web.StreamResponse:
    """How far the upload got (``Upload-Offset``), and its length (never cached: every answer
    says ``Cache-Control: no-store``)."""
    principal = await _uploader(request)
    record = (await _settled(request, principal)).upload
    response = Answer(status=200)
    response.headers.update(
        {"Upload-Offset": str(record.offset), "Upload-Expires": _expires(record)}
    )
    if record.length is None:
        response.headers["Upload-Defer-Length"] = "1"
    else:
        response.headers["Upload-Length"] = str(record.length)
    return response


async def patch(request: web.Request) -> web.StreamResponse:
    """The upload's next bytes, from ``Upload-Offset`` (204 with the new offset); the last of
    them make the file, named in ``Filehost-File-Id`` (and its alias's URL, when it was asked
    for, in ``Filehost-Alias-Url``)."""
    principal = await _uploader(request)
    check_patch_type(request)
    offset = upload_offset(request)
    appended = await _append(
        request, principal, request.match_info["upload_id"], offset, later_length(request)
    )
    response = Answer(status=204)
    _progress_headers(response, appended, public_origin(request))
    return response


async def terminate(request: web.Request) -> web.StreamResponse:
    """End the upload and remove its bytes (204); a finished upload's file stays."""
    principal = await _uploader(request)
    await request.app[POLICY].uploads.terminate(principal, request.match_info["upload_id"])
    return Answer(status=204)


async def list_uploads(request: web.Request) -> web.StreamResponse:
    """The uploads in progress the credential may continue, those that expire first first:
    what to resume, or to terminate when the account has no place left for another."""
    principal = await authenticate(request)
    require_for_upload(principal, "files.write")
    in_progress = await request.app[POLICY].uploads.in_progress(principal)
    return ok({"uploads": [_upload_view(record) for record in in_progress]})


async def get_upload(request: web.Request) -> web.StreamResponse:
    """The upload as JSON: its offset, length and expiry, and once finished its file."""
    principal = await authenticate(request)
    require_for_upload(principal, "files.write")
    return ok(_finished_view(await _settled(request, principal), public_origin(request)))


# -- what the handlers share ---------------------------------------------------------------------


async def _settled(request: web.Request, principal: Principal) -> Appended:
    """The upload asked about, with its file once finished. One whose bytes are all in but
    whose file was never made (the last ``PATCH`` failed after storing them) is finished
    first, as an empty ``PATCH`` at its end would finish it: a tus client that asks how far it
    got and hears "all of it" sends nothing more."""
    uploads = request.app[POLICY].uploads
    record = await uploads.get(principal, request.match_info["upload_id"])
    if record.done is None and record.offset == record.length:
        try:
            return await _append(request, principal, record.id, record.offset, None)
        except ApiError as refused:
            if refused.code != Code.UPLOAD_IN_PROGRESS:
                raise
            # a PATCH finishing it now: the upload as it stands
    file = await uploads.file_of(principal, record)
    return Appended(record, file, _alias_of(record))


async def _append(
    request: web.Request,
    principal: Principal,
    upload_id: str,
    offset: int,
    length: int | None,
) -> Appended:
    origin, actor = await acting_with(request, principal)
    uploads = request.app[POLICY].uploads
    body = RequestBody(request, rest_limit=0)
    try:
        appended = await uploads.append(
            principal,
            upload_id,
            offset,
            body,
            request.content_length,
            checksum(request),
            _alias_maker(request, principal, origin, actor),
            origin,
            actor,
            length,
        )
    finally:
        await body.close()
    metrics = request.app.get(METRICS)
    if metrics is not None and appended.made_now and appended.file is not None:
        metrics.upload("stored", appended.file.size)  # once per file, as POST /files counts
    return appended


def _alias_maker(
    request: web.Request, principal: Principal, origin: Origin, actor: dict[str, Any] | None
) -> Callable[[FileRecord], Awaitable[dict[str, Any]]]:
    """The alias an upload asked for, made when it finishes; should that fail (the account's
    limit reached since), the file stays and the refusal's code is kept instead."""

    async def make(record: FileRecord) -> dict[str, Any]:
        try:
            alias = await request.app[POLICY].aliases.create(
                principal, "file", record.id, "file_id", origin=origin, actor=actor
            )
        except ApiError as refused:
            return {"error": refused.code}
        return {
            "id": alias.id,
            "slug": alias.slug,
            "url": alias_url(public_origin(request), alias.slug),
        }

    return make


def _alias_of(record: UploadRecord) -> dict[str, Any] | None:
    return record.done.get("alias") if record.done else None


def _finished_view(appended: Appended, origin: str) -> dict[str, Any]:
    """The upload; once finished, its file as ``POST /files`` answers it (with the alias asked
    for), or ``alias_error`` when that alias could not be made."""
    view = _upload_view(appended.upload)
    if appended.file is None:
        return view
    view["file"] = file = file_view(appended.file, origin)
    alias = appended.alias
    if alias is not None and "error" in alias:
        view["alias_error"] = alias["error"]
    elif alias is not None:
        file["alias"] = alias
    return view


def _progress_headers(response: web.StreamResponse, appended: Appended, origin: str) -> None:
    record = appended.upload
    response.headers["Upload-Offset"] = str(record.offset)
    if record.done is None:
        response.headers["Upload-Expires"] = _expires(record)
        return
    if appended.file is not None:
        response.headers["Filehost-File-Id"] = appended.file.id
        response.headers["Filehost-File-Url"] = f"{origin}{FILES_PATH}/{appended.file.id}"
    alias = appended.alias
    if alias is not None and "url" in alias:
        response.headers["Filehost-Alias-Url"] = alias["url"]


# -- wiring -----------------------------------------------------------------------------------


def add_upload_routes(app: web.Application) -> None:
    one = f"{UPLOADS_PATH}/{{upload_id}}"
    app.router.add_routes(
        [
            web.options(UPLOADS_PATH, _tus(options)),
            web.post(UPLOADS_PATH, _tus(create)),
            web.get(UPLOADS_PATH, _tus(list_uploads), allow_head=False),
            web.options(one, _tus(options)),
            web.head(one, _tus(head)),
            web.patch(one, _tus(patch)),
            web.delete(one, _tus(terminate)),
            web.get(one, _tus(get_upload), allow_head=False),
        ]
    )
