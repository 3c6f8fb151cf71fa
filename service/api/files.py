"""The files resource under /api/v1/files: upload, list, metadata, content and delete.

The HTTP layer only: reads the request, checks the credential and its permission (``files.read``
to list and download, ``files.write`` to upload and delete; a session may do everything), and
shapes the answer. The metadata lives in Redis (``service.store.files``), the bytes behind
the blob interface (``service.store.blobs``). Another account's file answers exactly like an
unknown id: 404 ``file_not_found``.

An upload is streamed: the multipart field ``file`` goes chunk by chunk into the blob store,
never whole into memory, and stops at ``FILEHOST_MAX_UPLOAD_BYTES`` with 413 (the connection is
then closed, so the rest is never processed). The bytes are renamed into place when complete,
then the record is written; any failure on the way removes what was written, so a file is either
listed with all its bytes or not there at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import unicodedata
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from aiohttp import BodyPartReader, hdrs, web
from aiohttp.http_exceptions import HttpProcessingError
from multidict import CIMultiDictProxy

from service.api.answers import Answer, Reply
from service.api.context import AUTHENTICATOR, SETTINGS, STORE
from service.api.middleware import error_response, prepare_streamed
from service.api.routes import PREFIX, authenticate, check_credentials, ok, ok_reply
from service.api.validation import readable
from service.auth.authenticator import require
from service.clock import Clock, iso
from service.domain.credentials import is_valid_id, new_id
from service.domain.principal import Principal
from service.errors import (
    FileLimitReached,
    FileNotFound,
    PayloadTooLarge,
    RangeNotSatisfiable,
    Unauthorized,
    UnsupportedMediaType,
    ValidationFailed,
)
from service.logs import RequestTrace
from service.store.blobs import FILES_DIRECTORY, BlobMissing, BlobStore, DirectoryBlobs
from service.store.errors import AccountGone
from service.store.files import BadCursor, FileRecord, FilesStore, decode_cursor

log = logging.getLogger("service.api.files")

FILES = web.AppKey("files", FilesStore)
BLOBS = web.AppKey("blobs", BlobStore)  # type: ignore[type-abstract]
CLOCK = web.AppKey("files_clock", Clock)  # type: ignore[type-abstract]

FILES_PATH = f"{PREFIX}/files"
MAX_NAME_LENGTH = 255
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
UPLOAD_CHUNK = 256 * 1024
# The multipart framing around one file (boundaries, part headers; aiohttp caps each header
# line at 8190 bytes): a declared Content-Length past the limit by more than this cannot be a
# file within the limit, and is refused before a byte of the body is read.
FRAMING_ALLOWANCE = 64 * 1024
FALLBACK_NAME = "unnamed"

# Types a browser shows without running anything: served as stored, inline. Every other type
# (HTML, SVG, XML, JavaScript, PDF, anything unknown) is served as application/octet-stream
# with Content-Disposition: attachment, so no upload is ever rendered as a page of our origin.
INLINE_TYPES = frozenset(
    {
        "text/plain",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "audio/mpeg",
        "audio/ogg",
        "audio/wav",
        "audio/webm",
        "audio/flac",
        "video/mp4",
        "video/webm",
        "video/ogg",
    }
)
OCTET_STREAM = "application/octet-stream"
_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")
_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$")
# Past any file's size: a range position with more digits than this is read as this.
_FAR_PAST_THE_END = 10**18


# -- views and small parsers ------------------------------------------------------------------


def _file_view(record: FileRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "size": record.size,
        "content_type": record.content_type,
        "sha256": record.sha256,
        "created_at": iso(record.created_at),
    }


def display_name(raw: str | None) -> str:
    """The client's file name as it is kept, for display only: its last path component (after
    any ``/`` or ``\\``), without control characters, trimmed, at most 255 characters (a long one
    is shortened before its extension). Never used in a path: blobs are named by file id."""
    name = re.split(r"[/\\]", readable(raw) or "")[-1]
    name = "".join(char for char in name if unicodedata.category(char) != "Cc").strip()
    if len(name) > MAX_NAME_LENGTH:  # shortened in its stem, so a short extension survives
        stem, dot, extension = name.rpartition(".")
        keep = len(extension) + 1 if dot and stem and len(extension) <= 16 else 0
        name = name[: MAX_NAME_LENGTH - keep].rstrip() + (name[-keep:] if keep else "")
    if name in ("", ".", ".."):
        return FALLBACK_NAME
    return name


def media_type(raw: str | None) -> str:
    """The part's declared type reduced to ``type/subtype`` (lower case), or octet-stream."""
    value = (raw or "").split(";", 1)[0].strip().lower()
    return value if _MEDIA_TYPE.match(value) else OCTET_STREAM


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


