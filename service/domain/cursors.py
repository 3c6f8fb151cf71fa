"""The cursors of paged lists: an opaque, URL-safe name for the last item of a page, from which
the next page starts. Each list has its own shape of position; a cursor is the position in
unpadded base64url, and decoding checks both the shape and that encoding it again gives the
same text, so each position has exactly one cursor. Anything else is ``BadCursor``
(``service.api.paging`` answers it 400)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from service.domain.aliases import ALIAS_MEMBER
from service.domain.credentials import is_valid_id

# A file's position, ``<ms>:<id>``: every file of a later page sorts before it.
_FILE_POSITION = re.compile(r"^[0-9]{13}:fil_[0-9A-Za-z]{22}$")
# A folder's member among its siblings: a name key is at most 255 characters folded (each to
# at most 3), of up to 4 bytes each, then NUL and the folder's id.
_FOLDER_MEMBER_BYTES = 255 * 3 * 4 + 1 + 26
# An audit event's sequence number.
_EVENT_SEQ = re.compile(r"^[1-9][0-9]{0,15}$")


class BadCursor(ValueError):
    """Not a cursor of this list: not the shape of a position in it (any such position is one)."""


def _encode(position: str) -> str:
    return base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")


def _decode(cursor: str, max_length: int, valid: Callable[[str], bool]) -> str:
    if not 1 <= len(cursor) <= max_length or not cursor.isascii():
        raise BadCursor()
    try:
        position = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor() from None
    if not valid(position) or _encode(position) != cursor:
        raise BadCursor()
    return position


def encode_file_cursor(position: str) -> str:
    return _encode(position)


def decode_file_cursor(cursor: str) -> str:
    """The position (``<ms>:<id>``) a cursor of files names; a page starts after it."""
    return _decode(cursor, 64, lambda position: bool(_FILE_POSITION.match(position)))


def encode_folder_cursor(member: str) -> str:
    return _encode(member)


def _is_folder_member(member: str) -> bool:
    key, nul, folder_id = member.rpartition("\0")
    return bool(nul) and bool(key) and "\0" not in key and is_valid_id(folder_id, "fld")


def decode_folder_cursor(cursor: str) -> str:
    """The child member (name key, NUL, id) a cursor of folders names; a page starts after it."""
    return _decode(cursor, (_FOLDER_MEMBER_BYTES * 4 + 2) // 3, _is_folder_member)


def encode_alias_cursor(score: int, member: str) -> str:
    return _encode(f"{score}|{member}")


def _is_alias_position(text: str) -> bool:
    score, bar, member = text.partition("|")
    return (
        bool(bar)
        and score.isdigit()
        and len(score) <= 16
        and bool(ALIAS_MEMBER.match(member))
        and str(int(score)) == score
    )


def decode_alias_cursor(cursor: str) -> tuple[int, str]:
    """The position (score, member) a cursor of aliases names; a page starts after it."""
    score, _, member = _decode(cursor, 160, _is_alias_position).partition("|")
    return int(score), member


def encode_event_cursor(seq: int) -> str:
    return _encode(str(seq))


def decode_event_cursor(cursor: str) -> int:
    """The sequence number a cursor of audit events names; a page starts below it."""
    return int(_decode(cursor, 32, lambda text: bool(_EVENT_SEQ.match(text))))


# A searched listing's position: the query's digest (16 hex digits), the last file's id and its
# sort value (a name key, or a number's digits), separated by NUL (which neither holds).
_SEARCH_DIGEST = re.compile(r"^[0-9a-f]{16}$")
# A name key is at most 255 characters folded (each to at most 3), of up to 4 bytes each.
_SEARCH_POSITION_BYTES = 16 + 1 + 26 + 1 + 255 * 3 * 4


def encode_search_cursor(digest: str, file_id: str, value: str) -> str:
    return _encode(f"{digest}\0{file_id}\0{value}")


def _is_search_position(text: str) -> bool:
    digest, _, rest = text.partition("\0")
    file_id, nul, value = rest.partition("\0")
    return (
        bool(nul)
        and bool(_SEARCH_DIGEST.match(digest))
        and is_valid_id(file_id, "fil")
        and bool(value)
        and "\0" not in value
    )


def decode_search_cursor(cursor: str) -> tuple[str, str, str]:
    """The (query digest, file id, sort value) a cursor of a searched or re-ordered list of
    files names (``service.domain.file_search``); a page starts after that file."""
    text = _decode(cursor, (_SEARCH_POSITION_BYTES * 4 + 2) // 3, _is_search_position)
    digest, file_id, value = text.split("\0", 2)
    return digest, file_id, value
