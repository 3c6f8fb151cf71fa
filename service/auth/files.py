"""Hosted files as policy sees them: an account's files only (another account's file is exactly
an unknown one), in its folders, its quota, and the order that keeps a file whole.

Every operation receives the caller's ``Principal`` and asks ``service.auth.reach`` which file
or folder it reaches, so what a credential may reach is decided in that one place.

An upload's bytes are stored first (under a new file id), then its record is written, in the
folder the request named, else the account's default folder, else the top level (for a key bound
to folders: the default folder only when inside them, else the first of them); any failure on
the way removes what was written, so a file is either listed with all its bytes or not there at
all. A deletion removes the record first (the file is neither listed nor served from then on),
then the bytes (``service.auth.removals``); should that fail, the store still notes them, and
the account's next removal run takes them. A rename or move rewrites the record in place.

Each is recorded in the account's audit trail (``file.uploaded``, ``file.deleted``,
``file.renamed``, ``file.moved``), naming the session or API key that acted, in the same step
as the record's write or removal: an upload that fails or is undone records nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from service.auth.account_settings import AccountSettings
from service.auth.audit import AuditTrail
from service.auth.reach import Reach
from service.auth.removals import Removals
from service.clock import Clock
from service.domain import audit_events as audit
from service.domain.audit_events import EventBatch
from service.domain.blobs import Blob, BlobMissing, Source, StorageFull, Written
from service.domain.credentials import new_id
from service.domain.file_search import (
    RECORDS_AT_ONCE,
    WHOLE_LISTING_FROM,
    FileQuery,
    Keyed,
    SortKey,
    kept,
    ordered_page,
    search_page,
    search_place,
)
from service.domain.files import display_name, media_type
from service.domain.outcomes import AccountGone, FolderGone
from service.domain.permissions import BOUND_TO_FOLDERS
from service.domain.principal import Principal
from service.domain.records import UNSET, FilePage, FileRecord, Unset
from service.errors import ApiError, Code
from service.store.protocols import FilesStore
from service.store.protocols.blobs import BlobStores

log = logging.getLogger("service.auth.files")

# Who acted, as the audit trail names it (``audit.Origin.actor``, ``audit.api_key_actor``).
Actor = dict[str, Any] | None
# A change overtaken this many times in a row by others of the same file gives up.
ATTEMPTS = 8


def _limit_reached(limit: int) -> ApiError:
    return ApiError(
        Code.FILE_LIMIT_REACHED,
        f"This account holds the maximum of {limit} files. Delete one before uploading another.",
        details={"max_files": limit},
    )


class Files:
    def __init__(
        self,
        store: FilesStore,
        blob_stores: BlobStores,
        clock: Clock,
        max_files: int,
        reach: Reach,
        removals: Removals,
        settings: AccountSettings,
        trail: AuditTrail | None = None,
    ) -> None:
        self._store = store
        self.blobs = blob_stores.blobs
        self._small = blob_stores.small
        self._clock = clock
        self._max_files = max_files
        self._reach = reach
        self._removals = removals
        self._settings = settings
        self._trail = trail

    def _events(
        self,
        at: int,
        origin: audit.Origin,
        actor: Actor,
        *kinds: tuple[str, FileRecord, dict[str, Any] | None],
    ) -> EventBatch | None:
        if self._trail is None or not kinds:
            return None
        return self._trail.batch(
            at,
            *(
                audit.event(
                    kind,
                    at,
                    origin,
                    actor=actor,
                    target=audit.file_target(record.id, record.name, record.size),
                    changes=changes,
                )
                for kind, record, changes in kinds
            ),
        )

    async def check_room(self, principal: Principal) -> None:
        """409 ``file_limit_reached`` when the account holds its maximum of files: checked
        before an upload's body is read (and again, atomically, with its record)."""
        if await self._store.count(principal.user_id) >= self._max_files:
            raise _limit_reached(self._max_files)

    async def check_folder(self, principal: Principal, folder_id: str | None) -> None:
        """404 ``folder_not_found`` for an upload's folder (None: the top) that the principal
        cannot put a file in: checked as soon as the field is read, and again with the record."""
        await self._reach.place(principal, folder_id, "folder_id")

    async def check_default_place(self, principal: Principal) -> None:
        """404 ``folder_not_found`` when an upload naming no folder has no place the principal
        may put a file in (a key bound to folders whose folders are gone)."""
        default = await self._settings.default_folder(principal.user_id)
        await self._reach.default_place(principal, default)

    async def upload(
        self,
        principal: Principal,
        source: Source,
        name: str | None,
        content_type: str | None,
        before_record: Callable[[], Awaitable[str | Unset | None]],
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> FileRecord:
        """Store the bytes ``source`` fills, then (once ``before_record`` has accepted the
        rest of the request and said which folder it names: an id, None for the top level,
        ``UNSET`` for the account's default) the record: a new file named for display after
        ``name``, typed after ``content_type``, recorded as ``file.uploaded`` by ``actor`` in
        the same step. Whatever fails on the way (the source, ``before_record``, the folder,
        the quota, the store) leaves no bytes, no record and no event."""
        file_id = new_id("fil")
        try:
            written = await self.blobs.put(file_id, source)
        except StorageFull:
            log.error("no room left for uploaded files: uploads are refused (507) until there is")
            raise ApiError(Code.STORAGE_FULL) from None
        return await self._record(
            principal, file_id, written, name, content_type, before_record, origin, actor
        )

    async def adopt(
        self,
        principal: Principal,
        file_id: str,
        written: Written,
        name: str | None,
        content_type: str | None,
        folder: str | Unset | None,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> FileRecord:
        """Record the blob ``file_id`` a resumable upload stored, as ``upload`` records one it
        stored itself (``folder``: an id, None for the top level, ``UNSET`` for the account's
        default): the same checks, event and undoing; whatever fails removes the blob."""

        async def named() -> str | Unset | None:
            return folder

        return await self._record(
            principal, file_id, written, name, content_type, named, origin, actor
        )

    async def _record(
        self,
        principal: Principal,
        file_id: str,
        written: Written,
        name: str | None,
        content_type: str | None,
        before_record: Callable[[], Awaitable[str | Unset | None]],
        origin: audit.Origin,
        actor: Actor,
    ) -> FileRecord:
        """The record of a blob just stored (see ``upload``); the blob removed should it fail."""
        user_id = principal.user_id
        recorded = False
        record = events = None
        try:
            folder = await before_record()
            # A bound key's upload never lands at the top level, whatever happens to its
            # folder meanwhile: it is refused instead.
            defaulted = isinstance(folder, Unset) and not principal.bound
            if isinstance(folder, Unset):
                # The account's own setting, checked with the write (a folder deleted since
                # it was read puts the file at the top, as the deletion reset the setting);
                # for a key bound to folders, the setting only when inside them, else the
                # first of them (``Reach.default_place``).
                folder = await self._reach.default_place(
                    principal, await self._settings.default_folder(user_id)
                )
            else:
                folder = await self._reach.place(principal, folder, "folder_id")
            now = self._clock.now_ms()
            kept_name = display_name(name)
            record = FileRecord(
                id=file_id,
                name=kept_name,
                size=written.size,
                content_type=media_type(content_type, kept_name),
                sha256=written.sha256,
                created_at=now,
                folder_id=folder,
            )
            events = self._events(now, origin, actor, (audit.FILE_UPLOADED, record, None))
            recorded = True  # from here, an error may come after the record was written
            try:
                added = await self._add(user_id, record, events, defaulted)
            except AccountGone:
                recorded = False
                raise ApiError(Code.ACCOUNT_GONE) from None
            except FolderGone:
                recorded = False
                raise ApiError(Code.FOLDER_NOT_FOUND, details={"field": "folder_id"}) from None
            if not added:
                recorded = False
                raise _limit_reached(self._max_files)
            record = added
        except BaseException:
            if recorded and record is not None:
                undo = self._undo(user_id, record, events)
                with contextlib.suppress(Exception):
                    await asyncio.shield(undo)
                # Its record was written: a backup may have read it, so its bytes go as a
                # deletion's do.
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._removals.release(user_id, file_id))
            else:
                await self._release(file_id)
            raise
        return record

    async def _add(
        self, user_id: str, record: FileRecord, events: EventBatch | None, defaulted: bool
    ) -> FileRecord | None:
        """Write the record (None when the account is full). A default folder deleted since it
        was read (which reset the setting) puts the file at the top instead."""
        try:
            added = await self._store.add(user_id, record, self._max_files, events)
        except FolderGone:
            if not defaulted:
                raise
            record = replace(record, folder_id=None)
            added = await self._store.add(user_id, record, self._max_files, events)
        return record if added else None

    async def _undo(self, user_id: str, record: FileRecord, events: EventBatch | None) -> None:
        """Remove a record an upload wrote, and take back its events, when the upload failed
        after the write (its answer lost, say)."""
        found = await self._store.read(user_id, record.id)
        if found is not None:
            await self._store.remove(user_id, found[0], found[1], undo=True, retract=events)

    async def _release(self, file_id: str) -> None:
        """Remove a blob whose upload failed after it was stored, even from a cancelled task."""
        try:
            await asyncio.shield(self.blobs.delete(file_id))
        except Exception:
            log.exception("could not remove the bytes of a failed upload")

    async def count(self, user_id: str) -> int:
        """How many files the account holds."""
        return await self._store.count(user_id)

    async def page(self, principal: Principal, limit: int, after: str | None) -> FilePage:
        """A page of every file the principal reaches: on the gateway's path, one command (a
        key bound to folders: one script, ``Reach.files_page``)."""
        if principal.permissions & BOUND_TO_FOLDERS:  # the bit itself: the gateway's path
            return await self._reach.files_page(principal, limit, after)
        return await self._store.list_page(self._reach.account(principal), limit, after)

    async def folder_page(
        self, principal: Principal, folder_id: str | None, limit: int, after: str | None
    ) -> FilePage:
        """A page of one folder's files (None: the top level); 404 ``folder_not_found``."""
        folder_id = await self._reach.listing(principal, folder_id, "folder_id")
        page = await self._store.folder_page(principal.user_id, folder_id, limit, after)
        if page is None:
            raise ApiError(Code.FOLDER_NOT_FOUND, details={"field": "folder_id"})
        return page

    async def search(
        self,
        principal: Principal,
        folder_id: str | Unset | None,
        query: FileQuery,
        limit: int,
        after: SortKey | None,
    ) -> FilePage:
        """A page of the files the principal reaches (all of them, or with ``folder_id`` one
        folder's, None the top level) that ``query`` keeps, in its order, after the position
        ``after``. Every file of the account (or folder) is read in one round trip and kept
        and ordered here (``service.domain.file_search``): an account holds at most
        ``FILEHOST_MAX_FILES_PER_ACCOUNT`` files. 404 ``folder_not_found`` as ``folder_page``."""
        if isinstance(folder_id, Unset):
            records = await self._reach.every_file(principal)
        else:
            records = await self._reach.every_file_in(principal, folder_id, "folder_id")
        place = search_place(folder_id)
        if len(records) < WHOLE_LISTING_FROM:
            return search_page(records, query, place, limit, after)
        found: Keyed = []
        for start in range(0, len(records), RECORDS_AT_ONCE):
            await asyncio.sleep(0)  # the other requests' turn
            found += kept(records[start : start + RECORDS_AT_ONCE], query, after)
        return ordered_page(found, query, place, limit)

    async def get(self, principal: Principal, file_id: str) -> FileRecord:
        """The principal's file; 404 ``file_not_found`` for any other id."""
        return await self._reach.file(principal, file_id)

    async def listed(self, user_id: str, file_id: str) -> bool:
        """Whether the account's file is still listed (not deleted)."""
        return await self._store.read(user_id, file_id) is not None

    async def small_content(self, record: FileRecord) -> bytes | None:
        """A small file's whole bytes from the worker's memory (read once); None for a larger
        one, or one whose bytes are not what its record says: ``open`` it instead."""
        return await self._small.read(record.id, record.size, record.sha256)

    async def download_url(
        self, record: FileRecord, disposition: str, content_type: str
    ) -> str | None:
        """Where the client may fetch the file's bytes itself, when the blob store redirects
        downloads (a short-lived URL); None when the service sends them."""
        return await self.blobs.download_url(record.id, disposition, content_type)

    async def open(self, record: FileRecord) -> Blob:
        """The file's bytes; 404 when a listed file has none (logged: it should never be)."""
        try:
            return await self.blobs.open(record.id)
        except BlobMissing:
            log.error("a listed file has no bytes in storage")
            raise ApiError(Code.FILE_NOT_FOUND) from None

    async def change(
        self,
        principal: Principal,
        file_id: str,
        name: str | None = None,
        folder_id: str | Unset | None = UNSET,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
        *,
        placed: bool = False,
    ) -> FileRecord:
        """Rename (``name``) and/or move (``folder_id``: a folder, None for the top level) one
        of the principal's files; the file as it now is. Recorded as ``file.renamed`` (the new
        name) and ``file.moved`` (the new ``folder_id``), each only when it changed, in the
        step that makes the change; nothing when nothing changed. ``placed``: the caller has
        checked ``folder_id`` already (``Reach.place``: a bulk move checks it once for every
        file); the write's script checks again that it is live."""
        if not isinstance(folder_id, Unset) and not placed:
            folder_id = await self._reach.place(principal, folder_id, "folder_id")
        for _ in range(ATTEMPTS):
            stored, before = await self._reach.stored_file(principal, file_id)
            after = replace(
                before,
                name=before.name if name is None else name,
                folder_id=before.folder_id if isinstance(folder_id, Unset) else folder_id,
            )
            kinds: list[tuple[str, FileRecord, dict[str, str | None]]] = []
            if after.name != before.name:
                kinds.append((audit.FILE_RENAMED, before, {"name": after.name}))
            if after.folder_id != before.folder_id:
                kinds.append((audit.FILE_MOVED, before, {"folder_id": after.folder_id}))
            if not kinds:
                return before
            events = self._events(self._clock.now_ms(), origin, actor, *kinds)
            try:
                changed = await self._store.change(principal.user_id, stored, before, after, events)
            except FolderGone:
                raise ApiError(Code.FOLDER_NOT_FOUND, details={"field": "folder_id"}) from None
            if changed is None:
                raise ApiError(Code.FILE_NOT_FOUND)
            if changed:
                return after
        raise ApiError(Code.FILE_BUSY)

    async def delete(
        self,
        principal: Principal,
        file_id: str,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> int:
        """Delete one of the principal's files (record first, then what is left of it: its
        bytes, ``Removals.purge``); when it was deleted. Recorded as ``file.deleted`` by
        ``actor``, in the step that removes the record."""
        user_id = principal.user_id
        for _ in range(ATTEMPTS):
            stored, record = await self._reach.stored_file(principal, file_id)
            deleted_at = self._clock.now_ms()
            events = self._events(deleted_at, origin, actor, (audit.FILE_DELETED, record, None))
            removed = await self._store.remove(user_id, stored, record, events)
            if removed is None:  # deleted meanwhile
                raise ApiError(Code.FILE_NOT_FOUND)
            if removed:
                await self._removals.purge(user_id, [record.id])
                return deleted_at
        raise ApiError(Code.FILE_BUSY)
