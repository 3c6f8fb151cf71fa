"""The files resource under /api/v1/files: upload, list (all, or one folder's), metadata, content,
thumbnail, rename or move, and delete.

The HTTP layer only: reads the request, checks the credential and its permission (``files.read``
to list and download, ``files.write`` to upload, change and delete; a session may do
everything), and shapes the answer. The metadata lives in Redis (``service.store.files``), the
bytes behind the blob interface (``service.store.protocols.blobs``). Another account's file answers
exactly like an unknown id: 404 ``file_not_found``.

An upload is streamed: the multipart field ``file`` is filled straight into the blob store's
buffers (``RequestBody``, ``PartBody``), never whole into memory (the other fields,
``folder_id`` and ``alias``, may come before or after it), and stops at
``FILEHOST_MAX_UPLOAD_BYTES`` with 413 (the connection is then closed, so the rest is never
processed). The bytes are renamed into place when complete, then the record is
written; any failure on the way removes what was written, so a file is either listed with all
its bytes or not there at all. With ``alias=true`` (and ``aliases.write``) a vanity alias of the
new file is made too, with the account's defaults, and the answer names it.

A file's bytes go out through ``service.api.downloads``, as a vanity alias's do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from aiohttp import BodyPartReader, HttpVersion11, hdrs, web
from multidict import CIMultiDictProxy

from service.api._aiohttp import (
    Answer,
    BodyCutOff,
    BodyGoesOn,
    HttpProcessingError,
    PartBody,
    Reply,
    RequestBody,
)
from service.api.alias_requests import public_origin
from service.api.context import AUTHENTICATOR, METRICS, POLICY, PREFIX, SETTINGS
from service.api.credentials import acting_with, authenticate, check_credentials
from service.api.downloads import owner_etag, send_file, thumbnail_answer
from service.api.envelope import as_api_error, error_response
from service.api.file_queries import parse_bulk, search_query
from service.api.folder_requests import folder_query, parse_edit_file
from service.api.paging import DEFAULT_LIMIT, page_cursor, page_size
from service.api.validation import read_json_object, readable
from service.api.views import alias_url, file_view, ok, ok_reply
from service.auth.authenticator import require, require_for_upload
from service.auth.files import Files
from service.clock import iso
from service.domain.audit_events import Origin
from service.domain.cursors import decode_file_cursor
from service.domain.file_search import FileQuery, position_after, search_place
from service.domain.folders import TOP
from service.domain.principal import Principal
from service.domain.records import UNSET, FileRecord, Unset
from service.errors import ApiError, Code
from service.observability.trace import RequestTrace

log = logging.getLogger("service.api.routes.files")


FILES_PATH = f"{PREFIX}/files"
# The multipart framing around one file (boundaries, part headers; aiohttp caps each header
# line at 8190 bytes): a declared Content-Length past the limit by more than this cannot be a
# file within the limit, and is refused before a byte of the body is read.
FRAMING_ALLOWANCE = 64 * 1024


# What aiohttp's multipart reader raises for a body it cannot read as multipart.
_MALFORMED = (ValueError, AssertionError, RuntimeError, HttpProcessingError)


class _TooLarge(Exception):
    pass


class _AtMost:
    """A file part's bytes, ``_TooLarge`` once there are more than ``limit``."""

    def __init__(self, source: PartBody, limit: int) -> None:
        self._source = source
        self._left = limit

    async def fill(self, buffer: Any, start: int, end: int) -> int:
        count = await self._source.fill(buffer, start, end)
        self._left -= count
        if self._left < 0:
            raise _TooLarge()
        return count


def _too_large(limit: int) -> web.Response:
    """413, and the connection closed after it: the rest of the body is never read."""
    response = error_response(
        ApiError(
            Code.PAYLOAD_TOO_LARGE,
            f"A file may hold at most {limit} bytes.",
            details={"max_bytes": limit},
        )
    )
    response.force_close()
    return response


# -- handlers ---------------------------------------------------------------------------------


