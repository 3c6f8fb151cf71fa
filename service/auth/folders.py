"""Folders as policy sees them: creating, reading (with the path from the top), listing by name,
renaming, moving and deleting an account's folders, within the deployment's bounds (folders per
account, depth), each change recorded in the audit trail in the step that makes it.

Every operation receives the caller's ``Principal`` and asks ``service.auth.reach`` which
folders it reaches. Another account's folder, and one being deleted, answer exactly like an
unknown id: 404 ``folder_not_found``.

Deleting detaches the folder with its subtree at once, then removes the subtree in bounded steps
before answering (``service.auth.removals``, ``service.store.folder_removal``): a deletion cut
short is finished by the account's next folder change, or the next start of the service.

What later work builds on: ``Reach.folder`` (a folder exists and is the account's), ``page`` and
``Files.folder_page`` (a folder's direct subfolders and files), ``inside`` (whether a folder or
file lies in a folder's subtree), and ``Removals.purge`` (where a removed file's or folder's
aliases go).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from service.auth.audit import AuditTrail
from service.auth.reach import Reach
from service.auth.removals import Removals
from service.clock import Clock
from service.domain import audit_events as audit
from service.domain.credentials import new_id
from service.domain.folders import Outcome
from service.domain.principal import Principal
from service.domain.records import UNSET, FileRecord, FolderPage, FolderRecord, Unset
from service.errors import ApiError, Code
from service.store.protocols import FoldersStore

log = logging.getLogger("service.auth.folders")

Actor = dict[str, Any] | None
# A change overtaken this many times in a row by others of the same folder gives up.
ATTEMPTS = 8


def _refusal(outcome: Outcome, max_folders: int, max_depth: int) -> ApiError:
    if outcome is Outcome.NOT_FOUND:
        return ApiError(Code.FOLDER_NOT_FOUND)
    if outcome is Outcome.DESTINATION_NOT_FOUND:
        return ApiError(Code.FOLDER_NOT_FOUND, details={"field": "parent_id"})
    if outcome is Outcome.TOO_DEEP:
        return ApiError(
            Code.FOLDER_TOO_DEEP,
            f"Folders may nest at most {max_depth} levels deep.",
            details={"max_depth": max_depth},
        )
    if outcome is Outcome.NAME_TAKEN:
        return ApiError(Code.FOLDER_NAME_TAKEN)
    if outcome is Outcome.LIMIT_REACHED:
        return ApiError(
            Code.FOLDER_LIMIT_REACHED,
            f"This account holds the maximum of {max_folders} folders. Delete one before "
            "creating another.",
            details={"max_folders": max_folders},
        )
    if outcome is Outcome.CYCLE:
        return ApiError(Code.FOLDER_CYCLE)
    if outcome is Outcome.NOT_EMPTY:
        return ApiError(Code.FOLDER_NOT_EMPTY)
    if outcome is Outcome.ACCOUNT_GONE:
        return ApiError(Code.ACCOUNT_GONE)
    raise AssertionError(outcome)


class Folders:
    def __init__(
        self,
        store: FoldersStore,
        reach: Reach,
        removals: Removals,
        clock: Clock,
        trail: AuditTrail,
        max_folders: int,
        max_depth: int,
    ) -> None:
        self._store = store
        self._reach = reach
        self._removals = removals
        self._clock = clock
        self._trail = trail
        self.max_folders = max_folders
        self.max_depth = max_depth

    def _refused(self, outcome: Outcome) -> ApiError:
        return _refusal(outcome, self.max_folders, self.max_depth)

    async def _finish(self, user_id: str) -> None:
        """Finish the account's pending removals after a change that has been made: a failure
        (the store unreachable, say) leaves them to the next run, and does not undo the
        change's answer. Shielded: a client gone mid-way does not stop it half done."""
        try:
            await asyncio.shield(self._removals.finish(user_id))
        except Exception as error:
            log.warning("a removal was cut short, left for later: %s", type(error).__name__)

    def _event(
        self,
        kind: str,
        at: int,
        record: FolderRecord,
        origin: audit.Origin,
        actor: Actor,
        **changes: Any,
    ) -> dict[str, Any]:
        return audit.event(
            kind,
            at,
            origin,
            actor=actor,
            target=audit.folder_target(record.id, record.name),
            changes=changes or None,
        )

    async def create(
        self,
        principal: Principal,
        name: str,
        parent_id: str | None,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> FolderRecord:
        """A new folder named ``name`` (checked by the caller) in ``parent_id`` (None: the top
        level); recorded as ``folder.created`` in the step that stores it. A creation refused
        for the folder limit while a deletion is still being removed finishes that removal and
        tries once more."""
        user_id = principal.user_id
        parent_id = await self._reach.place(principal, parent_id, "parent_id")
        now = self._clock.now_ms()
        record = FolderRecord(new_id("fld"), name, parent_id, now, now)
        event = self._event(audit.FOLDER_CREATED, now, record, origin, actor, parent_id=parent_id)
        for attempt in range(2):
            changed = await self._store.create(
                user_id,
                record,
                self.max_folders,
                self.max_depth,
                self._trail.batch(now, event),
            )
            if changed.pending:
                await self._finish(user_id)
            if changed.outcome is Outcome.DONE:
                return record
            if changed.outcome is Outcome.NOT_FOUND:
                raise ApiError(Code.FOLDER_NOT_FOUND, details={"field": "parent_id"})
            if not (changed.outcome is Outcome.LIMIT_REACHED and changed.pending and attempt == 0):
                raise self._refused(changed.outcome)
        raise AssertionError("unreachable")

    async def get(self, principal: Principal, folder_id: str) -> list[FolderRecord]:
        """One of the principal's folders and its parents up to the top, the folder first;
        404 for any other id."""
        return await self._reach.folder(principal, folder_id)

    async def page(
        self, principal: Principal, parent_id: str | None, limit: int, after: str | None
    ) -> FolderPage:
        """A page of the folders in ``parent_id`` (None: the top level; for a key bound to
        folders, those of its folders that none of its others holds), by name; 404
        ``folder_not_found`` when the parent is not one of the principal's folders."""
        if parent_id is None and principal.bound:  # a bound key's top level: its folders
            return await self._reach.top_folders(principal, limit, after)
        parent_id = await self._reach.listing(principal, parent_id, "parent_id")
        page = await self._store.children_page(principal.user_id, parent_id, limit, after)
        if page is None:
            raise ApiError(Code.FOLDER_NOT_FOUND, details={"field": "parent_id"})
        return page

    async def change(
        self,
        principal: Principal,
        folder_id: str,
        name: str | None = None,
        parent_id: str | Unset | None = UNSET,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> FolderRecord:
        """Rename (``name``) and/or move (``parent_id``: a folder, None for the top level) one
        of the principal's folders; the folder as it now is. Moving it into itself or a folder
        below it is 409 ``folder_cycle``; its subtree must still fit the depth bound; its name
        must be free among its new siblings. Recorded as ``folder.renamed`` (the new name) and
        ``folder.moved`` (the new ``parent_id``), each only when it changed, in the step that
        makes the change."""
        user_id = principal.user_id
        if not isinstance(parent_id, Unset):
            parent_id = await self._reach.place(principal, parent_id, "parent_id")
        for _ in range(ATTEMPTS):
            read, before = await self._reach.stored_folder(principal, folder_id)
            now = self._clock.now_ms()
            after = replace(
                before,
                name=before.name if name is None else name,
                parent_id=before.parent_id if isinstance(parent_id, Unset) else parent_id,
                updated_at=now,
            )
            events = []
            if after.name != before.name:
                events.append(
                    self._event(audit.FOLDER_RENAMED, now, before, origin, actor, name=after.name)
                )
            if after.parent_id != before.parent_id:
                events.append(
                    self._event(
                        audit.FOLDER_MOVED, now, before, origin, actor, parent_id=after.parent_id
                    )
                )
            if not events:
                await self._reach.folder(principal, folder_id)  # still 404 when not live
                return before
            changed = await self._store.change(
                user_id, read, before, after, self.max_depth, self._trail.batch(now, *events)
            )
            if changed.pending:
                await self._finish(user_id)
            if changed.outcome is Outcome.DONE:
                return after
            if changed.outcome is not Outcome.CHANGED:
                raise self._refused(changed.outcome)
        raise ApiError(Code.FOLDER_BUSY)

    async def delete(
        self,
        principal: Principal,
        folder_id: str,
        recursive: bool,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> int:
        """Delete one of the principal's folders: 409 ``folder_not_empty`` when it holds a
        file or folder, unless ``recursive``, which deletes its whole subtree. Recorded as
        ``folder.deleted`` (``recursive`` in its changes) when detached; when it was deleted.
        The subtree is unreachable from the detachment on, and removed before the answer;
        if that is cut short (the client gone included), the rest is removed later."""
        user_id = principal.user_id
        for _ in range(ATTEMPTS):
            read, record = await self._reach.stored_folder(principal, folder_id)
            deleted_at = self._clock.now_ms()
            event = self._event(
                audit.FOLDER_DELETED, deleted_at, record, origin, actor, recursive=recursive
            )
            await self._removals.expect(user_id)
            outcome = await self._store.detach(
                user_id, read, record, recursive, self._trail.batch(deleted_at, event)
            )
            if outcome is Outcome.DONE:
                await self._finish(user_id)
                return deleted_at
            if outcome is not Outcome.CHANGED:
                raise self._refused(outcome)
        raise ApiError(Code.FOLDER_BUSY)

    async def inside(
        self, user_id: str, ancestor_id: str, target: FolderRecord | FileRecord
    ) -> bool:
        """Whether a folder, or a file, of the account lies in the subtree of the live folder
        ``ancestor_id`` (a folder in its own subtree). One round trip; a file at the top level
        is in no folder's subtree."""
        folder_id = target.id if isinstance(target, FolderRecord) else target.folder_id
        if folder_id is None:
            return False
        return await self._store.inside(user_id, folder_id, ancestor_id)
