"""The folders' records in Redis, under the account's hash tag: creating, reading, listing,
renaming and moving them, and detaching one (with its subtree) to be deleted.

Knows nothing of HTTP or of who asks (``service.auth.folders``). Per account
(``service.store.keys``):

- ``P:{U}:folders`` maps each folder id to ``<parent>:<created ms>:<updated ms>:<name>``: the
  parent empty at the top level, ``-`` for the top of a subtree being deleted. A folder is
  *live* when its parents lead to the top; one under a ``-`` is being deleted and answers like
  an unknown one. Every script that needs a folder walks its parents (``lineage``): at most
  ``FILEHOST_MAX_FOLDER_DEPTH`` reads inside the script, never another round trip.
- ``P:{U}:folder-children:<F>`` (``root`` for the top level) holds ``<name key>\\0<id>`` per
  child, all scored 0: ``ZRANGE … BYLEX`` pages it by name (one round trip per page, the
  records read in the same script), and one lexical range ``[<key>\\0 (<key>\\1`` says whether
  a sibling already has a name (``domain.folders.name_key``: ignoring case), checked in the
  script that takes it, so of two concurrent creations of one name exactly one wins.
- ``P:{U}:folder-heights:<F>`` scores the same children by the levels of folders below each,
  kept up to date by every change along the ancestors (at most the depth bound): a move checks
  that the moved subtree still fits under the depth bound without walking it.

Moving a folder walks the destination's parents: meeting the folder itself is a cycle. A
rename or move is compare-and-set on the record the caller read (its child member is derived
from its name), retried by the caller when another change came first.

Deleting is ``detach``: one script takes the folder out of its parent's indexes and marks it
``-``, so the folder and everything below it are unreachable at once, and nothing can be added
under them; the default folder setting is reset in the same step when it named a folder of the
subtree. The subtree's folders and files are then removed in bounded batches
(``service.store.folder_removal``).

Every record read back is checked; one that cannot be read raises ``CorruptRecord`` (503).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from service.domain.audit_events import EventBatch
from service.domain.cursors import encode_folder_cursor
from service.domain.folders import TOP, Changed, Outcome, name_key
from service.domain.records import FolderPage, FolderRecord
from service.domain.stored_forms import child_member, folder_record, folder_value
from service.errors import CorruptRecord
from service.store.audit import RECORD_EVENTS, batch_args
from service.store.keys import RedisKeys

# The functions the folder scripts share. ``lineage(folders, f)``: f and its parents up to the
# top, f first, or nil when f is not live (no record, or in a detached subtree); the guard only
# stops a walk of damaged records. ``refresh_height``: after folder p's children changed, p's
# height (0 without child folders, else one more than its highest child's) is written where its
# parent keeps it, and so on upwards while it changes. ``name_taken``: a child of that name key
# other than ``except`` is there. Key names are the prefixes keys.py makes, plus a place.
FOLDERS_LUA = """
local TOP, DETACHED, WALK_GUARD = '', '-', 4096
local NUL, SOH = string.char(0), string.char(1)
local function parent_of(folders, f)
  local record = redis.call('HGET', folders, f)
  if not record then
    return nil
  end
  return string.match(record, '^([^:]*):')
