"""Resumable uploads (tus 1.0, ``/api/v1/uploads``) as policy sees them: an upload made for a file,
continued by any ``PATCH`` on any instance from the offset it reached, and finished into the
file exactly once, as ``POST /files`` makes one.

An upload is the account's: another account's id is an unknown one. It is made with what a
``POST /files`` would be checked for (the credential's right to upload, the folder it names, the
account's room for one more file), plus the bounds of uploads in progress; every ``PATCH`` is
checked again for the credential that sends it, which need not be the one that made it (a key
bound to folders only where it could have made it).

The record (``service.store.uploads``) says how far each upload got; the bytes are the blob
store's (``service.store.partial_blobs``). A ``PATCH`` takes the upload's lease at the offset it
names (another offset is 409 ``upload_offset_mismatch``, a ``PATCH`` writing meanwhile 409
``upload_in_progress``), commits what it stored as it goes (so one cut off keeps it), and lets
it go. The last byte in, the same ``PATCH`` makes the blob whole, records the file
(``Files.adopt``: limits, folder, event) and marks the upload finished, while it still holds the
lease: so the file is made once however the last request is retried, and the retry is answered
with it.

The file's SHA-256 is hashed as the bytes arrive, in the process that receives them; an upload
continued by another process (or after a request that failed) is hashed again from its blob
when it is finished. A ``PATCH`` with ``Upload-Checksum`` commits only once its bytes match it
(460 ``upload_checksum_mismatch`` otherwise, and the offset stays).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from service.auth.files import Files
from service.clock import Clock
from service.config import UploadSettings
from service.domain import audit_events as audit
from service.domain import sha256_state
from service.domain.blobs import BlobMissing, Partial, Source, StorageFull, Written
from service.domain.credentials import is_valid_id, new_id
from service.domain.principal import Principal
from service.domain.records import UNSET, FileRecord, Unset
from service.domain.uploads import (
    ADDED,
    BUSY,
    ELSEWHERE,
    FINISHED,
    GONE,
    TOO_MANY,
    TOO_MANY_BYTES,
    UploadRecord,
)
from service.errors import ApiError, Code
from service.store.protocols import UploadStore
from service.store.protocols.blobs import BlobStore, PartialBlobs

log = logging.getLogger("service.auth.uploads")

# How long a PATCH holds an upload's lease without committing or renewing it (a fifth of it
# apart, while its body comes) before another may take it: how long an upload waits when the
# worker writing it died mid-request.
LEASE_MS = 30_000
# Checksum algorithms a PATCH's Upload-Checksum may name.
CHECKSUMS = ("sha1", "sha256")
# The most uploads whose running SHA-256 a worker keeps.
_DIGESTS_KEPT = 1000
# A count of uploads in progress no account reaches (a Lua number holds it exactly).
_NO_BOUND = 2**53

# Made once the file is recorded: the alias a request asked for, or None.
MakeAlias = Callable[[FileRecord], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class UploadMeta:
    """What a creation's ``Upload-Metadata`` says: the file's name and type, its folder (an id,
    None for the top level, ``UNSET`` for the account's default), and whether to alias it."""

    name: str | None
    content_type: str | None
    folder: str | Unset | None
    alias: bool

    def stored(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.content_type,
            "folder": "" if isinstance(self.folder, Unset) else self.folder,
            "alias": self.alias,
        }

    @classmethod
    def of(cls, stored: dict[str, Any]) -> UploadMeta:
        folder = stored.get("folder")
        return cls(
            stored.get("name"),
            stored.get("type"),
            UNSET if folder == "" else folder,
            bool(stored.get("alias")),
        )


@dataclass(frozen=True, slots=True)
class Appended:
    """A PATCH's outcome: the upload as it now is, and its file once finished."""

    upload: UploadRecord
    file: FileRecord | None = None
    alias: dict[str, Any] | None = None
    made_now: bool = False  # the file was made by this request


def _not_found() -> ApiError:
    return ApiError(Code.UPLOAD_NOT_FOUND)


class ResumableUploads:
    def __init__(
        self,
        store: UploadStore,
        partials: PartialBlobs,
        blobs: BlobStore,
        files: Files,
        clock: Clock,
        settings: UploadSettings,
    ) -> None:
        self._store = store
        self._partials = partials
        self._blobs = blobs
        self._files = files
        self._clock = clock
        self.settings = settings
        # upload id -> the SHA-256 of its bytes so far, of those this process received
        self._digests: dict[str, _Running] = {}

    # -- making, reading, ending ----------------------------------------------------------------

    async def create(
        self, principal: Principal, length: int | None, meta: UploadMeta
    ) -> UploadRecord:
        """A new upload of ``length`` bytes (None: told later), checked as ``POST /files`` is
        (413 past the size limit, the folder, the room for a file) and against the account's
        uploads in progress (409 ``upload_limit_reached``)."""
        limits = self.settings
        if length is not None and length > limits.max_bytes:
            raise ApiError(
                Code.PAYLOAD_TOO_LARGE,
                f"A file may hold at most {limits.max_bytes} bytes.",
                details={"max_bytes": limits.max_bytes},
            )
        await self._files.check_room(principal)
        if not isinstance(meta.folder, Unset):
            await self._files.check_folder(principal, meta.folder)
        now = self._clock.now_ms()
        record = UploadRecord(
            id=new_id("upl"),
            user_id=principal.user_id,
            file_id=new_id("fil"),
            length=length,
            offset=0,
            expires_at=now + limits.expiry_seconds * 1000,
            meta=meta.stored(),
            made_by=principal.key_id or "session",
            state={},
        )
        counted = limits.max_bytes if length is None else length
        # An empty upload is finished by its creation (the route's next step), so it never
        # takes a place among the uploads in progress: it is refused by none of their bounds.
        most = limits.max_in_progress if length != 0 else _NO_BOUND
        added = await self._store.add(record, now, counted, most, limits.max_bytes_in_progress)
        if added == ADDED:
            return record
        if added in (TOO_MANY, TOO_MANY_BYTES):
            raise ApiError(
                Code.UPLOAD_LIMIT_REACHED,
                details={
                    "max_uploads": limits.max_in_progress,
                    "max_bytes": limits.max_bytes_in_progress,
                },
            )
        raise ApiError(Code.ACCOUNT_GONE)

    async def get(self, principal: Principal, upload_id: str) -> UploadRecord:
        """The principal's account's upload; 404 ``upload_not_found`` for any other id (another
        account's, an expired or terminated one) and for one a key bound to folders could not
        have made (``_may_continue``): for such a key an upload outside its folders is an
        unknown one, whatever it is asked."""
        if not is_valid_id(upload_id, "upl"):
            raise _not_found()
        record = await self._store.get(principal.user_id, upload_id, self._clock.now_ms())
        if record is None:
            raise _not_found()
        if principal.bound:
            try:
                await self._may_continue(principal, record)
            except ApiError:
                raise _not_found() from None
        return record

    async def in_progress(self, principal: Principal) -> list[UploadRecord]:
        """The account's unfinished uploads the principal may continue (an uploader's key: those
        it made), those that expire first first: what holds the account's places."""
        records = await self._store.in_progress(principal.user_id, self._clock.now_ms())
        kept = []
        for record in sorted(records, key=lambda record: (record.expires_at, record.id)):
            if record.done is not None:
                continue
            if principal.upload_only and record.made_by != principal.key_id:
                continue
            try:
                await self._may_continue(principal, record)
            except ApiError:
                continue
            kept.append(record)
        return kept

    async def terminate(self, principal: Principal, upload_id: str) -> None:
        """End an upload and remove its bytes (tus termination); a finished one's file stays."""
        record = await self.get(principal, upload_id)
        if record.done is None:
            await self._partials.discard(_partial(record))
        await self._store.remove(principal.user_id, upload_id)
        self._digests.pop(upload_id, None)

    # -- a PATCH ----------------------------------------------------------------------------------

    async def append(
        self,
        principal: Principal,
        upload_id: str,
        offset: int,
        source: Source,
        body_length: int | None,
        checksum: tuple[str, bytes] | None,
        make_alias: MakeAlias,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: dict[str, Any] | None = None,
        length: int | None = None,
    ) -> Appended:
        """Store a PATCH's bytes at ``offset`` (see the module): the upload as it now is, with
        its file when this finished it. ``length``: the upload's length, when it was deferred
        and this request tells it."""
        record = await self.get(principal, upload_id)
        if record.done is not None:
            return await self._finished(principal, record, offset, source, body_length)
        record = self._with_length(record, length)
        if body_length is not None and record.length is not None:
            if offset + body_length > record.length:
                raise _past_the_length("Content-Length")
        elif body_length is not None and offset + body_length > self.settings.max_bytes:
            raise ApiError(Code.PAYLOAD_TOO_LARGE, details={"max_bytes": self.settings.max_bytes})
        token = secrets.token_hex(12)
        now = self._clock.now_ms()
        status, found = await self._store.claim(
            principal.user_id, upload_id, offset, token, now + LEASE_MS, now
        )
        if status == GONE:
            raise _not_found()
        if status == ELSEWHERE:
            raise ApiError(Code.UPLOAD_OFFSET_MISMATCH, details={"offset": found})
        if status == BUSY:  # Retry-After: when the writer's lease ends, if it says no more
            wait = max(1, math.ceil((found - now) / 1000))
            raise ApiError(Code.UPLOAD_IN_PROGRESS, headers={"Retry-After": str(wait)})
        if status == FINISHED:
            return await self._finished(principal, record, offset, source, body_length)
        try:
            return await self._write(
                principal, record, token, source, checksum, make_alias, origin, actor
            )
        finally:
            await self._store.release(principal.user_id, upload_id, token)

    async def _write(
        self,
        principal: Principal,
        record: UploadRecord,
        token: str,
        source: Source,
        checksum: tuple[str, bytes] | None,
        make_alias: MakeAlias,
        origin: audit.Origin,
        actor: dict[str, Any] | None,
    ) -> Appended:
        user_id, upload_id = principal.user_id, record.id
        digest = self._digest(record)
        self._digests.pop(upload_id, None)  # this request's from here
        before = digest.copy() if digest is not None else None
        chunk = hashlib.new(checksum[0]) if checksum is not None else None
        digests = [d for d in (digest, chunk) if d is not None]
        length = record.length
        committed = record.offset

        async def commit(offset: int, state: dict[str, Any]) -> None:
            nonlocal committed
            lease = self._clock.now_ms() + LEASE_MS
            # The hash goes with the offset when it has hashed exactly the bytes before it.
            sha = digest.save() if digest is not None and digest.count == offset else None
            if not await self._store.commit(
                user_id, upload_id, token, offset, state, lease, length, sha
            ):
                raise await self._lease_lost(user_id, upload_id)
            committed = offset

        renewing = asyncio.create_task(self._renew(user_id, upload_id, token))
        try:
            offset, state = await self._append(record, source, digests, chunk, commit)
        except BaseException:
            # A body cut off keeps what was committed: the hash goes on from there when it
            # covers exactly that.
            if digest is not None and digest.count == committed and chunk is None:
                self._keep_digest(upload_id, digest)
            raise
        finally:
            renewing.cancel()
        if checksum is not None and chunk is not None:
            if chunk.digest() != checksum[1]:
                if before is not None:
                    self._keep_digest(upload_id, before)
                await self._partials.abandon(_partial(record), state)
                raise ApiError(Code.UPLOAD_CHECKSUM_MISMATCH)
            await commit(offset, state)
        if digest is not None:
            self._keep_digest(upload_id, digest)
        record = replace(record, offset=offset, state=state)
        if length is None or offset < length:
            return Appended(record)
        return await self._finish(principal, record, token, make_alias, origin, actor)

    async def _lease_lost(self, user_id: str, upload_id: str) -> ApiError:
        """Why a commit found the upload's lease no longer this request's: the upload ended
        meanwhile (terminated, or expired) is an unknown one; otherwise another ``PATCH`` took
        the lease (this one outlived it)."""
        if await self._store.get(user_id, upload_id, self._clock.now_ms()) is None:
            return _not_found()
        return ApiError(Code.UPLOAD_IN_PROGRESS)

    async def _renew(self, user_id: str, upload_id: str, token: str) -> None:
        """Keep the lease while a slow body still comes (the request's body timeout bounds
        how long)."""
        while True:
            await asyncio.sleep(LEASE_MS / 5000)
            try:
                if not await self._store.renew(
                    user_id, upload_id, token, self._clock.now_ms() + LEASE_MS
                ):
                    return
            except Exception as error:  # the commit that follows fails the request, if it must
                log.warning("could not renew an upload's lease: %s", type(error).__name__)

    async def _append(
        self,
        record: UploadRecord,
        source: Source,
        digests: list[Any],
        chunk: Any,
        commit: Any,
    ) -> tuple[int, dict[str, Any]]:
        length = record.length
        room = (self.settings.max_bytes if length is None else length) - record.offset
        body = _AtMost(source, room)
        if room == 0:  # all in, the file not yet made (a finish that failed): no more bytes
            await body.fill(bytearray(1), 0, 1)
            return record.offset, record.state
        try:
            return await self._partials.append(
                _partial(record), body, digests, commit if chunk is None else None
            )
        except BlobMissing:
            await self._store.remove(record.user_id, record.id)
            raise ApiError(
                Code.UPLOAD_NOT_FOUND, "The upload's bytes are gone: start it again."
            ) from None
        except StorageFull:  # what was committed stays: the upload goes on once there is room
            log.error("no room left for uploads' bytes: they are refused (507) until there is")
            raise ApiError(Code.STORAGE_FULL) from None

    async def _finish(
        self,
        principal: Principal,
        record: UploadRecord,
        token: str,
        make_alias: MakeAlias,
        origin: audit.Origin,
        actor: dict[str, Any] | None,
    ) -> Appended:
        """The last byte is in: the blob made whole, its SHA-256, the file recorded (once), the
        alias asked for, and the upload marked finished; a refusal (the account's file limit,
        say) removes the blob and ends the upload, answered as ``POST /files`` would be."""
        file = await self._recorded(principal, record.file_id)
        if file is not None:  # recorded by a finish whose last step failed
            return await self._finished_now(principal, record, token, file, make_alias)
        partial = _partial(record)
        await self._partials.finish(partial)
        sha256 = await self._sha256(record)
        meta = UploadMeta.of(record.meta)
        try:
            file = await self._files.adopt(
                principal,
                record.file_id,
                Written(record.offset, sha256),
                meta.name,
                meta.content_type,
                meta.folder,
                origin,
                actor,
            )
        except ApiError:
            await self._store.remove(principal.user_id, record.id)
            raise
        return await self._finished_now(principal, record, token, file, make_alias)

    async def _finished_now(
        self,
        principal: Principal,
        record: UploadRecord,
        token: str,
        file: FileRecord,
        make_alias: MakeAlias,
    ) -> Appended:
        alias = await make_alias(file) if UploadMeta.of(record.meta).alias else None
        done = {"file_id": file.id, "alias": alias}
        await self._store.finish(principal.user_id, record.id, token, done)
        self._digests.pop(record.id, None)
        return Appended(replace(record, done=done), file, alias, made_now=True)

    async def _finished(
        self,
        principal: Principal,
        record: UploadRecord,
        offset: int,
        source: Source,
        body_length: int | None,
    ) -> Appended:
        """A PATCH to an upload already finished: the last one retried (at the end, with
        nothing more) is answered with its file; any other offset is 409, and bytes past the
        end are 400 as for any upload."""
        assert record.done is not None
        if offset != record.offset:
            raise ApiError(Code.UPLOAD_OFFSET_MISMATCH, details={"offset": record.offset})
        if body_length:
            raise _past_the_length("Content-Length")
        await _AtMost(source, 0).fill(bytearray(1), 0, 1)  # a body without a length: empty?
        file = await self.file_of(principal, record)
        return Appended(record, file, record.done.get("alias"))

    async def _recorded(self, principal: Principal, file_id: str) -> FileRecord | None:
        try:
            return await self._files.get(principal, file_id)
        except ApiError:
            return None

    async def file_of(self, principal: Principal, record: UploadRecord) -> FileRecord | None:
        """The file a finished upload made, as it is now (None when deleted since)."""
        if record.done is None:
            return None
        return await self._recorded(principal, record.done["file_id"])

    # -- checks and hashing -------------------------------------------------------------------

    async def _may_continue(self, principal: Principal, record: UploadRecord) -> None:
        """A credential other than the one that made the upload continues it only where it
        could have made it: a key bound to folders, into its folders."""
        meta = UploadMeta.of(record.meta)
        if principal.bound:
            folder = meta.folder
            if isinstance(folder, Unset):
                await self._files.check_default_place(principal)
            else:
                await self._files.check_folder(principal, folder)

    def _with_length(self, record: UploadRecord, length: int | None) -> UploadRecord:
        if length is None:
            return record
        if record.length is not None and record.length != length:
            raise ApiError(
                Code.VALIDATION_FAILED, details={"Upload-Length": "differs from the upload's"}
            )
        if length > self.settings.max_bytes:
            raise ApiError(Code.PAYLOAD_TOO_LARGE, details={"max_bytes": self.settings.max_bytes})
        if length < record.offset:
            raise ApiError(
                Code.VALIDATION_FAILED, details={"Upload-Length": "is less than the offset"}
            )
        return replace(record, length=length)

    def _digest(self, record: UploadRecord) -> _Running | None:
        """The running SHA-256 of the upload's bytes so far: this process's, or the one the
        record saved; None when neither has hashed exactly them (hashed again at the end)."""
        if record.offset == 0:
            return _Running(sha256_state.new(), 0)
        kept = self._digests.get(record.id)
        if kept is not None and kept.count == record.offset:
            return kept
        if record.sha is not None and record.sha[0] == record.offset:
            restored = sha256_state.ResumableSha256.restore(record.sha[1])
            if restored is not None:
                return _Running(restored, record.offset)
        return None

    def _keep_digest(self, upload_id: str, digest: _Running) -> None:
        if len(self._digests) >= _DIGESTS_KEPT:
            self._digests.clear()
        self._digests[upload_id] = digest

    async def _sha256(self, record: UploadRecord) -> str:
        kept = self._digest(record)  # this process's, or the one the record saved
        if kept is not None:
            return str(kept.sha.hexdigest())
        digest = hashlib.sha256()  # continued elsewhere: hashed from the blob, whole
        blob = await self._blobs.open(record.file_id)
        try:
            async for data in blob.chunks(0, blob.size):
                digest.update(data)
        finally:
            await blob.close()
        return digest.hexdigest()

    # -- housekeeping -----------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Remove the bytes and records of uploads that expired unfinished; how many."""
        now, swept = self._clock.now_ms(), 0
        for user_id in await self._store.accounts():
            for upload_id in await self._store.expired(user_id, now):
                left = await self._store.leftover_state(user_id, upload_id)
                if left is not None:
                    file_id, state = left
                    await self._partials.discard(Partial(upload_id, file_id, 0, state))
                await self._store.remove(user_id, upload_id)
                swept += 1
        return swept

    async def live_file_ids(self) -> frozenset[str]:
        """The file ids of the uploads in progress: their multipart uploads are not crash
        leftovers (``S3Blobs.sweep``'s ``keep``)."""
        now, found = self._clock.now_ms(), set()
        for user_id in await self._store.accounts():
            found |= await self._store.live_file_ids(user_id, now)
        return frozenset(found)


class _Running:
    """A running SHA-256, and how many bytes went into it."""

    __slots__ = ("count", "sha")

    def __init__(self, sha: Any, count: int) -> None:
        self.sha = sha
        self.count = count

    def update(self, data: Any) -> None:
        self.sha.update(data)
        self.count += len(data)

    def copy(self) -> _Running:
        return _Running(self.sha.copy(), self.count)

    def save(self) -> bytes | None:
        """The state, for another process to go on from (None where hashes cannot be
        saved)."""
        save = getattr(self.sha, "save", None)
        return save() if save is not None else None


def _past_the_length(what: str) -> ApiError:
    return ApiError(Code.VALIDATION_FAILED, details={what: "goes past the upload's Upload-Length"})


class _AtMost:
    """A PATCH's body, refused (400) past the upload's length. The read that reaches the length
    first makes sure the body ends there: a body that goes on fails the request before its
    last bytes are handed on, so they are never stored, the upload's offset stays short of its
    length, and a client resumes it from there (a ``HEAD`` that said the upload was all in
    would tell a tus client it was done, with no file made)."""

    def __init__(self, source: Source, room: int) -> None:
        self._source = source
        self._room = room

    async def fill(self, buffer: Any, start: int, end: int) -> int:
        if self._room <= 0:
            await self._ends()
            return 0
        count = await self._source.fill(buffer, start, min(end, start + self._room))
        self._room -= count
        if count and self._room == 0:
            await self._ends()
        return count

    async def _ends(self) -> None:
        if await self._source.fill(bytearray(1), 0, 1):
            raise _past_the_length("body")


def _partial(record: UploadRecord) -> Partial:
    return Partial(record.id, record.file_id, record.offset, record.state)
