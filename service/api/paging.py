"""The query of a paged list: ``limit`` (how many items a page holds) and ``cursor`` (the
previous page's ``next_cursor``), read the same way by every list of the API. A value given
twice, a ``limit`` that is not a whole number from 1 to ``MAX_LIMIT`` and a cursor that is not
one this list gave (``service.domain.cursors``) are 400 ``validation_failed`` naming the
parameter."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from aiohttp import web

from service.domain.cursors import BadCursor
from service.errors import ApiError, Code

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

Position = TypeVar("Position")


def page_size(request: web.Request) -> int:
    """``limit``: how many items a page holds, 1 to ``MAX_LIMIT`` (``DEFAULT_LIMIT`` when not
    given)."""
    values = request.query.getall("limit", [])
    if not values:
        return DEFAULT_LIMIT
    raw = values[0]
    if len(values) > 1 or not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise ApiError(
            Code.VALIDATION_FAILED,
            details={"limit": f"must be one whole number from 1 to {MAX_LIMIT}"},
        )
    return int(raw)


def page_cursor(request: web.Request, decode: Callable[[str], Position]) -> Position | None:
    """``cursor``: the position a page starts after, as ``decode`` reads it; None when not
    given (the first page)."""
    values = request.query.getall("cursor", [])
    if not values:
        return None
    try:
        if len(values) > 1:
            raise BadCursor()
        return decode(values[0])
    except BadCursor:
        raise ApiError(
            Code.VALIDATION_FAILED, details={"cursor": "must be the next_cursor of a previous page"}
        ) from None
