"""The public side's use of an alias's entry (``GET /a/{slug}``, ``service.store.aliases`` for the
entry): resolving a slug and counting its view in one script on one key, giving a view back, the
request-rate bucket of a client address.

Knows nothing of HTTP. Receives no password, only a bcrypt hash already checked against one.
The reads go through the worker's auto-pipelined connection (``hot``) when there is one: on a
cluster it sends each script to its own key's node.

**One round trip, and never past ``max_views``.** ``view`` reads every field the decision needs
and, in the same script, adds the view: whether the alias is usable (it exists, is enabled, its
account's public aliases are on, it has not expired, its views are below its limit, it is the
alias the caller expects) and the count are one atomic step, so however many requests arrive
on however many workers, no more views are counted than the limit allows, and a request is
served only after its view was counted. A view counted for an answer that then is not a 200 or
206 (the target deleted meanwhile, an error before the first byte) is given back (``give_back``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from service.domain.aliases import PASSWORD, UNUSABLE, USABLE, View
from service.store.keys import RedisKeys
from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis, ScriptCall

# What an alias's entry says of a request for it (status first): {0} unusable (unknown,
# disabled, switched off, moving to a new slug, expired, used up, or not the alias expected);
# {2, user, alias, target, hash} a password is needed (none was checked, or not the one the
# entry holds); {1, user, alias, target, views, limited} usable, with the view added when
# ``count`` is '1', and ``limited`` 1 when it has a view limit. ``count`` '2' continues a view
# counted before (``AliasAccess``'s grant): nothing is added and the limit is not checked, as
# that view was. ``now`` ms; ``expected`` the
# alias id expected (stored form; '' any); ``hash`` the bcrypt hash a given password was checked
# against ('' none).
_VIEW_FUNCTION = """
local function view(entry, now, count, expected, hash)
  local values = redis.call('HMGET', entry, 'u', 'i', 't', 'v', 'm', 'e', 'p', 'x', 'k', 'z')
  if not values[1] or values[8] or values[9] or values[10] then
    return {0}
  end
  if values[6] and tonumber(values[6]) <= tonumber(now) then
    return {0}
  end
  local views = tonumber(values[4] or '0')
  if count ~= '2' and values[5] and views >= tonumber(values[5]) then
    return {0}
  end
  if expected ~= '' and expected ~= values[2] then
    return {0}
  end
  if values[7] and hash ~= values[7] then
    return {2, values[1], values[2], values[3], values[7]}
  end
  if count == '1' then
    views = redis.call('HINCRBY', entry, 'v', 1)
  end
  return {1, values[1], values[2], values[3], views, values[5] and 1 or 0}
end
"""
# KEYS: entry. ARGV: now, count, expected, hash (``view``'s).
_VIEW = _VIEW_FUNCTION + "return view(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])\n"

# Gives back a view counted for an answer that was not served, while the entry is still alias
# ARGV[1]'s; never below zero. KEYS: entry.
_GIVE_BACK = """
if redis.call('HGET', KEYS[1], 'i') ~= ARGV[1] then
  return 0
end
if tonumber(redis.call('HGET', KEYS[1], 'v') or '0') > 0 then
  redis.call('HINCRBY', KEYS[1], 'v', -1)
end
return 1
"""

# Takes one request from a client address's bucket (GCRA, as the credentials' buckets): 0 when
# taken, else µs until one more request fits. The bucket is never replicated or written to the
# AOF (it lives seconds): nothing the script writes after it is either. ``now``, ``interval``,
# ``tolerance`` in µs.
_TAKE_FUNCTION = """
local function take(bucket, now, interval, tolerance)
  if redis.set_repl then
    redis.set_repl(redis.REPL_NONE)
  end
  now, interval, tolerance = tonumber(now), tonumber(interval), tonumber(tolerance)
  local tat = tonumber(redis.call('GET', bucket)) or now
  if tat < now then
    tat = now
  end
  if now + tolerance - tat < interval then
    return math.max(1, tat + interval - tolerance - now)
  end
  local next_tat = tat + interval
  redis.call('SET', bucket, string.format('%.0f', next_tat), 'PX',
    math.max(1, math.ceil((next_tat - now) / 1000)))
  return 0
