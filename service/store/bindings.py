"""What an API key bound to folders reaches: each read of a bound key's request and the check of
its binding as one script in the account's slot, so a bound key's request costs the round trips
an unbound key's does, or one more where the operation reads nothing of its own (a listing's
folder, the folder an upload goes to by default).

Knows nothing of HTTP or of who asks (``service.auth.reach``). A key's binding is ``f`` in its
listing metadata (``P:{U}:keys``, ``service.store.fields``): the folders it is bound to, in the
order given. Its digest entry only marks it bound (``BOUND_TO_FOLDERS`` in its mask), so the
per-request lookup of an unbound key reads nothing more; these scripts run only for a bound
key, and read its metadata (Redis' ``cjson``) in the same step as what the request names. Every
edit of the key is in that metadata before it answers, so the next request reads it.

Inside the binding: a live folder whose parents lead to the top through one of the key's
folders (a folder is in its own subtree), and a file in such a folder; the top level is not.
A key reaches nothing at all (status -1, refused everything) when its folders are none (every
one deleted), and also when its metadata is gone (revoked meanwhile) or names no folders (an
edit to the whole account not yet in its entries): never the whole account. Otherwise what is
outside answers status 0, exactly like what does not exist.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from service.domain.cursors import encode_file_cursor
from service.domain.records import FilePage, FolderRecord
from service.domain.stored_forms import FILE_POSITION_LENGTH, folder_record
from service.errors import CorruptRecord
from service.store.files import file_records
from service.store.folders import FOLDERS_LUA
from service.store.keys import RedisKeys
from service.store.pipelined import ARG, PipelinedRedis, ScriptCall

# What the bound scripts share, after ``FOLDERS_LUA``. ``bound_folders``: the key's folders as
# a set and as listed, or nil when it reaches nothing (see the module). ``file_folder``: the
# folder a file's member (``service.store.files``) names, nil at the top; the record's JSON ends
# with its ``folder_id``, and a quote inside a JSON string is escaped, so only the record's own
# field matches. ``view``: a live folder's lineage and the index in it of the key's outermost
# folder, or nil when outside. ``within``: whether a folder is inside, remembering in ``memo``
# what each folder on its way up was found to be (1 inside, 0 live outside, -1 not live), so a
# page of files walks each folder once.
BINDINGS_LUA = (
    FOLDERS_LUA
    + """
