"""The files' metadata in Redis: one record per file, in two keys under the account's hash tag.

Knows nothing of HTTP or of where the bytes are (``service.store.protocols.blobs``). Per account
(``service.store.keys``): ``P:{U}:file-order`` is a sorted set whose members, all scored 0, are
``<created ms, 13 digits>:<file id>:<JSON record>``, so reverse lexical order is newest first and
a page of the list is one plain ``ZRANGE … BYLEX REV LIMIT``: one round trip, no script, sent
over the worker's auto-pipelined connection when there is one (listing is on the gateway's path,
like the credential lookups; an account without files costs one command on an absent key).
``P:{U}:files`` maps each file id to the same member, for reading one file and deleting it. Both
are written and removed together, each time in one script, so neither exists without the other.

Each file is also in the index of the folder it is in, ``P:{U}:folder-files:<folder id or
root>`` (``<created ms>:<file id>``, scored 0, newest first like the order): a page of one
folder's files is one script that reads the index and the records. The record names its folder
(``folder_id``, null at the top), and a move or rename rewrites it in place, compare-and-set on
the member the caller read. An upload, a move and a rename into a folder check, in their
script, that the folder is live (``service.store.folders``); the account-wide order is untouched
by folders, so the unfiltered list stays one plain command.

Records written before folders existed have no ``folder_id``: they are at the top, and the
first listing of the top level places them in its index, a bounded batch per round trip, once
per account (``P:{U}:top-files-placed`` then says so; an account whose first file comes after
folders is marked by that upload).

Every record read back is checked; one that cannot be read raises ``CorruptRecord`` (503).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from redis.asyncio import Redis

from service.domain.audit_events import EventBatch
from service.domain.cursors import encode_file_cursor
from service.domain.file_search import RECORDS_AT_ONCE, WHOLE_LISTING_FROM
from service.domain.folders import TOP
from service.domain.outcomes import AccountGone, FolderGone
from service.domain.records import FilePage, FileRecord
from service.domain.stored_forms import (
    FILE_POSITION_LENGTH,
    file_member,
    file_position,
    file_record,
)
from service.errors import CorruptRecord
from service.store.audit import RECORD_EVENTS, batch_args, member
from service.store.folders import FOLDERS_LUA
from service.store.keys import RedisKeys
from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis

# Adds a file's member to the order, the record index and its folder's index, unless the user is
# gone (-1), its folder is not live (-2) or the account already holds the maximum of files (0);
# its upload's audit events are recorded in this same step (before the writes: a failed record
# adds nothing). The first file of an account marks its top level placed. Returns 1 when added.
# KEYS: user, index, order, folder index, folders, placed mark[, audit trail]. ARGV: file id,
# member, max files, folder ('' the top), position[, events (store.audit)].
_ADD_FILE = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if ARGV[4] ~= TOP and not lineage(KEYS[5], ARGV[4]) then
  return -2
end
local count = redis.call('ZCARD', KEYS[3])
if count >= tonumber(ARGV[3]) then
  return 0
end
if KEYS[7] then
  record_events(KEYS[7], 6)
end
if count == 0 then
  redis.call('SET', KEYS[6], '1')
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], 0, ARGV[2])
redis.call('ZADD', KEYS[4], 0, ARGV[5])
return 1
"""
)

# Removes a file from the record index, the order and its folder's index when its member is
# still ARGV[2]; returns its member, nil when there was none, 0 when it changed meanwhile. With
# an audit trail, in the same step: records the deletion's events and notes the file among the
# removed (its bytes go next, ``service.store.folder_removal``) (ARGV[4] 'record'), or takes back
# the events its upload recorded (ARGV[4] 'retract': an upload undone after its record was
# written leaves nothing; its bytes are released by the upload itself).
# KEYS: index, order, folder index, removed[, audit trail]. ARGV: file id, member read, position[,
# 'record' and events (store.audit), or 'retract' and the events' members].
_DELETE_FILE = (
    RECORD_EVENTS
    + """
local member = redis.call('HGET', KEYS[1], ARGV[1])
if not member then
  return nil
end
if member ~= ARGV[2] then
  return 0
end
if ARGV[4] == 'record' then
  if KEYS[5] then
    record_events(KEYS[5], 5)
  end
  redis.call('SADD', KEYS[4], ARGV[1])
elseif KEYS[5] then
  for i = 5, #ARGV do
    redis.call('ZREM', KEYS[5], ARGV[i])
  end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], member)
redis.call('ZREM', KEYS[3], ARGV[3])
return member
"""
)