async def list_files(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.read")
    query = search_query(request)
    if query is not None:
        return await _search(request, principal, query)
    limit = page_size(request)
    after = page_cursor(request, decode_file_cursor)
    folder = folder_query(request, "folder_id")
    if isinstance(folder, Unset):
        return Answer.of(
            await _page_reply(request.app, principal, limit, after, public_origin(request))
        )
    page = await request.app[POLICY].files.folder_page(principal, folder, limit, after)
    origin = public_origin(request)
    return ok(
        {
            "files": [file_view(record, origin) for record in page.files],
            "next_cursor": page.next_cursor,
        }
    )


async def _search(request: web.Request, principal: Principal, query: FileQuery) -> web.Response:
    """``GET /files`` with ``q``, ``sort`` or ``type``: the files that match, in that order."""
    limit = page_size(request)
    folder = folder_query(request, "folder_id")
    place = search_place(folder)
    after = page_cursor(request, lambda cursor: position_after(cursor, query, place))
    page = await request.app[POLICY].files.search(principal, folder, query, limit, after)
    origin = public_origin(request)
    return ok(
        {
            "files": [file_view(record, origin) for record in page.files],
            "next_cursor": page.next_cursor,
        }
    )


async def first_page_reply(
    app: web.Application, headers: CIMultiDictProxy[str], trace: RequestTrace
) -> Reply:
    """``GET /files`` without a query (the first page at the default size), for a request with
    ``headers``: a gateway route, so also served by the gateway lane
    (``service.api.gateway``), which takes it only when ``FILEHOST_PUBLIC_URL`` is set: the
    files' urls are made from it, never from a request the lane has not weighed (its Host, a
    proxy's ``X-Forwarded-Proto``)."""
    principal = await check_credentials(app[AUTHENTICATOR], headers, trace)
    require(principal, "files.read")
    origin = app[SETTINGS].public_url
    assert origin is not None, "the lane takes GET /files only under a public URL"
    return await _page_reply(app, principal, DEFAULT_LIMIT, None, origin)


async def _page_reply(
    app: web.Application, principal: Principal, limit: int, after: str | None, origin: str
) -> Reply:
    page = await app[POLICY].files.page(principal, limit, after)
    return ok_reply(
        {
            "files": [file_view(record, origin) for record in page.files],
            "next_cursor": page.next_cursor,
        }
    )


async def upload_file(request: web.Request) -> web.StreamResponse:
    principal = await authenticate(request)
    require_for_upload(principal, "files.write")
    metrics = request.app.get(METRICS)
    if metrics is None:
        return (await _upload(request, principal))[0]
    # Counted once the credential may upload: ``stored``, or the code it was refused with.
    try:
        response, stored = await _upload(request, principal)
    except BaseException as failed:
        metrics.upload(_upload_outcome(failed))
        raise
    metrics.upload("stored" if response.status == 201 else Code.PAYLOAD_TOO_LARGE, stored)
    return response


def _upload_outcome(failed: BaseException) -> str:
    if isinstance(failed, ConnectionResetError | asyncio.CancelledError):
        return Code.CLIENT_CLOSED_REQUEST  # the client went away mid-body
    return as_api_error(failed).code if isinstance(failed, Exception) else Code.INTERNAL_ERROR


async def expect_upload(request: web.Request) -> web.StreamResponse | None:
    """``Expect: 100-continue`` on ``POST /files`` (curl asks it for a body over 1 MiB): the
    refusals that need no body (the credential, the form's type, a declared length past the
    limit) are answered before the client sends it, not after; else ``100 Continue``. The
    credential is checked again, and counted, by the upload itself."""
    if request.headers.get(hdrs.EXPECT, "").lower() != "100-continue":
        raise web.HTTPExpectationFailed()
    if request.version >= HttpVersion11:
        require_for_upload(await authenticate(request, counted=False), "files.write")
        metrics = request.app.get(METRICS)
        try:
            refused = _refused_before_the_body(request)
        except ApiError as failed:
            if metrics is not None:
                metrics.upload(failed.code)
            raise
        if refused is not None:
            if metrics is not None:
                metrics.upload(Code.PAYLOAD_TOO_LARGE)
            return refused
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    return None


def _refused_before_the_body(request: web.Request) -> web.Response | None:
    """The answer to an upload refused by its headers alone: 413 for a declared length past the
    limit (answered rather than raised, so its connection closes); raises for the form's type."""
    limit = request.app[SETTINGS].max_upload_bytes
    if request.content_type != "multipart/form-data":
        raise ApiError(
            Code.UNSUPPORTED_MEDIA_TYPE,
            "Upload a file as multipart/form-data, in the field named file.",
        )
    if "boundary=" not in request.headers.get(hdrs.CONTENT_TYPE, "").lower():
        # A client that sets the Content-Type itself often drops the boundary its library made.
        raise ApiError(Code.VALIDATION_FAILED, details={"body": _NO_BOUNDARY})
    if request.content_length is not None and request.content_length > limit + FRAMING_ALLOWANCE:
        return _too_large(limit)
    return None


async def _upload(request: web.Request, principal: Principal) -> tuple[web.StreamResponse, int]:
    """The upload's answer (201, or the 413 it answers rather than raises) and the bytes it
    stored."""
    limit = request.app[SETTINGS].max_upload_bytes
    refused = _refused_before_the_body(request)
    if refused is not None:
        return refused, 0
    files = request.app[POLICY].files
    await files.check_room(principal)
    origin, actor = await acting_with(request, principal)

    body = RequestBody(request, rest_limit=FRAMING_ALLOWANCE)
    try:
        return await _store_upload(request, principal, body, files, origin, actor, limit)
    finally:
        await body.close()  # a body left half-read: the connection closes after the answer


async def _store_upload(
    request: web.Request,
    principal: Principal,
    body: RequestBody,
    files: Files,
    origin: Origin,
    actor: Any,
    limit: int,
) -> tuple[web.StreamResponse, int]:
    try:
        reader = await request.multipart()
        fields: dict[str, str] = {}
        part = await reader.next()
        while isinstance(part, BodyPartReader) and part.name in _FIELDS:
            await _read_field(part, fields)  # a field sent before the file
            part = await reader.next()
    except _MALFORMED:
        raise _malformed() from None
    if part is None:
        raise ApiError(Code.VALIDATION_FAILED, details={"file": "is required"})
    if not isinstance(part, BodyPartReader) or part.name != "file":
        raise _unknown_field(part)
    encoding = part.headers.get(hdrs.CONTENT_TRANSFER_ENCODING, "binary").strip().lower()
    if encoding not in ("binary", "8bit", "7bit") or hdrs.CONTENT_ENCODING in part.headers:
        raise ApiError(
            Code.VALIDATION_FAILED, details={"file": "must be sent as is, without an encoding"}
        )
    folder = _folder_field(fields)
    if not isinstance(folder, Unset):  # named before the file: refused before its bytes are read
        await files.check_folder(principal, folder)
    if _alias_field(fields):  # the same, for an alias asked for before the file
        await check_upload_alias(request, principal)

    async def rest_of_the_body() -> str | Unset | None:
        # What breaks off after the file, or a part without a name, is the file's own bytes
        # read as a boundary (a client with a fixed boundary): said so, not "malformed". But a
        # boundary the body ends after, with no part behind it, is a body cut off.
        try:
            while (more := await reader.next()) is not None:
                if isinstance(more, BodyPartReader) and not more.name:
                    cut = not more.headers and request.content.at_eof()
                    raise ApiError(
                        Code.VALIDATION_FAILED,
                        details={"body": _CUT_OFF if cut else _HOLDS_BOUNDARY},
                    )
                if not isinstance(more, BodyPartReader) or more.name not in _FIELDS:
                    raise _unknown_field(more)
                await _read_field(more, fields)
        except _MALFORMED:
            raise ApiError(Code.VALIDATION_FAILED, details={"body": _HOLDS_BOUNDARY}) from None
        # Bytes after the closing boundary mean the file held the boundary itself (a client
        # with a fixed boundary): what followed it would be lost, so nothing is kept.
        content = request.content
        if not content.at_eof():
            rest = await content.read(FRAMING_ALLOWANCE)
            if rest.strip() or not content.at_eof():
                raise ApiError(Code.VALIDATION_FAILED, details={"body": _GOES_ON})
        if _alias_field(fields):  # asked for after the file: checked before its record
            await check_upload_alias(request, principal)
        return _folder_field(fields)

    try:
        record = await files.upload(
            principal,
            _AtMost(PartBody(part, body), limit),
            _file_name(part),
            part.headers.get(hdrs.CONTENT_TYPE),
            rest_of_the_body,
            origin,
            actor,
        )
    except _TooLarge:
        return _too_large(limit), 0
    except BodyGoesOn:
        raise ApiError(Code.VALIDATION_FAILED, details={"body": _GOES_ON}) from None
    except BodyCutOff:
        raise ApiError(Code.VALIDATION_FAILED, details={"body": _CUT_OFF}) from None
    except _MALFORMED:
        raise _malformed() from None
    view = file_view(record, public_origin(request))
    if _alias_field(fields):
        view["alias"] = await _alias_of(request, principal, record, origin, actor)
    response = ok(view, status=201)
    response.headers[hdrs.LOCATION] = f"{PREFIX}/files/{record.id}"
    return response, record.size


async def check_upload_alias(request: web.Request, principal: Principal) -> None:
    """An upload that asks for an alias of its file needs ``aliases.write``, and room for it."""
    require_for_upload(principal, "aliases.write")
    await request.app[POLICY].aliases.check_room(principal)


async def _alias_of(
    request: web.Request,
    principal: Principal,
    record: FileRecord,
    origin: Origin,
    actor: dict[str, Any] | None,
) -> dict[str, str]:
    """An alias of the file just uploaded, with the account's defaults (``alias=true``): its
    id, slug and url. Should it fail (the bound reached meanwhile, say), the file is deleted
    again and the upload refused: an upload answers all it was asked for, or nothing."""
    policy = request.app[POLICY]
    try:
        alias = await policy.aliases.create(
            principal, "file", record.id, "file_id", origin=origin, actor=actor
        )
    except BaseException:
        with contextlib.suppress(Exception):
            await asyncio.shield(policy.files.delete(principal, record.id, origin, actor))
        raise
    return {
        "id": alias.id,
        "slug": alias.slug,
        "url": alias_url(public_origin(request), alias.slug),
    }


_GOES_ON = (
    "goes on after its closing boundary: the file holds the boundary; send it with a boundary "
    "that does not occur in it"
)


_HOLDS_BOUNDARY = (
    "breaks off after the file: the file holds the boundary (a line starting with -- and the "
    "boundary); send it with a boundary that does not occur in it"
)
_CUT_OFF = "ends before its closing boundary: it was cut off; send the whole body"
_NO_BOUNDARY = (
    "has no boundary: the Content-Type must name the one the body uses (multipart/form-data; "
    "boundary=...); let the HTTP library set the header rather than setting it by hand"
)


# An RFC 5987 ``filename*`` in UTF-8 (or no charset named): its percent-encoded bytes.
_UTF8_EXTENDED = re.compile(r"(?:utf-8)?'[^']*'([A-Za-z0-9!#$&+.^_`|~%-]*)", re.IGNORECASE)
# A plain ``filename`` between its quotes, as sent; and a backslash that escapes what follows it.
_QUOTED_FILENAME = re.compile(r';\s*filename\s*=\s*"((?:[^"\\]|\\.)*)"', re.IGNORECASE)
_ESCAPE = re.compile(r"\\(.)")
_ESCAPED_QUOTE_OR_BACKSLASH = re.compile(r'\\(["\\])')


def _file_name(part: BodyPartReader) -> str | None:
    """The file part's name as aiohttp reads it, readable (``readable``), a plain name's quote
    sent as ``%22`` read back as one. Except a ``filename*``
    in UTF-8 whose bytes are not all UTF-8, which aiohttp drops: kept with each byte that is not
    as U+FFFD, as a plain ``filename``'s are, unless a plain one stands beside it."""
    name = part.filename
    disposition = part.headers.get(hdrs.CONTENT_DISPOSITION, "")
    if name is not None and "filename*" in disposition.lower():
        return readable(name)  # exact as percent-encoded: decoded once by aiohttp
    if name is not None:
        # Browsers and curl send a plain name's quote so (HTML's form encoding): read back, as
        # no client writes a name's own "%22" for anything else.
        return readable(_with_its_backslashes(name, disposition).replace("%22", '"'))
    for item in disposition.split(";"):
        key, equals, value = item.partition("=")
        if equals and key.strip().lower() == "filename*":
            encoded = _UTF8_EXTENDED.fullmatch(value.strip())
            if encoded is not None:
                return unquote_to_bytes(encoded[1]).decode("utf-8", "replace")
    return None


def _with_its_backslashes(name: str, disposition: str) -> str:
    """``name`` (aiohttp's reading of a plain ``filename``) with the backslashes it was sent
    with. Browsers send one as it is (HTML's form encoding escapes only ", CR and LF), so that
    ``C:\\Users\\me\\shot.png`` is a path, while aiohttp reads every backslash as escaping
    what follows (``C:Usersmeshot.png``); clients that escape (Go's writer) send ``\\\\`` and
    ``\\"``. So only those two pairs are read as escapes, in the quoted value aiohttp read."""
    quoted = _QUOTED_FILENAME.search(disposition)
    if quoted is None or "\\" not in quoted[1] or _ESCAPE.sub(r"\1", quoted[1]) != name:
        return name
    return _ESCAPED_QUOTE_OR_BACKSLASH.sub(r"\1", quoted[1])


def _malformed() -> ApiError:
    return ApiError(
        Code.VALIDATION_FAILED, details={"body": "is not a well-formed multipart/form-data body"}
    )


# The form fields an upload may send beside ``file``, each at most once, each at most this long.
_FIELDS = ("folder_id", "alias")
_FIELD_BYTES = 64


def _unknown_field(part: object) -> ApiError:
    name = (part.name if isinstance(part, BodyPartReader) else None) or "part"
    if name == "file":
        return ApiError(Code.VALIDATION_FAILED, details={"file": "must be sent once"})
    return ApiError(
        Code.VALIDATION_FAILED,
        details={
            name[:100]: "is not a known field; send file and, optionally, folder_id and alias"
        },
    )


async def _read_field(part: BodyPartReader, fields: dict[str, str]) -> None:
    """A short text field of the upload's form, into ``fields``; never more than its bound."""
    name = part.name or ""
    if name in fields:
        raise ApiError(Code.VALIDATION_FAILED, details={name: "must be sent once"})
    data = b""
    while chunk := await part.read_chunk(_FIELD_BYTES + 1):
        data += chunk
        if len(data) > _FIELD_BYTES:
            raise ApiError(
                Code.VALIDATION_FAILED, details={name: f"must be at most {_FIELD_BYTES} bytes"}
            )
    fields[name] = data.decode("utf-8", "replace").strip()


def _alias_field(fields: dict[str, str]) -> bool:
    """Whether an upload asks for an alias of its file: ``alias`` is ``true`` (or ``false``,
    or absent)."""
    value = fields.get("alias", "false")
    if value not in ("true", "false"):
        raise ApiError(Code.VALIDATION_FAILED, details={"alias": "must be true or false"})
    return value == "true"


def _folder_field(fields: dict[str, str]) -> str | Unset | None:
    """The folder an upload names: an id, None for the top level (``root``), ``UNSET`` when
    the field is absent or empty (the account's default folder)."""
    value = fields.get("folder_id", "")
    if not value:
        return UNSET
    return None if value == TOP else value


async def get_file(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.read")
    record = await request.app[POLICY].files.get(principal, request.match_info["file_id"])
    return ok(file_view(record, public_origin(request)))


async def edit_file(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.write")
    name, folder = parse_edit_file(await read_json_object(request))
    origin, actor = await acting_with(request, principal)
    record = await request.app[POLICY].files.change(
        principal, request.match_info["file_id"], name, folder, origin, actor
    )
    return ok(file_view(record, public_origin(request)))


async def download_file(request: web.Request) -> web.StreamResponse:
    principal = await authenticate(request)
    require(principal, "files.read")
    files = request.app[POLICY].files
    record = await files.get(principal, request.match_info["file_id"])
    return await send_file(request, files, record, owner_etag(record))


async def file_thumbnail(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.read")
    thumbnail = await request.app[POLICY].thumbnails.of_file(
        principal, request.match_info["file_id"]
    )
    return thumbnail_answer(thumbnail)


async def delete_file(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.write")
    file_id = request.match_info["file_id"]
    origin, actor = await acting_with(request, principal)
    deleted_at = await request.app[POLICY].files.delete(principal, file_id, origin, actor)
    return ok({"id": file_id, "deleted_at": iso(deleted_at)})


async def bulk_files(request: web.Request) -> web.Response:
    """``POST /files/bulk``: move or delete many files, each as its single operation would,
    with an outcome for each id in the order given."""
    principal = await authenticate(request)
    require(principal, "files.write")
    action, file_ids, folder = parse_bulk(await read_json_object(request))
    origin, actor = await acting_with(request, principal)
    outcomes = await request.app[POLICY].bulk_files.apply(
        principal, action, file_ids, folder, origin, actor
    )
    return ok(
        {
            "results": [
                {"id": file_id, "ok": True}
                if refused is None
                else {
                    "id": file_id,
                    "ok": False,
                    "error": {"code": refused.code, "message": refused.message},
                }
                for file_id, refused in zip(file_ids, outcomes, strict=True)
            ]
        }
    )


# -- wiring -----------------------------------------------------------------------------------


def add_file_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(FILES_PATH, list_files, allow_head=False),
            web.post(FILES_PATH, upload_file, expect_handler=expect_upload),
            web.post(f"{FILES_PATH}/bulk", bulk_files),
            web.get(f"{PREFIX}/files/{{file_id}}", get_file, allow_head=False),
            # And HEAD, which download tools ask first (the size, the ETag, ranges).
            web.get(f"{PREFIX}/files/{{file_id}}/content", download_file),
            web.get(f"{PREFIX}/files/{{file_id}}/thumbnail", file_thumbnail),
            web.patch(f"{PREFIX}/files/{{file_id}}", edit_file),
            web.delete(f"{PREFIX}/files/{{file_id}}", delete_file),
        ]
    )
