"""Request bodies: reading JSON safely and checking the fields of each operation.

Every problem becomes a ``BadRequest``/``ValidationFailed`` whose ``details`` name each field and
why; no value a client sent is echoed back except unknown permission names and field names,
which are not secrets and are what the client needs to fix the request.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from service.api.context import SETTINGS
from service.auth.accounts import MAX_EMAIL_LENGTH, MAX_PASSWORD_LENGTH
from service.auth.permissions import PERMISSIONS, unknown_names
from service.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType, ValidationFailed

MAX_KEY_NAME_LENGTH = 100
DEFAULT_EXPIRES_DAYS = 90
MAX_EXPIRES_DAYS = 365


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400/413/415 error."""
    content_type = request.content_type
    if content_type != "application/json" and not (
        content_type.startswith("application/") and content_type.endswith("+json")
    ):
        raise UnsupportedMediaType()
    charset = request.charset
    if charset is not None and charset.lower() != "utf-8":  # JSON is UTF-8 (RFC 8259)
        raise UnsupportedMediaType("A JSON body must be UTF-8: send no charset, or charset=utf-8.")
    limit = request.app[SETTINGS].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(details={"max_bytes": limit})
    try:
        body = await request.read()  # aiohttp stops reading past client_max_size
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(details={"max_bytes": limit}) from None
    except web.RequestPayloadError:  # e.g. a Content-Encoding stream that does not decode
        raise BadRequest("The request body could not be decoded.", code="bad_request") from None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest("The request body is not valid JSON.", code="malformed_json") from None
    if not isinstance(value, dict):
        raise BadRequest("The request body must be a JSON object.", code="body_not_object")
    if _members_written(body) != _members_kept(value):
        _refuse_repeated_names(body)
    return value


# Every JSON string, and whether a ``:`` follows it (it is then an object member's name). Run
# over a body orjson accepted, each match starts at an opening quote, as nothing but strings holds
# a quote in valid JSON.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"([ \t\n\r]*:)?', re.DOTALL)


def _members_written(body: bytes) -> int:
    """How many object members the JSON text holds, repeated names included."""
    followers = _STRING.findall(body)
    return len(followers) - followers.count(b"")


def _members_kept(value: Any) -> int:
    """How many object members the parsed value holds (orjson keeps the last of a repeated
    name). Iterative: orjson parses up to 1024 levels, past Python's recursion limit."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


class _Repeats(dict):  # type: ignore[type-arg]
    """An object in which a name was written more than once."""

    names: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    kept = dict(pairs)
    if len(kept) == len(pairs):
        return kept
    repeats = _Repeats(kept)
    repeats.names = []
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen and name not in repeats.names:
            repeats.names.append(name)
        seen.add(name)
    return repeats


def _holds_repeats(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Repeats):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _refuse_repeated_names(body: bytes) -> None:
    """A name written twice in one object is refused rather than read as its last value (what
    orjson does), since another reader of the same body may take the first. Only reached when the
    counts above differ; the stdlib parser then names the fields."""
    problems: dict[str, str] = {}
    try:
        value = json.loads(body, object_pairs_hook=_pairs)
    except RecursionError:  # nested deeper than the stdlib parser goes: say so without names
        value = None
    if isinstance(value, dict):
        for name in value.names if isinstance(value, _Repeats) else ():
            problems[name] = "is given more than once"
        for name, item in value.items():
            if name not in problems and _holds_repeats(item):
                problems[name] = "holds an object that gives a name more than once"
    raise ValidationFailed(details=problems or {"body": "gives a name more than once"})


def _refuse_unknown_fields(body: dict[str, Any], known: tuple[str, ...], problems: dict) -> None:
    for field in body:
        if field not in known:
            problems[field] = "is not a known field"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class LoginRequest:
    email: str
    password: str


def parse_login(body: dict[str, Any]) -> LoginRequest:
    problems: dict[str, str] = {}
    _refuse_unknown_fields(body, ("email", "password"), problems)
    email = body.get("email")
    password = body.get("password")
    if not isinstance(email, str) or not email.strip():
        problems["email"] = "is required and must be a non-empty string"
    elif len(email.strip()) > MAX_EMAIL_LENGTH:
        problems["email"] = f"must be at most {MAX_EMAIL_LENGTH} characters"
    if not isinstance(password, str) or not password:
        problems["password"] = "is required and must be a non-empty string"  # noqa: S105
    elif len(password) > MAX_PASSWORD_LENGTH:
        problems["password"] = f"must be at most {MAX_PASSWORD_LENGTH} characters"
    if problems:
        raise ValidationFailed(details=problems)
    assert isinstance(email, str) and isinstance(password, str)
    return LoginRequest(email, password)


@dataclass(frozen=True, slots=True)
class ChangePasswordRequest:
    current_password: str
    new_password: str


def parse_change_password(body: dict[str, Any]) -> ChangePasswordRequest:
    """Both fields required non-empty strings of at most ``MAX_PASSWORD_LENGTH``; the new
    password's minimum length is the policy's (``Accounts.change_password``), as for users."""
    problems: dict[str, str] = {}
    _refuse_unknown_fields(body, ("current_password", "new_password"), problems)
    values = {}
    for field in ("current_password", "new_password"):
        value = body.get(field)
        if not isinstance(value, str) or not value:
            problems[field] = "is required and must be a non-empty string"
        elif len(value) > MAX_PASSWORD_LENGTH:
            problems[field] = f"must be at most {MAX_PASSWORD_LENGTH} characters"
        else:
            values[field] = value
    if problems:
        raise ValidationFailed(details=problems)
    return ChangePasswordRequest(values["current_password"], values["new_password"])


@dataclass(frozen=True, slots=True)
class CreateKeyRequest:
    name: str
    permissions: list[str]  # known names, duplicates folded, in the spec's order
    expires_days: int


def _check_name(value: Any) -> tuple[str | None, str | None]:
    if not isinstance(value, str):
        return None, "is required and must be a string"
    name = value.strip()
    if not name:
        return None, "must not be empty"
    if len(name) > MAX_KEY_NAME_LENGTH:
        return None, f"must be at most {MAX_KEY_NAME_LENGTH} characters"
    if any(unicodedata.category(char) == "Cc" for char in name):
        return None, "must not contain control characters"
    return name, None


def parse_create_key(body: dict[str, Any]) -> CreateKeyRequest:
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("name", "permissions", "expires_days"), problems)

    name, problem = _check_name(body.get("name"))
    if problem:
        problems["name"] = problem

    permissions = body.get("permissions")
    chosen: list[str] = []
    if not isinstance(permissions, list) or not permissions:
        problems["permissions"] = "is required and must be a non-empty array of permission names"
    elif not all(isinstance(item, str) for item in permissions):
        problems["permissions"] = "must contain only strings"
    else:
        unknown = unknown_names(permissions)
        if unknown:
            problems["permissions"] = {
                "reason": "contains unknown permission names",
                "unknown": unknown,
                "allowed": list(PERMISSIONS),
            }
        else:
            chosen = [name_ for name_ in PERMISSIONS if name_ in set(permissions)]

    expires_days = body.get("expires_days", DEFAULT_EXPIRES_DAYS)
    if not _is_int(expires_days) or not 1 <= expires_days <= MAX_EXPIRES_DAYS:
        problems["expires_days"] = f"must be a whole number from 1 to {MAX_EXPIRES_DAYS}"

    if problems:
        raise ValidationFailed(details=problems)
    assert name is not None
    return CreateKeyRequest(name, chosen, expires_days)
