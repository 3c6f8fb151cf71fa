"""Backing up the whole service, its records in Redis and the bytes of its files, as one state it
was in; and restoring such a backup into an empty store and data directory.

**Why the two halves agree.** An upload stores its bytes (renamed into place, fsynced) before
its record is written; a deletion removes the record before the bytes, and a blob is never
changed once in place (``service.auth.files``, ``service.store.protocols.blobs``). So at any
instant every file record names bytes that are there. A backup:

1. pauses the store's writes and reads every record at that instant (``service.store.backup``:
   the records are as they were when the pause began, a state the service was in);
2. still paused, hard-links the bytes of every file record it read into a private directory
   next to them (``PinnableBlobs.pin``). No record can be removed while writes wait, so none of
   those bytes has been removed yet (the deletion's record removal comes first, and waits);
3. unpauses, and copies the pinned bytes into the backup at leisure, checking each against its
   record's size and SHA-256. A file deleted meanwhile has lost its name in the data directory,
   not its bytes: the link still holds them.

With an object store (``FILEHOST_BLOB_STORE=s3``) nothing can be hard-linked, so step 2 is
different: before step 1, the backup marks the store (``BackupStore.mark_backing_up``), and while
the mark is there no deletion removes bytes, it only notes them (``Removals.purge``); the mark
is renewed while the bytes are copied out, and lifted after (it expires by itself should the
backup die). A record in the snapshot was there when it was read, after the mark was set, so
its removal, and the bytes' after it, come later: they find the mark and wait. The account's
next removal run (the backup command runs one for every account at its end) removes them.

So the backup holds exactly the records of that instant and the bytes of each of their files:
no record without its bytes, and no bytes without a record (an upload whose record was still
waiting, or crash leftovers, are left out). The records a half-done change leaves behind are
those a crash at that instant would have left, which every change is ordered to survive. Writes
wait for steps 1 and 2 only, bounded by ``max_pause_ms`` (the snapshot is refused when it took
longer). Records that already named missing bytes before the backup (``missing_bytes``) are kept
as they were, and said so.

**Restoring** refuses a target that holds anything (a key under the prefix in Redis, a blob in the
blob store), writes the bytes first (checked against the backup's SHA-256) and the records after,
so an interrupted restore never leaves a record without its bytes; a marker in Redis lets a restore
cut short be run again with the same backup. Marks of upgrades done (``RedisKeys.upgrade_marks``)
are no data: every start writes them, so a deployment started empty holds them; the check passes
over them and the restore removes them before the records, which hold the backup's own, so a backup
made before an upgrade is upgraded (the command line runs the upgrades once the records are in: a
``serve`` already running ran them over none). The store comes back as it was at the backup's
instant, but for its sessions: they are left out (everyone signs in again), unless asked to keep
them. Keys keep their own deadlines, so a key revoked after the backup is live again: the command
line lists the keys with their last use and revokes those created or used since a given time
(``service.cli.keys``).

**The backup** is a directory, mode 0700, of files mode 0600: ``records.jsonl`` (one key a line:
its name, absolute expiry and ``DUMP`` payload, base64), ``files/<id>`` (the bytes) and
``manifest.json`` (written last: without it the backup is incomplete). It holds digests of
secrets, password hashes and emails, never a secret; nothing here prints one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import os
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from service.clock import Clock, iso
from service.domain.backup import Record, Snapshot
from service.domain.blobs import READ_CHUNK, BlobMissing, ChunkSource
from service.domain.outcomes import PauseTooLong
from service.domain.records import FileRecord
from service.store.protocols import BackupStore
from service.store.protocols.blobs import BlobStore, PinnableBlobs

FORMAT = "filehost-auth backup"
VERSION = 1
MANIFEST = "manifest.json"
RECORDS = "records.jsonl"
FILES = "files"
# How long writes may wait while a backup reads the store, unless told otherwise.
DEFAULT_MAX_PAUSE_MS = 2000
# How long a backup's mark holds deletions' bytes back unless renewed (it is, while copying):
# a backup that dies lets them go this long after.
BACKUP_MARK_MS = 10 * 60 * 1000
_FILE_ID = re.compile(r"^fil_[0-9A-Za-z]{22}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class BackupSummary:
    id: str
    taken_at: int
    records: int
    files: int
    bytes: int
    paused_ms: int
    missing_bytes: list[str]  # file records whose bytes were already gone


@dataclass(frozen=True, slots=True)
class RestoreSummary:
    taken_at: int
    records: int  # written; those past their deadline are left out
    expired: int
    files: int
    bytes: int
    resumed: bool  # finished a restore of the same backup cut short
    sessions_ended: int = 0  # sessions of the backup left out (``keep_sessions`` false)


def _private_directory(path: Path) -> bool:
    """Make ``path`` a directory only its owner can enter; True when it was made here. An
    existing one must be empty."""
    if path.exists():
        if not path.is_dir() or any(path.iterdir()):
            raise BackupError(f"{path} exists and is not an empty directory: choose a new one")
        made = False
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700)
        made = True
    path.chmod(0o700)
    return made


def _private_file(path: Path) -> Any:
    """A new file only its owner can read, open for writing bytes."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(descriptor, 0o600)
    return os.fdopen(descriptor, "wb")


