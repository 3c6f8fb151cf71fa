"""What the policy asks of the stores of files and what reaches them: files, folders and their
removal, a bound key's reach, aliases and their views, resumable uploads, download tickets, and
small blobs kept in Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from service.domain.aliases import Listed, View
from service.domain.audit_events import EventBatch
from service.domain.folders import Changed, Outcome
from service.domain.records import (
    AliasRecord,
    DownloadTicket,
    FilePage,
    FileRecord,
    FolderPage,
    FolderRecord,
)
from service.domain.uploads import UploadRecord


class FilesStore(Protocol):
    async def list_page(self, user_id: str, limit: int, after: str | None) -> FilePage: ...

    async def folder_page(
        self, user_id: str, folder_id: str | None, limit: int, after: str | None
    ) -> FilePage | None: ...

    async def every_file(self, user_id: str) -> list[FileRecord]: ...

    async def get_many(self, user_id: str, file_ids: list[str]) -> list[FileRecord | None]: ...

    async def get(self, user_id: str, file_id: str) -> FileRecord | None: ...

    def record_field(self, user_id: str, file_id: str) -> tuple[str, str]: ...

    async def read(self, user_id: str, file_id: str) -> tuple[str, FileRecord] | None: ...

    async def count(self, user_id: str) -> int: ...

    async def add(
        self, user_id: str, record: FileRecord, max_files: int, events: EventBatch | None = None
    ) -> bool: ...

    async def change(
        self,
        user_id: str,
        stored: str,
        before: FileRecord,
        after: FileRecord,
        events: EventBatch | None = None,
    ) -> bool | None: ...

    async def remove(
        self,
        user_id: str,
        stored: str,
        record: FileRecord,
        events: EventBatch | None = None,
        *,
        undo: bool = False,
        retract: EventBatch | None = None,
    ) -> bool | None: ...


class FoldersStore(Protocol):
    async def create(
        self,
        user_id: str,
        record: FolderRecord,
        max_folders: int,
        max_depth: int,
        events: EventBatch | None = None,
    ) -> Changed: ...

    async def read(self, user_id: str, folder_id: str) -> str | None: ...

    async def lineage(self, user_id: str, folder_id: str) -> list[FolderRecord] | None: ...

    async def children_page(
        self, user_id: str, parent_id: str | None, limit: int, after: str | None
    ) -> FolderPage | None: ...

    async def change(
        self,
        user_id: str,
        read: str,
        before: FolderRecord,
        after: FolderRecord,
        max_depth: int,
        events: EventBatch | None = None,
    ) -> Changed: ...

    async def detach(
        self,
        user_id: str,
        read: str,
        record: FolderRecord,
        recursive: bool,
        events: EventBatch | None = None,
    ) -> Outcome: ...

    async def inside(self, user_id: str, folder_id: str, ancestor_id: str | None) -> bool: ...

    async def every_folder(self, user_id: str) -> list[FolderRecord]: ...

    async def count(self, user_id: str) -> int: ...


class FolderRemovalStore(Protocol):
    async def expect(self, user_id: str) -> None: ...

    async def trash(self, user_id: str) -> list[str]: ...

    async def remove_batch(self, user_id: str, top: str, budget: int) -> tuple[bool, list[str]]: ...

    def leftovers(self, user_id: str, count: int) -> AsyncIterator[list[str]]: ...

    async def note(self, user_id: str, ids: list[str]) -> None: ...

    async def backing_up(self) -> bool: ...

    async def forget(self, user_id: str, ids: list[str]) -> None: ...

    async def pending(self, user_id: str) -> bool: ...

    async def accounts(self) -> list[str]: ...

    async def settle(self, user_id: str) -> None: ...


class BindingsStore(Protocol):
    async def file(self, user_id: str, key_id: str, file_id: str) -> tuple[int, str | None]: ...

    async def folder(
        self, user_id: str, key_id: str, folder_id: str
    ) -> tuple[int, list[tuple[str, str]]]: ...

    async def place(
        self, user_id: str, key_id: str, default: str | None
    ) -> tuple[int, str | None]: ...

    async def tops(self, user_id: str, key_id: str) -> tuple[int, list[FolderRecord]]: ...

    async def files_page(
        self, user_id: str, key_id: str, limit: int, after: str | None
    ) -> tuple[int, FilePage]: ...

    async def targets(
        self, user_id: str, key_id: str, targets: list[tuple[str, str]]
    ) -> tuple[int, list[bool]]: ...

    async def folders_after_check(
        self, user_id: str, key_id: str, target: tuple[str, str] | None
    ) -> tuple[int, list[str]]: ...


class AliasEntries(Protocol):
    async def claim(self, slug: str, fields: Mapping[str, str | int]) -> bool: ...

    async def change(self, slug: str, alias_id: str, changes: dict[str, str | None]) -> bool: ...

    async def freeze(self, slug: str, alias_id: str) -> dict[str, str] | None: ...

    async def delete(
        self, slug: str, user_id: str, alias_id: str | None = None, target_id: str | None = None
    ) -> bool: ...


class AliasStore(Protocol):
    @property
    def entries(self) -> AliasEntries: ...

    async def add(
        self,
        user_id: str,
        record: AliasRecord,
        max_aliases: int,
        now: int,
        events: EventBatch | None = None,
    ) -> tuple[int, bool]: ...

    async def claim(
        self, user_id: str, record: AliasRecord, password_hash: str | None, off: bool
    ) -> bool: ...

    async def confirm(self, user_id: str, value: str, created_at: int) -> tuple[int, bool]: ...

    async def page(
        self, user_id: str, limit: int, after: tuple[int, str] | None
    ) -> tuple[list[Listed], tuple[int, str] | None]: ...

    async def page_of_target(
        self, user_id: str, target_id: str, limit: int, after: tuple[int, str] | None
    ) -> tuple[list[Listed], tuple[int, str] | None]: ...

    async def find(self, user_id: str, alias_id: str) -> Listed | None: ...

    async def members_of(self, user_id: str, target_ids: list[str]) -> list[Listed]: ...

    async def pending_since(self, user_id: str, values: list[str]) -> list[int | None]: ...

    async def count(self, user_id: str) -> int: ...

    async def admit(
        self,
        user_id: str,
        value: str,
        created_at: int,
        new_value: str | None,
        now: int,
        events: EventBatch | None,
    ) -> bool: ...

    async def remove_members(
        self,
        user_id: str,
        members: list[tuple[str, int]],
        events: EventBatch | None = None,
        *,
        retract: EventBatch | None = None,
    ) -> None: ...

    async def expect_switch(self, user_id: str) -> None: ...

    async def switch_all(self, user_id: str, off: bool, batch: int = 500) -> None: ...

    async def switched(self, user_id: str) -> None: ...

    async def switch_pending(self, user_id: str) -> bool: ...

    async def switching(self) -> list[str]: ...

    async def switch_setting(self, user_id: str) -> bool: ...


class AliasViews(Protocol):
    async def view(
        self,
        slug_key: str,
        now_ms: int,
        *,
        count: bool,
        alias_id: str | None = None,
        password_hash: str | None = None,
        address: str | None = None,
        rate: tuple[int, int] | None = None,
        continuing: bool = False,
    ) -> tuple[View, int]: ...

    async def view_reading(
        self,
        slug_key: str,
        now_ms: int,
        alias_id: str,
        field: tuple[str, str],
        address: str | None = None,
        rate: tuple[int, int] | None = None,
    ) -> tuple[View, Any, int]: ...

    async def give_back(self, slug_key: str, alias_id: str) -> None: ...


class UploadStore(Protocol):
    async def add(
        self,
        record: UploadRecord,
        now: int,
        counted: int,
        max_count: int,
        max_bytes: int,
    ) -> int: ...

    async def get(self, user_id: str, upload_id: str, now: int) -> UploadRecord | None: ...

    async def claim(
        self, user_id: str, upload_id: str, offset: int, token: str, lease_until: int, now: int
    ) -> tuple[int, Any]: ...

    async def commit(
        self,
        user_id: str,
        upload_id: str,
        token: str,
        offset: int,
        state: dict[str, Any],
        lease_until: int,
        length: int | None = None,
        sha: bytes | None = None,
    ) -> bool: ...

    async def release(self, user_id: str, upload_id: str, token: str) -> None: ...

    async def renew(self, user_id: str, upload_id: str, token: str, lease_until: int) -> bool: ...

    async def finish(
        self, user_id: str, upload_id: str, token: str, done: dict[str, Any]
    ) -> bool: ...

    async def remove(self, user_id: str, upload_id: str) -> None: ...

    async def accounts(self) -> list[str]: ...

    async def expired(self, user_id: str, now: int) -> list[str]: ...

    async def in_progress(self, user_id: str, now: int) -> list[UploadRecord]: ...

    async def live_file_ids(self, user_id: str, now: int) -> set[str]: ...

    async def leftover_state(
        self, user_id: str, upload_id: str
    ) -> tuple[str, dict[str, Any]] | None: ...


class DownloadTicketStore(Protocol):
    async def keep(self, ticket_digest: str, ticket: DownloadTicket, lasting_ms: int) -> None: ...

    async def find(self, ticket_digest: str) -> DownloadTicket | None: ...