end
local function lineage(folders, f)
  local ids = {}
  while f ~= TOP do
    if f == DETACHED or #ids >= WALK_GUARD then
      return nil
    end
    local parent = parent_of(folders, f)
    if not parent then
      return nil
    end
    ids[#ids + 1] = f
    f = parent
  end
  return ids
end
local function place(f)
  if f == TOP then
    return 'root'
  end
  return f
end
local function refresh_height(folders, heights, p)
  while p ~= TOP do
    local highest = redis.call('ZRANGE', heights .. p, -1, -1, 'WITHSCORES')
    local h = 0
    if highest[2] then
      h = tonumber(highest[2]) + 1
    end
    local parent = parent_of(folders, p)
    if not parent or parent == DETACHED then
      return
    end
    local key = heights .. place(parent)
    local old = redis.call('ZSCORE', key, p)
    if old and tonumber(old) == h then
      return
    end
    redis.call('ZADD', key, h, p)
    p = parent
  end
end
local function name_taken(children, key, except)
  local found = redis.call('ZRANGE', children, '[' .. key .. NUL, '(' .. key .. SOH, 'BYLEX',
    'LIMIT', 0, 1)
  return found[1] ~= nil and found[1] ~= except
end
"""

# Whether the account has a deletion to finish (a detached subtree, or leftovers of removed
# records): the policy finishes it on the account's next folder change.
_PENDING = """
local function pending(trash, removed)
  if redis.call('EXISTS', trash) + redis.call('EXISTS', removed) > 0 then
    return 1
  end
  return 0
end
"""

# Creates a folder. KEYS: user, folders, children and heights of the parent, trash, removed[,
# audit trail]. ARGV: id, record, child member, name key, parent ('' the top), max folders, max
# depth, heights prefix[, events (store.audit)]. Returns {outcome, pending}.
_CREATE = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + _PENDING
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1, 0}
end
local parent = ARGV[5]
local depth = 1
if parent ~= TOP then
  local above = lineage(KEYS[2], parent)
  if not above then
    return {-2, 0}
  end
  depth = #above + 1
end
if depth > tonumber(ARGV[7]) then
  return {-3, 0}
end
if name_taken(KEYS[3], ARGV[4], nil) then
  return {-4, 0}
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[6]) then
  return {-5, pending(KEYS[5], KEYS[6])}
end
if KEYS[7] then
  record_events(KEYS[7], 9)
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], 0, ARGV[3])
redis.call('ZADD', KEYS[4], 0, ARGV[1])
refresh_height(KEYS[2], ARGV[8], parent)
return {1, pending(KEYS[5], KEYS[6])}
"""
)

# A live folder and its parents up to the top, as id, record, id, record, ...; empty when the
# folder is not live. KEYS: folders. ARGV: id.
_LINEAGE = (
    FOLDERS_LUA
    + """
local ids = lineage(KEYS[1], ARGV[1])
local found = {}
for _, f in ipairs(ids or {}) do
  found[#found + 1] = f
  found[#found + 1] = redis.call('HGET', KEYS[1], f)
end
return found
"""
)

# Up to ARGV[3] children of a live folder (or the top) from ARGV[2] on, by name, as member,
# record, member, record, ...; nil when the folder is not live. KEYS: folders, its children.
# ARGV: the folder ('' the top), the range's start, count.
_CHILDREN = (
    FOLDERS_LUA
    + """
if ARGV[1] ~= TOP and not lineage(KEYS[1], ARGV[1]) then
  return false
end
local members = redis.call('ZRANGE', KEYS[2], ARGV[2], '+', 'BYLEX', 'LIMIT', 0,
  tonumber(ARGV[3]))
local found = {}
for _, member in ipairs(members) do
  local id = string.sub(member, string.find(member, NUL, 1, true) + 1)
  found[#found + 1] = member
  found[#found + 1] = redis.call('HGET', KEYS[1], id) or ''
end
return found
"""
)

# Renames and/or moves a folder, when its record is still the one the caller read. KEYS:
# folders, children and heights of the old parent, children and heights of the new one, trash,
# removed[, audit trail]. ARGV: id, record read, new record, old member, new member, new name
# key, old parent, new parent ('' the top), max depth, heights prefix[, events]. Returns
# {outcome, pending}.
_CHANGE = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + _PENDING
    + """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  return {-2, 0}
end
if current ~= ARGV[2] then
  return {-9, 0}
end
if not lineage(KEYS[1], ARGV[1]) then
  return {-2, 0}
end
local old_parent, new_parent = ARGV[7], ARGV[8]
local moving = old_parent ~= new_parent
if moving and new_parent ~= TOP then
  local above = lineage(KEYS[1], new_parent)
  if not above then
    return {-6, 0}
  end
  for _, f in ipairs(above) do
    if f == ARGV[1] then
      return {-7, 0}
    end
  end
  local below = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]) or 0)
  if #above + 1 + below > tonumber(ARGV[9]) then
    return {-3, 0}
  end
end
if name_taken(KEYS[4], ARGV[6], ARGV[4]) then
  return {-4, 0}
end
if KEYS[8] then
  record_events(KEYS[8], 11)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[4], 0, ARGV[5])
if moving then
  local below = redis.call('ZSCORE', KEYS[3], ARGV[1]) or 0
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[5], below, ARGV[1])
  refresh_height(KEYS[1], ARGV[10], old_parent)
  refresh_height(KEYS[1], ARGV[10], new_parent)
end
return {1, pending(KEYS[6], KEYS[7])}
"""
)

