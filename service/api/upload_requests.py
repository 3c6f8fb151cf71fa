"""What a tus request's headers say (``service.api.routes.uploads``): the protocol version, an
upload's length, its metadata, a PATCH's offset and checksum; each malformed one a 400
``validation_failed`` naming the header, a missing or other version 412."""

from __future__ import annotations

import base64
import binascii
import re

from aiohttp import hdrs, web

from service.api.credentials import single_header
from service.auth.uploads import CHECKSUMS, UploadMeta
from service.domain.folders import TOP
from service.domain.records import UNSET
from service.errors import ApiError, Code

TUS_VERSION = "1.0.0"
# On every answer of the tus routes, refusals included.
TUS_HEADERS = {"Tus-Resumable": TUS_VERSION}
OFFSET_OCTET_STREAM = "application/offset+octet-stream"
OCTET_STREAM = "application/octet-stream"

_DIGITS = re.compile(r"[0-9]+")
# Past any length or offset the service takes: a count with more digits is read as this (too
# large, or another offset) rather than converted.
_PAST_ANY = 10**19
# A metadata key: printable ASCII without spaces or commas.
_KEY = re.compile(r"[!-+\--~]{1,64}")
# The metadata keys the service reads (tus clients name a file's name and type either way);
# any other key is accepted and not kept.
_NAME_KEYS = ("filename", "name")
_TYPE_KEYS = ("filetype", "type")
_VALUE_BYTES = 1024


def _invalid(header: str, problem: str) -> ApiError:
    return ApiError(Code.VALIDATION_FAILED, details={header: problem}, headers=TUS_HEADERS)


def check_version(request: web.Request) -> None:
    """412 ``tus_version_unsupported`` unless the request says ``Tus-Resumable: 1.0.0``."""
    if single_header(request.headers, "Tus-Resumable") != TUS_VERSION:
        raise ApiError(
            Code.TUS_VERSION_UNSUPPORTED, headers={**TUS_HEADERS, "Tus-Version": TUS_VERSION}
        )


def _count(request: web.Request, header: str) -> int | None:
    values = request.headers.getall(header, [])
    if not values:
        return None
    if len(values) > 1 or not _DIGITS.fullmatch(values[0].strip()):
        raise _invalid(header, "must be one non-negative integer")
    digits = values[0].strip().lstrip("0") or "0"
    return int(digits) if len(digits) < 20 else _PAST_ANY


def upload_length(request: web.Request) -> int | None:
    """A creation's ``Upload-Length``, or None with ``Upload-Defer-Length: 1`` (told by a
    later PATCH); one of the two is required."""
    length = _count(request, "Upload-Length")
    deferred = request.headers.getall("Upload-Defer-Length", [])
    if deferred and (deferred != ["1"] or length is not None):
        raise _invalid("Upload-Defer-Length", "must be 1, and only without Upload-Length")
    if length is None and not deferred:
        raise _invalid("Upload-Length", "is required (or Upload-Defer-Length: 1)")
    return length


def later_length(request: web.Request) -> int | None:
    """A PATCH's ``Upload-Length``: the length of an upload made with it deferred."""
    return _count(request, "Upload-Length")


def upload_offset(request: web.Request) -> int:
    offset = _count(request, "Upload-Offset")
    if offset is None:
        raise _invalid("Upload-Offset", "is required")
    return offset


def check_patch_type(request: web.Request) -> None:
    """415 for upload bytes sent as neither ``application/offset+octet-stream`` (tus's) nor
    ``application/octet-stream`` (what a client generated from the API document sends), or
    without a ``Content-Type`` (which aiohttp would read as the second)."""
    if hdrs.CONTENT_TYPE not in request.headers or request.content_type not in (
        OFFSET_OCTET_STREAM,
        OCTET_STREAM,
    ):
        raise ApiError(
            Code.UNSUPPORTED_MEDIA_TYPE,
            f"Send an upload's bytes as {OFFSET_OCTET_STREAM}.",
            headers=TUS_HEADERS,
        )


def checksum(request: web.Request) -> tuple[str, bytes] | None:
    """A PATCH's ``Upload-Checksum``: ``<algorithm> <base64 digest>``, the algorithm one of
    ``CHECKSUMS``."""
    value = request.headers.getall("Upload-Checksum", [])
    if not value:
        return None
    parts = value[0].strip().split(" ")
    if len(value) > 1 or len(parts) != 2 or parts[0] not in CHECKSUMS:
        raise _invalid(
            "Upload-Checksum",
            f"must be an algorithm ({', '.join(CHECKSUMS)}), then a base64 digest",
        )
    try:
        digest = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise _invalid("Upload-Checksum", "the digest must be base64") from None
    return parts[0], digest


def upload_metadata(request: web.Request) -> UploadMeta:
    """A creation's ``Upload-Metadata`` (``key base64value`` pairs, comma-separated): the file's
    name (``filename`` or ``name``), type (``filetype`` or ``type``), folder (``folder_id``: an
    id, ``root`` for the top level, absent for the account's default) and whether to alias it
    (``alias``: ``true`` or ``false``). Other keys (tus clients send their own) are left."""
    values = request.headers.getall("Upload-Metadata", [])
    if len(values) > 1:
        raise _invalid("Upload-Metadata", "must be sent once")
    pairs: dict[str, str] = {}
    for item in values[0].split(",") if values and values[0].strip() else ():
        key, _, encoded = item.strip().partition(" ")
        if not _KEY.fullmatch(key) or key in pairs:
            raise _invalid("Upload-Metadata", "each key must be named once, without spaces")
        try:
            value = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise _invalid("Upload-Metadata", f"the value of {key} must be base64") from None
        if len(value) > _VALUE_BYTES:
            raise _invalid("Upload-Metadata", f"the value of {key} is too long")
        pairs[key] = value.decode("utf-8", "replace").strip()
    name = next((pairs[k] for k in _NAME_KEYS if pairs.get(k)), None)
    content_type = next((pairs[k] for k in _TYPE_KEYS if pairs.get(k)), None)
    folder = pairs.get("folder_id") or None
    alias = pairs.get("alias", "false")
    if alias not in ("true", "false"):
        raise _invalid("Upload-Metadata", "alias must be true or false")
    return UploadMeta(
        name,
        content_type,
        UNSET if folder is None else (None if folder == TOP else folder),
        alias == "true",
    )
