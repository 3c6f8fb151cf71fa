"""Hosted files as policy sees them: an account's files only (another account's file is exactly
an unknown one), its quota, and the order that keeps a file whole.

An upload's bytes are stored first (under a new file id), then its record is written; any
failure on the way removes what was written, so a file is either listed with all its bytes or
not there at all. A deletion removes the record first (the file is neither listed nor served
from then on), then the bytes; should that fail, they are only unreferenced, and it is logged.

Both are recorded in the account's audit trail (``file.uploaded``, ``file.deleted``), naming the
session or API key that acted, in the same step as the record's write or removal: an upload
that fails or is undone records nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

from service.auth.audit import AuditTrail
from service.clock import Clock
from service.domain import audit_events as audit
from service.domain.credentials import is_valid_id, new_id
from service.domain.files import display_name, media_type
from service.domain.records import FilePage, FileRecord
from service.errors import ApiError, Code
from service.store.audit import EventBatch
from service.store.blobs import Blob, BlobMissing, BlobStore
from service.store.errors import AccountGone
from service.store.files import FilesStore

log = logging.getLogger("service.auth.files")

# Who acted, as the audit trail names it (``audit.Origin.actor``, ``audit.api_key_actor``).
Actor = dict[str, Any] | None


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
        blobs: BlobStore,
        clock: Clock,
        max_files: int,
        trail: AuditTrail | None = None,
    ) -> None:
        self._store = store
        self.blobs = blobs
        self._clock = clock
        self._max_files = max_files
        self._trail = trail

    def _events(
        self, kind: str, record: FileRecord, at: int, origin: audit.Origin, actor: Actor
    ) -> EventBatch | None:
        if self._trail is None:
            return None
        target = audit.file_target(record.id, record.name, record.size)
        return self._trail.batch(at, audit.event(kind, at, origin, actor=actor, target=target))

    async def check_room(self, user_id: str) -> None:
        """409 ``file_limit_reached`` when the account holds its maximum of files: checked
        before an upload's body is read (and again, atomically, with its record)."""
        if await self._store.count(user_id) >= self._max_files:
            raise _limit_reached(self._max_files)

    async def upload(
        self,
        user_id: str,
        chunks: AsyncIterable[bytes],
        name: str | None,
        content_type: str | None,
        before_record: Callable[[], Awaitable[None]],
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> FileRecord:
        """Store the bytes ``chunks`` yields, then (once ``before_record`` has accepted the
        rest of the request) the record: a new file named for display after ``name``, typed
        after ``content_type``, recorded as ``file.uploaded`` by ``actor`` in the same step.
        Whatever fails on the way (the chunks, ``before_record``, the quota, the store) leaves
        no bytes, no record and no event."""
        file_id = new_id("fil")
        written = await self.blobs.put(file_id, chunks)
        recorded = False
        events = None
        try:
            await before_record()
            now = self._clock.now_ms()
            record = FileRecord(
                id=file_id,
                name=display_name(name),
                size=written.size,
                content_type=media_type(content_type),
                sha256=written.sha256,
                created_at=now,
            )
            events = self._events(audit.FILE_UPLOADED, record, now, origin, actor)
            recorded = True  # from here, an error may come after the record was written
            try:
                added = await self._store.add(user_id, record, self._max_files, events)
            except AccountGone:
                recorded = False
                raise ApiError(Code.ACCOUNT_GONE) from None
            if not added:
                recorded = False
                raise _limit_reached(self._max_files)
        except BaseException:
            if recorded:
                undo = self._store.remove(user_id, file_id, retract=events)
                with contextlib.suppress(Exception):
                    await asyncio.shield(undo)
            await self._release(file_id)
            raise
        return record

    async def _release(self, file_id: str) -> None:
        """Remove a blob whose upload failed after it was stored, even from a cancelled task."""
        try:
            await asyncio.shield(self.blobs.delete(file_id))
        except Exception:
            log.exception("could not remove the bytes of a failed upload")

    async def count(self, user_id: str) -> int:
        """How many files the account holds."""
        return await self._store.count(user_id)

    async def page(self, user_id: str, limit: int, after: str | None) -> FilePage:
        return await self._store.list_page(user_id, limit, after)

    async def get(self, user_id: str, file_id: str) -> FileRecord:
        """The account's file; 404 ``file_not_found`` for any other id."""
        record = await self._store.get(user_id, file_id) if is_valid_id(file_id, "fil") else None
        if record is None:
            raise ApiError(Code.FILE_NOT_FOUND)
        return record

    async def open(self, record: FileRecord) -> Blob:
        """The file's bytes; 404 when a listed file has none (logged: it should never be)."""
        try:
            return await self.blobs.open(record.id)
        except BlobMissing:
            log.error("a listed file has no bytes in storage")
            raise ApiError(Code.FILE_NOT_FOUND) from None

    async def delete(
        self,
        user_id: str,
        file_id: str,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> int:
        """Delete the account's file (record first, then bytes); when it was deleted. Recorded
        as ``file.deleted`` by ``actor``, in the step that removes the record."""
        record = await self.get(user_id, file_id)
        deleted_at = self._clock.now_ms()
        events = self._events(audit.FILE_DELETED, record, deleted_at, origin, actor)
        if await self._store.remove(user_id, file_id, events) is None:  # deleted meanwhile
            raise ApiError(Code.FILE_NOT_FOUND)
        try:
            await self.blobs.delete(file_id)
        except OSError:
            log.exception("could not remove the bytes of a deleted file")
        return deleted_at
