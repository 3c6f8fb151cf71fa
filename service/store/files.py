"""The files' metadata in Redis: one record per file, in two keys under the account's hash tag.

Knows nothing of HTTP or of where the bytes are (``service.store.blobs``). Per account
(``service.store.keys``): ``P:{U}:file-order`` is a sorted set whose members, all scored 0, are
``<created ms, 13 digits>:<file id>:<JSON record>``, so reverse lexical order is newest first and
a page of the list is one plain ``ZRANGE … BYLEX REV LIMIT``: one round trip, no script, sent
over the worker's auto-pipelined connection when there is one (listing is on the gateway's path,
like the credential lookups; an account without files costs one command on an absent key).
``P:{U}:files`` maps each file id to the same member, for reading one file and deleting it. Both
are written and removed together, each time in one script, so neither exists without the other.
Every record read back is checked; one that cannot be read raises ``CorruptRecord`` (503).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

import orjson
from redis.asyncio import Redis

from service.domain.records import FilePage, FileRecord
from service.errors import CorruptRecord
from service.store.audit import RECORD_EVENTS, EventBatch, member
from service.store.errors import AccountGone
from service.store.keys import RedisKeys
from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis

# Adds a file's member to the order and the index, unless the user is gone (-1) or the account
# already holds the maximum of files (0); its upload's audit events are recorded in this same step
# (before the writes: a failed record adds nothing). Returns 1 when added.
# KEYS: user, index, order[, audit trail]. ARGV: file id, member, max files[, events (store.audit)].
_ADD_FILE = (
    RECORD_EVENTS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) then
  return 0
end
if KEYS[4] then
  record_events(KEYS[4], 4)
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], 0, ARGV[2])
return 1
"""
)

# Removes a file from the index and the order; returns its member, or nil when there was none.
# With an audit trail, in the same step and only when there was one: records the deletion's
# events (ARGV[2] 'record'), or takes back the events its upload recorded (ARGV[2] 'retract': an
# upload undone after its record was written leaves nothing).
# KEYS: index, order[, audit trail]. ARGV: file id[, 'record' and events (store.audit), or
# 'retract' and the events' members].
_DELETE_FILE = (
    RECORD_EVENTS
    + """
local member = redis.call('HGET', KEYS[1], ARGV[1])
if not member then
  return nil
end
if KEYS[3] then
  if ARGV[2] == 'record' then
    record_events(KEYS[3], 3)
  else
    for i = 3, #ARGV do
      redis.call('ZREM', KEYS[3], ARGV[i])
    end
  end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], member)
return member
"""
)

# A cursor names the last file of a page by the start of its member, ``<ms>:<id>``: every
# member of a later file sorts before it, the file's own member (which goes on) after it.
_POSITION = re.compile(r"^[0-9]{13}:fil_[0-9A-Za-z]{22}$")
_POSITION_LENGTH = 13 + 1 + 26
_FIELDS = ("id", "name", "size", "content_type", "sha256", "created_at")


def file_member(record: FileRecord) -> str:
    """How a file is stored: its position in the order, then its JSON record."""
    fields = {name: getattr(record, name) for name in _FIELDS}
    return f"{record.created_at:013d}:{record.id}:" + orjson.dumps(fields).decode()


def file_record(member: str) -> FileRecord:
    """The record a stored member holds; ``CorruptRecord`` when it cannot be read."""
    try:
        value: Any = orjson.loads(member[_POSITION_LENGTH + 1 :])
    except orjson.JSONDecodeError:
        raise CorruptRecord() from None
    if not isinstance(value, dict):
        raise CorruptRecord()
    try:
        record = FileRecord(*(value[name] for name in _FIELDS))
    except KeyError:
        raise CorruptRecord() from None
    ints = (record.size, record.created_at)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
        raise CorruptRecord()
    texts = (record.id, record.name, record.content_type, record.sha256)
    if not all(isinstance(v, str) for v in texts):
        raise CorruptRecord()
    if member[: _POSITION_LENGTH + 1] != f"{record.created_at:013d}:{record.id}:":
        raise CorruptRecord()
    return record


class BadCursor(ValueError):
    """Not a cursor: not the shape of a position in the list (any such position is one)."""


def encode_cursor(position: str) -> str:
    return base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The position (``<ms>:<id>``) a cursor names; a page starts after it. Else ``BadCursor``."""
    if not 1 <= len(cursor) <= 64 or not cursor.isascii():
        raise BadCursor()
    try:
        position = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor() from None
    if not _POSITION.match(position) or encode_cursor(position) != cursor:
        raise BadCursor()
    return position


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
            encode_cursor(f"{last.created_at:013d}:{last.id}") if len(members) > limit else None
        )
        return FilePage(files, next_cursor)

    async def get(self, user_id: str, file_id: str) -> FileRecord | None:
        key = self.keys.account_files(user_id)
        if self._hot is not None:
            member = await self._hot.execute_packed(
                self._hot_get.pack(key.encode(), file_id.encode())
            )
        else:
            member = await self._redis.hget(key, file_id)
        return None if member is None else file_record(member)

    async def count(self, user_id: str) -> int:
        return int(await self._redis.zcard(self.keys.account_file_order(user_id)))

    async def add(
        self, user_id: str, record: FileRecord, max_files: int, events: EventBatch | None = None
    ) -> bool:
        """Store the file, and record ``events`` in the same step; False when the account
        already holds ``max_files`` files. Raises ``AccountGone`` when the user record is gone."""
        keys = [
            self.keys.user(user_id),
            self.keys.account_files(user_id),
            self.keys.account_file_order(user_id),
        ]
        args: list[str | int] = [record.id, file_member(record), max_files]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(events.args())
        added = await self._add_file(keys=keys, args=args)
        if added == -1:
            raise AccountGone()
        return added == 1

    async def remove(
        self,
        user_id: str,
        file_id: str,
        events: EventBatch | None = None,
        *,
        retract: EventBatch | None = None,
    ) -> FileRecord | None:
        """Remove the file's metadata; its record, or None when there was none. In the same
        step, when it was there: ``events`` recorded (a deletion's), or the events of
        ``retract`` taken back out of the trail (those of an upload being undone)."""
        keys = [self.keys.account_files(user_id), self.keys.account_file_order(user_id)]
        args: list[str | int] = [file_id]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args += ["record", *events.args()]
        elif retract is not None:
            keys.append(self.keys.account_audit(user_id))
            args += ["retract", *(member(event) for event in retract.events)]
        found = await self._delete_file(keys=keys, args=args)
        return None if found is None else file_record(found)
