"""Finding and ordering files: a listing's query (a name to look for, an order, a type class),
which files it keeps, in which order, and the cursor that goes on from a page of it. Pure
functions over records already read, no I/O.

A name matches when it holds every word of the query (split at white space), in any order, as
substrings, both folded (``search_form``): fully case-folded in Unicode NFC
(``domain.folders.name_key``), so ``straße`` finds ``STRASSE.txt``, and without accents, so
``resume`` finds ``Résumé.pdf`` (and ``résumé`` finds ``RESUME.txt``); ``april invoice`` finds
``Invoice_April.pdf``. The type class is read from the stored ``content_type``: ``image/*``,
``video/*``, ``audio/*``, ``text/*``, ``application/pdf``, and ``other`` for everything else.
Every order ends with the file's id, so no two files tie and a page never skips or repeats one.

A cursor of such a listing names its query (a short digest of the name, order, type and
place it was made for), the last file's sort value and its id: sent with another query it is
refused as any cursor that is not this list's, never read as a position in another order.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from service.domain.cursors import BadCursor, decode_search_cursor, encode_search_cursor
from service.domain.folders import TOP, name_key
from service.domain.records import FilePage, FileRecord, Unset

MAX_QUERY_LENGTH = 100
# More records than a listing's page (its limit is at most 1000) are a whole account's or
# folder's, read for a search: reading and searching that many at once would hold up every
# other request of the worker for as long, so they are read and searched a part at a time
# (``RECORDS_AT_ONCE``), the worker answering other requests between the parts.
WHOLE_LISTING_FROM = 1001
RECORDS_AT_ONCE = 250
SORTS = ("name", "-name", "created_at", "-created_at", "size", "-size")
DEFAULT_SORT = "-created_at"
TYPES = ("image", "video", "audio", "text", "pdf", "other")
_TYPE_PREFIXES = {"image/": "image", "video/": "video", "audio/": "audio", "text/": "text"}
# The Combining Diacritical Marks block (U+0300 to U+036F): the accents of Latin, Greek and
# Cyrillic letters once decomposed. Marks of other scripts (Devanagari's vowel signs, Hebrew's
# points) spell different words, so a search keeps them.
_ACCENTS = dict.fromkeys(range(0x0300, 0x0370))

# A file's place in an order: its sort value as text (a number zero-padded, so that text order
# is number order), then its id.
SortKey = tuple[str, str]
_DIGITS = 20


@dataclass(frozen=True, slots=True)
class FileQuery:
    """What a listing asks for beyond a page: ``text`` in the name (None: any), the order
    (one of ``SORTS``), the type class (one of ``TYPES``, None: any)."""

    text: str | None = None
    sort: str = DEFAULT_SORT
    kind: str | None = None


def type_class(content_type: str) -> str:
    """The class of a stored ``type/subtype``: one of ``TYPES``."""
    if content_type == "application/pdf":
        return "pdf"
    for prefix, kind in _TYPE_PREFIXES.items():
        if content_type.startswith(prefix):
            return kind
    return "other"


def search_form(text: str) -> str:
    """How a query and a name compare: fully case-folded in Unicode NFC (``name_key``), then
    without the accents of ``_ACCENTS``."""
    folded = name_key(text)
    if folded.isascii():  # no accent to take off
        return folded
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", folded).translate(_ACCENTS))


def search_words(text: str) -> list[str]:
    """The words of a query, each in its ``search_form``: a name matches when it holds every
    one of them, in any order. Empty for a query of only spaces and accents."""
    return search_form(text).split()


def _field(sort: str) -> str:
    return sort.removeprefix("-")


def _key(record: FileRecord, field: str) -> SortKey:
    if field == "name":
        return name_key(record.name), record.id
    if field == "size":
        return f"{record.size:0{_DIGITS}d}", record.id
    return f"{record.created_at:0{_DIGITS}d}", record.id


def search_place(folder_id: str | Unset | None) -> str:
    """The place a listing covers, as its cursors name it: a folder's id, ``root`` for the
    top level, ``*`` for every file the caller reaches."""
    if isinstance(folder_id, Unset):
        return "*"
    return TOP if folder_id is None else folder_id


def fingerprint(query: FileQuery, place: str) -> str:
    """A short digest of the query and the place listed (a folder id, ``root``, or ``*`` for
    the whole account): what a cursor of this listing carries."""
    named = "\0".join((query.text or "", query.sort, query.kind or "", place))
    return hashlib.sha256(named.encode()).hexdigest()[:16]


def position_after(cursor: str, query: FileQuery, place: str) -> SortKey:
    """Where a page of ``query`` over ``place`` starts, from the ``cursor`` of the one before;
    ``BadCursor`` for one made for another query, place or order."""
    digest, file_id, value = decode_search_cursor(cursor)
    if digest != fingerprint(query, place):
        raise BadCursor()
    if _field(query.sort) == "name":
        return value, file_id
    if not value.isascii() or not value.isdigit() or len(value) != _DIGITS:
        raise BadCursor()
    return value, file_id


def name_holds(name: str, words: list[str]) -> bool:
    """Whether a file's name holds every one of a query's ``search_words``."""
    form = search_form(name)
    return all(word in form for word in words)


Keyed = list[tuple[SortKey, FileRecord]]


def kept(records: Iterable[FileRecord], query: FileQuery, after: SortKey | None) -> Keyed:
    """The ``records`` ``query`` keeps that come after the position ``after``
    (``position_after``), each with its place in the query's order: what ``ordered_page``
    orders, for records read a part at a time."""
    words = None if query.text is None else search_words(query.text)
    field = _field(query.sort)
    descending = query.sort.startswith("-")
    found: Keyed = []
    for record in records:
        if words is not None and not name_holds(record.name, words):
            continue
        if query.kind is not None and type_class(record.content_type) != query.kind:
            continue
        key = _key(record, field)
        if after is None or (key < after if descending else key > after):
            found.append((key, record))
    return found


def ordered_page(keyed: Keyed, query: FileQuery, place: str, limit: int) -> FilePage:
    """A page of what ``kept`` kept, in the query's order, with the cursor of the next page."""
    keyed.sort(key=lambda pair: pair[0], reverse=query.sort.startswith("-"))
    page = keyed[:limit]
    next_cursor = None
    if len(keyed) > limit:
        (value, file_id), _ = page[-1]
        next_cursor = encode_search_cursor(fingerprint(query, place), file_id, value)
    return FilePage([record for _, record in page], next_cursor)


def search_page(
    records: Iterable[FileRecord],
    query: FileQuery,
    place: str,
    limit: int,
    after: SortKey | None,
) -> FilePage:
    """A page of ``records`` as ``query`` keeps and orders them, after the position ``after``
    (``position_after``), with the cursor of the next page."""
    return ordered_page(kept(records, query, after), query, place, limit)
