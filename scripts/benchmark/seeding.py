"""What the store holds for a run: the bench account (a user, its keys and a session) written
through the service's own code, and, for the scale runs, keys and sessions by the million streamed
straight into the store in the layout the service writes."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from itertools import chain
from pathlib import Path
from typing import Any

import orjson

from service.domain import credentials
from service.domain.permissions import to_mask
from service.store.fields import (
    KEY_EXPIRED_GRACE_MS,
    SESSION_EXPIRED_GRACE_MS,
    SESSION_FIELDS,
    key_entry_fields,
    new_key_metadata,
)
from service.store.keys import RedisKeys
from tests.support.redis import server_binary

PASSWORD = "bench password 1234"
# The bench alias's slug: scenario a asks for /a/<it> (benchmark.scenarios.ALIAS_PATH).
ALIAS_SLUG = "bench-alias"
EMAIL = "bench@example.com"
ALIAS_EMAIL = "bench-aliases@example.com"
TRANSFER_EMAIL = "transfers@example.com"
OBJECT_STORE_EMAIL = "object-store@example.com"
RESUMABLE_EMAIL = "resumable@example.com"
SEARCH_EMAIL = "searcher@example.com"
PREFIX = "fh"
DAY_MS = 86_400_000


@asynccontextmanager
async def _service_code(
    redis_url: str, mode: str = "single", data_dir: Path | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The service's policy and stores over the run's store, as the service builds them (bcrypt
    at its production cost; files in ``data_dir``, the service's ``FILEHOST_DATA_DIR``), for
    writing what a run needs through the service's own code paths; closed on leaving."""
    from service.auth.passwords import PasswordHasher
    from service.auth.policy import make_policy
    from service.clock import SystemClock
    from service.config import Settings
    from service.store.blob_stores import blob_stores_over, open_blob_store
    from service.store.stores import open_stores
    from service.store.topology import connect_client

    where = {} if data_dir is None else {"data_dir": data_dir}
    settings = Settings(
        redis_url=redis_url, bcrypt_cost=12, redis_mode=mode, redis_timeout_seconds=2.0, **where
    )
    client, close = connect_client(settings, redis_url)
    passwords = PasswordHasher(12, 1, 0)
    stores = open_stores(client, PREFIX)
    blobs = blob_stores_over(open_blob_store(settings))
    try:
        yield make_policy(stores, blobs, passwords, SystemClock(), settings), stores
    finally:
        passwords.close()
        await close()


def seed_account(
    redis_url: str, mode: str = "single", data_dir: Path | None = None
) -> dict[str, str]:
    """One user, its keys and a session, written through the service's own code paths; with
    ``data_dir`` (the service's ``FILEHOST_DATA_DIR``), also a 1 KiB file and a vanity alias of
    it, ``ALIAS_SLUG``."""

    async def run() -> dict[str, str]:
        async with _service_code(redis_url, mode, data_dir) as (accounts, _):
            user = await accounts.users.create_user(EMAIL, PASSWORD)
            reader = await accounts.api_keys.create_key(user.id, "bench reader", ["files.read"], 30)
            other = await accounts.api_keys.create_key(
                user.id, "bench folders", ["folders.read"], 30
            )
            for n in range(8):
                await accounts.api_keys.create_key(user.id, f"filler {n}", ["files.read"], 30)
            session = await accounts.login.login(EMAIL, PASSWORD)
            if data_dir is not None:
                # Another account's file: the bench account's list, what b and c read, stays
                # empty.
                sharer = await accounts.users.create_user(ALIAS_EMAIL, PASSWORD)
                await _alias_of_a_file(accounts, sharer.id)
        good = reader.secret
        return {
            "user_id": user.id,
            "key": good,
            "key_without_files_read": other.secret,
            "token": session.token,
            "unknown_key": credentials.generate_api_key(),
            "malformed_key": good[:-1] + ("A" if good[-1] != "A" else "B"),
        }

    return asyncio.run(run())


async def _alias_of_a_file(accounts: Any, user_id: str) -> None:
    """A 1 KiB file, uploaded as the service stores one, and its alias ``ALIAS_SLUG``."""
    from service.domain.blobs import ChunkSource
    from service.domain.permissions import ALL_PERMISSIONS_MASK
    from service.domain.principal import CredentialType, Principal
    from service.domain.records import UNSET

    owner = Principal(user_id, CredentialType.SESSION, ALL_PERMISSIONS_MASK, 2**53)

    async def chunks() -> AsyncIterator[bytes]:
        yield bytes(range(256)) * 4

    async def no_more_fields() -> Any:
        return UNSET

    record = await accounts.files.upload(
        owner, ChunkSource(chunks()), "bench.txt", "text/plain", no_more_fields
    )
    await accounts.aliases.create(owner, "file", record.id, "file_id", slug=ALIAS_SLUG)


def seed_transfer_key(redis_url: str, email: str = TRANSFER_EMAIL) -> str:
    """A user apart from the bench account (whose file list scenario b reads), with a key that
    may upload and download: the transfers' credential (each part of the bench that transfers
    files names a user of its own, ``email``, as they share one Redis)."""

    async def run() -> str:
        async with _service_code(redis_url) as (accounts, _):
            user = await accounts.users.create_user(email, PASSWORD)
            key = await accounts.api_keys.create_key(
                user.id, "bench transfers", ["files.read", "files.write", "aliases.write"], 30
            )
        return key.secret

    return asyncio.run(run())


