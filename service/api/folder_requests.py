"""The request fields of folders and of a file's rename or move (into a folder), and the query
that names a folder.

As in ``service.api.validation``: every problem is a 400 ``validation_failed`` whose ``details``
name each field and why. A folder id of the right type (a string) that names no folder of the
account is not a problem of the request's shape: the policy answers it 404 ``folder_not_found``,
exactly like another account's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from service.domain.folders import NAME_RULE, TOP, given_name
from service.domain.records import UNSET, Unset
from service.errors import ApiError, Code

_PLACE_RULE = f"must be a folder id, or null (or {TOP}) for the top level"


def _refuse_unknown(body: dict[str, Any], known: tuple[str, ...], problems: dict[str, Any]) -> None:
    for field in body:
        if field not in known:
            problems[field] = "is not a known field"


def _place(body: dict[str, Any], field: str, problems: dict[str, Any]) -> str | Unset | None:
    if field not in body:
        return UNSET
    value = body[field]
    if value is not None and not isinstance(value, str):
        problems[field] = _PLACE_RULE
        return UNSET
    return None if value == TOP else value  # as in a query or an upload's form


def _name(body: dict[str, Any], problems: dict[str, Any], *, required: bool) -> str | None:
    if "name" not in body:
        if required:
            problems["name"] = "is required and " + NAME_RULE
        return None
    name = given_name(body["name"])
    if name is None:
        problems["name"] = NAME_RULE
    return name


def parse_create_folder(body: dict[str, Any]) -> tuple[str, str | None]:
    """``POST /folders``: the name and the parent (None: the top level)."""
    problems: dict[str, str] = {}
    _refuse_unknown(body, ("name", "parent_id"), problems)
    name = _name(body, problems, required=True)
    parent = _place(body, "parent_id", problems)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    assert name is not None
    return name, None if isinstance(parent, Unset) else parent


def parse_edit_folder(body: dict[str, Any]) -> tuple[str | None, str | Unset | None]:
    """``PATCH /folders/{id}``: a new name (None: as it is) and a new parent (``UNSET``: as it
    is; None: the top level)."""
    problems: dict[str, str] = {}
    _refuse_unknown(body, ("name", "parent_id"), problems)
    name = _name(body, problems, required=False)
    parent = _place(body, "parent_id", problems)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return name, parent


def parse_edit_file(body: dict[str, Any]) -> tuple[str | None, str | Unset | None]:
    """``PATCH /files/{id}``: a new name (None: as it is) and a new folder (``UNSET``: as it
    is; None: the top level). A name follows the rules of a folder's."""
    problems: dict[str, str] = {}
    _refuse_unknown(body, ("name", "folder_id"), problems)
    name = _name(body, problems, required=False)
    folder = _place(body, "folder_id", problems)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return name, folder


def folder_query(request: web.Request, name: str) -> str | Unset | None:
    """A folder named in the query string: an id, None for ``root`` (the top level), ``UNSET``
    when absent. Given twice or empty: 400."""
    values = request.query.getall(name, [])
    if not values:
        return UNSET
    if len(values) > 1 or not values[0]:
        raise ApiError(
            Code.VALIDATION_FAILED,
            details={name: f"must be given once: a folder id, or {TOP} for the top level"},
        )
    return None if values[0] == TOP else values[0]
