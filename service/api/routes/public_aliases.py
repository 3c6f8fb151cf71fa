"""The public side of vanity aliases, without a credential: ``GET``/``HEAD /a/{slug}`` (a file's
bytes, or a folder's listing as JSON or HTML), ``GET``/``HEAD /a/{slug}/{file_id or folder_id}``
(what lies in an aliased folder's subtree), and ``POST /a/{slug}``, where the password form of a
protected alias posts.

The HTTP layer only: what the request asks (a view counted or not, a password in
``X-Alias-Password`` or the form, the cookie a folder's password granted, JSON or HTML) and the
answer's shape. A file's bytes go out through ``routes.files.send_file``, exactly as
``GET /files/{id}/content`` sends them. What is decided (which alias may be used, its views, its
password, what it reaches) is ``service.auth.alias_access``.

Once this worker has served a small file whole through an alias without a password, the
alias's next plain ``GET``s are answered in the gateway lane (``lane_route``, and
``service.api.gateway``): its view, its address's rate and its file's record in one round trip,
the same answer as here; whatever changed about the alias since, the lane hands the request back
to these handlers.

Every 404 of these paths is the one ``alias_not_found``, the same bytes whatever the reason: the
JSON envelope, or for a browser that prefers HTML to JSON the one page of a link that can't be
used (``alias_pages.UNUSABLE_PAGE``). A view is counted for every 200 and 206 (a listing, a
file, a part of one), never for HEAD, a 304 or a refusal: counted before the bytes go out,
given back when the answer turns out otherwise. A browser's opening of a sound or video gets
the view's grant with it (``VIEW_GRANT_NAME``, ``AliasAccess.view_grant``), and the ranges its
own view then asks of that address are part of that view.

A link unfurler (``link_previews``) gets the link's preview page from ``GET /a/{slug}`` instead
of what it is of, and ``GET /a/{slug}/thumbnail`` serves the thumbnail its ``og:image`` names;
neither counts a view, nor does an unfurler's fetch of a file of an alias without a password or
a view limit.
"""

from __future__ import annotations

import re
from functools import partial

from aiohttp import hdrs, web
from multidict import CIMultiDictProxy

from service.api._aiohttp import Answer, HttpProcessingError, Reply
from service.api.alias_pages import (
    PAGE_CSP,
    UNUSABLE_PAGE,
    FileItem,
    Link,
    listing_page,
    password_page,
)
from service.api.alias_requests import public_origin
from service.api.context import POLICY
from service.api.credentials import single_header
from service.api.downloads import count_download, file_headers, send_file, thumbnail_answer
from service.api.gateway import LaneRoute
from service.api.link_previews import (
    BARE_PREVIEW,
    Preview,
    file_description,
    is_unfurler,
    preview_page,
)
from service.api.paging import MAX_LIMIT, page_cursor, page_size
from service.api.views import alias_url, ok
from service.api.zip_answers import send_archive
from service.auth.alias_access import (
    COOKIE_NAME,
    COOKIE_SECONDS,
    VIEW_GRANT_NAME,
    VIEW_GRANT_SECONDS,
    AliasAccess,
    KnownFile,
    Opened,
)
from service.auth.thumbnails import has_thumbnail
from service.clock import iso
from service.domain.cursors import decode_file_cursor
from service.domain.files import PLAYED_TYPES
from service.domain.records import FileRecord, FolderRecord
from service.errors import ApiError, Code
from service.observability.trace import RequestTrace, current_trace

PUBLIC_PREFIX = "/a"
ALIAS_ROUTE = f"{PUBLIC_PREFIX}/{{slug}}"
ALIAS_PASSWORD = "X-Alias-Password"  # noqa: S105 - a header name
# The refusals a browser gets as the password form rather than JSON.
_FORM_CODES = {
    Code.ALIAS_PASSWORD_REQUIRED: None,
    Code.ALIAS_PASSWORD_INVALID: "That password is not right.",
    Code.ALIAS_PASSWORD_THROTTLED: "Too many wrong passwords. Wait a while before trying again.",
}
_CONDITIONS = (hdrs.IF_NONE_MATCH, hdrs.RANGE, hdrs.IF_RANGE)
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")
THUMBNAIL = "thumbnail"
ARCHIVE = "archive"
# What a password form may go on to below its link once the password is right: an item, the
# archive. Nothing else, so its redirect never leaves the link.
_BELOW = re.compile(rf"(?:fil|fld)_[A-Za-z0-9_-]{{1,64}}|{ARCHIVE}")
_QUALITY = re.compile(r"\bq\s*=\s*([01](?:\.\d{0,3})?)\s*(?:;|$)", re.IGNORECASE)