end
"""
# KEYS: bucket. ARGV: now, interval, tolerance (``take``'s).
_TAKE = _TAKE_FUNCTION + "return take(KEYS[1], ARGV[1], ARGV[2], ARGV[3])\n"

# On one server, where a script may use keys of any slot: ``view`` (counted), then, when ARGV[5]
# is '1', ``take``, and a hash field read as it is: {view's reply, the field or nil, take's}.
# KEYS: entry, bucket (any key when no take), the hash. ARGV: view's four, '1'/'0', take's
# three, the field.
_VIEW_TAKE_READ = (
    _VIEW_FUNCTION
    + _TAKE_FUNCTION
    + """
local seen = view(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
local wait = 0
if ARGV[5] == '1' then
  wait = take(KEYS[2], ARGV[6], ARGV[7], ARGV[8])
end
return {seen, redis.call('HGET', KEYS[3], ARGV[9]), wait}
"""
)


_NOT_USABLE = View(UNUSABLE)
# A call ``_together`` sends: a script's call and its values, or a packed command and ().
_Call = tuple[ScriptCall | bytes, tuple[bytes, ...]]


def _by_sha(call: _Call) -> bytes:
    command, values = call
    return command if isinstance(command, bytes) else command.by_sha.pack(*values)


def _view_args(
    now_ms: int,
    count: bool,
    alias_id: str | None,
    password_hash: str | None,
    continuing: bool = False,
) -> tuple[bytes, ...]:
    return (
        b"%d" % now_ms,
        b"2" if continuing else b"1" if count else b"0",
        alias_id[4:].encode() if alias_id else b"",
        password_hash.encode() if password_hash else b"",
    )


def _take_args(now_ms: int, rate: tuple[int, int]) -> tuple[bytes, ...]:
    return b"%d" % (now_ms * 1000), b"%d" % rate[0], b"%d" % rate[1]


def _view(reply: Any) -> View:
    if not reply or reply[0] == UNUSABLE:
        return _NOT_USABLE
    status, user, alias, target, last, *limited = reply
    if status == PASSWORD:
        return View(PASSWORD, "usr_" + user, "als_" + alias, target, 0, last)
    return View(USABLE, "usr_" + user, "als_" + alias, target, int(last), None, limited == [1])


class AliasViews:
    """The public side's scripts over the service's Redis client (and its hot connection)."""

    def __init__(self, redis: Redis, keys: RedisKeys, hot: PipelinedRedis | None = None) -> None:
        self._redis = redis
        self._hot = hot
        self.keys = keys
        self._view = redis.register_script(_VIEW)
        self._give_back = redis.register_script(_GIVE_BACK)
        self._take = redis.register_script(_TAKE)
        self._hot_view = ScriptCall(_VIEW, self._view.sha, 1, ARG, ARG, ARG, ARG, ARG)
        self._hot_take = ScriptCall(_TAKE, self._take.sha, 1, ARG, ARG, ARG, ARG)
        self._hot_give_back = ScriptCall(_GIVE_BACK, self._give_back.sha, 1, ARG, ARG)
        self._view_take_read = redis.register_script(_VIEW_TAKE_READ)
        self._hot_view_take_read = ScriptCall(
            _VIEW_TAKE_READ, self._view_take_read.sha, 3, *(ARG,) * 12
        )
        self._hot_hget = CommandTemplate("HGET", ARG, ARG)

    def _view_call(self, entry: str, args: tuple[bytes, ...]) -> _Call:
        return self._hot_view, (entry.encode(), *args)

    def _take_call(self, bucket: str, args: tuple[bytes, ...]) -> _Call:
        return self._hot_take, (bucket.encode(), *args)

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
    ) -> tuple[View, int]:
        """What the entry of ``slug_key`` says of a request (``View``), with its view counted
        when ``count`` and it is usable (``continuing``: a view counted before goes on, past
        the view limit, and nothing is counted); and, with ``address`` and ``rate`` (interval
        and tolerance, µs), the µs the address must wait (0: its request was taken from its
        bucket). Both in one round trip (two keys, so two scripts, sent together)."""
        args = _view_args(now_ms, count, alias_id, password_hash, continuing)
        entry = self.keys.alias_entry(slug_key)
        if address is None or rate is None:
            if self._hot is None:
                return _view(await self._view(keys=[entry], args=list(args))), 0
            return _view((await self._together([self._view_call(entry, args)]))[0]), 0
        bucket, take = self.keys.alias_rate(address), _take_args(now_ms, rate)
        if self._hot is None:
            seen, wait = await asyncio.gather(
                self._view(keys=[entry], args=list(args)),
                self._take(keys=[bucket], args=list(take)),
            )
        else:
            seen, wait = await self._together(
                [self._view_call(entry, args), self._take_call(bucket, take)]
            )
        return _view(seen), int(wait)

    async def view_reading(
        self,
        slug_key: str,
        now_ms: int,
        alias_id: str,
        field: tuple[str, str],
        address: str | None = None,
        rate: tuple[int, int] | None = None,
    ) -> tuple[View, Any, int]:
        """``view`` of the alias ``alias_id`` (counted when usable; unusable when the slug is
        now another alias's) and the address's take, with a read of ``field`` (a hash and its
        field: the record of the file the alias was last seen to be of), in one round trip where
        ``view`` and then the read would be two: one script on one server, three commands sent
        together on a cluster. The field's value is returned as stored (None when absent). Only
        over the worker's hot connection."""
        hot = self._hot
        if hot is None:
            raise RuntimeError("view_reading needs the worker's pipelined connection")
        entry = self.keys.alias_entry(slug_key).encode()
        view_args = _view_args(now_ms, True, alias_id, None)
        take = None
        if address is not None and rate is not None:
            take = self.keys.alias_rate(address), _take_args(now_ms, rate)
        hash_name, hash_field = field[0].encode(), field[1].encode()
        if isinstance(hot, PipelinedRedis):
            if take is None:
                keys, taking = (entry, entry, hash_name), (b"0", b"0", b"0", b"0")
            else:
                keys, taking = (entry, take[0].encode(), hash_name), (b"1", *take[1])
            [reply] = await self._together(
                [(self._hot_view_take_read, (*keys, *view_args, *taking, hash_field))]
            )
            seen, member, wait = reply
            return _view(seen), member, int(wait)
        calls: list[_Call] = [
            (self._hot_view, (entry, *view_args)),
            (self._hot_hget.pack(hash_name, hash_field), ()),
        ]
        if take is not None:
            calls.append(self._take_call(*take))
        replies = await self._together(calls)
        return _view(replies[0]), replies[1], int(replies[2]) if len(replies) > 2 else 0

    async def _together(self, calls: list[_Call]) -> list[Any]:
        """Each of ``calls`` (a script's call and its values, run by its SHA1 and by its source
        on a server that lacks it; or a command already packed), sent at once over the hot
        connection: on one server in the same write, without a task of its own (the connection
        hands back each reply's future at once); on a cluster to each key's node. Every reply is
        awaited before any failure is raised, so none is left unread."""
        hot = self._hot
        assert hot is not None
        packed = [_by_sha(call) for call in calls]
        if isinstance(hot, PipelinedRedis):
            pending: list[Any] = [hot.execute_packed(command) for command in packed]
        else:
            pending = [asyncio.ensure_future(hot.execute_packed(command)) for command in packed]
        replies: list[Any] = []
        failed: BaseException | None = None
        for (call, values), reply in zip(calls, pending, strict=True):
            try:
                replies.append(await reply)
            except ResponseError as error:
                if isinstance(call, bytes) or not str(error).startswith("NOSCRIPT"):
                    failed = failed or error
                    continue
                replies.append(await hot.execute_packed(call.by_source.pack(*values)))
            except BaseException as error:
                failed = failed or error
        if failed is not None:
            raise failed
        return replies

    async def give_back(self, slug_key: str, alias_id: str) -> None:
        """Take back a view counted for an answer that was not served."""
        entry, alias = self.keys.alias_entry(slug_key), alias_id[4:]
        if self._hot is None:
            await self._give_back(keys=[entry], args=[alias])
            return
        # Over the hot connection, as the view was: the gateway lane runs outside any task.
        await self._together([(self._hot_give_back, (entry.encode(), alias.encode()))])

    async def forget_stored_cookie_secret(self) -> None:
        """Delete the cookie key earlier releases kept in the store (and so in every backup):
        the key is now derived from the operator's secrets key, never stored."""
        await self._redis.delete(self.keys.alias_cookie_secret)
