"""The request fields of vanity aliases (``POST``/``PATCH /aliases``, the list's ``target_id``),
and where an alias's ``url`` points.

As in ``service.api.validation``: every problem is a 400 ``validation_failed`` whose ``details``
name each field and why, and a password is never echoed. An id of the right type that names no
file or folder of the account is not a problem of the request's shape: the policy answers it 404
(``file_not_found``/``folder_not_found`` naming the field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from aiohttp import web

from service.api.client_address import is_trusted_proxy
from service.api.context import SETTINGS
from service.auth.aliases import AliasChanges
from service.domain.aliases import (
    MAX_EXPIRES_SECONDS,
    MAX_VIEWS,
    MIN_EXPIRES_SECONDS,
    PASSWORD_MAX,
    PASSWORD_MIN,
    slug_problem,
)
from service.domain.credentials import is_valid_id
from service.domain.records import UNSET, Unset
from service.errors import ApiError, Code

_EXPIRES_RULE = (
    f"must be a whole number of seconds from {MIN_EXPIRES_SECONDS} to {MAX_EXPIRES_SECONDS}, "
    "or null for never"
)
_MAX_VIEWS_RULE = f"must be a whole number from 1 to {MAX_VIEWS}, or null for unlimited"
_PASSWORD_RULE = f"must be {PASSWORD_MIN} to {PASSWORD_MAX} characters, or null for none"
_TARGET_RULE = "give exactly one of file_id and folder_id, an id as a string"
_ID_FIELDS = ("file_id", "folder_id")
_CREATE_FIELDS = (*_ID_FIELDS, "slug", "expires_in_seconds", "max_views", "password", "enabled")
_EDIT_FIELDS = ("slug", "expires_in_seconds", "max_views", "password", "enabled")


@dataclass(frozen=True, slots=True)
class CreateAlias:
    kind: str  # "file" or "folder"
    target_id: str
    field: str  # the request's field that named it
    slug: str | None
    expires_in_seconds: int | Unset | None
    max_views: int | Unset | None
    password: str | None
    enabled: bool


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown(body: dict[str, Any], known: tuple[str, ...], problems: dict[str, str]) -> None:
    for field in body:
        if field not in known:
            problems[field] = "is not a known field"


def _bounded(
    body: dict[str, Any], field: str, low: int, high: int, rule: str, problems: dict[str, str]
) -> int | Unset | None:
    if field not in body:
        return UNSET
    value = body[field]
    if value is None:
        return None
    if _is_int(value) and low <= value <= high:
        return value
    problems[field] = rule
    return UNSET


def _fields(body: dict[str, Any], problems: dict[str, str]) -> dict[str, Any]:
    """The fields creating and changing share, checked."""
    found: dict[str, Any] = {}
    if "slug" in body:
        problem = slug_problem(body["slug"])
        if problem:
            problems["slug"] = problem
        else:
            found["slug"] = body["slug"]
    found["expires_in_seconds"] = _bounded(
        body,
        "expires_in_seconds",
        MIN_EXPIRES_SECONDS,
        MAX_EXPIRES_SECONDS,
        _EXPIRES_RULE,
        problems,
    )
    found["max_views"] = _bounded(body, "max_views", 1, MAX_VIEWS, _MAX_VIEWS_RULE, problems)
    found["password"] = UNSET
    if "password" in body:
        password = body["password"]
        if password is None or (
            isinstance(password, str) and PASSWORD_MIN <= len(password) <= PASSWORD_MAX
        ):
            found["password"] = password
        else:
            problems["password"] = _PASSWORD_RULE
    if "enabled" in body:
        if isinstance(body["enabled"], bool):
            found["enabled"] = body["enabled"]
        else:
            problems["enabled"] = "must be true or false"
    return found


def parse_create_alias(body: dict[str, Any]) -> CreateAlias:
    """``POST /aliases``: the target (``file_id`` or ``folder_id``) and the optional fields."""
    problems: dict[str, str] = {}
    _unknown(body, _CREATE_FIELDS, problems)
    named = [field for field in _ID_FIELDS if field in body]
    if len(named) != 1 or not isinstance(body[named[0]], str):
        for field in named or ["file_id"]:
            problems[field] = _TARGET_RULE
    found = _fields(body, problems)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    field = named[0]
    return CreateAlias(
        kind="file" if field == "file_id" else "folder",
        target_id=body[field],
        field=field,
        slug=found.get("slug"),
        expires_in_seconds=found["expires_in_seconds"],
        max_views=found["max_views"],
        password=None if isinstance(found["password"], Unset) else found["password"],
        enabled=found.get("enabled", True),
    )


def parse_edit_alias(body: dict[str, Any]) -> AliasChanges:
    """``PATCH /aliases/{id}``: any of the fields; absent ones stay as they are."""
    problems: dict[str, str] = {}
    _unknown(body, _EDIT_FIELDS, problems)
    found = _fields(body, problems)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return AliasChanges(
        slug=found.get("slug"),
        expires_in_seconds=found["expires_in_seconds"],
        max_views=found["max_views"],
        password=found["password"],
        enabled=found.get("enabled"),
    )


def target_query(request: web.Request) -> str | None:
    """``GET /aliases?target_id=``: the file or folder whose aliases alone are listed; None
    when not given. Given twice, or not the shape of a file's or folder's id: 400."""
    values = request.query.getall("target_id", [])
    if not values:
        return None
    if len(values) > 1 or not (is_valid_id(values[0], "fil") or is_valid_id(values[0], "fld")):
        raise ApiError(
            Code.VALIDATION_FAILED,
            details={"target_id": "must be given once: a file's or a folder's id"},
        )
    return values[0]


# A Host header as this service takes it for a URL: a name or an address, and a port.
_HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$"
)


def public_origin(request: web.Request) -> str:
    """Where people reach the service, for an alias's ``url``: ``FILEHOST_PUBLIC_URL``, else
    the request's own origin: its Host, and its scheme (from a trusted proxy, its
    ``X-Forwarded-Proto``; a client's own is never believed). A Host that is not a plain name
    or address gives ``localhost``: set ``FILEHOST_PUBLIC_URL``."""
    settings = request.app[SETTINGS]
    if settings.public_url is not None:
        return settings.public_url
    scheme = request.scheme
    if is_trusted_proxy(request.remote, settings.trusted_proxies):
        forwarded = request.headers.getall("X-Forwarded-Proto", [])
        if len(forwarded) == 1 and forwarded[0].strip().lower() in ("http", "https"):
            scheme = forwarded[0].strip().lower()
    host = request.headers.get("Host", "")
    if not _HOST.match(host):
        host = "localhost"
    return f"{scheme}://{host}"