class _Views:
    """A request's view (``send_file``'s admission): counted when the alias was opened, or now,
    for a request whose answer could not be known to be a 200 or 206 then; given back when
    what was counted was not served. HEAD counts nothing, nor does an unfurler's fetch from an
    alias without a password or a view limit (``free``), nor a range a view's grant covers
    (``Opened.continued``). With a ``grant`` (its value, the address it is for, whether
    ``Secure``), the admitted 200 gives it as its cookie."""

    __slots__ = ("_access", "_admitted", "_free", "_opened", "grant")

    def __init__(self, access: AliasAccess, opened: Opened, free: bool) -> None:
        self._access = access
        self._opened = opened
        self._free = free or opened.continued
        self.grant: tuple[str, str, bool] | None = None
        self._admitted = False

    async def admit(self, answer: web.StreamResponse | None = None) -> bool:
        if self._free:
            return True
        if self._opened.counted or await self._access.count(self._opened):
            self._admitted = True
            if self.grant is not None and answer is not None and answer.status == 200:
                value, path, secure = self.grant
                _give_cookie(answer, VIEW_GRANT_NAME, value, VIEW_GRANT_SECONDS, path, secure)
        return self._admitted

    async def settle(self) -> None:
        if self._opened.counted and not self._admitted:
            await self._access.give_back(self._opened)


def _accepts(request: web.Request, media_type: str) -> bool:
    return any(
        part.split(";", 1)[0].strip().lower() == media_type
        for value in request.headers.getall(hdrs.ACCEPT, ())
        for part in value.split(",")
    )


def _quality(parameters: str) -> float:
    found = _QUALITY.search(parameters)
    return 1.0 if found is None else min(1.0, float(found[1]))


def prefers_html(request: web.Request) -> bool:
    """Whether the client would rather have HTML than JSON (a browser's navigation): ``text/html``
    asked for above JSON (``application/json``, else ``application/*`` or ``*/*``), or as much
    as a wildcard when JSON is not named. ``*/*`` alone, or JSON named as high, is an API
    client's."""
    html = json = wildcard = 0.0
    for value in request.headers.getall(hdrs.ACCEPT, ()):
        for part in value.split(","):
            media, _, parameters = part.partition(";")
            media = media.strip().lower()
            if media == "text/html":
                html = max(html, _quality(parameters))
            elif media == "application/json":
                json = max(json, _quality(parameters))
            elif media in ("application/*", "*/*"):
                wildcard = max(wildcard, _quality(parameters))
    if html == 0:
        return False
    return html > json if json > 0 else html >= wildcard


def _html(body: bytes, status: int = 200) -> web.Response:
    response = web.Response(body=body, status=status, content_type="text/html", charset="utf-8")
    response.headers["Content-Security-Policy"] = PAGE_CSP
    return response


def _refused(request: web.Request, refused: ApiError) -> web.Response:
    """Every 404 of the public side is the one ``alias_not_found``: the envelope, or for a
    browser that prefers HTML, the one page of a link that can't be used."""
    refused = _one_not_found(refused)
    if refused.code is Code.ALIAS_NOT_FOUND and prefers_html(request):
        return _html(UNUSABLE_PAGE, 404)
    raise refused


def _browser(request: web.Request) -> bool:
    """A browser: it asks for HTML, and sends no password of an API client's."""
    return _accepts(request, "text/html") and ALIAS_PASSWORD not in request.headers


async def _open(
    request: web.Request,
    *,
    count: bool,
    password: str | None = None,
    grant_cookie: bool = False,
    below: str | None = None,
) -> Opened | web.Response:
    """The alias the request names, or, for a browser that must give its password, the form
    (posting to the link's own address, then going on to ``below`` it)."""
    access = request.app[POLICY].alias_access
    given = password if password is not None else single_header(request.headers, ALIAS_PASSWORD)
    trace = current_trace.get()
    try:
        return await access.open(
            request.match_info["slug"],
            count=count,
            address=None if trace is None else trace.remote,
            password=given,
            cookie=request.cookies.get(COOKIE_NAME),
            grant_cookie=grant_cookie,
            grants=_grants(request),
        )
    except ApiError as refused:
        if refused.code not in _FORM_CODES or not (_browser(request) or password is not None):
            raise
        action = f"{PUBLIC_PREFIX}/{request.match_info['slug']}"
        page = password_page(action, _FORM_CODES[refused.code], below)
        response = _html(page, refused.status)
        response.headers.update(refused.headers)
        return response


