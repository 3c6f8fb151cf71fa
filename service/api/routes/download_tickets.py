"""Download tickets (``service.auth.download_tickets``): a browser's own download of a file, or of
a folder or a selection of files as a ZIP archive, streamed to disk by the browser instead of held
in a tab's memory.

- ``POST /api/v1/download-tickets`` (a session only), ``{"file_id": …}``, ``{"folder_id": …}`` or
  ``{"ids": […]}`` (as ``POST /files/archive`` takes them): 201 ``{ticket, expires_at}``, a ticket
  for that file, folder or selection, good for a minute while the session lasts.
- ``POST /api/v1/downloads``, a form (``application/x-www-form-urlencoded``) with the one field
  ``ticket`` and no credential header: the file as ``GET /files/{id}/content`` answers it, but
  always ``attachment``, or the archive as ``GET /folders/{id}/archive`` or ``POST
  /files/archive`` does. A page posting that form gets a download, and the ticket is in no
  address, history or proxy log.

The HTTP layer only; the ticket's rules are the policy's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import hdrs, web

from service.api.context import POLICY, PREFIX
from service.api.credentials import authenticate
from service.api.downloads import owner_etag, send_file
from service.api.file_queries import parse_archive
from service.api.routes.archives import SELECTION_NAME
from service.api.validation import read_json_object
from service.api.views import ok
from service.api.zip_answers import send_archive
from service.clock import iso
from service.domain.records import TICKET_FILE, TICKET_FOLDER, TICKET_SELECTION
from service.errors import ApiError, Code
from service.observability.trace import current_trace

TICKETS_PATH = f"{PREFIX}/download-tickets"
DOWNLOADS_PATH = f"{PREFIX}/downloads"
TICKET_FIELD = "ticket"
FORM_TYPE = "application/x-www-form-urlencoded"
# What a ticket's request names, by its one field.
_KINDS = {"file_id": TICKET_FILE, "folder_id": TICKET_FOLDER, "ids": TICKET_SELECTION}


def _target(body: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(what, its ids) of a ticket's request body: one of ``_KINDS``' fields."""
    problems = {field: "is not a known field" for field in body if field not in _KINDS}
    given = [field for field in _KINDS if field in body]
    if len(given) != 1:
        problems["file_id"] = "give one of file_id, folder_id or ids"
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    field = given[0]
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    if field == "ids":
        return TICKET_SELECTION, tuple(parse_archive({"ids": body["ids"]}))
    if not isinstance(body[field], str) or not body[field]:
        raise ApiError(Code.VALIDATION_FAILED, details={field: "must be an id"})
    return _KINDS[field], (body[field],)


async def take_download_ticket(request: web.Request) -> web.Response:
    principal = await authenticate(request, session_only=True)
    kind, ids = _target(await read_json_object(request))
    secret, expires_at = await request.app[POLICY].download_tickets.take(principal, kind, ids)
    return ok({"ticket": secret, "expires_at": iso(expires_at)}, status=201)


async def _ticket_of_form(request: web.Request) -> str:
    """The form's one ``ticket``: 400 for a credential header beside it (the ticket is the
    credential here), 415 for a body that is no such form, 400 for any other field."""
    if hdrs.AUTHORIZATION in request.headers or "X-API-Key" in request.headers:
        raise ApiError(
            Code.AMBIGUOUS_CREDENTIALS, "Send the ticket alone, without a credential header."
        )
    if request.content_type != FORM_TYPE:
        raise ApiError(
            Code.UNSUPPORTED_MEDIA_TYPE,
            f"The request body must be a form (Content-Type: {FORM_TYPE}).",
        )
    form = await request.post()
    problems = {field: "is not a known field" for field in form if field != TICKET_FIELD}
    tickets = form.getall(TICKET_FIELD, [])
    ticket = tickets[0] if len(tickets) == 1 else None
    if not isinstance(ticket, str):
        problems[TICKET_FIELD] = "must be given once"
    if problems or not isinstance(ticket, str):
        raise ApiError(Code.VALIDATION_FAILED, details=problems)
    return ticket


async def download(request: web.Request) -> web.StreamResponse:
    secret = await _ticket_of_form(request)
    # The access line names the ticket as the credential, and once it is taken its account.
    trace = current_trace.get()
    if trace is not None:  # set by request_handling, around every handler
        trace.credential = "download_ticket"
    ticket, principal = await request.app[POLICY].download_tickets.open(secret)
    if trace is not None:
        trace.user_id = principal.user_id
    if ticket.kind == TICKET_FILE:
        files = request.app[POLICY].files
        record = await files.get(principal, ticket.ids[0])
        return await send_file(request, files, record, owner_etag(record), attachment=True)
    archives = request.app[POLICY].archives
    if ticket.kind == TICKET_FOLDER:
        name, entries = await archives.folder(principal, ticket.ids[0])
    else:
        name, entries = SELECTION_NAME, await archives.selection(principal, list(ticket.ids))
    return await send_archive(request, name, entries, archives.open)


def add_download_ticket_routes(app: web.Application) -> None:
    app.router.add_routes(
        [web.post(TICKETS_PATH, take_download_ticket), web.post(DOWNLOADS_PATH, download)]
    )
