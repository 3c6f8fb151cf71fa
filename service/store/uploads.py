"""Resumable uploads' records in Redis (``service.auth.uploads`` decides; ``service.store.
partial_blobs`` holds the bytes): what each upload is, how far it got, and who is writing to it,
so any instance continues any upload.

Per account (``service.store.keys``): ``P:{U}:upload:<id>``, a hash of one upload: ``file`` (the
file id its bytes become), ``length`` (-1 while deferred), ``offset``, ``expires`` (ms), ``meta``
(JSON: name, type, folder, alias), ``by`` (the key that made it, or ``session``), ``state`` (JSON:
where the backend keeps the bytes so far), ``sha`` (``<offset>:<base64>``: the running
SHA-256 saved at that offset, ``service.domain.sha256_state``), ``writer`` and ``lease`` (the
``PATCH`` writing now and until when), and once finished ``done`` (JSON: the file, and its
alias). ``P:{U}:uploads`` names each of the account's uploads with ``<expires>:<length>``, for
the limits and the sweep; ``P:uploads`` lists the accounts that have one.

Every change is a script on the account's keys, so it holds whatever runs at once: a ``PATCH``
first takes the upload's lease at the offset it names (``claim``: 409 for another offset, or for
an upload another ``PATCH`` is writing), commits the bytes it stored only while it holds it
(``commit``), and lets it go (``release``); finishing is a claim's last step (``finish``), once.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from redis.asyncio import Redis

from service.domain.uploads import BUSY, ELSEWHERE, FINISHED, UploadRecord
from service.store.keys import RedisKeys

# Adds an upload when the account's live uploads stay within the bounds: 1 added, -1 too many,
# -2 too many bytes, -3 the user is gone. (Expired ones are not counted, and stay listed for
# the sweep that removes their bytes.) KEYS: uploads index, upload, user (the account's slot:
# the list of accounts, another slot, is written before). ARGV: id, now, expires, length
# (counted), max count, max bytes, user id, the record's end (ms), then field, value pairs.
_ADD = """
if redis.call('EXISTS', KEYS[3]) == 0 then
  return -3
end
local now = tonumber(ARGV[2])
local held, count = 0, 0
local listed = redis.call('HGETALL', KEYS[1])
for i = 1, #listed, 2 do
  local expires, length = string.match(listed[i + 1], '^(%d+):(%d+)$')
  if tonumber(expires) > now then
    count = count + 1
    held = held + tonumber(length)
  end
end
if count + 1 > tonumber(ARGV[5]) then
  return -1
end
if held + tonumber(ARGV[4]) > tonumber(ARGV[6]) then
  return -2
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3] .. ':' .. ARGV[4])
redis.call('HSET', KEYS[2], unpack(ARGV, 9))
redis.call('PEXPIREAT', KEYS[2], ARGV[8])
return 1
"""

# Takes the writer's lease at an offset: {1, fields...} taken; {0} no such live upload; {2,
# offset} the upload is at another offset; {3, until} another writer holds it until then (ms);
# {4, done} finished.
# KEYS: upload. ARGV: offset, token, lease until, now.
_CLAIM = """
local upload = redis.call('HGETALL', KEYS[1])
if #upload == 0 then
  return {0}
end
local fields = {}
for i = 1, #upload, 2 do
  fields[upload[i]] = upload[i + 1]
end
local now = tonumber(ARGV[4])
if tonumber(fields['expires']) <= now then
  return {0}
end
if fields['done'] then
  return {4, fields['done']}
end
if fields['offset'] ~= ARGV[1] then
  return {2, fields['offset']}
end
if fields['writer'] and tonumber(fields['lease']) > now then
  return {3, fields['lease']}
