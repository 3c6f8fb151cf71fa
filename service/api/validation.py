"""Request bodies: reading JSON safely and checking the fields of each operation.

Every problem becomes a 400 ``ApiError`` (``validation_failed`` and the like) whose ``details``
name each field and why; no value a client sent is echoed back except unknown permission names
and field names, which are not secrets and are what the client needs to fix the request.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, TypeGuard

import orjson
from aiohttp import web

from service.api.context import SETTINGS
from service.auth.api_keys import MAX_GRACE_SECONDS, KeyEdit
from service.auth.rate_limits import KEY_MAX_BURST, KEY_MAX_PER_SECOND
from service.auth.users import MAX_EMAIL_LENGTH, MAX_PASSWORD_LENGTH
from service.domain.account_settings import KEY_EXPIRES_DAYS_MAX
from service.domain.audit_events import MAX_USER_AGENT_LENGTH
from service.domain.key_rules import MAX_ALLOWED_IPS, canonical_network
from service.domain.permissions import MAX_KEY_FOLDERS, PERMISSIONS, unknown_names
from service.domain.uploaders import KINDS
from service.errors import ApiError, Code

MAX_KEY_NAME_LENGTH = 100
MAX_EXPIRES_DAYS = KEY_EXPIRES_DAYS_MAX
# POST /keys/leaked: values per report, and the longest value looked at (a key is 53 characters;
# a scanner may send whatever matched its pattern, so some slack).
MAX_LEAKED_SECRETS = 100
MAX_LEAKED_SECRET_LENGTH = 256


def readable(value: str | None) -> str | None:
    """A header or multipart value as text the service can keep: aiohttp reads header bytes
    that are not UTF-8 as lone surrogates (``surrogateescape``), which neither Redis nor JSON
    can hold; each such byte becomes U+FFFD, as a browser shows it."""
    if value is None or value.isascii():
        return value
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def user_agent(request: web.Request) -> str | None:
    """The request's User-Agent as it is kept (audit events, sessions): readable, at most
    ``MAX_USER_AGENT_LENGTH`` characters, None when absent or empty."""
    agent = readable(request.headers.get("User-Agent"))
    return agent[:MAX_USER_AGENT_LENGTH] if agent else None


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 400/413/415 error."""
    content_type = request.content_type
    if content_type != "application/json" and not (
        content_type.startswith("application/") and content_type.endswith("+json")
    ):
        raise ApiError(Code.UNSUPPORTED_MEDIA_TYPE)
    charset = request.charset
    if charset is not None and charset.lower() != "utf-8":  # JSON is UTF-8 (RFC 8259)
        raise ApiError(
            Code.UNSUPPORTED_MEDIA_TYPE,
            "A JSON body must be UTF-8: send no charset, or charset=utf-8.",
        )
    limit = request.app[SETTINGS].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(Code.PAYLOAD_TOO_LARGE, details={"max_bytes": limit})
    try:
        body = await request.read()  # aiohttp stops reading past client_max_size
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(Code.PAYLOAD_TOO_LARGE, details={"max_bytes": limit}) from None
    # A body that does not decode (web.RequestPayloadError) is the envelope's 400 bad_request,
    # wherever a body is read (envelope.undecodable_body).
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        if str(error).startswith("number is infinity"):  # valid JSON, past what a double holds
            raise ApiError(
                Code.MALFORMED_JSON,
                "The request body holds a number too large to read.",
                details={"body": "holds a number beyond ±1.7976931348623157e308"},
            ) from None
        raise ApiError(Code.MALFORMED_JSON) from None
    if not isinstance(value, dict):
        raise ApiError(Code.BODY_NOT_OBJECT)
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


class _Repeats(dict[str, Any]):
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
    raise ApiError(
        Code.VALIDATION_FAILED, details=problems or {"body": "gives a name more than once"}
    )


def _refuse_unknown_fields(
    body: dict[str, Any], known: tuple[str, ...], problems: dict[str, Any]
) -> None:
    for field in body:
        if field not in known:
            problems[field] = "is not a known field"


def _is_int(value: Any) -> TypeGuard[int]:
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
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
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
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return ChangePasswordRequest(values["current_password"], values["new_password"])


@dataclass(frozen=True, slots=True)
class CreateKeyRequest:
    name: str
    permissions: list[str]  # known names, duplicates folded, in the spec's order
    expires_days: int | None  # None: the account's default_key_expires_days setting
    folder_ids: tuple[str, ...] | None = None  # None: the whole account


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