# Rewrites a file's record (a rename and/or a move) when its member is still ARGV[2] and its
# folder and the destination are live: nil when the file is gone or its folder is not live, 0
# when it changed meanwhile, -2 when the destination is not live, 1 when done. Always (re)places
# the file in the destination's index, which also places a file recorded before folders existed.
# KEYS: index, order, the old folder's index, the new one's, folders[, audit trail]. ARGV: file
# id, member read, new member, position, old folder, new folder ('' the top)[, events].
_CHANGE_FILE = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  return nil
end
if current ~= ARGV[2] then
  return 0
end
if ARGV[5] ~= TOP and not lineage(KEYS[5], ARGV[5]) then
  return nil
end
if ARGV[6] ~= ARGV[5] and ARGV[6] ~= TOP and not lineage(KEYS[5], ARGV[6]) then
  return -2
end
if KEYS[6] then
  record_events(KEYS[6], 7)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[3])
if ARGV[6] ~= ARGV[5] then
  redis.call('ZREM', KEYS[3], ARGV[4])
end
redis.call('ZADD', KEYS[4], 0, ARGV[4])
return 1
"""
)

# Up to ARGV[3] files of a live folder (or the top), newest first, from ARGV[2] on: position,
# member, position, member, ...; {-1} when the folder is not live, {-2} when the top level has
# files recorded before folders existed still to be placed. KEYS: the folder's index, the
# record index, folders, the placed mark. ARGV: the folder ('' the top), start, count.
_FOLDER_PAGE = (
    FOLDERS_LUA
    + """
if ARGV[1] ~= TOP and not lineage(KEYS[3], ARGV[1]) then
  return {-1}
end
if ARGV[1] == TOP and redis.call('EXISTS', KEYS[4]) == 0 then
  return {-2}
end
local positions = redis.call('ZRANGE', KEYS[1], ARGV[2], '-', 'BYLEX', 'REV', 'LIMIT', 0,
  tonumber(ARGV[3]))