def _sync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _copy_checked(source: Path, target: Path, record: FileRecord) -> None:
    """Copy a file's bytes into the backup; ``BackupError`` when they are not its record's."""
    digest, size = hashlib.sha256(), 0
    with open(source, "rb") as reading, _private_file(target) as writing:
        while data := reading.read(READ_CHUNK):
            digest.update(data)
            size += len(data)
            writing.write(data)
        writing.flush()
        os.fsync(writing.fileno())
    if (size, digest.hexdigest()) != (record.size, record.sha256):
        raise BackupError(
            f"the bytes of {record.id} in the data directory do not match its record "
            "(size or SHA-256): they were damaged on disk; nothing was kept"
        )


async def _nothing_to_pin(files: list[FileRecord]) -> None:
    """An object store's bytes are held by the backup's mark instead (``Backups._copied``)."""


def _private_files_directory(to: Path) -> None:
    (to / FILES).mkdir(mode=0o700)
    (to / FILES).chmod(0o700)


def _encode(record: Record) -> bytes:
    line = {
        "key": record.key,
        "expire_at": record.expire_at,
        "dump": base64.b64encode(record.dump).decode(),
    }
    return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)


class Backups:
    """Backups of one deployment: its store (under ``prefix``) and its files' bytes."""

    def __init__(self, store: BackupStore, blobs: BlobStore, clock: Clock) -> None:
        self._store = store
        self._blobs = blobs
        self._clock = clock
        self._prefix = store.prefix

    async def back_up(self, to: Path, max_pause_ms: int = DEFAULT_MAX_PAUSE_MS) -> BackupSummary:
        """Write a backup into the new (or empty) directory ``to``; see the module's
        docstring. On any failure nothing is left in ``to``."""
        made = _private_directory(to)
        try:
            return await self._back_up(to, max_pause_ms)
        except BaseException:
            for path in (to / RECORDS, to / MANIFEST):
                path.unlink(missing_ok=True)
            shutil.rmtree(to / FILES, ignore_errors=True)
            if made:
                shutil.rmtree(to, ignore_errors=True)
            raise

    async def _back_up(self, to: Path, max_pause_ms: int) -> BackupSummary:
        if isinstance(self._blobs, PinnableBlobs):
            snapshot, kept, missing = await self._pinned(to, max_pause_ms, self._blobs)
        else:
            snapshot, kept, missing = await self._copied(to, max_pause_ms)
        backup_id = secrets.token_hex(8)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "id": backup_id,
            "taken_at": iso(snapshot.taken_at),
            "taken_at_ms": snapshot.taken_at,
            "redis_prefix": self._prefix,
            "server": snapshot.server,
            "records": snapshot.records,
            "files": [{"id": r.id, "size": r.size, "sha256": r.sha256} for r in kept],
            "missing_bytes": sorted(missing),
        }
        partial = to / f".{MANIFEST}.partial"
        with _private_file(partial) as out:
            out.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
            out.flush()
            os.fsync(out.fileno())
        partial.rename(to / MANIFEST)
        _sync_directory(to)
        return BackupSummary(
            id=backup_id,
            taken_at=snapshot.taken_at,
            records=snapshot.records,
            files=len(kept),
            bytes=sum(record.size for record in kept),
            paused_ms=snapshot.paused_ms,
            missing_bytes=sorted(missing),
        )

    async def _pinned(
        self, to: Path, max_pause_ms: int, blobs: PinnableBlobs
    ) -> tuple[Snapshot, list[FileRecord], list[str]]:
        """The records, and the bytes of the directory's files hard-linked while writes wait
        (so a deletion right after can't take them), then copied: the snapshot, the records
        whose bytes were copied, and those whose bytes were already missing."""
        pinned = await asyncio.to_thread(blobs.pinning_directory)
        try:
            missing: list[str] = []

            async def pin(files: list[FileRecord]) -> None:
                ids = [record.id for record in files]
                missing.extend(await asyncio.to_thread(blobs.pin, ids, pinned))

            snapshot = await self._snapshot(to, max_pause_ms, pin)
            kept = [record for record in snapshot.files if record.id not in set(missing)]
            _private_files_directory(to)
            for record in kept:
                await asyncio.to_thread(
                    _copy_checked, pinned / record.id, to / FILES / record.id, record
                )
            _sync_directory(to / FILES)
        finally:
            await asyncio.to_thread(shutil.rmtree, pinned, True)
        return snapshot, kept, missing

    async def _copied(
        self, to: Path, max_pause_ms: int
    ) -> tuple[Snapshot, list[FileRecord], list[str]]:
        """The records, and the bytes of their files copied out of the object store, while
        deletions leave the bytes they remove noted for later (``BackupStore.mark_backing_up``,
        set before the records are read and renewed while copying): so no file the records
        name loses its bytes until the copy is done."""
        await self._store.mark_backing_up(BACKUP_MARK_MS)
        renewed = time.monotonic()
        try:
            snapshot = await self._snapshot(to, max_pause_ms, _nothing_to_pin)
            _private_files_directory(to)
            kept, missing = [], []
            for record in snapshot.files:
                if time.monotonic() - renewed > BACKUP_MARK_MS / 4000:
                    await self._store.mark_backing_up(BACKUP_MARK_MS)
                    renewed = time.monotonic()
                try:
                    await self._download_checked(record, to / FILES / record.id)
                except BlobMissing:
                    missing.append(record.id)
                    continue
                kept.append(record)
            _sync_directory(to / FILES)
        finally:
            await self._store.done_backing_up()
        return snapshot, kept, missing

    async def _snapshot(
        self,
        to: Path,
        max_pause_ms: int,
        while_paused: Callable[[list[FileRecord]], Awaitable[None]],
    ) -> Snapshot:
        with _private_file(to / RECORDS) as records:
            try:
                snapshot = await self._store.snapshot(
                    lambda record: records.write(_encode(record)), while_paused, max_pause_ms
                )
            except PauseTooLong as error:
                raise BackupError(
                    f"reading the store took {error.took_ms} ms, longer than writes may "
                    f"wait ({error.max_pause_ms} ms), so writes may have landed meanwhile "
                    "and nothing was kept: run it again at a quieter moment, or allow a "
                    "longer wait with --max-pause-ms"
                ) from None
            records.flush()
            os.fsync(records.fileno())
        return snapshot

    async def _download_checked(self, record: FileRecord, target: Path) -> None:
        """A file's bytes from the blob store into the backup; ``BackupError`` when they are
        not its record's."""
        blob = await self._blobs.open(record.id)
        digest, size = hashlib.sha256(), 0
        try:
            with _private_file(target) as writing:
                async for data in blob.chunks(0, blob.size):
                    digest.update(data)
                    size += len(data)
                    await asyncio.to_thread(writing.write, data)
                writing.flush()
                os.fsync(writing.fileno())
        finally:
            await blob.close()
        if (size, digest.hexdigest()) != (record.size, record.sha256):
            raise BackupError(
                f"the bytes of {record.id} in the file storage do not match its record "
                "(size or SHA-256): they were damaged there; nothing was kept"
            )

    async def restore(self, source: Path, keep_sessions: bool = False) -> RestoreSummary:
        """Restore the backup in ``source`` into this deployment's store and data directory,
        which must hold nothing (or a restore of the same backup cut short). Every session of
        the backup (and every login waiting for its second step) is left out, so everyone signs
        in again, unless ``keep_sessions``."""
        manifest = _manifest(source)
        if manifest["redis_prefix"] != self._prefix:
            raise BackupError(
                f"the backup's records are under the prefix {manifest['redis_prefix']!r}, "
                f"this deployment's under {self._prefix!r}: set FILEHOST_REDIS_PREFIX="
                f"{manifest['redis_prefix']} to restore it"
            )
        cut_short = await self._store.restoring()
        if cut_short is not None and cut_short != manifest["id"]:
            raise BackupError(
                f"a restore of another backup ({cut_short}) was cut short here: empty the "
                "store and the data directory first"
            )
        resumed = cut_short is not None
        if not resumed:
            await self._refuse_unless_empty()
        await self._store.begin_restore(manifest["id"])
        # Also when resumed: a serve started since the cut would have marked upgrades done over
        # the records then restored.
        await self._store.forget_upgrades()
        size = 0
        for entry in manifest["files"]:  # the bytes first: no record ever names missing bytes
            if resumed and await self._intact(entry):
                continue  # restored before the cut
            await self._restore_bytes(source / FILES / entry["id"], entry)
            size += entry["size"]
        now = self._clock.now_ms()
        lines = _records(source / RECORDS, self._prefix)
        written, signed_in, sessions = await self._store.restore(
            lines, now, replace=resumed, keep_sessions=keep_sessions
        )
        await self._store.end_restore()
        return RestoreSummary(
            taken_at=manifest["taken_at_ms"],
            records=written,
            expired=manifest["records"] - written - signed_in,
            files=len(manifest["files"]),
            bytes=size,
            resumed=resumed,
            sessions_ended=sessions,
        )

    async def _refuse_unless_empty(self) -> None:
        held = await self._store.held(limit=3)
        stored = await self._blobs.stored()
        if held or stored:
            found = []
            if held:
                found.append(f"keys under {self._prefix}: in Redis (such as {held[0]})")
            if stored:
                found.append(f"{len(stored)} file(s) in the file storage")
            raise BackupError(
                "the target is not empty: "
                + " and ".join(found)
                + "; restore only into an empty store and data directory (nothing was written)"
            )

    async def _intact(self, entry: dict[str, Any]) -> bool:
        """Whether the blob store holds a file's bytes whole, as the backup has them (a
        restore cut short wrote them before the cut); a blob that is not is removed."""
        try:
            blob = await self._blobs.open(entry["id"])
        except BlobMissing:
            return False
        digest = hashlib.sha256()
        try:
            whole = blob.size == entry["size"]
            if whole:
                async for data in blob.chunks(0, blob.size):
                    digest.update(data)
        finally:
            await blob.close()
        if not whole or digest.hexdigest() != entry["sha256"]:
            await self._blobs.delete(entry["id"])
            return False
        return True

    async def _restore_bytes(self, path: Path, entry: dict[str, Any]) -> None:
        try:
            written = await self._blobs.put(entry["id"], ChunkSource(_chunks(path)))
        except FileNotFoundError:
            raise BackupError(f"the backup lacks the bytes of {entry['id']}") from None
        if (written.size, written.sha256) != (entry["size"], entry["sha256"]):
            await self._blobs.delete(entry["id"])
            raise BackupError(
                f"the bytes of {entry['id']} in the backup do not match its record: the backup "
                "is damaged"
            )


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(open, path, "rb")
    try:
        while data := await asyncio.to_thread(handle.read, READ_CHUNK):
            yield data
    finally:
        await asyncio.to_thread(handle.close)