def _grants(request: web.Request) -> tuple[str, list[str]] | None:
    """For a range a browser's view of a sound or video asks: the address, and every view grant
    sent (the browser sends one per address above this one it opened too). None otherwise."""
    if request.method != hdrs.METH_GET or hdrs.RANGE not in request.headers:
        return None
    values = [
        value.strip()
        for header in request.headers.getall(hdrs.COOKIE, ())
        for name, _, value in (part.partition("=") for part in header.split(";"))
        if name.strip() == VIEW_GRANT_NAME
    ]
    return (request.path, values) if values else None


def _view_grant(
    request: web.Request, opened: Opened, record: FileRecord
) -> tuple[str, str, bool] | None:
    """The grant the view of this request gives, when it is a browser's opening of a sound or a
    video (a navigation, which asks for HTML above all): the browser's own view of it then asks
    the same address again in ranges."""
    if (
        not opened.counted
        or record.content_type not in PLAYED_TYPES
        or hdrs.RANGE in request.headers
        or not prefers_html(request)
    ):
        return None
    trace = current_trace.get()
    address = None if trace is None else trace.remote
    path = request.path
    value = request.app[POLICY].alias_access.view_grant(opened, path, address)
    return value, path, _secure(request)


def _one_not_found(refused: ApiError) -> ApiError:
    """Every 404 of the public side is the same one."""
    return ApiError(Code.ALIAS_NOT_FOUND) if refused.status == 404 else refused


async def open_alias(request: web.Request) -> web.StreamResponse:
    """``GET``/``HEAD /a/{slug}``: the file, or the folder's listing."""
    return await _serve(request, None)


async def open_item(request: web.Request) -> web.StreamResponse:
    """``GET``/``HEAD /a/{slug}/{item_id}``: a file or folder in an aliased folder's subtree (or
    a file alias's own file, at its id)."""
    item_id = request.match_info["item_id"]
    if not item_id.startswith(("fil_", "fld_")):
        return _refused(request, ApiError(Code.ALIAS_NOT_FOUND))
    return await _serve(request, item_id)


async def _serve(request: web.Request, item_id: str | None) -> web.StreamResponse:
    head = request.method == hdrs.METH_HEAD
    unfurler = is_unfurler(request.headers.get(hdrs.USER_AGENT))
    # An unfurler's view is counted (by ``_Views``) only once it is known to have no free pass.
    count = not head and not unfurler and not any(name in request.headers for name in _CONDITIONS)
    try:
        opened = await _open(request, count=count, below=item_id)
        if isinstance(opened, web.Response):
            return opened
        free = unfurler and opened.password_hash is None and not opened.limited
        if unfurler and item_id is None:
            return await _preview(request, opened, free)
        return await _answer(request, opened, item_id, head or free)
    except ApiError as refused:
        return _refused(request, refused)


async def _preview(request: web.Request, opened: Opened, free: bool) -> web.Response:
    """A link unfurler's answer (``link_previews``): the preview of an alias without a password
    or a view limit, the bare page for any other; no view either way."""
    if not free:
        return _html(BARE_PREVIEW)
    policy = request.app[POLICY]
    access = policy.alias_access
    url = alias_url(public_origin(request), request.match_info["slug"])
    if not opened.target_id.startswith("fil_"):
        folder = (await access.folder(opened))[0]
        return _html(preview_page(Preview(folder.name, "A shared folder", url)))
    record = await access.file(opened)
    image = video = None
    if has_thumbnail(record.content_type):
        try:  # made now: the unfurler asks for it next
            await policy.thumbnails.of_record(opened.user_id, record)
            image = f"{url}/{THUMBNAIL}"
        except ApiError as refused:
            if refused.code is not Code.THUMBNAIL_NOT_FOUND:
                raise
    elif record.content_type.startswith("video/"):
        video = f"{url}/{record.id}"
    description = file_description(record.size, record.content_type)
    return _html(
        preview_page(Preview(record.name, description, url, image, video, record.content_type))
    )


async def alias_thumbnail(request: web.Request) -> web.StreamResponse:
    """``GET``/``HEAD /a/{slug}/thumbnail``: the thumbnail of an image alias without a password or
    a view limit (a link preview's ``og:image``); no view. Every other alias: the one 404."""
    policy = request.app[POLICY]
    trace = current_trace.get()
    try:
        try:
            opened = await policy.alias_access.open(
                request.match_info["slug"],
                count=False,
                address=None if trace is None else trace.remote,
            )
        except ApiError as refused:
            if refused.code in _FORM_CODES:  # a password: no preview, so no thumbnail either
                raise ApiError(Code.ALIAS_NOT_FOUND) from None
            raise
        if opened.password_hash is not None or opened.limited:
            raise ApiError(Code.ALIAS_NOT_FOUND)
        if not opened.target_id.startswith("fil_"):
            raise ApiError(Code.ALIAS_NOT_FOUND)
        record = await policy.alias_access.file(opened)
        return thumbnail_answer(await policy.thumbnails.of_record(opened.user_id, record))
    except ApiError as refused:
        return _refused(request, refused)