local found = {}
for _, position in ipairs(positions) do
  found[#found + 1] = position
  found[#found + 1] = redis.call('HGET', KEYS[2], string.sub(position, 15)) or ''
end
return found
"""
)

# Places files recorded before folders existed in the top level's index, each only while its
# member is still the one read (a file moved or deleted meanwhile is left alone).
# KEYS: index, the top level's index. ARGV: file id, member, position, file id, ...
_PLACE_AT_TOP = """
for i = 1, #ARGV, 3 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('ZADD', KEYS[2], 0, ARGV[i + 2])
  end
end
return 1
"""
_PLACING_BATCH = 500


def _unplaced(member: str) -> bool:
    """A member recorded before folders existed: without ``folder_id``."""
    return '"folder_id":' not in member[FILE_POSITION_LENGTH + 1 :]


async def file_records(members: Sequence[str]) -> list[FileRecord]:
    """The records stored members hold, a part at a time when they are a whole listing's
    (``WHOLE_LISTING_FROM``); ``CorruptRecord`` for one that cannot be read."""
    if len(members) < WHOLE_LISTING_FROM:
        return [file_record(member) for member in members]
    records: list[FileRecord] = []
    for start in range(0, len(members), RECORDS_AT_ONCE):
        await asyncio.sleep(0)  # the other requests' turn
        records += [file_record(member) for member in members[start : start + RECORDS_AT_ONCE]]
    return records


class FilesStore:
    """The files' metadata, over the service's Redis client (and its hot connection)."""

    def __init__(self, redis: Redis, keys: RedisKeys, hot: PipelinedRedis | None = None) -> None:
        self._redis = redis
        self._hot = hot  # the worker's auto-pipelined connection, or None
        self.keys = keys
        self._hot_page = CommandTemplate("ZRANGE", ARG, ARG, "-", "BYLEX", "REV", "LIMIT", 0, ARG)
        self._hot_get = CommandTemplate("HGET", ARG, ARG)
        self._add_file = self._redis.register_script(_ADD_FILE)
        self._delete_file = self._redis.register_script(_DELETE_FILE)
        self._change_file = self._redis.register_script(_CHANGE_FILE)
        self._folder_page = self._redis.register_script(_FOLDER_PAGE)
        self._place_at_top = self._redis.register_script(_PLACE_AT_TOP)

    async def list_page(self, user_id: str, limit: int, after: str | None) -> FilePage:
        """Up to ``limit`` files, newest first, after the position ``after``: one command."""
        order = self.keys.account_file_order(user_id)
        start = "+" if after is None else "(" + after
        count = limit + 1  # one more than asked tells whether another page follows
        if self._hot is not None:
            members = await self._hot.execute_packed(
                self._hot_page.pack(order.encode(), start.encode(), b"%d" % count)
            )
        else:
            members = await self._redis.zrange(
                order, start, "-", desc=True, bylex=True, offset=0, num=count
            )
        if not members:
            return FilePage([], None)
        files = [file_record(member) for member in members[:limit]]
        last = files[-1]
        next_cursor = (
            encode_file_cursor(f"{last.created_at:013d}:{last.id}")
            if len(members) > limit
            else None
        )
        return FilePage(files, next_cursor)

    async def folder_page(
        self, user_id: str, folder_id: str | None, limit: int, after: str | None
    ) -> FilePage | None:
        """Up to ``limit`` files of one live folder (None: the top level), newest first, after
        the position ``after``; None when the folder is not live. One round trip (the first
        listing of an account's top level may first place its older files, see the module)."""
        place = TOP if folder_id is None else folder_id
        keys = [
            self.keys.folder_files(user_id, place),
            self.keys.account_files(user_id),
            self.keys.account_folders(user_id),
            self.keys.top_files_placed(user_id),
        ]
        args = [folder_id or "", "+" if after is None else "(" + after, limit + 1]
        found = await self._folder_page(keys=keys, args=args)
        if found == [-2]:
            await self._place_older_files(user_id)
            found = await self._folder_page(keys=keys, args=args)
        if found == [-1]:
            return None
        positions, members = found[0::2], found[1::2]
        if not all(members[:limit]):  # indexed without a record: never written so, damaged
            raise CorruptRecord()
        files = await file_records(members[:limit])
        more = len(positions) > limit
        return FilePage(files, encode_file_cursor(positions[limit - 1]) if more else None)

    async def _place_older_files(self, user_id: str) -> None:
        """Place every file recorded before folders existed in the top level's index (see the
        module), then mark the account placed."""
        order = self.keys.account_file_order(user_id)
        start = "+"
        while True:
            members = await self._redis.zrange(
                order, start, "-", desc=True, bylex=True, offset=0, num=_PLACING_BATCH
            )
            args: list[str] = []
            for stored in members:
                if _unplaced(stored):
                    position = stored[:FILE_POSITION_LENGTH]
                    args += [position[14:], stored, position]
            if args:
                keys = [
                    self.keys.account_files(user_id),
                    self.keys.folder_files(user_id, TOP),
                ]
                await self._place_at_top(keys=keys, args=args)
            if len(members) < _PLACING_BATCH:
                break
            start = "(" + members[-1][:FILE_POSITION_LENGTH]
        await self._redis.set(self.keys.top_files_placed(user_id), "1")

    async def every_file(self, user_id: str) -> list[FileRecord]:
        """Every file of the account, newest first: one command (``ZRANGE``) for the whole
        order, at most ``FILEHOST_MAX_FILES_PER_ACCOUNT`` members (a searched or re-ordered
        listing reads it whole, ``service.domain.file_search``)."""
        members = await self._redis.zrange(self.keys.account_file_order(user_id), 0, -1, desc=True)
        return await file_records(members)

    async def get_many(self, user_id: str, file_ids: list[str]) -> list[FileRecord | None]:
        """The records of ``file_ids`` (None for one the account does not hold), in order: one
        command (``HMGET``)."""
        if not file_ids:
            return []
        members = await self._redis.hmget(self.keys.account_files(user_id), file_ids)
        return [None if member is None else file_record(member) for member in members]

    async def get(self, user_id: str, file_id: str) -> FileRecord | None:
        key = self.keys.account_files(user_id)
        if self._hot is not None:
            member = await self._hot.execute_packed(
                self._hot_get.pack(key.encode(), file_id.encode())
            )
        else:
            member = await self._redis.hget(key, file_id)
        return None if member is None else file_record(member)

    def record_field(self, user_id: str, file_id: str) -> tuple[str, str]:
        """Where ``get`` reads a file's record: a hash and its field, for a caller that reads it
        beside other things (the value, or None, is read with ``file_record``)."""
        return self.keys.account_files(user_id), file_id

    async def read(self, user_id: str, file_id: str) -> tuple[str, FileRecord] | None:
        """A file's member as stored and its record, for a compare-and-set change."""
        stored = await self._redis.hget(self.keys.account_files(user_id), file_id)
        return None if stored is None else (stored, file_record(stored))

    async def count(self, user_id: str) -> int:
        return int(await self._redis.zcard(self.keys.account_file_order(user_id)))

    async def add(
        self, user_id: str, record: FileRecord, max_files: int, events: EventBatch | None = None
    ) -> bool:
        """Store the file in its folder, and record ``events`` in the same step; False when the
        account already holds ``max_files`` files. Raises ``AccountGone`` when the user record
        is gone, ``FolderGone`` when its folder is not live."""
        keys = [
            self.keys.user(user_id),
            self.keys.account_files(user_id),
            self.keys.account_file_order(user_id),
            self.keys.folder_files(user_id, record.folder_id or TOP),
            self.keys.account_folders(user_id),
            self.keys.top_files_placed(user_id),
        ]
        args: list[str | int] = [
            record.id,
            file_member(record),
            max_files,
            record.folder_id or "",
            file_position(record),
        ]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        added = await self._add_file(keys=keys, args=args)
        if added == -1:
            raise AccountGone()
        if added == -2:
            raise FolderGone()
        return added == 1

    async def change(
        self,
        user_id: str,
        stored: str,
        before: FileRecord,
        after: FileRecord,
        events: EventBatch | None = None,
    ) -> bool | None:
        """Rewrite a file's record from ``before`` to ``after`` (renamed and/or moved), if its
        member is still ``stored``: True when done, False when it changed meanwhile, None when
        the file is gone or no longer reachable. Raises ``FolderGone`` when the destination is
        not a live folder."""
        keys = [
            self.keys.account_files(user_id),
            self.keys.account_file_order(user_id),
            self.keys.folder_files(user_id, before.folder_id or TOP),
            self.keys.folder_files(user_id, after.folder_id or TOP),
            self.keys.account_folders(user_id),
        ]
        args: list[str | int] = [
            before.id,
            stored,
            file_member(after),
            file_position(before),
            before.folder_id or "",
            after.folder_id or "",
        ]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        changed = await self._change_file(keys=keys, args=args)
        if changed == -2:
            raise FolderGone()
        return None if changed is None else changed == 1

    async def remove(
        self,
        user_id: str,
        stored: str,
        record: FileRecord,
        events: EventBatch | None = None,
        *,
        undo: bool = False,
        retract: EventBatch | None = None,
    ) -> bool | None:
        """Remove the file's metadata, if its member is still ``stored``: True when removed,
        False when it changed meanwhile, None when it was gone. A deletion records ``events``
        in the same step and notes the file among the removed, whose bytes go next; an upload
        being ``undo``ne takes the events of ``retract`` back out of the trail instead (its
        bytes are released by the upload)."""
        keys = [
            self.keys.account_files(user_id),
            self.keys.account_file_order(user_id),
            self.keys.folder_files(user_id, record.folder_id or TOP),
            self.keys.account_removed(user_id),
        ]
        args: list[str | int] = [record.id, stored, file_position(record)]
        if undo:
            args.append("retract")
            if retract is not None:
                keys.append(self.keys.account_audit(user_id))
                args += [member(event) for event in retract.events]
        else:
            args.append("record")
            if events is not None:
                keys.append(self.keys.account_audit(user_id))
                args.extend(batch_args(events))
        found = await self._delete_file(keys=keys, args=args)
        return None if found is None else found != 0
