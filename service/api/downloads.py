"""How every path that serves a file's bytes answers: the files resource's content
(``routes.files``) and a vanity alias's (``routes.public_aliases``), so both follow one set of
rules. A strong ``ETag`` (the owner's is the bytes' SHA-256, the public side's an opaque tag)
and 304, one ``bytes=`` range as 206 or 416, ``HEAD`` without the bytes, risky types as
``application/octet-stream`` and ``attachment``; a small file from the worker's memory in one
write, a larger one streamed (``sendfile`` from the disk, chunks from an object store), or a
302 to the object store's short-lived URL in redirect mode."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Protocol
from urllib.parse import quote

from aiohttp import hdrs, web

from service.api._aiohttp import Answer
from service.api.context import METRICS
from service.api.headers import prepare_streamed
from service.api.sendfile import send_blob
from service.auth.files import Files
from service.domain.files import INLINE_TYPES, OCTET_STREAM
from service.domain.records import FileRecord
from service.errors import ApiError, Code

# The unit is case-insensitive (RFC 9110 14.1).
_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$", re.IGNORECASE)
# Past any file's size: a range position with more digits than this is read as this.
_FAR_PAST_THE_END = 10**18


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
        assert suffix is not None  # the check above: one of the two positions is given
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


class Admission(Protocol):
    """Asked by ``send_file`` just before a 200 or 206 goes out: whether ``answer`` may (a
    vanity alias's view is counted there, ``routes.public_aliases``), which it may give a
    header first (the view's grant)."""

    async def admit(self, answer: web.StreamResponse) -> bool: ...


def thumbnail_answer(thumbnail: bytes) -> web.Response:
    """A file's thumbnail: a WebP the service made (``service.auth.thumbnails``), never bytes
    as a user sent them, so shown inline by the owner's page and a link's preview alike."""
    return web.Response(body=thumbnail, content_type="image/webp")


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
    may_redirect: bool = True,
    attachment: bool = False,
) -> web.StreamResponse:
    """The bytes of ``record`` as ``GET /files/{id}/content`` answers them (and every other
    path that serves a file): Content-Length, the strong ``etag``, 304, one ``bytes=`` range as
    206, risky types as ``application/octet-stream`` and ``attachment``; for HEAD, the same
    headers without the bytes. ``admission`` refusing a 200 or 206 is 404 ``alias_not_found``.
    When the blob store redirects downloads (``FILEHOST_S3_DOWNLOADS=redirect``) and
    ``may_redirect``, a 302 to the store's short-lived URL instead (for GET), counted as
    ``admission``'s view like a 200. ``attachment``: saved, never shown, whatever the type."""
    if_none_match = request.headers.get(hdrs.IF_NONE_MATCH)
    if if_none_match is not None and _etag_matches(if_none_match, etag):
        return web.Response(status=304, headers={hdrs.ETAG: etag})
    # Never HEAD: a store's presigned URL is signed for GET alone.
    if may_redirect and request.method != hdrs.METH_HEAD:
        content_type, headers = file_headers(record, etag, attachment)
        disposition = dict(headers)[hdrs.CONTENT_DISPOSITION]
        url = await files.download_url(record, disposition, content_type)
        if url is not None:
            redirect = web.Response(status=302, headers={hdrs.LOCATION: url})
            if admission is not None and not await admission.admit(redirect):
                raise ApiError(Code.ALIAS_NOT_FOUND)
            return redirect
    content = await files.small_content(record)
    if content is not None:
        # One write of headers and bytes, from memory: no thread, no open file.
        chosen = byte_range(request, len(content), etag)
        start, length = chosen if chosen is not None else (0, len(content))
        body = content[start : start + length] if chosen is not None else content
        small = Answer(body, 200 if chosen is None else 206)
        _content_headers(small, record, etag, chosen, len(content), attachment)
        if admission is not None and not await admission.admit(small):
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
        _content_headers(response, record, etag, chosen, size, attachment)
        response.content_length = length
        if admission is not None and not await admission.admit(response):
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
    attachment: bool,
) -> None:
    """A file's headers, wherever its bytes come from (``file_headers``)."""
    content_type, headers = file_headers(record, etag, attachment)
    response.headers[hdrs.CONTENT_TYPE] = content_type
    response.headers.extend(headers)
    if chosen is not None:
        start, length = chosen
        response.headers[hdrs.CONTENT_RANGE] = f"bytes {start}-{start + length - 1}/{size}"


@lru_cache(maxsize=4096)
def file_headers(
    record: FileRecord, etag: str, attachment: bool = False
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A file's content type and the headers that follow it in a whole file's answer (with
    ``etag``): risky types as ``application/octet-stream`` and ``attachment``, and every type
    ``attachment`` when asked. The same for the same record, so a file served again and again
    (through an alias) has them made once."""
    inline = record.content_type in INLINE_TYPES
    disposition = content_disposition(
        "inline" if inline and not attachment else "attachment", record.name
    )
    return record.content_type if inline else OCTET_STREAM, (
        (hdrs.CONTENT_DISPOSITION, disposition),
        (hdrs.ETAG, etag),
        (hdrs.ACCEPT_RANGES, "bytes"),
    )