async def _answer(
    request: web.Request, opened: Opened, item_id: str | None, free: bool
) -> web.StreamResponse:
    access = request.app[POLICY].alias_access
    views = _Views(access, opened, free)
    try:
        if (item_id or opened.target_id).startswith("fil_"):
            record = await access.file(opened, item_id)
            views.grant = _view_grant(request, opened, record)
            etag = access.public_etag(record)
            files = request.app[POLICY].files
            # A link with a password or a view limit is never handed a reusable URL.
            redirect = opened.password_hash is None and not opened.limited
            response = await send_file(request, files, record, etag, views, redirect)
            # Served whole from memory (an Answer) with its view counted: the gateway lane may
            # take the slug's next request (``lane_route``); never a sound's or a video's, whose
            # opening gives a grant.
            played = record.content_type in PLAYED_TYPES
            if item_id is None and opened.counted and not played and type(response) is Answer:
                access.remember(request.match_info["slug"], opened)
        else:
            lineage = await access.folder(opened, item_id)
            response = await _listing(request, opened, lineage, views)
    finally:
        await views.settle()
    return response


async def open_archive(request: web.Request) -> web.StreamResponse:
    """``GET /a/{slug}/archive``: a folder alias's whole subtree as one ZIP archive, one view.
    A browser asked for the password gets the form of ``/a/{slug}``, whose cookie opens this
    too, and comes back here; a file alias's archive is the 404 of any alias that may not be
    used."""
    policy = request.app[POLICY]
    try:
        opened = await _open(request, count=True, below=ARCHIVE)
        if isinstance(opened, web.Response):
            return opened
        views = _Views(policy.alias_access, opened, False)

        async def admit() -> None:
            if not await views.admit():
                raise ApiError(Code.ALIAS_NOT_FOUND)

        try:
            lineage = await policy.alias_access.folder(opened)
            name, entries = await policy.archives.tree(opened.user_id, lineage[0])
            return await send_archive(request, name, entries, policy.archives.open, admit)
        finally:
            await views.settle()
    except ApiError as refused:
        return _refused(request, refused)


# -- the gateway lane's route ----------------------------------------------------------------


def lane_route(access: AliasAccess, slug: str, headers: CIMultiDictProxy[str]) -> LaneRoute | None:
    """The gateway lane's route for ``GET /a/{slug}`` (``service.api.gateway``): for an alias this
    worker last served a small file through, whole and without a password, asked for without a
    condition or a range. Its view, its address's rate and its file's record are then one round
    trip (``AliasAccess.open_known``) and the bytes come from memory, with the same answer as
    ``open_alias`` gives; anything else about the alias now, it hands to aiohttp."""
    known = access.known(slug)
    if known is None or any(name in headers for name in _CONDITIONS):
        return None
    if is_unfurler(headers.get(hdrs.USER_AGENT)):  # its preview, and no view: aiohttp's
        return None
    return partial(_known_file, slug, known)


async def _known_file(
    slug: str,
    known: KnownFile,
    app: web.Application,
    headers: CIMultiDictProxy[str],
    trace: RequestTrace,
) -> Reply | None:
    trace.route = ALIAS_ROUTE
    policy = app[POLICY]
    access = policy.alias_access
    try:
        found = await access.open_known(slug, known, trace.remote)
    except ApiError as refused:
        raise _one_not_found(refused) from None
    if found is None:
        return None
    opened, record = found
    content = await policy.files.small_content(record)
    if content is None:  # not small any more, or its bytes not what the record says
        await access.hand_back(slug, opened, trace.remote)
        return None
    count_download(app, "alias", len(content))
    content_type, own = file_headers(record, access.public_etag(record))
    return Reply(200, content, own, content_type)


