"""Forward-auth for an API key bound to folders: what ``GET /api/v1/auth/verify`` asks of such a
key beyond its permissions, so that a gateway passes on only requests for what lies inside its
folders (``service.auth.reach`` decides what that is, as for the API itself), and the folders
themselves, which the gateway passes upstream (``X-Auth-Folder-Ids``).

Run only for a bound key (its mask says so, at no cost to any other credential), after the
permission checks, with one read, which also reads the key's folders as its binding lists them
then (so a change of the binding holds from the next request):

- a settings permission (named or derived) is 403: the settings are the whole account's;
- an original request naming a file (``/api/v1/files/{id}``, and anything below it), a folder
  (``/api/v1/folders/{id}``) or a listing of one (``folder_id`` of ``/api/v1/files``,
  ``parent_id`` of ``/api/v1/folders``, ``root`` included) outside the key's folders is 403
  ``insufficient_permission``: to the gateway an unknown id and one outside are the same, so
  it learns nothing it could not from the API;
- an alias (``/api/v1/aliases/{id}``) whose target is outside them is 403, as is an unknown
  one: the alias is read as ``GET /aliases/{id}`` reads it, so ``Reach.alias`` decides (one
  read more, for the folders);
- a query naming a listed folder in a way other frameworks read as its field and ``parse_qs``
  does not (``folder_id[]=``, ``FOLDER_ID=``, see ``_LIKE_A_LISTED_FIELD``) is 403 as one
  outside, whatever the path: the upstream may list that folder;
- ``/api/v1/files/bulk`` and ``/api/v1/files/archive`` name many files, in a body or a query
  the service checks file by file: collections, passed as any other (the service answers each
  file outside ``file_not_found``); a folder's archive names its folder, checked as above;
- anything else (a collection, a body, an upload): 403 when the key reaches nothing (its
  folders were all deleted), else passed, for the upstream to hold to the folders it is told.

The path is read as ``forward_auth.derive_permission`` read it (decoded once, already checked to
be in plain form); the query string only here, split on ``;`` as well as ``&``, and a folder
named twice in it is refused.
"""

from __future__ import annotations

import asyncio
import re
from urllib.parse import unquote, unquote_plus

from aiohttp import web

from service.api.context import POLICY, PREFIX
from service.auth.policy import Policy
from service.domain.folders import TOP
from service.domain.principal import Principal
from service.errors import ApiError, Code

# The query field of a collection that names the folder it lists.
_LISTED_FOLDER = {"files": "folder_id", "folders": "parent_id"}
_LISTED_FIELDS = frozenset(_LISTED_FOLDER.values())
# A query name, decoded once (so ``%5B``, ``%5b`` and ``folder%5Fid`` too), that some upstream
# reads as a listed folder's field though it is not exactly that: PHP, Rails and qs read
# ``folder_id[]`` and ``folder_id[0]`` as the field (qs with allowDots ``folder_id.x`` too),
# PHP reads ``.`` and a space as ``_`` and drops leading spaces, ASP.NET Core ignores case, and
# an upstream that decodes again reads a ``%`` left after the first decoding.
_LIKE_A_LISTED_FIELD = re.compile(r" *(?:folder|parent)[_. ]id(?:$|[\[.%])", re.IGNORECASE)
# Where a query's fields part: Rack (Rails) before 3 splits on ``;`` as well as ``&``.
_FIELD_SEPARATOR = re.compile("[&;]")
# Paths below a resource that name many of its items rather than one (``/files/bulk``,
# ``/files/archive``): collections, whose items the service checks one by one.
_MANY = {"bulk", "archive"}


def _outside() -> ApiError:
    return ApiError(
        Code.INSUFFICIENT_PERMISSION,
        "The original request names something outside the folders this API key is bound to.",
        details={"bound_to_folders": True},
    )


def _listed_folders(query: str) -> dict[str, list[str]]:
    """The values of each listed folder's field in ``query`` (decoded as ``parse_qs`` decodes
    them), split wherever an upstream may split it; 403 for a name an upstream may read as
    one of those fields that is not exactly it."""
    listed: dict[str, list[str]] = {}
    for pair in _FIELD_SEPARATOR.split(query):
        name, _, value = pair.partition("=")
        name = unquote_plus(name)
        if name in _LISTED_FIELDS:
            listed.setdefault(name, []).append(unquote_plus(value))
        elif _LIKE_A_LISTED_FIELD.match(name):
            raise _outside()
    return listed


def _named(uri: str) -> tuple[str, str | None, list[str] | None] | None:
    """(resource, the id the path names or None, the folders the query names or None) for an
    original request to the API's files, folders or aliases; None for anything else. Raises
    403 for a query naming a listed folder in another spelling, whatever the path."""
    path, _, query = uri.partition("?")
    listed_folders = _listed_folders(query) if query else {}
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
        listed = listed_folders.get(field)
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


async def _check(policy: Policy, principal: Principal, uri: str | None) -> list[str]:
    """The key's folders, once what ``uri`` names is found inside them (see the module)."""
    reach = policy.reach
    named = _named(uri) if uri is not None else None
    if named is None:
        return await reach.bound_folders(principal)
    resource, named_id, listed = named
    if named_id is not None:
        if resource == "files":
            return await reach.bound_folders(principal, ("file", named_id))
        if resource == "folders":
            return await reach.bound_folders(principal, ("folder", named_id))
        if await asyncio.create_task(_alias_outside(policy, principal, named_id)):
            # In a task: the aliases' store reads through redis-py, which needs one; the gateway
            # lane runs without one, and only a bound key naming an alias comes here.
            raise _outside()
        return await reach.bound_folders(principal)
    if listed is not None:
        if len(listed) != 1:
            raise _outside()
        folder_id = listed[0]
        # The top level ('' in the store) is never inside a key's folders.
        return await reach.bound_folders(
            principal, ("folder", "" if folder_id == TOP else folder_id)
        )
    return await reach.bound_folders(principal)


async def check_bound_key(
    app: web.Application,
    principal: Principal,
    permissions: tuple[str | None, str | None],
    original: tuple[str, str] | None,
) -> list[str]:
    """Refuse (403) what a bound key may not pass with (see the module): ``permissions`` the
    named and derived ones, ``original`` the original request (method, URI) when given. The
    key's folders as its binding lists them now, for the gateway to pass upstream."""
    policy: Policy = app[POLICY]
    if any(p is not None and p.startswith("settings.") for p in permissions):
        policy.reach.whole_account(principal)
    try:
        return await _check(policy, principal, original[1] if original is not None else None)
    except ApiError as error:
        if error.status == 404:
            raise _outside() from None
        raise
