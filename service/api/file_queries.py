"""The requests that name files by the many: a listing's search (``q``, ``sort``, ``type``), a
bulk operation's body (``POST /files/bulk``) and an archive's selection (``ids``, in the query
or in the body of ``POST /files/archive``).

As in ``service.api.validation``: a problem of the request's shape is a 400
``validation_failed`` whose ``details`` name each field and why (more ids than taken at once:
400 ``too_many_ids``). An id of the right shape that names no file of the account is not a
problem of the request: the policy answers it ``file_not_found``, exactly like another
account's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.auth.bulk_files import ACTIONS, MAX_BULK_IDS
from service.domain.file_search import (
    DEFAULT_SORT,
    MAX_QUERY_LENGTH,
    SORTS,
    TYPES,
    FileQuery,
    search_words,
)
from service.domain.folders import TOP
from service.errors import ApiError, Code

# The longest string taken as an id (a file id is 26 characters): anything longer is not one,
# and is refused rather than echoed back in a result.
_ID_LENGTH = 64


def _single(request: web.Request, name: str, problems: dict[str, str], rule: str) -> str | None:
    values = request.query.getall(name, [])
    if not values:
        return None
    if len(values) > 1:
        problems[name] = f"is given more than once; {rule}"
        return None
    return values[0]


def search_query(request: web.Request) -> FileQuery | None:
    """The search a ``GET /files`` asks for, or None when it names none of ``q``, ``sort`` and
    ``type`` (the listing as it always was)."""
    query = request.query
    if "q" not in query and "sort" not in query and "type" not in query:
        return None
    problems: dict[str, str] = {}
    text_rule = f"must be 1 to {MAX_QUERY_LENGTH} characters, not only spaces and accents"
    text = _single(request, "q", problems, text_rule)
    if text is not None and (not 1 <= len(text) <= MAX_QUERY_LENGTH or not search_words(text)):
        problems["q"] = text_rule
    sort_rule = "must be one of " + ", ".join(SORTS)
    sort = _single(request, "sort", problems, sort_rule)
    if sort is not None and sort not in SORTS:
        problems["sort"] = sort_rule
    type_rule = "must be one of " + ", ".join(TYPES)
    kind = _single(request, "type", problems, type_rule)
    if kind is not None and kind not in TYPES:
        problems["type"] = type_rule
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return FileQuery(text, sort or DEFAULT_SORT, kind)


def _too_many(count: int, limit: int) -> ApiError:
    return ApiError(
        Code.TOO_MANY_IDS,
        f"At most {limit} ids at once; this request names {count}.",
        details={"max_ids": limit, "ids": count},
    )


def _ids(value: Any, problems: dict[str, Any]) -> list[str]:
    rule = f"must be an array of 1 to {MAX_BULK_IDS} file ids"
    if not isinstance(value, list) or not value:
        problems["ids"] = rule
        return []
    if len(value) > MAX_BULK_IDS:
        raise _too_many(len(value), MAX_BULK_IDS)
    for position, item in enumerate(value):
        if not isinstance(item, str) or not 1 <= len(item) <= _ID_LENGTH:
            problems["ids"] = f"{rule}: item {position + 1} is not a file id"
            return []
    return value


def parse_bulk(body: dict[str, Any]) -> tuple[str, list[str], str | None]:
    """``POST /files/bulk``: the action, the ids in order (as given: duplicates too), and for a
    move the destination (None: the top level)."""
    problems: dict[str, Any] = {}
    for field in body:
        if field not in ("action", "ids", "folder_id"):
            problems[field] = "is not a known field"
    action = body.get("action")
    if action not in ACTIONS:
        problems["action"] = "must be move or delete"
    ids = _ids(body.get("ids"), problems)
    folder = body.get("folder_id")
    if action == "move":
        if "folder_id" not in body:
            problems["folder_id"] = (
                "is required to move: a folder id, or null (or root) for the top level"
            )
        elif folder is not None and not isinstance(folder, str):
            problems["folder_id"] = "must be a folder id, or null (or root) for the top level"
    elif "folder_id" in body and action == "delete":
        problems["folder_id"] = "is only for move"
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return str(action), ids, None if folder == TOP else folder


def parse_archive(body: dict[str, Any]) -> list[str]:
    """``POST /files/archive``: ``{"ids": [...]}``, the ids in order, 1 to ``MAX_BULK_IDS``
    (a selection too long for a request line)."""
    problems: dict[str, Any] = {field: "is not a known field" for field in body if field != "ids"}
    ids = _ids(body.get("ids"), problems)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return ids


def archive_ids(request: web.Request) -> list[str]:
    """``GET /files/archive?ids=fil_a,fil_b``: the ids, in order, 1 to ``MAX_BULK_IDS``."""
    rule = f"must be 1 to {MAX_BULK_IDS} file ids, separated by commas"
    values = request.query.getall("ids", [])
    if len(values) != 1:
        raise ApiError(Code.VALIDATION_FAILED, details={"ids": rule})
    ids = values[0].split(",")
    if len(ids) > MAX_BULK_IDS:
        raise _too_many(len(ids), MAX_BULK_IDS)
    if any(not 1 <= len(item) <= _ID_LENGTH for item in ids):
        raise ApiError(Code.VALIDATION_FAILED, details={"ids": rule})
    return ids
