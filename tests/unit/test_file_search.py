"""Finding and ordering files (``service.domain.file_search``): type classes, matching, and the
cursors of a searched listing, which go on only with the query they were made for."""

from __future__ import annotations

import pytest

from service.domain.cursors import BadCursor, decode_search_cursor, encode_search_cursor
from service.domain.file_search import (
    FileQuery,
    position_after,
    search_page,
    search_place,
    type_class,
)
from service.domain.records import UNSET, FileRecord


def _file(n: int, name: str, size: int = 1, content_type: str = "text/plain") -> FileRecord:
    return FileRecord(f"fil_{n:022d}", name, size, content_type, "0" * 64, 1000 + n)


def test_type_classes() -> None:
    assert [
        type_class(kind)
        for kind in (
            "image/svg+xml",
            "video/mp4",
            "audio/ogg",
            "text/html",
            "application/pdf",
            "application/octet-stream",
            "application/pdf+x",
        )
    ] == ["image", "video", "audio", "text", "pdf", "other", "other"]


def test_pages_follow_each_other_to_the_end_in_the_order_asked() -> None:
    files = [_file(n, name, size) for n, (name, size) in enumerate([("b", 3), ("A", 1), ("c", 2)])]
    query = FileQuery(None, "-size", None)
    place = search_place(UNSET)
    first = search_page(files, query, place, 2, None)
    assert [record.name for record in first.files] == ["b", "c"]
    assert first.next_cursor is not None
    rest = search_page(files, query, place, 2, position_after(first.next_cursor, query, place))
    assert [record.name for record in rest.files] == ["A"] and rest.next_cursor is None
    by_name = search_page(files, FileQuery("", "name", None), place, 5, None)
    assert [record.name for record in by_name.files] == ["A", "b", "c"]


def test_a_cursor_is_refused_by_any_other_query_or_place() -> None:
    files = [_file(n, f"f{n}") for n in range(3)]
    query = FileQuery("f", "size", "text")
    cursor = search_page(files, query, "*", 1, None).next_cursor
    assert cursor is not None
    assert position_after(cursor, query, "*")
    for other, place in [
        (FileQuery("g", "size", "text"), "*"),
        (FileQuery("f", "-size", "text"), "*"),
        (FileQuery("f", "size", None), "*"),
        (query, "root"),
    ]:
        with pytest.raises(BadCursor):
            position_after(cursor, other, place)
    # A digest that matches with a value not of the order's shape is refused too.
    forged = encode_search_cursor(
        decode_search_cursor(cursor)[0], "fil_" + "0" * 22, "not-a-number"
    )
    with pytest.raises(BadCursor):
        position_after(forged, query, "*")
