"""The Redis half of a backup (``service.store.backup``) on the fixtures' real Redis (a cluster
under ``--redis cluster``): every record under the prefix, with its deadline, read at one instant
while writes wait, and written back into the emptied store."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis as redis_sync
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.config import Settings
from service.domain.backup import Record
from service.domain.credentials import new_id
from service.domain.outcomes import PauseTooLong
from service.domain.records import FileRecord
from service.store.stores import Stores, open_stores
from service.store.topology import connect_client

ALICE, BOB = "usr_" + "a" * 22, "usr_" + "b" * 22
HOUR_MS = 3_600_000
# The snapshots' longest pause: far longer than a snapshot of these few records takes on a busy
# machine, and than anything the test of writes waiting waits for, so a write answered there was
# not answered because the pause ran out. Redis lifts it as soon as the snapshot is read.
LONG_PAUSE_MS = 60_000


@pytest.fixture
async def stores(settings: Settings) -> AsyncIterator[Stores]:
    client, close = connect_client(settings, settings.redis_url or "")
    yield open_stores(client, "fh")
    await close()


def everything(redis_client: Any) -> dict[str, tuple[object, int]]:
    """Every key of the store: its serialised value and absolute deadline (-1: none). A hash
    is its fields, in order: a large one's serialised form follows its table's order, which a
    restore may change (Redis 7.0's does, now and then; Valkey 8.1's keeps it)."""
    raw = redis_client
    return {
        name: (
            sorted(raw.hgetall(name).items())
            if raw.type(name) in (b"hash", "hash")
            else raw.dump(name),
            raw.pexpiretime(name),
        )
        for name in sorted(raw.scan_iter(match="*", count=1000))
    }


def file_of(user: str) -> FileRecord:
    return FileRecord(new_id("fil"), "a.txt", 3, "text/plain", "0" * 64, int(time.time() * 1000))


async def populate(stores: Stores, redis_client: Any) -> list[FileRecord]:
    """Two accounts with a session, file records, an audit-like set and keys with deadlines,
    a rate bucket, and a key of another deployment."""
    now = int(time.time() * 1000)
    files = []
    for user in (ALICE, BOB):
        assert await stores.users.add(user, f"{user}@example.com", "$2b$04$hash", now)
        await stores.sessions.add("d" * 63 + user[-1], user, now, now + HOUR_MS, now + 2 * HOUR_MS)
        for _ in range(2):
            files.append(file_of(user))
            assert await stores.files.add(user, files[-1], 10)
    redis_client.set("fh:login-failures:ip:127.0.0.1", 3, px=HOUR_MS)
    redis_client.set(stores.keys.rate_bucket(stores.keys.session_entry("x" * 64)), 1, px=HOUR_MS)
    redis_client.set("another-deployment:users:by-email", "kept out")
    return files


def no_writes(_: list[FileRecord]) -> Any:
    async def nothing() -> None:
        return None

    return nothing()


async def test_a_snapshot_restored_into_the_emptied_store_gives_back_every_record_and_deadline(
    stores: Stores, redis_client: Any, redis_server: Any
) -> None:
    await populate(stores, redis_client)
    before = {
        name: held
        for name, held in everything(redis_client).items()
        if name.startswith("fh:") and not stores.keys.is_transient(name)
    }
    records: list[Record] = []

    snapshot = await stores.backup.snapshot(records.append, no_writes, LONG_PAUSE_MS)
    redis_server.flush()
    written, left_out, _ = await stores.backup.restore(records, int(time.time() * 1000))
    assert left_out == 0  # the store's own restore keeps sessions unless told otherwise

    assert snapshot.records == written == len(records) == len(before)
    assert everything(redis_client) == before  # values and deadlines; no rate bucket, no other
    assert snapshot.server.split()[0] in ("valkey", "redis")


async def test_the_snapshot_names_every_file_record_it_holds(
    stores: Stores, redis_client: Any
) -> None:
    files = await populate(stores, redis_client)
    pinned: list[FileRecord] = []

    async def pin(found: list[FileRecord]) -> None:
        pinned.extend(found)

    snapshot = await stores.backup.snapshot(lambda _: None, pin, LONG_PAUSE_MS)

    assert sorted(snapshot.files, key=lambda r: r.id) == sorted(files, key=lambda r: r.id)
    assert pinned == snapshot.files


def writer(redis_url: str, redis_mode: str, timeout: float) -> Any:
    """A client that gives up on a command after ``timeout`` s, with no retry."""
    options: dict[str, Any] = {"socket_timeout": timeout, "decode_responses": True}
    if redis_mode == "cluster":
        return redis_sync.RedisCluster.from_url(redis_url, **options)
    return redis_sync.Redis.from_url(redis_url, retry=Retry(NoBackoff(), 0), **options)


async def test_writes_wait_while_the_store_is_read_and_reads_go_on(
    stores: Stores, redis_client: Any, redis_url: str, redis_mode: str
) -> None:
    await populate(stores, redis_client)
    # A read and the write after may take seconds on a busy machine, far less than the pause;
    # the write during the pause is given up on after 0.3 s: it waits for as long as the pause.
    other, impatient = writer(redis_url, redis_mode, 30), writer(redis_url, redis_mode, 0.3)
    seen: dict[str, Any] = {}

    async def while_paused(_: list[FileRecord]) -> None:
        seen["read"] = other.get("fh:login-failures:ip:127.0.0.1")
        with pytest.raises(redis_sync.TimeoutError):
            impatient.set("fh:written-while-paused", 1)

    try:
        await stores.backup.snapshot(lambda _: None, while_paused, LONG_PAUSE_MS)
        assert seen["read"] == "3"
        other.set("fh:written-after", 1)  # unpaused at once, not when the pause would end
    finally:
        other.close()
        impatient.close()
    assert redis_client.get("fh:written-after") == "1"


def clock_moving_by(seconds: float) -> Callable[[], float]:
    readings = iter([0.0, seconds])
    return lambda: next(readings)


async def test_a_snapshot_that_took_longer_than_the_pause_is_refused_and_writes_go_on(
    stores: Stores, redis_client: Any
) -> None:
    await populate(stores, redis_client)

    with pytest.raises(PauseTooLong) as refused:
        await stores.backup.snapshot(lambda _: None, no_writes, 2_000, clock_moving_by(2.0))

    assert (refused.value.took_ms, refused.value.max_pause_ms) == (2000, 2000)
    redis_client.set("fh:written-after", 1)
    assert redis_client.get("fh:written-after") == "1"


async def test_an_empty_store_holds_nothing_but_transient_keys(
    stores: Stores, redis_client: Any
) -> None:
    redis_client.set(stores.keys.rate_bucket(stores.keys.key_entry("e" * 64)), 1, px=HOUR_MS)
    redis_client.set(stores.keys.restore_marker, "a-backup")
    redis_client.set("another-deployment:user", 1)
    assert await stores.backup.held() == []

    assert await stores.users.add(ALICE, "alice@example.com", "$2b$04$hash", 1)

    assert sorted(await stores.backup.held(limit=5)) == [
        stores.keys.users_by_email,
        stores.keys.user(ALICE),
    ]


async def test_a_store_that_holds_only_upgrade_marks_holds_nothing_and_a_restore_forgets_them(
    stores: Stores, redis_client: Any
) -> None:
    """What every start writes, over no data too: the upgrades it made are marked done."""
    redis_client.set(stores.keys.uploader_keys_marked, "1")
    assert await stores.backup.held() == []

    assert await stores.users.add(ALICE, "alice@example.com", "$2b$04$hash", 1)
    assert sorted(await stores.backup.held(limit=5)) == [
        stores.keys.users_by_email,
        stores.keys.user(ALICE),
    ]

    await stores.backup.forget_upgrades()
    assert redis_client.exists(stores.keys.uploader_keys_marked) == 0
    assert redis_client.exists(stores.keys.user(ALICE)) == 1


async def test_a_record_past_its_deadline_is_not_restored(
    stores: Stores, redis_client: Any
) -> None:
    now, name = int(time.time() * 1000), "fh:session:" + "f" * 64
    redis_client.set(name, "x")
    dump = redis_client.dump(name)
    redis_client.delete(name)

    assert await stores.backup.restore([Record(name, now - 1, dump)], now) == (0, 0, 0)
    assert redis_client.exists(name) == 0
    kept = Record(name, now + HOUR_MS, dump)
    assert await stores.backup.restore([kept], now, keep_sessions=False) == (0, 1, 1)
    assert redis_client.exists(name) == 0
    assert await stores.backup.restore([kept], now) == (1, 0, 0)
    assert redis_client.pexpiretime(name) == now + HOUR_MS