local function bound_folders(keys, key_id)
  local meta = redis.call('HGET', keys, key_id)
  if not meta then
    return nil
  end
  local ok, decoded = pcall(cjson.decode, meta)
  if not ok or type(decoded) ~= 'table' or type(decoded['f']) ~= 'table' then
    return nil
  end
  local bound, listed = {}, {}
  for _, f in ipairs(decoded['f']) do
    if type(f) == 'string' and not bound[f] then
      bound[f] = true
      listed[#listed + 1] = f
    end
  end
  if #listed == 0 then
    return nil
  end
  return bound, listed
end
local function file_folder(member)
  return string.match(member, ',"folder_id":"(fld_[0-9A-Za-z]+)"}$')
end
local function view(folders, bound, f)
  local ids = lineage(folders, f)
  if not ids then
    return nil
  end
  local top = 0
  for i, g in ipairs(ids) do
    if bound[g] then
      top = i
    end
  end
  if top == 0 then
    return nil
  end
  return ids, top
end
local function within(folders, bound, memo, f)
  local path, g = {}, f
  local state = 0
  while g ~= TOP do
    local known = memo[g]
    if known ~= nil then
      state = known
      break
    end
    local parent = nil
    if g ~= DETACHED and #path < WALK_GUARD then
      parent = parent_of(folders, g)
    end
    if not parent then
      state = -1
      break
    end
    path[#path + 1] = g
    g = parent
  end
  for i = #path, 1, -1 do
    if state ~= -1 and bound[path[i]] then
      state = 1
    end
    memo[path[i]] = state
  end
  return state == 1
end
"""
)

# A file of the key's: {status, its member}. KEYS: files, folders, keys. ARGV: file id, key id.
_FILE = (
    BINDINGS_LUA
    + """
local bound = bound_folders(KEYS[3], ARGV[2])
if not bound then
  return {-1}
end
local member = redis.call('HGET', KEYS[1], ARGV[1])
if not member then
  return {0}
end
local folder = file_folder(member)
if not folder or not view(KEYS[2], bound, folder) then
  return {0}
end
return {1, member}
"""
)

# A folder of the key's and its parents up to the key's outermost folder above it: {status, id,
# record, id, record, ...}, the folder first. KEYS: folders, keys. ARGV: folder id, key id.
_FOLDER = (
    BINDINGS_LUA
    + """
local bound = bound_folders(KEYS[2], ARGV[2])
if not bound then
  return {-1}
end
local ids, top = view(KEYS[1], bound, ARGV[1])
if not ids then
  return {0}
end
local found = {1}
for i = 1, top do
  found[#found + 1] = ids[i]
  found[#found + 1] = redis.call('HGET', KEYS[1], ids[i])
end
return found
"""
)

# Where an upload without a folder goes for the key: the account's default folder when it is
# inside, else the first of the key's folders that is live: {status, folder} ({0}: none is).
# KEYS: folders, keys. ARGV: key id, the default folder ('' none).
_PLACE = (
    BINDINGS_LUA
    + """
local bound, listed = bound_folders(KEYS[2], ARGV[1])
if not bound then
  return {-1}
end
if ARGV[2] ~= '' and view(KEYS[1], bound, ARGV[2]) then
  return {1, ARGV[2]}
end
for _, f in ipairs(listed) do
  if lineage(KEYS[1], f) then
    return {1, f}
  end
end
return {0}
"""
)

# The key's top level: its live folders that no other of its folders holds, {status, id,
# record, ...}. KEYS: folders, keys. ARGV: key id.
_TOPS = (
    BINDINGS_LUA
    + """
local bound, listed = bound_folders(KEYS[2], ARGV[1])
if not bound then
  return {-1}
end
local found = {1}
for _, f in ipairs(listed) do
  local ids = lineage(KEYS[1], f)
  local outermost = ids ~= nil
  for i = 2, #(ids or {}) do
    if bound[ids[i]] then
      outermost = false
      break
    end
  end
  if outermost then
    found[#found + 1] = f
    found[#found + 1] = redis.call('HGET', KEYS[1], f)
  end
end
return found
"""
)

# A page of the key's files across its folders, newest first: the account's order from ARGV[2]
# on, keeping the members inside, until ARGV[3] are kept, the order ends or ARGV[4] members were
# examined (a bound on the script's work however few files are inside). {status, where the
# examining stopped ('' when it did not stop for the bound), member, member, ...}.
# KEYS: order, folders, keys. ARGV: key id, start, count, bound, a position's length.
_FILES_PAGE = (
    BINDINGS_LUA
    + """
local bound = bound_folders(KEYS[3], ARGV[1])
if not bound then
  return {-1}
end
local want, budget, position = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local memo, found, start, examined = {}, {1, ''}, ARGV[2], 0
while examined < budget do
  local chunk = math.min(256, budget - examined)
  local members = redis.call('ZRANGE', KEYS[1], start, '-', 'BYLEX', 'REV', 'LIMIT', 0, chunk)
  for _, member in ipairs(members) do
    examined = examined + 1
    local folder = file_folder(member)
    if folder and within(KEYS[2], bound, memo, folder) then
      found[#found + 1] = member
      if #found - 2 >= want then
        return found
      end
    end
  end
  if #members < chunk then
    return found
  end
  start = '(' .. string.sub(members[#members], 1, position)
end
found[2] = string.sub(start, 2)
return found
"""
)

# Which of a batch of files and folders (say, the targets of a page of aliases) lie inside:
# {status, 1 or 0 per target, in order}. KEYS: files, folders, keys. ARGV: key id, then a kind
# ('file' or 'folder') and an id per target.
_TARGETS = (
    BINDINGS_LUA
    + """
local bound = bound_folders(KEYS[3], ARGV[1])
if not bound then
  return {-1}
end
local memo, found = {}, {1}
for i = 2, #ARGV - 1, 2 do
  local folder = ARGV[i + 1]
  if ARGV[i] ~= 'folder' then
    local member = redis.call('HGET', KEYS[1], ARGV[i + 1])
    folder = member and file_folder(member)
  end
  if folder and within(KEYS[2], bound, memo, folder) then
    found[#found + 1] = 1
  else
    found[#found + 1] = 0
  end
end
return found
"""
)

# The key's folders as its binding lists them, after one check: with ARGV[2] 'file' or 'folder',
# that ARGV[3] is a file or folder inside them, else that one of them is live (-1 when none is):
# {status, folder, folder, ...}. KEYS: files, folders, keys. ARGV: key id, kind ('' none), id.
_FOLDERS_AFTER_CHECK = (
    BINDINGS_LUA
    + """
local bound, listed = bound_folders(KEYS[3], ARGV[1])
if not bound then
  return {-1}
end
local status = 1
if ARGV[2] == 'file' then
  local member = redis.call('HGET', KEYS[1], ARGV[3])
  local folder = member and file_folder(member)
  if not folder or not view(KEYS[2], bound, folder) then
    status = 0
  end
elseif ARGV[2] == 'folder' then
  if not view(KEYS[2], bound, ARGV[3]) then
    status = 0
  end
else
  status = -1
  for _, f in ipairs(listed) do
    if lineage(KEYS[2], f) then
      status = 1
      break
    end
  end
end
local found = {status}
for _, f in ipairs(listed) do
  found[#found + 1] = f
end
return found
"""
)

# Members of the account's order one page of a bound key's files examines at least.
SCAN_BOUND = 1000


class _Script:
    """One of the scripts above, run on the worker's auto-pipelined connection when there is
    one (the gateway lane's routes run without a task, which redis-py's client needs), else
    on the service's client."""

    __slots__ = ("_call", "_hot", "_script")

    def __init__(
        self, redis: Redis, hot: PipelinedRedis | None, source: str, keys: int, args: int
    ) -> None:
        self._script = redis.register_script(source)
        self._hot = hot
        self._call = ScriptCall(source, self._script.sha, keys, *([ARG] * (keys + args)))

    async def __call__(self, keys: list[str], args: list[str | int]) -> Any:
        if self._hot is None:
            return await self._script(keys=keys, args=args)
        values = [name.encode() for name in keys] + [str(arg).encode() for arg in args]
        return await self._hot.run_script(self._call, *values)


class BindingsStore:
    """A bound key's reads, over the service's Redis client (and its hot connection). Each
    returns a status first: 1 inside, 0 outside (or unknown), -1 the key reaches nothing (see
    the module)."""

    def __init__(self, redis: Redis, keys: RedisKeys, hot: PipelinedRedis | None = None) -> None:
        self.keys = keys
        self._file = _Script(redis, hot, _FILE, 3, 2)
        self._folder = _Script(redis, hot, _FOLDER, 2, 2)
        self._place = _Script(redis, hot, _PLACE, 2, 2)
        self._tops = _Script(redis, hot, _TOPS, 2, 1)
        self._files_page = _Script(redis, hot, _FILES_PAGE, 3, 5)
        self._targets = redis.register_script(_TARGETS)  # never on the gateway's path
        self._folders_after_check = _Script(redis, hot, _FOLDERS_AFTER_CHECK, 3, 3)

    async def file(self, user_id: str, key_id: str, file_id: str) -> tuple[int, str | None]:
        """(status, the file's member as stored when inside). One round trip."""
        found = await self._file(
            keys=[
                self.keys.account_files(user_id),
                self.keys.account_folders(user_id),
                self.keys.account_keys(user_id),
            ],
            args=[file_id, key_id],
        )
        return int(found[0]), (found[1] if len(found) > 1 else None)

    async def folder(
        self, user_id: str, key_id: str, folder_id: str
    ) -> tuple[int, list[tuple[str, str]]]:
        """(status, the folder's lineage up to the key's outermost folder above it, as (id,
        stored record) pairs, the folder first). One round trip."""
        found = await self._folder(
            keys=[self.keys.account_folders(user_id), self.keys.account_keys(user_id)],
            args=[folder_id, key_id],
        )
        return int(found[0]), list(zip(found[1::2], found[2::2], strict=True))

    async def place(self, user_id: str, key_id: str, default: str | None) -> tuple[int, str | None]:
        """(status, where an upload without a folder goes: ``default`` when inside, else the
        key's first live folder; None when none is live). One round trip."""
        found = await self._place(
            keys=[self.keys.account_folders(user_id), self.keys.account_keys(user_id)],
            args=[key_id, default or ""],
        )
        return int(found[0]), (found[1] if len(found) > 1 else None)

    async def tops(self, user_id: str, key_id: str) -> tuple[int, list[FolderRecord]]:
        """(status, the key's live folders that none of its others holds). One round trip."""
        found = await self._tops(
            keys=[self.keys.account_folders(user_id), self.keys.account_keys(user_id)],
            args=[key_id],
        )
        records = []
        for folder_id, stored in zip(found[1::2], found[2::2], strict=True):
            if not stored:
                raise CorruptRecord()
            records.append(folder_record(folder_id, stored))
        return int(found[0]), records

    async def files_page(
        self, user_id: str, key_id: str, limit: int, after: str | None
    ) -> tuple[int, FilePage]:
        """(status, up to ``limit`` of the key's files, newest first, after the position
        ``after``). One round trip; a page examines at most ``SCAN_BOUND`` files of the
        account (or ``limit`` + 1), so it may hold fewer than ``limit``, even none, with a
        ``next_cursor`` to go on from."""
        found = await self._files_page(
            keys=[
                self.keys.account_file_order(user_id),
                self.keys.account_folders(user_id),
                self.keys.account_keys(user_id),
            ],
            args=[
                key_id,
                "+" if after is None else "(" + after,
                limit + 1,
                max(SCAN_BOUND, limit + 1),
                FILE_POSITION_LENGTH,
            ],
        )
        status, stopped, members = int(found[0]), found[1] if len(found) > 1 else "", found[2:]
        files = await file_records(members[:limit])
        if len(members) > limit:
            last = files[-1]
            next_cursor = encode_file_cursor(f"{last.created_at:013d}:{last.id}")
        elif stopped:
            next_cursor = encode_file_cursor(stopped)
        else:
            next_cursor = None
        return status, FilePage(files, next_cursor)

    async def targets(
        self, user_id: str, key_id: str, targets: list[tuple[str, str]]
    ) -> tuple[int, list[bool]]:
        """(status, whether each of ``targets``, ``(kind, id)`` with kind ``file`` or
        ``folder``, lies inside the key's folders). One round trip however many."""
        args: list[str] = [key_id]
        for kind, target_id in targets:
            args += (kind, target_id)
        found = await self._targets(
            keys=[
                self.keys.account_files(user_id),
                self.keys.account_folders(user_id),
                self.keys.account_keys(user_id),
            ],
            args=args,
        )
        return int(found[0]), [bool(inside) for inside in found[1:]]

    async def folders_after_check(
        self, user_id: str, key_id: str, target: tuple[str, str] | None
    ) -> tuple[int, list[str]]:
        """(status, the key's folders as its binding lists them), after checking that
        ``target`` (``(kind, id)``, kind ``file`` or ``folder``) lies inside them, or without a
        target that one of them is live (else status -1). One round trip; the folders are
        returned whatever the status."""
        kind, target_id = target if target is not None else ("", "")
        found = await self._folders_after_check(
            keys=[
                self.keys.account_files(user_id),
                self.keys.account_folders(user_id),
                self.keys.account_keys(user_id),
            ],
            args=[key_id, kind, target_id],
        )
        return int(found[0]), list(found[1:])