def seed_searched_account(redis_url: str, count: int) -> None:
    """A user apart from the bench account, ``SEARCH_EMAIL``, holding ``count`` files' records
    (written through the store's own code; a search reads records, never bytes), one in three
    named ``Report-…``: what the search storm searches."""
    from service.domain.records import FileRecord

    async def run() -> None:
        async with _service_code(redis_url) as (accounts, stores):
            user = await accounts.users.create_user(SEARCH_EMAIL, PASSWORD)
            now = int(time.time() * 1000)
            for index in range(count):
                record = FileRecord(
                    id=credentials.new_id("fil"),
                    name=f"{'Report' if index % 3 == 0 else 'photo'}-{index:05}.txt",
                    size=index,
                    content_type="text/plain",
                    sha256="0" * 64,
                    created_at=now + index,
                )
                await stores.files.add(user.id, record, count)

    asyncio.run(run())


def key_entry(seed: dict[str, str]) -> str:
    """The Redis key of the bench key's digest entry: what floor F1 reads on every request."""
    return RedisKeys(PREFIX).key_entry(credentials.digest(seed["key"]))


def _resp(*args: str | int) -> bytes:
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def mass_insert(redis_url: str, commands: Iterator[bytes]) -> None:
    """Stream RESP commands into valkey-cli/redis-cli --pipe: fastest bulk load there is."""
    server = Path(server_binary())
    cli = next(
        (
            str(c)
            for c in (server.with_name("valkey-cli"), server.with_name("redis-cli"))
            if c.exists()
        ),
        shutil.which("redis-cli") or shutil.which("valkey-cli"),
    )
    if cli is None:
        raise RuntimeError("no valkey-cli/redis-cli found for bulk loading")
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    process = subprocess.Popen(
        [cli, "-h", "127.0.0.1", "-p", port, "--pipe"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    batch: list[bytes] = []
    for command in commands:
        batch.append(command)
        if len(batch) >= 20_000:
            process.stdin.write(b"".join(batch))
            batch.clear()
    process.stdin.write(b"".join(batch))
    process.stdin.close()
    if process.wait(600) != 0:
        raise RuntimeError("bulk load failed")


def key_commands(count: int, keys_per_account: int = 100) -> Iterator[bytes]:
    """The exact layout ApiKeyStore.add writes, for ``count`` keys: their listing metadata and
    digest entries made by the store's own ``service.store.fields``, so they follow its layout."""
    names = RedisKeys(PREFIX)
    now = int(time.time() * 1000)
    expires = now + 30 * DAY_MS
    mask = to_mask(["files.read"])
    for n in range(count):
        user = f"usr_bench{n // keys_per_account:017d}"
        key_id = f"key_bench{n:017d}"
        digest = os.urandom(32).hex()
        meta = new_key_metadata(
            name=f"key {n}",
            key_prefix="fhk_abcdefgh...",
            permissions=mask,
            created_at=now,
            expires_at=expires,
            secret_digest=digest,
        )
        yield _resp("HSET", names.account_keys(user), key_id, orjson.dumps(meta))
        yield _resp("ZADD", names.account_key_expiry(user), expires, key_id)
        entry = names.key_entry(digest)
        yield _resp("HSET", entry, *key_entry_fields(user, key_id, meta))
        yield _resp("PEXPIREAT", entry, expires + KEY_EXPIRED_GRACE_MS)


def session_commands(count: int, sessions_per_user: int = 4) -> Iterator[bytes]:
    """The layout SessionStore.add writes, for ``count`` sessions: the entry's fields the
    per-request lookup reads (``SESSION_FIELDS``, in its order: user, created, absolute and idle
    deadlines), without those only the session list reads."""
    names = RedisKeys(PREFIX)
    now = int(time.time() * 1000)
    idle, absolute = now + DAY_MS, now + 7 * DAY_MS
    for n in range(count):
        user = f"usr_sess{n // sessions_per_user:018d}"
        digest = os.urandom(32).hex()
        kept_until = absolute + SESSION_EXPIRED_GRACE_MS
        yield _resp("ZADD", names.account_sessions(user), kept_until, digest)
        yield _resp("PEXPIREAT", names.account_sessions(user), kept_until)
        entry = names.session_entry(digest)
        values = (user, now, absolute, idle)
        yield _resp("HSET", entry, *chain.from_iterable(zip(SESSION_FIELDS, values, strict=True)))
        yield _resp("PEXPIREAT", entry, idle + SESSION_EXPIRED_GRACE_MS)


def alias_commands(count: int, aliases_per_account: int = 1000) -> Iterator[bytes]:
    """The layout the alias store writes, for ``count`` aliases of files: each entry made by
    the store's own ``entry_fields`` with a few views counted, and its member of the account's
    index (1,000 an account, so each index is a skiplist, not a listpack)."""
    from service.domain.aliases import index_member, new_alias_id
    from service.domain.credentials import new_id
    from service.domain.records import AliasRecord
    from service.store.alias_entries import entry_fields

    names = RedisKeys(PREFIX)
    now = int(time.time() * 1000)
    for n in range(count):
        user = f"usr_alias{n // aliases_per_account:017d}"
        slug = f"bench-{n:07d}"
        record = AliasRecord(new_alias_id(now), slug, new_id("fil"), now, views=n % 1000)
        fields = entry_fields(user, record, None, False)
        yield _resp("HSET", names.alias_entry(slug), *chain.from_iterable(fields.items()))
        yield _resp("ZADD", names.account_aliases(user), now, index_member(record.target_id, slug))
