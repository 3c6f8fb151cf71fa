"""What a hosted file's client-given name and type become: the name kept for display only (never a
path: blobs are named by file id), the type reduced to ``type/subtype`` (or, when the client sent
none, read from the name's extension), and which types may be shown by a browser as they are,
and which have a thumbnail. Pure functions, no I/O."""

from __future__ import annotations

import mimetypes
import re
import unicodedata

MAX_NAME_LENGTH = 255
FALLBACK_NAME = "unnamed"
OCTET_STREAM = "application/octet-stream"

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
# Types a browser plays, in a view of its own that asks the file's address again in ranges.
PLAYED_TYPES = frozenset(kind for kind in INLINE_TYPES if kind.startswith(("audio/", "video/")))
# Types whose files have a thumbnail, made by the service (``service.auth.thumbnails``): raster
# images only. Never SVG (a document that may hold script) nor anything else.
THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# A type for a file sent without one (or as application/octet-stream, what a client that did not
# look sends), from its name's extension: first the types the service and the dashboard treat
# apart (shown inline, previewed, given a thumbnail, a class of the files' type filter) under
# the names a browser would give them, then Python's own table of registered types (never the
# host's /etc/mime.types: every instance names a file alike).
_TYPES_BY_EXTENSION = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "avif": "image/avif",
    "bmp": "image/bmp",
    "mp4": "video/mp4",
    "m4v": "video/mp4",
    "webm": "video/webm",
    "ogv": "video/ogg",
    "mp3": "audio/mpeg",
    "m4a": "audio/mp4",
    "ogg": "audio/ogg",
    "oga": "audio/ogg",
    "opus": "audio/ogg",
    "wav": "audio/wav",
    "flac": "audio/flac",
    "weba": "audio/webm",
    "txt": "text/plain",
    "csv": "text/csv",
    "md": "text/markdown",
    "json": "application/json",
    "pdf": "application/pdf",
}
_REGISTERED_TYPES = mimetypes.MimeTypes(filenames=()).types_map[True]
_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")


def display_name(raw: str | None) -> str:
    """The client's file name as it is kept, for display only: its last path component (after
    any ``/`` or ``\\``), without control characters, trimmed, at most 255 characters (a long one
    is shortened before its extension)."""
    name = re.split(r"[/\\]", raw or "")[-1]
    name = "".join(char for char in name if unicodedata.category(char) != "Cc").strip()
    if len(name) > MAX_NAME_LENGTH:  # shortened in its stem, so a short extension survives
        stem, dot, extension = name.rpartition(".")
        keep = len(extension) + 1 if dot and stem and len(extension) <= 16 else 0
        name = name[: MAX_NAME_LENGTH - keep].rstrip() + (name[-keep:] if keep else "")
    if name in ("", ".", ".."):
        return FALLBACK_NAME
    return name


def media_type(raw: str | None, name: str) -> str:
    """A declared type reduced to ``type/subtype`` (lower case); for none (or one unreadable,
    or octet-stream), the type of ``name``'s extension (``_TYPES_BY_EXTENSION``), else
    octet-stream."""
    value = (raw or "").split(";", 1)[0].strip().lower()
    if _MEDIA_TYPE.match(value) and value != OCTET_STREAM:
        return value
    stem, dot, extension = name.rpartition(".")
    if not (dot and stem):  # ".bashrc" has no extension
        return OCTET_STREAM
    extension = extension.lower()
    return _TYPES_BY_EXTENSION.get(extension) or _REGISTERED_TYPES.get(
        f".{extension}", OCTET_STREAM
    )