def _manifest(source: Path) -> dict[str, Any]:
    path = source / MANIFEST
    try:
        manifest = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise BackupError(
            f"no {MANIFEST} in {source}: not a backup, or one that did not finish"
        ) from None
    except (OSError, orjson.JSONDecodeError) as error:
        raise BackupError(f"{path} is unreadable ({type(error).__name__})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{source} is not a filehost-auth backup")
    if manifest.get("version") != VERSION:
        raise BackupError(
            f"{source} is a backup of format version {manifest.get('version')}; this version "
            f"reads version {VERSION}"
        )
    try:
        well_formed = (
            all(isinstance(manifest[name], str) for name in ("id", "redis_prefix"))
            and all(isinstance(manifest[name], int) for name in ("taken_at_ms", "records"))
            and all(
                _FILE_ID.match(entry["id"])
                and isinstance(entry["size"], int)
                and _SHA256.match(entry["sha256"])
                for entry in manifest["files"]
            )
        )
    except (KeyError, TypeError):
        well_formed = False
    if not well_formed:
        raise BackupError(f"{path} is damaged: a field is missing or malformed")
    return manifest


def _records(path: Path, prefix: str) -> Iterator[Record]:
    """The records of a backup, each checked to be one of this deployment's keys."""
    with open(path, "rb") as lines:
        for number, line in enumerate(lines, 1):
            try:
                entry = orjson.loads(line)
                record = Record(entry["key"], entry["expire_at"], base64.b64decode(entry["dump"]))
            except (orjson.JSONDecodeError, KeyError, TypeError, binascii.Error):
                raise BackupError(f"{path}, line {number}: not a record") from None
            if not record.key.startswith(prefix + ":"):
                raise BackupError(f"{path}, line {number}: a key outside {prefix}:")
            yield record
