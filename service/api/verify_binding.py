"""Forward-auth for an API key bound to folders: what ``GET /api/v1/auth/verify`` asks of such a
key beyond its permissions, so that a gateway passes on only requests for what lies inside its
folders (``service.auth.reach`` decides what that is, as for the API itself).

Run only for a bound key (its mask says so, at no cost to any other credential), after the
permission checks, with one read:

- a settings permission (named or derived) is 403: the settings are the whole account's;
- an original request naming a file (``/api/v1/files/{id}``, and anything below it), a folder
  (``/api/v1/folders/{id}``) or a listing of one (``folder_id`` of ``/api/v1/files``,
  ``parent_id`` of ``/api/v1/folders``, ``root`` included) outside the key's folders is 403
  ``insufficient_permission``: to the gateway an unknown id and one outside are the same, so
  it learns nothing it could not from the API;
- an alias (``/api/v1/aliases/{id}``) whose target is outside them is 403, as is an unknown
  one: the alias is read as ``GET /aliases/{id}`` reads it, so ``Reach.alias`` decides;
- ``/api/v1/files/bulk`` and ``/api/v1/files/archive`` name many files, in a body or a query
  the service checks file by file: collections, passed as any other (the service answers each
  file outside ``file_not_found``); a folder's archive names its folder, checked as above;
- anything else: 403 when the key reaches nothing (its folders were all deleted).

The path is read as ``forward_auth.derive_permission`` read it (decoded once, already checked to
be in plain form); the query string only here, and a folder named twice in it is refused.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, unquote

from aiohttp import web

from service.api.context import POLICY, PREFIX
from service.auth.policy import Policy
from service.domain.folders import TOP
from service.domain.principal import Principal
from service.errors import ApiError, Code

# The query field of a collection that names the folder it lists.
_LISTED_FOLDER = {"files": "folder_id", "folders": "parent_id"}
# Paths below a resource that name many of its items rather than one (``/files/bulk``,
# ``/files/archive``): collections, whose items the service checks one by one.
_MANY = {"bulk", "archive"}


def _outside() -> ApiError:
    return ApiError(
        Code.INSUFFICIENT_PERMISSION,
        "The original request names something outside the folders this API key is bound to.",
        details={"bound_to_folders": True},
    )


def _named(uri: str) -> tuple[str, str | None, list[str] | None] | None:
    """(resource, the id the path names or None, the folders the query names or None) for an
    original request to the API's files, folders or aliases; None for anything else."""
    path, _, query = uri.partition("?")
    if "%" in path:
        path = unquote(path)
    if not path.startswith(PREFIX + "/"):
        return None
    resource, _, rest = path[len(PREFIX) + 1 :].partition("/")
    if resource not in ("files", "folders", "aliases"):
        return None
    named_id = rest.partition("/")[0] or None
    if resource == "files" and named_id in _MANY and rest == named_id:
        named_id = None
    listed = None
    field = _LISTED_FOLDER.get(resource)
    if named_id is None and field is not None:
        listed = parse_qs(query, keep_blank_values=True).get(field)
    return resource, named_id, listed


async def _alias_outside(policy: Policy, principal: Principal, alias_id: str) -> bool:
    """Whether the alias is one the key cannot reach. A refusal is an answer here, not an error
    out of the task: the task would keep it, and its traceback the frames awaiting the task, in a
    cycle left for the garbage collector (from Python 3.12)."""
    try:
        await policy.aliases.get(principal, alias_id)
    except ApiError as error:
        if error.status == 404:
            return True
        raise
    return False


async def _check(policy: Policy, principal: Principal, uri: str | None) -> None:
    reach = policy.reach
    named = _named(uri) if uri is not None else None
    if named is None:
        await reach.reaches_something(principal)
        return
    resource, named_id, listed = named
    if named_id is not None:
        if resource == "files":
            await reach.file(principal, named_id)
        elif resource == "folders":
            await reach.folder(principal, named_id)
        elif await asyncio.create_task(_alias_outside(policy, principal, named_id)):
            # In a task: the aliases' store reads through redis-py, which needs one; the gateway
            # lane runs without one, and only a bound key naming an alias comes here.
            raise _outside()
    elif listed is not None:
        if len(listed) != 1:
            raise _outside()
        folder_id = listed[0]
        await reach.listing(principal, None if folder_id == TOP else folder_id, "folder_id")
    else:
        await reach.reaches_something(principal)


async def check_bound_key(
    app: web.Application,
    principal: Principal,
    permissions: tuple[str | None, str | None],
    original: tuple[str, str] | None,
) -> None:
    """Refuse (403) what a bound key may not pass with (see the module): ``permissions`` the
    named and derived ones, ``original`` the original request (method, URI) when given."""
    policy: Policy = app[POLICY]
    if any(p is not None and p.startswith("settings.") for p in permissions):
        policy.reach.whole_account(principal)
    try:
        await _check(policy, principal, original[1] if original is not None else None)
    except ApiError as error:
        if error.status == 404:
            raise _outside() from None
        raise
