"""The Redis half of a backup: every record under the deployment's prefix, copied at one instant,
and written back into an empty store. The bytes of files and the backup's own format are
``service.auth.backup``'s, which says why the two halves are consistent.

**One instant, without stopping the service.** ``snapshot`` pauses every client's writes
(``CLIENT PAUSE … WRITE``, on every master of a cluster, all paused before anything is read),
reads every key under the prefix (``SCAN``, then ``DUMP`` and ``PEXPIRETIME`` of each, pipelined)
and unpauses. Reads go on meanwhile; a write (a login, a key's change, a credential lookup, whose
script takes from a rate bucket) waits for the pause to end, and Redis neither expires nor evicts
a key while writes are paused. So what is read is the store as it was when the pause began: a
state the service was in, as a crash at that moment would have left it, which every multi-step
change of the service is ordered to survive (``service.store.sessions``, "Creating a
credential"). A copy read key by key without a pause would not be one: a key's entry read before
its revocation and its account read after would bring back a revoked key that works.

The pause is bounded: Redis lifts it by itself after ``max_pause_ms`` even if this process dies,
and a snapshot that took longer is refused (``PauseTooLong``), since writes may have landed
during it. A request that waits longer than ``FILEHOST_REDIS_TIMEOUT_SECONDS`` (and its one
retry) is answered 503 ``store_unavailable``; the command it sent is never run, since Redis drops
a waiting command whose client has gone.

Left out (``RedisKeys.is_transient``): rate buckets (they start full again), the replication
marker and a restore's marker. Expiry deadlines are kept as the absolute times Redis holds
(``PEXPIRETIME``), so a restored session or key expires when it would have. Needs Redis 7.0 or
newer (``PEXPIRETIME``; the service needs Redis 7 anyway). Never logs a key's value: digests are
in the key names, password hashes in the values.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from redis.asyncio.cluster import RedisCluster

from service.domain.backup import Record, Snapshot
from service.domain.outcomes import PauseTooLong
from service.domain.records import FileRecord
from service.domain.stored_forms import file_record
from service.store.keys import RedisKeys

# Keys asked for per SCAN, and records read or written per pipelined round trip.
_SCAN_COUNT = 1000
_BATCH = 500


def _glob_escaped(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class BackupStore:
    """Snapshots and restores of every record under the prefix, over the service's client: one
    server, the master Sentinel names, or every master of a cluster."""

    def __init__(self, redis: Any, keys: RedisKeys) -> None:
        self._redis = redis
        self.keys = keys
        self.prefix = keys.prefix
        self._pattern = _glob_escaped(keys.prefix) + ":*"

    async def _masters(self) -> list[Any]:
        """Where to scan and pause: None (the one server) or each master of a cluster."""
        if isinstance(self._redis, RedisCluster):
            await self._redis.initialize()  # the slot map, once
            return list(self._redis.get_primaries())
        return [None]

    async def _on(self, node: Any, *args: Any) -> Any:
        """A command to the one server, or to one node of a cluster as to a server of its own
        (the cluster client would merge what its nodes answer)."""
        if node is None:
            return await self._redis.execute_command(*args)
        return await node.execute_command(*args)

    async def _names(self, node: Any) -> list[str]:
        """Every key under the prefix on ``node`` but the transient ones."""
        names, cursor = [], 0
        while True:
            cursor, found = await self._on(
                node, "SCAN", cursor, "MATCH", self._pattern, "COUNT", _SCAN_COUNT
            )
            names += [name for name in found if not self.keys.is_transient(name)]
            if int(cursor) == 0:
                return sorted(set(names))

    async def _server(self, node: Any) -> str:
        info = await self._on(node, "INFO", "server")
        if isinstance(info, dict):
            engine = "valkey" if "valkey_version" in info else "redis"
            return f"{engine} {info.get(f'{engine}_version', info.get('redis_version', '?'))}"
        return "?"

    async def snapshot(
        self,
        write: Callable[[Record], None],
        while_paused: Callable[[list[FileRecord]], Awaitable[None]],
        max_pause_ms: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> Snapshot:
        """Pause writes, give every record to ``write`` and the file records found to
        ``while_paused`` (still paused: their bytes can be pinned then), and unpause; the
        snapshot's summary. ``PauseTooLong`` when that took ``max_pause_ms`` or more."""
        masters = await self._masters()
        server = await self._server(masters[0])
        started = monotonic()
        try:
            for node in masters:
                await self._on(node, "CLIENT", "PAUSE", max_pause_ms, "WRITE")
            seconds, micros = await self._on(masters[0], "TIME")
            taken_at = int(seconds) * 1000 + int(micros) // 1000
            count, files = 0, []
            for node in masters:
                names = await self._names(node)
                for start in range(0, len(names), _BATCH):
                    batch = names[start : start + _BATCH]
                    for record, members in await self._read(batch):
                        write(record)
                        count += 1
                        files += [file_record(member) for member in members]
            await while_paused(files)
            took_ms = int((monotonic() - started) * 1000)
            if took_ms >= max_pause_ms:
                raise PauseTooLong(took_ms, max_pause_ms)
        finally:
            for node in masters:
                await self._on(node, "CLIENT", "UNPAUSE")
        return Snapshot(taken_at, count, files, took_ms, server)

    async def _read(self, names: list[str]) -> list[tuple[Record, list[str]]]:
        """Each key's record, and for an account's files its members (the file records)."""
        owners = [self.keys.account_files_owner(name) for name in names]
        async with self._redis.pipeline(transaction=False) as pipe:
            for name, owner in zip(names, owners, strict=True):
                pipe.dump(name)
                pipe.execute_command("PEXPIRETIME", name)
                if owner is not None:
                    pipe.hvals(name)
            replies = await pipe.execute()
        read, position = [], 0
        for name, owner in zip(names, owners, strict=True):
            dump, expire_at = replies[position], int(replies[position + 1])
            position += 2
            members: list[str] = []
            if owner is not None:
                members = list(replies[position])
                position += 1
            if dump is None:  # gone between SCAN and DUMP: only a transient key can be
                continue
            read.append((Record(name, expire_at if expire_at >= 0 else None, dump), members))
        return read

    async def held(self, limit: int = 1) -> list[str]:
        """Up to ``limit`` keys under the prefix but the transient ones and the upgrade marks:
        none in an empty store, nor in one a ``serve`` only started on."""
        held: list[str] = []
        passed_over = set(self.keys.upgrade_marks)
        for node in await self._masters():
            cursor = 0
            while len(held) < limit:
                cursor, found = await self._on(
                    node, "SCAN", cursor, "MATCH", self._pattern, "COUNT", _SCAN_COUNT
                )
                held += [
                    name
                    for name in found
                    if not self.keys.is_transient(name) and name not in passed_over
                ]
                if int(cursor) == 0:
                    break
        return held[:limit]

    async def mark_backing_up(self, lasting_ms: int) -> None:
        """Note (again) that a backup is copying the files' bytes, for ``lasting_ms``:
        deletions leave the bytes they remove noted for later meanwhile."""
        await self._redis.set(self.keys.backup_marker, "1", px=lasting_ms)

    async def done_backing_up(self) -> None:
        await self._redis.delete(self.keys.backup_marker)

    async def restoring(self) -> str | None:
        """The id of the backup a restore cut short was writing, if one was."""
        return await self._redis.get(self.keys.restore_marker)

    async def begin_restore(self, backup_id: str) -> None:
        await self._redis.set(self.keys.restore_marker, backup_id)

    async def forget_upgrades(self) -> None:
        """Remove the upgrade marks (``RedisKeys.upgrade_marks``) before a restore writes the
        backup's records: a start over no data wrote them, and the backup holds its own, so an
        upgrade a backup made before it needs is not taken for done."""
        for mark in self.keys.upgrade_marks:  # one by one: a cluster's slots differ
            await self._redis.delete(mark)

    async def end_restore(self) -> None:
        await self._redis.delete(self.keys.restore_marker)

    async def restore(
        self,
        records: Iterable[Record],
        now: int,
        replace: bool = False,
        keep_sessions: bool = True,
    ) -> tuple[int, int, int]:
        """Write ``records`` back with their deadlines (``replace``: over keys already there, to
        finish a restore cut short); those already past their deadline at ``now`` are left out,
        as Redis would have expired them, and without ``keep_sessions`` every signed-in state
        (``RedisKeys.is_signed_in_state``). How many records were written, how many were left
        out as signed-in state, and how many of those were sessions."""
        written, batch, signed_in, sessions = 0, [], 0, 0
        session_entry = self.keys.session_entry("")
        for record in records:
            if record.expire_at is not None and record.expire_at <= now:
                continue
            if not keep_sessions and self.keys.is_signed_in_state(record.key):
                signed_in += 1
                sessions += record.key.startswith(session_entry)
                continue
            batch.append(record)
            if len(batch) >= _BATCH:
                written += await self._write(batch, replace)
                batch = []
        if batch:
            written += await self._write(batch, replace)
        return written, signed_in, sessions

    async def _write(self, records: list[Record], replace: bool) -> int:
        async with self._redis.pipeline(transaction=False) as pipe:
            for record in records:
                ttl = record.expire_at if record.expire_at is not None else 0
                pipe.restore(record.key, ttl, record.dump, replace=replace, absttl=ttl != 0)
            await pipe.execute()
        return len(records)
