"""The files resource under /api/v1/files: upload, list (all, or one folder's), metadata, content,
rename or move, and delete.

The HTTP layer only: reads the request, checks the credential and its permission (``files.read``
to list and download, ``files.write`` to upload, change and delete; a session may do
everything), and shapes the answer. The metadata lives in Redis (``service.store.files``), the
bytes behind the blob interface (``service.store.blobs``). Another account's file answers
exactly like an unknown id: 404 ``file_not_found``.

An upload is streamed: the multipart field ``file`` is filled straight into the blob store's
buffers (``RequestBody``, ``PartBody``), never whole into memory (the other fields,
``folder_id`` and ``alias``, may come before or after it), and stops at
``FILEHOST_MAX_UPLOAD_BYTES`` with 413 (the connection is then closed, so the rest is never
processed). The bytes are renamed into place when complete, then the record is
written; any failure on the way removes what was written, so a file is either listed with all
its bytes or not there at all. With ``alias=true`` (and ``aliases.write``) a vanity alias of the
new file is made too, with the account's defaults, and the answer names it.

``send_file`` is how every path that serves a file's bytes answers (this resource's content and
a vanity alias's, ``routes.public_aliases``), so they follow one set of rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from functools import lru_cache
from typing import Any, Protocol
from urllib.parse import quote

from aiohttp import BodyPartReader, hdrs, web
from aiohttp.http_exceptions import HttpProcessingError
from multidict import CIMultiDictProxy

from service.api._aiohttp import Answer, BodyGoesOn, PartBody, Reply, RequestBody
from service.api.alias_requests import public_origin
from service.api.context import AUTHENTICATOR, METRICS, POLICY, PREFIX, SETTINGS
from service.api.credentials import acting_with, authenticate, check_credentials
from service.api.envelope import as_api_error, error_response
from service.api.folder_requests import DEFAULT_LIMIT, folder_query, page_size, parse_edit_file
from service.api.headers import prepare_streamed
from service.api.sendfile import send_blob
from service.api.validation import read_json_object, readable
from service.api.views import alias_url, file_view, ok, ok_reply
from service.auth.authenticator import require, require_for_upload
from service.auth.files import Files
from service.clock import iso
from service.domain.audit_events import Origin
from service.domain.files import INLINE_TYPES, OCTET_STREAM
from service.domain.folders import TOP
from service.domain.principal import Principal
from service.domain.records import UNSET, FileRecord, Unset
from service.errors import ApiError, Code
from service.observability.trace import RequestTrace
from service.store.files import BadCursor, decode_cursor

log = logging.getLogger("service.api.routes.files")


FILES_PATH = f"{PREFIX}/files"
# The multipart framing around one file (boundaries, part headers; aiohttp caps each header
# line at 8190 bytes): a declared Content-Length past the limit by more than this cannot be a
# file within the limit, and is refused before a byte of the body is read.
FRAMING_ALLOWANCE = 64 * 1024

_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$")
# Past any file's size: a range position with more digits than this is read as this.
_FAR_PAST_THE_END = 10**18


# -- small parsers ----------------------------------------------------------------------------


def content_disposition(kind: str, name: str) -> str:
    """RFC 6266 with an RFC 5987 ``filename*`` for the exact name and a plain ASCII fallback."""
    fallback = "".join(
        char if " " <= char <= "~" and char not in '"\\%' else "_" for char in name
    ).strip()
    encoded = quote(name, safe="!#$&+-.^_`|~")
    return f"{kind}; filename=\"{fallback or 'file'}\"; filename*=UTF-8''{encoded}"


def _etag_matches(header: str, etag: str) -> bool:
    """``If-None-Match``: weak comparison against our strong tag; ``*`` matches anything."""
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == etag:
            return True
    return False


def byte_range(request: web.Request, size: int, etag: str) -> tuple[int, int] | None:
    """The one range to send, as (start, length); None for the whole file. A header that is not
    one well-formed ``bytes=`` range (several ranges included) is ignored, as RFC 9110 allows;
    so is any Range when ``If-Range`` names another version. Unsatisfiable: 416."""
    header = request.headers.get(hdrs.RANGE)
    if header is None:
        return None
    if_range = request.headers.get(hdrs.IF_RANGE)
    if if_range is not None and if_range.strip() != etag:
        return None
    match = _RANGE.match(header.strip())
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = (_position(digits) for digits in match.groups())
    if first is None:  # the last N bytes
        suffix = last
        if suffix == 0 or size == 0:
            raise _unsatisfiable(size)
        start = max(0, size - suffix)
        return start, size - start
    start = first
    if last is not None and last < start:
        return None
    if start >= size:
        raise _unsatisfiable(size)
    end = min(last, size - 1) if last is not None else size - 1  # RFC 9110 14.1.1: clamped
    return start, end - start + 1


def _position(digits: str) -> int | None:
    """A range's byte position: None when absent; any number of digits (never an int of
    thousands of digits: anything past ``_FAR_PAST_THE_END`` is that)."""
    if not digits:
        return None
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else _FAR_PAST_THE_END


def _unsatisfiable(size: int) -> ApiError:
    return ApiError(
        Code.RANGE_NOT_SATISFIABLE,
        details={"size": size},
        headers={"Content-Range": f"bytes */{size}"},
    )


def _cursor(request: web.Request) -> str | None:
    values = request.query.getall("cursor", [])
    if not values:
        return None
    try:
        if len(values) > 1:
            raise BadCursor()
        return decode_cursor(values[0])
    except BadCursor:
        raise ApiError(
            Code.VALIDATION_FAILED, details={"cursor": "must be the next_cursor of a previous page"}
        ) from None


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
    limit = page_size(request)
    after = _cursor(request)
    folder = folder_query(request, "folder_id")
    if isinstance(folder, Unset):
        return Answer.of(await _page_reply(request.app, principal, limit, after))
    page = await request.app[POLICY].files.folder_page(principal, folder, limit, after)
    return ok(
        {"files": [file_view(record) for record in page.files], "next_cursor": page.next_cursor}
    )


async def first_page_reply(
    app: web.Application, headers: CIMultiDictProxy[str], trace: RequestTrace
) -> Reply:
    """``GET /files`` without a query (the first page at the default size), for a request with
    ``headers``: a gateway route, so also served by the gateway lane
    (``service.api.gateway``)."""
    principal = await check_credentials(app[AUTHENTICATOR], headers, trace)
    require(principal, "files.read")
    return await _page_reply(app, principal, DEFAULT_LIMIT, None)


async def _page_reply(
    app: web.Application, principal: Principal, limit: int, after: str | None
) -> Reply:
    page = await app[POLICY].files.page(principal, limit, after)
    return ok_reply(
        {"files": [file_view(record) for record in page.files], "next_cursor": page.next_cursor}
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


async def _upload(request: web.Request, principal: Principal) -> tuple[web.StreamResponse, int]:
    """The upload's answer (201, or the 413 it answers rather than raises) and the bytes it
    stored."""
    settings = request.app[SETTINGS]
    limit = settings.max_upload_bytes
    if request.content_type != "multipart/form-data":
        raise ApiError(
            Code.UNSUPPORTED_MEDIA_TYPE,
            "Upload a file as multipart/form-data, in the field named file.",
        )
    if request.content_length is not None and request.content_length > limit + FRAMING_ALLOWANCE:
        return _too_large(limit), 0
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
        await _check_alias(request, principal)

    async def rest_of_the_body() -> str | Unset | None:
        try:
            while (more := await reader.next()) is not None:
                if not isinstance(more, BodyPartReader) or more.name not in _FIELDS:
                    raise _unknown_field(more)
                await _read_field(more, fields)
        except _MALFORMED:
            raise _malformed() from None
        # Bytes after the closing boundary mean the file held the boundary itself (a client
        # with a fixed boundary): what followed it would be lost, so nothing is kept.
        content = request.content
        if not content.at_eof():
            rest = await content.read(FRAMING_ALLOWANCE)
            if rest.strip() or not content.at_eof():
                raise ApiError(Code.VALIDATION_FAILED, details={"body": _GOES_ON})
        if _alias_field(fields):  # asked for after the file: checked before its record
            await _check_alias(request, principal)
        return _folder_field(fields)

    try:
        record = await files.upload(
            principal,
            _AtMost(PartBody(part, body), limit),
            readable(part.filename),
            part.headers.get(hdrs.CONTENT_TYPE),
            rest_of_the_body,
            origin,
            actor,
        )
    except _TooLarge:
        return _too_large(limit), 0
    except BodyGoesOn:
        raise ApiError(Code.VALIDATION_FAILED, details={"body": _GOES_ON}) from None
    except _MALFORMED:
        raise _malformed() from None
    view = file_view(record)
    if _alias_field(fields):
        view["alias"] = await _alias_of(request, principal, record, origin, actor)
    response = ok(view, status=201)
    response.headers[hdrs.LOCATION] = f"{PREFIX}/files/{record.id}"
    return response, record.size


async def _check_alias(request: web.Request, principal: Principal) -> None:
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
    return ok(file_view(record))


async def edit_file(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.write")
    name, folder = parse_edit_file(await read_json_object(request))
    origin, actor = await acting_with(request, principal)
    record = await request.app[POLICY].files.change(
        principal, request.match_info["file_id"], name, folder, origin, actor
    )
    return ok(file_view(record))


async def download_file(request: web.Request) -> web.StreamResponse:
    principal = await authenticate(request)
    require(principal, "files.read")
    files = request.app[POLICY].files
    record = await files.get(principal, request.match_info["file_id"])
    return await send_file(request, files, record, owner_etag(record))


class Admission(Protocol):
    """Asked by ``send_file`` just before a 200 or 206 goes out: whether it may (a vanity
    alias's view is counted there, ``routes.public_aliases``)."""

    async def admit(self) -> bool: ...


def owner_etag(record: FileRecord) -> str:
    """The ETag of a file's bytes for whoever holds a credential to them: their SHA-256, which
    the file's view shows anyway. The public side sends an opaque one
    (``AliasAccess.public_etag``)."""
    return f'"{record.sha256}"'


async def send_file(
    request: web.Request,
    files: Files,
    record: FileRecord,
    etag: str,
    admission: Admission | None = None,
) -> web.StreamResponse:
    """The bytes of ``record`` as ``GET /files/{id}/content`` answers them (and every other
    path that serves a file): Content-Length, the strong ``etag``, 304, one ``bytes=`` range as
    206, risky types as ``application/octet-stream`` and ``attachment``; for HEAD, the same
    headers without the bytes. ``admission`` refusing a 200 or 206 is 404 ``alias_not_found``."""
    if_none_match = request.headers.get(hdrs.IF_NONE_MATCH)
    if if_none_match is not None and _etag_matches(if_none_match, etag):
        return web.Response(status=304, headers={hdrs.ETAG: etag})
    content = await files.small_content(record)
    if content is not None:
        # One write of headers and bytes, from memory: no thread, no open file.
        chosen = byte_range(request, len(content), etag)
        start, length = chosen if chosen is not None else (0, len(content))
        body = content[start : start + length] if chosen is not None else content
        small = Answer(body, 200 if chosen is None else 206)
        _content_headers(small, record, etag, chosen, len(content))
        if admission is not None and not await admission.admit():
            raise ApiError(Code.ALIAS_NOT_FOUND)
        if request.method != hdrs.METH_HEAD:
            _count_download(request, admission, length)
        return small
    blob = await files.open(record)
    try:
        size = blob.size
        chosen = byte_range(request, size, etag)
        start, length = chosen if chosen is not None else (0, size)
        response = web.StreamResponse(status=200 if chosen is None else 206)
        _content_headers(response, record, etag, chosen, size)
        response.content_length = length
        if admission is not None and not await admission.admit():
            raise ApiError(Code.ALIAS_NOT_FOUND)
        await prepare_streamed(request, response)
        if request.method == hdrs.METH_HEAD:
            await response.write_eof()
        else:
            await send_blob(request, response, blob, start, length)
            _count_download(request, admission, length)
        return response
    finally:
        await blob.close()


def _count_download(request: web.Request, admission: Admission | None, size: int) -> None:
    count_download(request.app, "content" if admission is None else "alias", size)


def count_download(app: web.Application, via: str, size: int) -> None:
    """A download's body of ``size`` bytes sent, ``via`` its content address or an alias, in
    the metrics when they are on."""
    metrics = app.get(METRICS)
    if metrics is not None and size:
        metrics.downloaded(via, size)


def _content_headers(
    response: web.StreamResponse,
    record: FileRecord,
    etag: str,
    chosen: tuple[int, int] | None,
    size: int,
) -> None:
    """A file's headers, wherever its bytes come from (``file_headers``)."""
    content_type, headers = file_headers(record, etag)
    response.headers[hdrs.CONTENT_TYPE] = content_type
    response.headers.extend(headers)
    if chosen is not None:
        start, length = chosen
        response.headers[hdrs.CONTENT_RANGE] = f"bytes {start}-{start + length - 1}/{size}"


@lru_cache(maxsize=4096)
def file_headers(record: FileRecord, etag: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A file's content type and the headers that follow it in a whole file's answer (with
    ``etag``): risky types as ``application/octet-stream`` and ``attachment``. The same for the
    same record, so a file served again and again (through an alias) has them made once."""
    inline = record.content_type in INLINE_TYPES
    disposition = content_disposition("inline" if inline else "attachment", record.name)
    return record.content_type if inline else OCTET_STREAM, (
        (hdrs.CONTENT_DISPOSITION, disposition),
        (hdrs.ETAG, etag),
        (hdrs.ACCEPT_RANGES, "bytes"),
    )


async def delete_file(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.write")
    file_id = request.match_info["file_id"]
    origin, actor = await acting_with(request, principal)
    deleted_at = await request.app[POLICY].files.delete(principal, file_id, origin, actor)
    return ok({"id": file_id, "deleted_at": iso(deleted_at)})


# -- wiring -----------------------------------------------------------------------------------


def add_file_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(FILES_PATH, list_files, allow_head=False),
            web.post(FILES_PATH, upload_file),
            web.get(f"{PREFIX}/files/{{file_id}}", get_file, allow_head=False),
            web.get(f"{PREFIX}/files/{{file_id}}/content", download_file, allow_head=False),
            web.patch(f"{PREFIX}/files/{{file_id}}", edit_file),
            web.delete(f"{PREFIX}/files/{{file_id}}", delete_file),
        ]
    )