end
redis.call('HSET', KEYS[1], 'writer', ARGV[2], 'lease', ARGV[3])
return {1}
"""

# While the lease is the caller's: sets the offset and the state (and the length, when it
# was deferred and is now known: ARGV[4], '' to leave it; and the running hash, ARGV[6], ''
# to leave it), renews the lease; 1 done, 0 the lease was lost. KEYS: upload. ARGV: token,
# offset, state, length, lease until, hash.
_COMMIT = """
if redis.call('HGET', KEYS[1], 'writer') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'offset', ARGV[2], 'state', ARGV[3], 'lease', ARGV[5])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'length', ARGV[4])
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'sha', ARGV[6])
end
return 1
"""

# Lets the lease go (when it is still the caller's). KEYS: upload. ARGV: token.
_RELEASE = """
if redis.call('HGET', KEYS[1], 'writer') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'writer', 'lease')
end
return 1
"""

# Extends the lease (while it is the caller's): 1 done, 0 lost. KEYS: upload. ARGV: token,
# lease until.
_RENEW = """
if redis.call('HGET', KEYS[1], 'writer') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'lease', ARGV[2])
return 1
"""

# Marks the upload finished (while the lease is the caller's): 1 done, 0 lost. It stays, so a
# retried last PATCH, or a GET, is answered with the file, until it expires. KEYS: upload,
# uploads index. ARGV: token, done (JSON), id.
_FINISH = """
if redis.call('HGET', KEYS[1], 'writer') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'done', ARGV[2])
redis.call('HDEL', KEYS[1], 'writer', 'lease')
redis.call('HDEL', KEYS[2], ARGV[3])
return 1
"""

# How long an upload's record outlives its expiry: the sweep reads where its bytes are from it.
EXPIRED_GRACE_MS = 7 * 24 * 3600 * 1000


def _record(user_id: str, upload_id: str, fields: dict[str, str]) -> UploadRecord:
    length = int(fields["length"])
    return UploadRecord(
        id=upload_id,
        user_id=user_id,
        file_id=fields["file"],
        length=None if length < 0 else length,
        offset=int(fields["offset"]),
        expires_at=int(fields["expires"]),
        meta=orjson.loads(fields["meta"]),
        made_by=fields["by"],
        state=orjson.loads(fields["state"]),
        done=orjson.loads(fields["done"]) if "done" in fields else None,
        sha=_saved_hash(fields.get("sha")),
    )


def _saved_hash(value: str | None) -> tuple[int, bytes] | None:
    if not value:
        return None
    offset, _, state = value.partition(":")
    return int(offset), base64.b64decode(state)


class UploadStore:
    def __init__(self, redis: Redis, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self._add = redis.register_script(_ADD)
        self._claim = redis.register_script(_CLAIM)
        self._commit = redis.register_script(_COMMIT)
        self._release = redis.register_script(_RELEASE)
        self._renew = redis.register_script(_RENEW)
        self._finish = redis.register_script(_FINISH)

    async def add(
        self,
        record: UploadRecord,
        now: int,
        counted: int,
        max_count: int,
        max_bytes: int,
    ) -> int:
        """Add ``record`` (new: offset 0) when the account's live uploads stay within
        ``max_count`` and, with ``counted`` bytes more, ``max_bytes``: ``ADDED``, or
        ``TOO_MANY``, ``TOO_MANY_BYTES``, ``ACCOUNT_GONE``."""
        user_id = record.user_id
        fields = {
            "file": record.file_id,
            "length": -1 if record.length is None else record.length,
            "offset": record.offset,
            "expires": record.expires_at,
            "meta": orjson.dumps(record.meta).decode(),
            "by": record.made_by,
            "state": orjson.dumps(record.state).decode(),
        }
        pairs = [item for pair in fields.items() for item in pair]
        # Listed for the sweep first: an account listed with nothing to sweep is taken off.
        await self._redis.sadd(self.keys.upload_accounts, user_id)
        return int(
            await self._add(
                keys=[
                    self.keys.account_uploads(user_id),
                    self.keys.account_upload(user_id, record.id),
                    self.keys.user(user_id),
                ],
                args=[
                    record.id,
                    now,
                    record.expires_at,
                    counted,
                    max_count,
                    max_bytes,
                    user_id,
                    record.expires_at + EXPIRED_GRACE_MS,
                    *pairs,
                ],
            )
        )

    async def get(self, user_id: str, upload_id: str, now: int) -> UploadRecord | None:
        """The upload, unless there is none or it has expired."""
        fields = await self._redis.hgetall(self.keys.account_upload(user_id, upload_id))
        if not fields or int(fields["expires"]) <= now:
            return None
        return _record(user_id, upload_id, fields)

    async def claim(
        self, user_id: str, upload_id: str, offset: int, token: str, lease_until: int, now: int
    ) -> tuple[int, Any]:
        """Take the writer's lease at ``offset``: (``TAKEN``, None), (``GONE``, None),
        (``ELSEWHERE``, its offset), (``BUSY``, when its lease ends, ms) or (``FINISHED``, its
        done record)."""
        reply = await self._claim(
            keys=[self.keys.account_upload(user_id, upload_id)],
            args=[offset, token, lease_until, now],
        )
        status = int(reply[0])
        if status in (ELSEWHERE, BUSY):
            return status, int(reply[1])
        if status == FINISHED:
            return status, orjson.loads(reply[1])
        return status, None

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
    ) -> bool:
        """Record the bytes stored so far (while the lease is ``token``'s), and the running
        hash's state when it has hashed exactly them; False when the lease was lost."""
        return bool(
            await self._commit(
                keys=[self.keys.account_upload(user_id, upload_id)],
                args=[
                    token,
                    offset,
                    orjson.dumps(state).decode(),
                    "" if length is None else length,
                    lease_until,
                    "" if sha is None else f"{offset}:{base64.b64encode(sha).decode()}",
                ],
            )
        )

    async def release(self, user_id: str, upload_id: str, token: str) -> None:
        await self._release(keys=[self.keys.account_upload(user_id, upload_id)], args=[token])

    async def renew(self, user_id: str, upload_id: str, token: str, lease_until: int) -> bool:
        """Keep the lease for a writer still receiving bytes; False when it was lost."""
        return bool(
            await self._renew(
                keys=[self.keys.account_upload(user_id, upload_id)], args=[token, lease_until]
            )
        )

    async def finish(self, user_id: str, upload_id: str, token: str, done: dict[str, Any]) -> bool:
        return bool(
            await self._finish(
                keys=[
                    self.keys.account_upload(user_id, upload_id),
                    self.keys.account_uploads(user_id),
                ],
                args=[token, orjson.dumps(done).decode(), upload_id],
            )
        )

    async def remove(self, user_id: str, upload_id: str) -> None:
        """Forget the upload (terminated, or expired and its bytes removed)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.delete(self.keys.account_upload(user_id, upload_id))
            pipe.hdel(self.keys.account_uploads(user_id), upload_id)
            await pipe.execute()

    async def accounts(self) -> list[str]:
        """The accounts that may have an upload in progress."""
        return sorted(await self._redis.smembers(self.keys.upload_accounts))

    async def expired(self, user_id: str, now: int) -> list[str]:
        """The ids of the account's uploads that expired unfinished (their bytes to remove);
        an account left with none is taken off the list."""
        index = self.keys.account_uploads(user_id)
        listed = await self._redis.hgetall(index)
        if not listed:
            await self._redis.srem(self.keys.upload_accounts, user_id)
            if await self._redis.exists(index):  # one added meanwhile (two slots: no script)
                await self._redis.sadd(self.keys.upload_accounts, user_id)
        return [
            upload_id for upload_id, value in listed.items() if int(value.split(":", 1)[0]) <= now
        ]

    async def in_progress(self, user_id: str, now: int) -> list[UploadRecord]:
        """The account's uploads that have not expired, finished ones among them (each stays
        until its expiry), in no order."""
        live = await self._live_ids(user_id, now)
        if not live:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for upload_id in live:
                pipe.hgetall(self.keys.account_upload(user_id, upload_id))
            found = await pipe.execute()
        return [
            _record(user_id, upload_id, fields)
            for upload_id, fields in zip(live, found, strict=True)
            if fields and int(fields["expires"]) > now
        ]

    async def live_file_ids(self, user_id: str, now: int) -> set[str]:
        """The file ids of the account's uploads in progress."""
        live = await self._live_ids(user_id, now)
        if not live:
            return set()
        async with self._redis.pipeline(transaction=False) as pipe:
            for upload_id in live:
                pipe.hget(self.keys.account_upload(user_id, upload_id), "file")
            found = await pipe.execute()
        return {file_id for file_id in found if file_id}

    async def _live_ids(self, user_id: str, now: int) -> list[str]:
        """The ids the account's list holds of uploads that have not expired."""
        listed = await self._redis.hgetall(self.keys.account_uploads(user_id))
        return [
            upload_id for upload_id, value in listed.items() if int(value.split(":", 1)[0]) > now
        ]

    async def leftover_state(self, user_id: str, upload_id: str) -> tuple[str, dict] | None:
        """An expired upload's file id and bytes' state (its record outlives its expiry by
        ``EXPIRED_GRACE_MS`` for this)."""
        fields = await self._redis.hmget(
            self.keys.account_upload(user_id, upload_id), "file", "state"
        )
        if fields[0] is None:
            return None
        return fields[0], orjson.loads(fields[1])
