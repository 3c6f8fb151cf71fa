"""Download tickets: a browser's own download of one file, or of one folder or a selection of
files as a ZIP archive, without a credential header. A browser's download streams to disk and
shows its progress, where bytes fetched with a header must be held in the tab's memory first; a
form posting the ticket starts one (``routes.download_tickets``), and keeps the ticket out of
every address and log.

A session takes a ticket for a file, a folder or a selection of files of its account (``take``);
the ticket's secret is stored only as a digest, with what it downloads, the account and the
session's digest. It downloads that alone (``open``), for ``TICKET_LIFETIME_MS`` from when it was
taken, while the session lasts: a logout, an ended session or a reauthentication that replaced it
ends its tickets at once. Every other use is the same refusal, ``download_ticket_not_found``,
whatever the reason; a ticket is never logged or echoed."""

from __future__ import annotations

from service.auth.archives import Archives
from service.auth.reach import Reach
from service.clock import Clock
from service.domain import credentials
from service.domain.permissions import ALL_PERMISSIONS_MASK
from service.domain.principal import CredentialType, Principal
from service.domain.records import TICKET_FILE, TICKET_FOLDER, DownloadTicket
from service.errors import ApiError, Code
from service.store.protocols import CredentialLookup, DownloadTicketStore

# Long enough for a browser to begin the download it was taken for, short enough that a ticket
# found later opens nothing.
TICKET_LIFETIME_MS = 60_000
# Kept in the store a little longer than the ticket lasts: the instances' clocks decide its end.
_KEPT_BEYOND_MS = 60_000


class DownloadTickets:
    def __init__(
        self,
        store: DownloadTicketStore,
        lookup: CredentialLookup,
        reach: Reach,
        archives: Archives,
        clock: Clock,
    ) -> None:
        self._store = store
        self._lookup = lookup
        self._reach = reach
        self._archives = archives
        self._clock = clock

    async def take(self, principal: Principal, kind: str, ids: tuple[str, ...]) -> tuple[str, int]:
        """A ticket for the session's file (``TICKET_FILE``, one id), folder (``TICKET_FOLDER``,
        one id) or selection of files (``TICKET_SELECTION``): its secret and when it ends (ms).
        Refused as the file, folder or selection's archive itself would be (404 ``file_not_found``,
        ``folder_not_found``); 403 ``session_required`` for anything but a session."""
        if principal.token_digest is None:
            raise ApiError(Code.SESSION_REQUIRED)
        if kind == TICKET_FILE:
            await self._reach.file(principal, ids[0])
        elif kind == TICKET_FOLDER:
            await self._reach.folder(principal, ids[0])
        else:
            await self._archives.selection(principal, list(ids))
        secret = credentials.generate_download_ticket()
        expires_at = self._clock.now_ms() + TICKET_LIFETIME_MS
        ticket = DownloadTicket(principal.user_id, kind, ids, principal.token_digest, expires_at)
        await self._store.keep(
            credentials.digest(secret), ticket, TICKET_LIFETIME_MS + _KEPT_BEYOND_MS
        )
        return secret, expires_at

    async def open(self, secret: str) -> tuple[DownloadTicket, Principal]:
        """What the ticket ``secret`` downloads, and who as: its session's account. 404
        ``download_ticket_not_found`` for a malformed, unknown or ended ticket, or one whose
        session is over."""
        if not credentials.is_well_formed(secret, credentials.DOWNLOAD_TICKET_KIND):
            raise ApiError(Code.DOWNLOAD_TICKET_NOT_FOUND)
        ticket = await self._store.find(credentials.digest(secret))
        now = self._clock.now_ms()
        if ticket is None or ticket.expires_at <= now:
            raise ApiError(Code.DOWNLOAD_TICKET_NOT_FOUND)
        session = await self._lookup.find_session(ticket.session_digest, now, 0)
        if (
            session is None
            or session.user_id != ticket.user_id
            or session.idle_deadline <= now
            or session.absolute_deadline <= now
        ):
            raise ApiError(Code.DOWNLOAD_TICKET_NOT_FOUND)
        principal = Principal(
            ticket.user_id,
            CredentialType.SESSION,
            ALL_PERMISSIONS_MASK,
            ticket.expires_at,
            None,  # key_id: sessions only
            ticket.session_digest,
        )
        return ticket, principal