# Detaches a folder with its subtree for deletion, when its record is still the one read: out
# of its parent's indexes, marked detached, listed in the trash; refused when it holds anything
# unless recursive. The default folder setting goes when it named a folder now unreachable.
# KEYS: folders, children and heights of the parent, the folder's own children and files,
# trash, settings[, audit trail]. ARGV: id, record read, detached record, member, parent,
# recursive ('1'), heights prefix[, events]. Returns the outcome.
_DETACH = (
    RECORD_EVENTS
    + FOLDERS_LUA
    + """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  return -2
end
if current ~= ARGV[2] then
  return -9
end
if not lineage(KEYS[1], ARGV[1]) then
  return -2
end
if ARGV[6] ~= '1' and redis.call('EXISTS', KEYS[4]) + redis.call('EXISTS', KEYS[5]) > 0 then
  return -8
end
if KEYS[8] then
  record_events(KEYS[8], 8)
end
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
refresh_height(KEYS[1], ARGV[7], ARGV[5])
redis.call('SADD', KEYS[6], ARGV[1])
local default = redis.call('HGET', KEYS[7], 'default_folder_id')
if default and not lineage(KEYS[1], default) then
  redis.call('HDEL', KEYS[7], 'default_folder_id')
end
return 1
"""
)

# Whether a live folder ARGV[1] lies in the subtree of ARGV[2] (itself included; '' the top:
# any live folder). KEYS: folders. Returns 1 or 0.
_INSIDE = (
    FOLDERS_LUA
    + """
local ids = lineage(KEYS[1], ARGV[1])
if not ids then
  return 0
end
if ARGV[2] == TOP then
  return 1
end
for _, f in ipairs(ids) do
  if f == ARGV[2] then
    return 1
  end
end
return 0
"""
)


def place_of(folder_id: str | None) -> str:
    """The suffix of the indexes of a folder, or of the top level (None)."""
    return TOP if folder_id is None else folder_id


