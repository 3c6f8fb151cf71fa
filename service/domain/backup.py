"""What a backup's snapshot of the store holds: each record as the store serialises it, and
what was read when."""

from __future__ import annotations

from dataclasses import dataclass

from service.domain.records import FileRecord


@dataclass(frozen=True, slots=True)
class Record:
    """One key as ``DUMP`` serialises it, and when it expires (absolute ms; None: never)."""

    key: str
    expire_at: int | None
    dump: bytes


@dataclass(frozen=True, slots=True)
class Snapshot:
    taken_at: int  # the store's clock (ms) when writes were paused
    records: int
    files: list[FileRecord]  # every file record the snapshot holds
    paused_ms: int
    server: str  # the engine and version of the (first) master, e.g. "valkey 8.1.1"