def _unsatisfiable(size: int) -> RangeNotSatisfiable:
    return RangeNotSatisfiable(details={"size": size}, headers={"Content-Range": f"bytes */{size}"})


def _page_size(request: web.Request) -> int:
    values = request.query.getall("limit", [])
    if not values:
        return DEFAULT_LIMIT
    raw = values[0]
    if len(values) > 1 or not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise ValidationFailed(details={"limit": f"must be one whole number from 1 to {MAX_LIMIT}"})
    return int(raw)


def _cursor(request: web.Request) -> str | None:
    values = request.query.getall("cursor", [])
    if not values:
        return None
    try:
        if len(values) > 1:
            raise BadCursor()
        return decode_cursor(values[0])
    except BadCursor:
        raise ValidationFailed(
            details={"cursor": "must be the next_cursor of a previous page"}
        ) from None


def _file_id(request: web.Request) -> str:
    file_id = request.match_info["file_id"]
    if not is_valid_id(file_id, "fil"):
        raise FileNotFound()
    return file_id


def _account_gone() -> Unauthorized:
    return Unauthorized(
        "The credential's account no longer exists.",
        code="account_gone",
        headers={"WWW-Authenticate": 'Bearer realm="filehost"'},
    )


def _limit_reached(limit: int) -> FileLimitReached:
    return FileLimitReached(
        f"This account holds the maximum of {limit} files. Delete one before uploading another.",
        details={"max_files": limit},
    )


# What aiohttp's multipart reader raises for a body it cannot read as multipart.
_MALFORMED = (ValueError, AssertionError, RuntimeError, HttpProcessingError)


class _TooLarge(Exception):
    pass


def _too_large(limit: int) -> web.Response:
    """413, and the connection closed after it: the rest of the body is never read."""
    response = error_response(
        PayloadTooLarge(f"A file may hold at most {limit} bytes.", details={"max_bytes": limit})
    )
    response.force_close()
    return response


async def _release(blobs: BlobStore, file_id: str) -> None:
    """Remove a blob whose upload failed after it was stored, even from a cancelled task."""
    try:
        await asyncio.shield(blobs.delete(file_id))
    except Exception:
        log.exception("could not remove the bytes of a failed upload")


# -- handlers ---------------------------------------------------------------------------------