class FoldersStore:
    """The folders' records over the service's Redis client."""

    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self._create = redis.register_script(_CREATE)
        self._lineage = redis.register_script(_LINEAGE)
        self._children = redis.register_script(_CHILDREN)
        self._change = redis.register_script(_CHANGE)
        self._detach = redis.register_script(_DETACH)
        self._inside = redis.register_script(_INSIDE)

    def _indexes(self, user_id: str, folder_id: str | None) -> list[str]:
        place = place_of(folder_id)
        return [
            self.keys.folder_children(user_id, place),
            self.keys.folder_heights(user_id, place),
        ]

    async def create(
        self,
        user_id: str,
        record: FolderRecord,
        max_folders: int,
        max_depth: int,
        events: EventBatch | None = None,
    ) -> Changed:
        """Store a new folder under ``record.parent_id`` (recording ``events`` in the same
        step), unless the parent is not live, the folder would be too deep, a sibling has the
        name, or the account holds ``max_folders``."""
        keys = [
            self.keys.user(user_id),
            self.keys.account_folders(user_id),
            *self._indexes(user_id, record.parent_id),
            self.keys.folder_trash(user_id),
            self.keys.account_removed(user_id),
        ]
        args: list[str | int] = [
            record.id,
            folder_value(record),
            child_member(record),
            name_key(record.name),
            record.parent_id or "",
            max_folders,
            max_depth,
            self.keys.folder_heights_prefix(user_id),
        ]
        return await self._scripted(self._create, user_id, keys, args, events)

    async def _scripted(
        self,
        script: AsyncScript,
        user_id: str,
        keys: list[str],
        args: list[Any],
        events: EventBatch | None,
    ) -> Changed:
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        outcome, pending = await script(keys=keys, args=args)
        return Changed(Outcome(outcome), bool(pending))

    async def read(self, user_id: str, folder_id: str) -> str | None:
        """A folder's stored record as it is (live or not), for a compare-and-set change."""
        return await self._redis.hget(self.keys.account_folders(user_id), folder_id)

    async def lineage(self, user_id: str, folder_id: str) -> list[FolderRecord] | None:
        """A live folder and its parents up to the top (the folder first); None when the
        folder is not live. One round trip."""
        found = await self._lineage(keys=[self.keys.account_folders(user_id)], args=[folder_id])
        if not found:
            return None
        return [folder_record(found[i], found[i + 1]) for i in range(0, len(found), 2)]

    async def children_page(
        self, user_id: str, parent_id: str | None, limit: int, after: str | None
    ) -> FolderPage | None:
        """Up to ``limit`` folders in ``parent_id`` (None: the top level) by name, after the
        child member ``after``; None when the parent is not a live folder. One round trip."""
        keys = [
            self.keys.account_folders(user_id),
            self.keys.folder_children(user_id, place_of(parent_id)),
        ]
        start = "-" if after is None else "(" + after
        found = await self._children(keys=keys, args=[parent_id or "", start, limit + 1])
        if found is None:
            return None
        members = found[0::2]
        folders = []
        for member, value in zip(members[:limit], found[1::2], strict=False):
            if not value:  # indexed without a record: never written so, read as damaged
                raise CorruptRecord()
            folders.append(folder_record(member.rpartition("\0")[2], value))
        more = len(members) > limit
        return FolderPage(folders, encode_folder_cursor(members[limit - 1]) if more else None)

    async def change(
        self,
        user_id: str,
        read: str,
        before: FolderRecord,
        after: FolderRecord,
        max_depth: int,
        events: EventBatch | None = None,
    ) -> Changed:
        """Rename and/or move a folder from ``before`` to ``after``, if its record is still
        ``read``: its new parent live, no cycle, not too deep, its new name free there."""
        keys = [
            self.keys.account_folders(user_id),
            *self._indexes(user_id, before.parent_id),
            *self._indexes(user_id, after.parent_id),
            self.keys.folder_trash(user_id),
            self.keys.account_removed(user_id),
        ]
        args: list[str | int] = [
            before.id,
            read,
            folder_value(after),
            child_member(before),
            child_member(after),
            name_key(after.name),
            before.parent_id or "",
            after.parent_id or "",
            max_depth,
            self.keys.folder_heights_prefix(user_id),
        ]
        return await self._scripted(self._change, user_id, keys, args, events)

    async def detach(
        self,
        user_id: str,
        read: str,
        record: FolderRecord,
        recursive: bool,
        events: EventBatch | None = None,
    ) -> Outcome:
        """Take the folder and its subtree out of reach, to be removed (see the module), if
        its record is still ``read``; refused when it holds anything unless ``recursive``."""
        keys = [
            self.keys.account_folders(user_id),
            *self._indexes(user_id, record.parent_id),
            self.keys.folder_children(user_id, record.id),
            self.keys.folder_files(user_id, record.id),
            self.keys.folder_trash(user_id),
            self.keys.account_settings(user_id),
        ]
        args: list[str | int] = [
            record.id,
            read,
            folder_value(record, detached=True),
            child_member(record),
            record.parent_id or "",
            "1" if recursive else "0",
            self.keys.folder_heights_prefix(user_id),
        ]
        if events is not None:
            keys.append(self.keys.account_audit(user_id))
            args.extend(batch_args(events))
        return Outcome(await self._detach(keys=keys, args=args))

    async def inside(self, user_id: str, folder_id: str, ancestor_id: str | None) -> bool:
        """Whether ``folder_id`` is a live folder in the subtree of ``ancestor_id`` (itself
        included; None: the top, so any live folder). One round trip."""
        return bool(
            await self._inside(
                keys=[self.keys.account_folders(user_id)], args=[folder_id, ancestor_id or ""]
            )
        )

    async def count(self, user_id: str) -> int:
        """The account's folders, those of a deletion not yet finished included."""
        return int(await self._redis.hlen(self.keys.account_folders(user_id)))

    async def every_folder(self, user_id: str) -> list[FolderRecord]:
        """Every folder record of the account, live or being deleted (a detached one's
        ``parent_id`` is ``-``): one command (``HGETALL``), at most
        ``FILEHOST_MAX_FOLDERS_PER_ACCOUNT``. A folder's subtree is worked out from it
        (``service.auth.reach``)."""
        stored = await self._every_record(user_id)
        return [folder_record(folder_id, value) for folder_id, value in stored.items()]

    async def _every_record(self, user_id: str) -> dict[str, str]:
        return await self._redis.hgetall(self.keys.account_folders(user_id))