def _check_permissions(permissions: Any) -> tuple[list[str], Any]:
    """(known names, duplicates folded, in the spec's order; the problem or None)."""
    if not isinstance(permissions, list) or not permissions:
        return [], "is required and must be a non-empty array of permission names"
    if not all(isinstance(item, str) for item in permissions):
        return [], "must contain only strings"
    unknown = unknown_names(permissions)
    if unknown:
        return [], {
            "reason": "contains unknown permission names",
            "unknown": unknown,
            "allowed": list(PERMISSIONS),
        }
    return [name_ for name_ in PERMISSIONS if name_ in set(permissions)], None


def _expires_days(body: dict[str, Any], problems: dict[str, Any]) -> int | None:
    """The body's ``expires_days`` (None when it has none: a default applies), its problem
    noted under the field; null is not a value it may have."""
    if "expires_days" not in body:
        return None
    expires_days = body["expires_days"]
    if not _is_int(expires_days) or not 1 <= expires_days <= MAX_EXPIRES_DAYS:
        problems["expires_days"] = f"must be a whole number from 1 to {MAX_EXPIRES_DAYS}"
    return expires_days  # type: ignore[no-any-return]  # a whole number unless a problem is noted


def _check_folder_ids(value: Any) -> tuple[tuple[str, ...] | None, str | None]:
    """(the folder ids, duplicates folded, in the order given, or None for the whole account;
    the problem or None). Whether each is one of the account's live folders is the policy's
    to say (404 ``folder_not_found``)."""
    if value is None:
        return None, None
    rule = f"must be an array of 1 to {MAX_KEY_FOLDERS} folder ids, or null (the whole account)"
    if not isinstance(value, list) or not value:
        return None, rule
    if len(value) > MAX_KEY_FOLDERS:
        return None, f"must hold at most {MAX_KEY_FOLDERS} folder ids"
    bad = [str(index) for index, item in enumerate(value) if not isinstance(item, str)]
    if bad:
        return None, f"items at positions {', '.join(bad)} (from 0) are not strings"
    return tuple(dict.fromkeys(value)), None


def parse_create_key(body: dict[str, Any]) -> CreateKeyRequest:
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("name", "permissions", "expires_days", "folder_ids"), problems)

    name, problem = _check_name(body.get("name"))
    if problem:
        problems["name"] = problem

    chosen, problem = _check_permissions(body.get("permissions"))
    if problem:
        problems["permissions"] = problem

    expires_days = _expires_days(body, problems)

    folder_ids, problem = _check_folder_ids(body.get("folder_ids"))
    if problem:
        problems["folder_ids"] = problem

    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    assert name is not None
    return CreateKeyRequest(name, chosen, expires_days, folder_ids)


@dataclass(frozen=True, slots=True)
class CreateUploaderRequest:
    kind: str  # one of uploaders.KINDS
    name: str  # the key's name too
    folder_id: str | None  # None: the whole account
    alias: bool
    expires_days: int | None = None  # None: the account's default_key_expires_days setting