async def list_files(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.read")
    limit = _page_size(request)
    after = _cursor(request)
    return Answer.of(await _page_reply(request.app, principal, limit, after))


async def first_page_reply(
    app: web.Application, headers: CIMultiDictProxy[str], trace: RequestTrace
) -> Reply:
    """``GET /files`` without a query (the first page at the default size), for a request with
    ``headers``: a gateway route, so also served by the gateway lane
    (``service.api.gateway_lane``)."""
    principal = await check_credentials(app[AUTHENTICATOR], headers, trace)
    require(principal, "files.read")
    return await _page_reply(app, principal, DEFAULT_LIMIT, None)


async def _page_reply(
    app: web.Application, principal: Principal, limit: int, after: str | None
) -> Reply:
    page = await app[FILES].list_page(principal.user_id, limit, after)
    return ok_reply(
        {"files": [_file_view(record) for record in page.files], "next_cursor": page.next_cursor}
    )


async def upload_file(request: web.Request) -> web.StreamResponse:
    principal = await authenticate(request)
    require(principal, "files.write")
    settings = request.app[SETTINGS]
    limit = settings.max_upload_bytes
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType("Upload a file as multipart/form-data, in the field named file.")
    if request.content_length is not None and request.content_length > limit + FRAMING_ALLOWANCE:
        return _too_large(limit)
    files = request.app[FILES]
    max_files = settings.max_files_per_account
    if await files.count(principal.user_id) >= max_files:
        raise _limit_reached(max_files)

    try:
        reader = await request.multipart()
        part = await reader.next()
    except _MALFORMED:
        raise _malformed() from None
    if part is None:
        raise ValidationFailed(details={"file": "is required"})
    if not isinstance(part, BodyPartReader) or part.name != "file":
        name = (part.name if isinstance(part, BodyPartReader) else None) or "part"
        raise ValidationFailed(details={name[:100]: "is not a known field; send only file"})
    encoding = part.headers.get(hdrs.CONTENT_TRANSFER_ENCODING, "binary").strip().lower()
    if encoding not in ("binary", "8bit", "7bit") or hdrs.CONTENT_ENCODING in part.headers:
        raise ValidationFailed(details={"file": "must be sent as is, without an encoding"})

    async def chunks() -> AsyncIterator[bytes]:
        total = 0
        while True:
            data = await part.read_chunk(UPLOAD_CHUNK)
            if not data:
                return
            total += len(data)
            if total > limit:
                raise _TooLarge()
            yield data

    blobs = request.app[BLOBS]
    file_id = new_id("fil")
    recorded = False
    try:
        written = await blobs.put(file_id, chunks())
    except _TooLarge:
        return _too_large(limit)
    except _MALFORMED:
        raise _malformed() from None
    try:
        try:
            if await reader.next() is not None:
                raise ValidationFailed(details={"file": "must be the only field"})
        except _MALFORMED:
            raise _malformed() from None
        record = FileRecord(
            id=file_id,
            name=display_name(part.filename),
            size=written.size,
            content_type=media_type(part.headers.get(hdrs.CONTENT_TYPE)),
            sha256=written.sha256,
            created_at=request.app[CLOCK].now_ms(),
        )
        recorded = True  # from here, an error may come after the record was written
        try:
            added = await files.add(principal.user_id, record, max_files)
        except AccountGone:
            recorded = False
            raise _account_gone() from None
        if not added:
            recorded = False
            raise _limit_reached(max_files)
    except BaseException:
        if recorded:
            with contextlib.suppress(Exception):
                await asyncio.shield(files.remove(principal.user_id, file_id))
        await _release(blobs, file_id)
        raise
    response = ok(_file_view(record), status=201)
    response.headers[hdrs.LOCATION] = f"{PREFIX}/files/{file_id}"
    return response


def _malformed() -> ValidationFailed:
    return ValidationFailed(details={"body": "is not a well-formed multipart/form-data body"})


async def get_file(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.read")
    record = await request.app[FILES].get(principal.user_id, _file_id(request))
    if record is None:
        raise FileNotFound()
    return ok(_file_view(record))


async def download_file(request: web.Request) -> web.StreamResponse:
    principal = await authenticate(request)
    require(principal, "files.read")
    record = await request.app[FILES].get(principal.user_id, _file_id(request))
    if record is None:
        raise FileNotFound()
    etag = f'"{record.sha256}"'
    if_none_match = request.headers.get(hdrs.IF_NONE_MATCH)
    if if_none_match is not None and _etag_matches(if_none_match, etag):
        return web.Response(status=304, headers={hdrs.ETAG: etag})
    try:
        blob = await request.app[BLOBS].open(record.id)
    except BlobMissing:
        log.error("a listed file has no bytes in storage")
        raise FileNotFound() from None
    try:
        size = blob.size
        chosen = byte_range(request, size, etag)
        start, length = chosen if chosen is not None else (0, size)
        inline = record.content_type in INLINE_TYPES
        response = web.StreamResponse(status=200 if chosen is None else 206)
        headers = response.headers
        headers[hdrs.CONTENT_TYPE] = record.content_type if inline else OCTET_STREAM
        headers[hdrs.CONTENT_DISPOSITION] = content_disposition(
            "inline" if inline else "attachment", record.name
        )
        headers[hdrs.ETAG] = etag
        headers[hdrs.ACCEPT_RANGES] = "bytes"
        if chosen is not None:
            headers[hdrs.CONTENT_RANGE] = f"bytes {start}-{start + length - 1}/{size}"
        response.content_length = length
        await prepare_streamed(request, response)
        async for data in blob.chunks(start, length):
            await response.write(data)
        await response.write_eof()
        return response
    finally:
        await blob.close()


async def delete_file(request: web.Request) -> web.Response:
    principal = await authenticate(request)
    require(principal, "files.write")
    file_id = _file_id(request)
    record = await request.app[FILES].remove(principal.user_id, file_id)
    if record is None:
        raise FileNotFound()
    deleted_at = request.app[CLOCK].now_ms()
    # The record went first, so the file is neither listed nor served from here on; then the
    # bytes. Should that fail, they are only unreferenced, and the failure is logged.
    try:
        await request.app[BLOBS].delete(file_id)
    except OSError:
        log.exception("could not remove the bytes of a deleted file")
    return ok({"id": file_id, "deleted_at": iso(deleted_at)})


# -- wiring -----------------------------------------------------------------------------------


def add_file_routes(app: web.Application, clock: Clock) -> None:
    """The files routes; blobs in ``<FILEHOST_DATA_DIR>/files`` unless ``app[BLOBS]`` is set."""
    app[CLOCK] = clock
    if BLOBS not in app:
        app[BLOBS] = DirectoryBlobs(app[SETTINGS].data_dir / FILES_DIRECTORY)

    async def metadata(app: web.Application) -> AsyncIterator[None]:
        app[FILES] = app[STORE].files  # after the app's lifecycle made the stores
        yield

    app.cleanup_ctx.append(metadata)
    app.router.add_routes(
        [
            web.get(FILES_PATH, list_files, allow_head=False),
            web.post(FILES_PATH, upload_file),
            web.get(f"{PREFIX}/files/{{file_id}}", get_file, allow_head=False),
            web.get(f"{PREFIX}/files/{{file_id}}/content", download_file, allow_head=False),
            web.delete(f"{PREFIX}/files/{{file_id}}", delete_file),
        ]
    )