async def post_password(request: web.Request) -> web.StreamResponse:
    """``POST /a/{slug}``: the password form's answer: the cookie that opens the alias (for its
    path only, ``COOKIE_SECONDS``) and a redirect to it, or to what the form was asked for below
    it (``below``: an item, the archive)."""
    if request.content_type not in _FORMS:
        raise ApiError(
            Code.UNSUPPORTED_MEDIA_TYPE,
            "Send the password form as application/x-www-form-urlencoded.",
        )
    try:
        form = await request.post()
    except (ValueError, LookupError, AssertionError, HttpProcessingError):
        # LookupError: a charset Python does not know, in the body's or a part's header.
        raise ApiError(Code.BAD_REQUEST, "The form could not be read.") from None
    password = form.get("password")
    if not isinstance(password, str) or len(password) > 1024:
        password = ""
    below = form.get("below")
    if not isinstance(below, str) or not _BELOW.fullmatch(below):
        below = None
    try:
        opened = await _open(
            request, count=False, password=password, grant_cookie=True, below=below
        )
        if isinstance(opened, web.Response):
            return opened
    except ApiError as refused:
        return _refused(request, refused)
    # A file's too, not its bytes: the browser then shows it from a GET, which it may reload,
    # and its own view of a sound or video asks the address again (in ranges) with the cookie.
    location = request.path if below is None else f"{request.path}/{below}"
    response = web.Response(status=303, headers={hdrs.LOCATION: location})
    if opened.cookie is not None:
        path = f"{PUBLIC_PREFIX}/{request.match_info['slug']}"
        _give_cookie(response, COOKIE_NAME, opened.cookie, COOKIE_SECONDS, path, _secure(request))
    return response


def _give_cookie(
    response: web.StreamResponse, name: str, value: str, seconds: int, path: str, secure: bool
) -> None:
    """A cookie of the public side (the password's, a view's grant): for ``path`` only, never
    read by script, sent on a link followed from elsewhere, ``Secure`` when the service's
    address is https."""
    response.set_cookie(
        name,
        value,
        max_age=seconds,
        path=path,
        httponly=True,
        samesite="Lax",
        secure=secure,
    )


def _secure(request: web.Request) -> bool:
    return public_origin(request).startswith("https://")


async def _listing(
    request: web.Request, opened: Opened, lineage: list[FolderRecord], views: _Views
) -> web.StreamResponse:
    """A shared folder's folders and a page of its files: JSON for a client that asks for it,
    else an HTML page."""
    limit = page_size(request)
    after = page_cursor(request, decode_file_cursor)
    folder = lineage[0]
    folders, files = await request.app[POLICY].alias_access.contents(
        opened, folder.id, MAX_LIMIT, limit, after
    )
    if not await views.admit():
        raise ApiError(Code.ALIAS_NOT_FOUND)
    slug = request.match_info["slug"]
    base = f"{PUBLIC_PREFIX}/{slug}"
    origin = public_origin(request)
    here = base if folder.id == opened.target_id else f"{base}/{folder.id}"
    more = f"{here}?cursor={files.next_cursor}" if files.next_cursor else None
    if _accepts(request, "application/json"):
        return ok(
            {
                "folder": {"name": folder.name},
                "folders": [
                    {"name": child.name, "url": f"{alias_url(origin, slug)}/{child.id}"}
                    for child in folders.folders
                ],
                "files": [
                    {
                        "name": item.name,
                        "size": item.size,
                        "content_type": item.content_type,
                        "created_at": iso(item.created_at),
                        "url": f"{alias_url(origin, slug)}/{item.id}",
                    }
                    for item in files.files
                ],
                "next_cursor": files.next_cursor,
            }
        )
    crumbs = [
        Link(step.name, base if step.id == opened.target_id else f"{base}/{step.id}")
        for step in reversed(lineage)
    ]
    page = listing_page(
        crumbs,
        [Link(child.name, f"{base}/{child.id}") for child in folders.folders],
        [
            FileItem(item.name, f"{base}/{item.id}", item.size, item.content_type, item.created_at)
            for item in files.files
        ],
        more,
        folders.next_cursor is not None,
        request.app[POLICY].alias_access.now_ms(),
        f"{base}/archive",
    )
    return _html(page)


def add_public_alias_routes(app: web.Application) -> None:
    app.router.add_routes(
        [
            web.get(f"{PUBLIC_PREFIX}/{{slug}}", open_alias),  # and HEAD
            web.post(f"{PUBLIC_PREFIX}/{{slug}}", post_password),
            # Before the items': ``thumbnail`` and ``archive`` are no item's id.
            web.get(f"{PUBLIC_PREFIX}/{{slug}}/{THUMBNAIL}", alias_thumbnail),
            web.get(f"{PUBLIC_PREFIX}/{{slug}}/{ARCHIVE}", open_archive, allow_head=False),
            web.get(f"{PUBLIC_PREFIX}/{{slug}}/{{item_id}}", open_item),
        ]
    )