def parse_create_uploader(body: dict[str, Any]) -> CreateUploaderRequest:
    """``POST /uploaders``'s body: ``kind`` and ``name`` required, ``folder_id`` (a string, or
    null), ``alias`` (a boolean) and ``expires_days`` (as ``POST /keys`` takes it) optional;
    each problem named under its field."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("kind", "name", "folder_id", "alias", "expires_days"), problems)
    kind = body.get("kind")
    if kind not in KINDS:
        problems["kind"] = f"is required and must be one of: {', '.join(KINDS)}"
    name, problem = _check_name(body.get("name"))
    if problem:
        problems["name"] = problem
    folder_id = body.get("folder_id")
    if folder_id is not None and (not isinstance(folder_id, str) or not 1 <= len(folder_id) <= 64):
        problems["folder_id"] = "must be a folder's id (a string of 1 to 64 characters) or null"
    alias = body.get("alias", False)
    if not isinstance(alias, bool):
        problems["alias"] = "must be true or false"
    expires_days = _expires_days(body, problems)
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    assert name is not None and kind is not None
    return CreateUploaderRequest(kind, name, folder_id, alias, expires_days)


EDIT_KEY_FIELDS = (
    "name",
    "permissions",
    "expires_days",
    "enabled",
    "allowed_ips",
    "rate_limit",
    "folder_ids",
)


def _check_allowed_ips(value: Any) -> tuple[tuple[str, ...], str | None]:
    """(canonical networks, duplicates folded, in the order given; the problem or None). The
    problem names the positions of the items that are not addresses, never the items, counting
    from 1 as a person counts the lines of a list they typed."""
    if value is None:
        return (), None
    if not isinstance(value, list):
        return (), (
            f"must be an array of at most {MAX_ALLOWED_IPS} IPv4/IPv6 addresses or CIDR "
            "networks, or null (from anywhere)"
        )
    if len(value) > MAX_ALLOWED_IPS:
        return (), f"must hold at most {MAX_ALLOWED_IPS} addresses or networks"
    networks = [canonical_network(item) if isinstance(item, str) else None for item in value]
    bad = [str(position) for position, network in enumerate(networks, 1) if network is None]
    if bad:
        return (), (
            f"items at positions {', '.join(bad)} (counting from 1) are not IPv4/IPv6 addresses "
            "or CIDR networks"
        )
    return tuple(dict.fromkeys(networks)), None  # type: ignore[arg-type]  # no None: returned above


def _check_rate_limit(value: Any) -> tuple[tuple[int, int] | None, Any]:
    """((per second, burst) or None for the deployment's; the problems or None)."""
    if value is None:
        return None, None
    if not isinstance(value, dict):
        return None, "must be an object {per_second, burst}, or null (the deployment's rate)"
    problems: dict[str, str] = {}
    _refuse_unknown_fields(value, ("per_second", "burst"), problems)
    bounds = {"per_second": KEY_MAX_PER_SECOND, "burst": KEY_MAX_BURST}
    for field, maximum in bounds.items():
        number = value.get(field)
        if not _is_int(number) or not 1 <= number <= maximum:
            problems[field] = f"is required and must be a whole number from 1 to {maximum}"
    if problems:
        return None, problems
    return (value["per_second"], value["burst"]), None


def parse_edit_key(body: dict[str, Any]) -> KeyEdit:
    """``PATCH /keys/{id}``: any of the fields, each checked like at creation where it exists
    there; a field not given stays as it is."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, EDIT_KEY_FIELDS, problems)
    name = permissions = expires_days = enabled = allowed_ips = rate_limit = None
    if "name" in body:
        name, problem = _check_name(body["name"])
        if problem:
            problems["name"] = problem
    if "permissions" in body:
        permissions, problem = _check_permissions(body["permissions"])
        if problem:
            problems["permissions"] = problem
    expires_days = _expires_days(body, problems)
    if "enabled" in body:
        enabled = body["enabled"]
        if not isinstance(enabled, bool):
            problems["enabled"] = "must be true or false"
    if "allowed_ips" in body:
        allowed_ips, problem = _check_allowed_ips(body["allowed_ips"])
        if problem:
            problems["allowed_ips"] = problem
    if "rate_limit" in body:
        rate_limit, problem = _check_rate_limit(body["rate_limit"])
        if problem:
            problems["rate_limit"] = problem
    folder_ids = None
    if "folder_ids" in body:
        folder_ids, problem = _check_folder_ids(body["folder_ids"])
        if problem:
            problems["folder_ids"] = problem
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return KeyEdit(
        name=name,
        permissions=permissions,
        expires_days=expires_days,
        enabled=enabled,
        allowed_ips=allowed_ips,
        sets_rate_limit="rate_limit" in body,
        rate_limit=rate_limit,
        sets_folder_ids="folder_ids" in body,
        folder_ids=folder_ids,
    )


def parse_roll_key(body: dict[str, Any]) -> int:
    """``POST /keys/{id}/roll``: the grace of the current secret in seconds (default 0)."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("grace_seconds",), problems)
    grace = body.get("grace_seconds", 0)
    if not _is_int(grace) or not 0 <= grace <= MAX_GRACE_SECONDS:
        problems["grace_seconds"] = f"must be a whole number from 0 to {MAX_GRACE_SECONDS}"
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return grace  # type: ignore[no-any-return]  # a whole number: refused above otherwise


def parse_leak_report(body: dict[str, Any]) -> list[str]:
    """``POST /keys/leaked``: ``secrets``, 1 to 100 strings (any string: a value that is no key
    of ours is simply not found). Never echoes a value."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("secrets",), problems)
    secrets = body.get("secrets")
    if not isinstance(secrets, list) or not 1 <= len(secrets) <= MAX_LEAKED_SECRETS:
        problems["secrets"] = (
            f"is required and must be an array of 1 to {MAX_LEAKED_SECRETS} strings"
        )
    elif not all(
        isinstance(item, str) and 1 <= len(item) <= MAX_LEAKED_SECRET_LENGTH for item in secrets
    ):
        problems["secrets"] = (
            f"must contain only strings of 1 to {MAX_LEAKED_SECRET_LENGTH} characters"
        )
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    assert isinstance(secrets, list)
    return secrets
