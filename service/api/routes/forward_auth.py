"""``GET /api/v1/auth/verify``: the answer to a gateway's authentication sub-request (nginx
``auth_request``, Traefik ``ForwardAuth``, Envoy ``ext_authz`` over HTTP).

The gateway forwards the client's ``X-API-Key`` or ``Authorization`` and says what the original
request needs, in one of two ways:

- ``X-Required-Permission: files.read``: a permission name, set per location by the gateway;
- the original request, from which the permission is derived through ``ROUTE_PERMISSIONS``:
  ``X-Original-Method`` + ``X-Original-URI`` (nginx) or ``X-Forwarded-Method`` +
  ``X-Forwarded-Uri`` (Traefik).

When both are given, the credential must hold both permissions. Answers:

- 200, empty body, with ``X-Auth-User-Id``, ``X-Auth-Credential`` (``api_key`` or ``session``),
  ``X-Auth-Key-Id`` (API keys only), ``X-Auth-Permissions`` (comma-separated names in the
  spec's order; a session holds all ten) and, for a key bound to folders only,
  ``X-Auth-Folder-Ids`` (its folders, comma-separated, as its binding lists them now) for the
  gateway to pass upstream. verify checks only the object an original request names and the
  folder it lists (``service.api.verify_binding``): what a collection, a body or an upload
  touches is the upstream's to hold to those folders.
- 401 (with ``WWW-Authenticate``) for a missing, malformed, unknown, revoked or expired
  credential, and also for two credentials or a repeated credential header (400 in the rest of
  the API, but nginx turns any status other than 2xx/401/403 into a 500, and these are the
  client's doing).
- 403 ``insufficient_permission``, ``session_required`` (an API key on ``/api/v1/keys*``, as the
  service itself answers), or ``no_permission_mapping`` (an original request the table does not
  map, or whose path is not in plain form, see ``derive_permission``). Fail closed: what cannot be
  classified is refused. A key bound to folders is also refused (``insufficient_permission``)
  an original request naming a file, folder or alias outside them
  (``service.api.verify_binding``).
- 400 for a misconfigured gateway: ``unknown_permission`` (not one of the ten names),
  ``permission_unspecified`` (neither header way used), ``incomplete_original_request`` (a method
  without a URI or the reverse), ``ambiguous_original_request`` (both nginx and Traefik headers),
  ``duplicate_header``. nginx answers the client 500 for these and logs the status.
- 503 ``store_unavailable`` when Redis cannot be asked; 429 ``rate_limited`` like everywhere.
- 405 for any method but GET (HEAD included): nginx and Traefik send GET.

Every refusal is the usual error envelope plus ``X-Auth-Error: <code>``, which a gateway can copy
into its own error page (nginx cannot pass the sub-request's body on). Nothing of the credential
is ever echoed. The gateway must set or clear ``X-Required-Permission`` and the original-request
headers itself (the examples in ``deploy/`` do): a client must never be able to choose them.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from aiohttp import web
from multidict import CIMultiDictProxy, istr
from redis.exceptions import RedisError

from service.api._aiohttp import Answer, Reply
from service.api.context import AUTHENTICATOR, PREFIX
from service.api.credentials import check_credentials, single_header
from service.api.envelope import as_api_error, note_store_error
from service.api.verify_binding import check_bound_key
from service.auth.authenticator import require
from service.domain.permissions import BIT, BOUND_TO_FOLDERS, to_names
from service.domain.principal import CredentialType
from service.errors import ApiError, Challenge, Code
from service.observability.trace import RequestTrace, current_trace

VERIFY_PATH = f"{PREFIX}/auth/verify"
REQUIRED_PERMISSION = istr("X-Required-Permission")
AUTH_ERROR = "X-Auth-Error"

# The route -> permission map: the first path segment after /api/v1/ names the resource, the
# method picks read or write. Anything else is unmapped (403 no_permission_mapping).
ROUTE_PERMISSIONS: dict[str, tuple[str, str]] = {
    # resource: (permission for GET/HEAD, permission for POST/PUT/PATCH/DELETE)
    "files": ("files.read", "files.write"),
    "folders": ("folders.read", "folders.write"),
    "aliases": ("aliases.read", "aliases.write"),
    "settings": ("settings.read", "settings.write"),
    "keys": ("keys.read", "keys.write"),
    # An uploader is a key made with its configuration: the key endpoints' rule.
    "uploaders": ("keys.read", "keys.write"),
    # A resumable upload is asked about (HEAD) as it is written: by whoever may upload.
    "uploads": ("files.write", "files.write"),
    # What the account holds and what was done in it are account-wide, as its settings are; the
    # activity (as in the API) is a session's.
    "usage": ("settings.read", "settings.write"),
    "audit-events": ("settings.read", "settings.write"),
    # A download ticket is a session's too, taken with a POST that only reads.
    "download-tickets": ("files.read", "files.read"),
}
# Below a resource, a POST that only reads: a selection's ZIP archive takes its ids in the body
# (as GET takes them in the query) and needs what GET needs. Matched exactly: any other spelling
# gets the table's stricter answer.
READING_POSTS: dict[str, str] = {"files/archive": "files.read"}
READ_METHODS = ("GET", "HEAD")
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
# The key endpoints take only a session, whatever a key's permissions (the spec's rule 1), and
# so do the account's activity and its download tickets.
SESSION_ONLY_RESOURCES = frozenset({"keys", "uploaders", "audit-events", "download-tickets"})

_RESOURCE_START = len(PREFIX) + 1
_PREFIX_SEGMENTS = tuple(PREFIX.strip("/").split("/"))
# (method, resource) -> (permission, session only), precomputed from the table above.
_DERIVED: dict[tuple[str, str], tuple[str, bool]] = {
    (method, resource): (permissions[index], resource in SESSION_ONLY_RESOURCES)
    for resource, permissions in ROUTE_PERMISSIONS.items()
    for index, methods in enumerate((READ_METHODS, WRITE_METHODS))
    for method in methods
}
# Header names as multidict's case-insensitive strings, so no answer works out their lower case.
_USER_ID = istr("X-Auth-User-Id")
_CREDENTIAL = istr("X-Auth-Credential")
_KEY_ID = istr("X-Auth-Key-Id")
_PERMISSIONS = istr("X-Auth-Permissions")
_FOLDER_IDS = istr("X-Auth-Folder-Ids")
_CREDENTIAL_NAMES = {kind: kind.value for kind in CredentialType}
_PERMISSION_NAMES: dict[int, str] = {}  # mask -> header value; at most 1024 entries


_ORIGINAL_METHOD = istr("X-Original-Method")
_ORIGINAL_URI = istr("X-Original-URI")
_FORWARDED_METHOD = istr("X-Forwarded-Method")
_FORWARDED_URI = istr("X-Forwarded-Uri")


def _original_request(headers: CIMultiDictProxy[str]) -> tuple[str, str] | None:
    if not (
        _ORIGINAL_METHOD in headers
        or _ORIGINAL_URI in headers
        or _FORWARDED_METHOD in headers
        or _FORWARDED_URI in headers
    ):
        return None  # the common case with X-Required-Permission: no header read twice
    nginx = single_header(headers, _ORIGINAL_METHOD), single_header(headers, _ORIGINAL_URI)
    traefik = single_header(headers, _FORWARDED_METHOD), single_header(headers, _FORWARDED_URI)
    has_nginx = nginx != (None, None)
    if has_nginx and traefik != (None, None):
        raise ApiError(Code.AMBIGUOUS_ORIGINAL_REQUEST)
    method, uri = nginx if has_nginx else traefik
    if method is None and uri is None:
        return None
    if method is None or uri is None:
        raise ApiError(Code.INCOMPLETE_ORIGINAL_REQUEST)
    return method, uri


# Anything in a (percent-decoded) path that an upstream might read differently from this module:
# a control character, a backslash, ``;`` (path parameters: Tomcat/Spring drop ``..;``), ``#``,
# a ``%`` left after decoding (``%25``, so a second decoding; a malformed or ``%u`` escape),
# a ``?`` (``%3F``: an upstream that decodes before it splits reads a query there), ``//``,
# and a segment of only dots and spaces (``.``, ``..``, and ``... `` that Windows trims).
_NOT_PLAIN = re.compile(r"[\x00-\x1f\x7f\\;#%?]|//|/[. ]*\.[. ]*(?=/|$)")


def derive_permission(method: str, uri: str) -> tuple[str, bool] | None:
    """``(permission, session only)`` for the original request, or None when the table does not
    know its resource (then a named permission alone decides). Raises 403
    ``no_permission_mapping`` for a path that is not in plain form: no leading ``/``, a ``#``
    anywhere in the URI, any non-ASCII character (raw or percent-encoded, so also invalid or
    overlong UTF-8 and look-alikes such as fullwidth ``．`` or ``／`` that an upstream may
    normalise), or, after decoding once, anything ``_NOT_PLAIN`` matches. Also for a path that
    names one of the table's resources (or the API's prefix) in any spelling but the canonical
    one, since an upstream may route without regard to case; and for a method outside the
    table, or not in upper case, on one of its resources. The query string is not looked at."""
    if "#" in uri:
        raise ApiError(Code.NO_PERMISSION_MAPPING)
    path = uri.partition("?")[0]
    if not path.isascii():
        raise ApiError(Code.NO_PERMISSION_MAPPING)
    if "%" in path:
        decoded = unquote_to_bytes(path)
        if not decoded.isascii():
            raise ApiError(Code.NO_PERMISSION_MAPPING)
        path = decoded.decode("ascii")
    if not path.startswith("/") or _NOT_PLAIN.search(path):
        raise ApiError(Code.NO_PERMISSION_MAPPING)
    if not path.startswith(PREFIX) or path[_RESOURCE_START - 1 : _RESOURCE_START] != "/":
        segments = path.split("/")[1 : len(_PREFIX_SEGMENTS) + 1]
        if tuple(_folded(segment) for segment in segments) == _PREFIX_SEGMENTS:
            # the API's root, or its prefix spelled otherwise
            raise ApiError(Code.NO_PERMISSION_MAPPING)
        return None
    below = path[_RESOURCE_START:]
    if not below:  # the API's root, with its trailing slash
        raise ApiError(Code.NO_PERMISSION_MAPPING)
    if method == "POST" and below in READING_POSTS:
        return READING_POSTS[below], False
    resource = below.partition("/")[0]
    derived = _DERIVED.get((method, resource))
    if derived is not None:
        return derived
    if resource in ROUTE_PERMISSIONS or _folded(resource) in ROUTE_PERMISSIONS:
        # a known resource with a method outside the table, or spelled otherwise
        raise ApiError(Code.NO_PERMISSION_MAPPING)
    return None


def _folded(segment: str) -> str:
    """A path segment (the prefix's, a resource's name) as a lenient upstream might read it: any
    case, an NTFS stream (``:$DATA``) and trailing dots and spaces dropped (as Windows does)."""
    return segment.lower().partition(":")[0].rstrip(". ")


def _requirement(headers: CIMultiDictProxy[str]) -> tuple[str | None, str | None, bool]:
    """(named permission, derived permission, session only) for this sub-request."""
    named = single_header(headers, REQUIRED_PERMISSION)
    if named is not None and named not in BIT:
        raise ApiError(Code.UNKNOWN_PERMISSION)
    original = _original_request(headers)
    if original is None:
        if named is None:
            raise ApiError(Code.PERMISSION_UNSPECIFIED)
        return named, None, False
    derived = derive_permission(*original)
    if derived is None:
        if named is None:
            raise ApiError(Code.NO_PERMISSION_MAPPING)
        return named, None, False
    return named, derived[0], derived[1]


def _with_auth_error(caught: ApiError | RedisError, trace: RequestTrace) -> ApiError:
    """The refusal of a sub-request, with its code in ``X-Auth-Error`` for the gateway."""
    note_store_error(trace, caught)
    error = as_api_error(caught)
    error.headers = {**error.headers, AUTH_ERROR: error.code}
    return error


def _permission_names(mask: int) -> str:
    names = _PERMISSION_NAMES.get(mask)
    if names is None:
        names = _PERMISSION_NAMES[mask] = ",".join(to_names(mask))
    return names


async def verify(request: web.Request) -> web.Response:
    # The trace is set by request_handling, around every handler.
    return Answer.of(await verify_reply(request.app, request.headers, current_trace.get()))  # type: ignore[arg-type]


async def verify_reply(
    app: web.Application, headers: CIMultiDictProxy[str], trace: RequestTrace
) -> Reply:
    """The answer to a sub-request with ``headers`` (see the module); a gateway route, so also
    served by the gateway lane (``service.api.gateway``)."""
    try:
        named, derived, session_only = _requirement(headers)
        try:
            principal = await check_credentials(
                app[AUTHENTICATOR], headers, trace, session_only=session_only
            )
        except ApiError as error:
            if error.status != 400:
                raise
            # Two credentials, or one sent twice: the client's doing, so 401 (see the module).
            raise ApiError(
                error.code, error.message, headers=Challenge.BEARER.headers, status=401
            ) from None
        if named is not None:
            require(principal, named)
        if derived is not None and derived != named:
            require(principal, derived)
        folder_ids = None
        if principal.permissions & BOUND_TO_FOLDERS:  # a key bound to folders: what it names
            folder_ids = await check_bound_key(
                app, principal, (named, derived), _original_request(headers)
            )
    except (ApiError, RedisError) as caught:  # anything else is the envelope's 500, as anywhere
        # Made by a function of its own: a local of this frame would hold the error that holds
        # the frame (its traceback), a cycle per refusal for the garbage collector.
        raise _with_auth_error(caught, trace) from None
    credential = _CREDENTIAL_NAMES[principal.credential]
    identity: tuple[tuple[str, str], ...] = (
        (_USER_ID, principal.user_id),
        (_CREDENTIAL, credential),
    )
    if principal.key_id is not None:
        identity += ((_KEY_ID, principal.key_id),)
    answer = (*identity, (_PERMISSIONS, _permission_names(principal.permissions)))
    if folder_ids is not None:
        answer += ((_FOLDER_IDS, ",".join(folder_ids)),)
    return Reply(200, None, answer)


def add_forward_auth_routes(app: web.Application) -> None:
    app.router.add_get(VERIFY_PATH, verify, allow_head=False)
