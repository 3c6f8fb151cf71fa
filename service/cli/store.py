"""The store and the policy a command works on: the Redis that ``REDIS_URL`` names, or the
embedded store (attached to when a running ``serve`` owns it, else started for the command)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from service.auth.passwords import PasswordHasher
from service.auth.policy import Policy, make_policy
from service.clock import SystemClock
from service.config import Settings
from service.store.blob_stores import blob_stores_over, open_blob_store
from service.store.embedded import EmbeddedRedis, EmbeddedStoreError
from service.store.stores import Stores, open_stores
from service.store.topology import connect_client


@asynccontextmanager
async def opened(settings: Settings) -> AsyncIterator[tuple[Policy, Stores]]:
    embedded = None
    url = settings.redis_url
    if url is None:
        # Attaches to the store a running serve owns, or starts a private one (stopped below).
        embedded = EmbeddedRedis(settings.data_dir, settings.embedded_server)
        try:
            embedded.start()
        except EmbeddedStoreError as error:  # what to do about it (main() adds "unreachable")
            print(f"error: {error}", file=sys.stderr)
            raise
        url = embedded.url
    client, close = connect_client(settings, url)  # the topology FILEHOST_REDIS_MODE names
    passwords = PasswordHasher(settings.bcrypt_cost, concurrency=1, queue_max=0)
    store = open_stores(client, settings.redis_prefix)
    blobs = open_blob_store(settings)
    try:
        policy = make_policy(store, blob_stores_over(blobs), passwords, SystemClock(), settings)
        yield policy, store
    finally:
        await blobs.close()
        passwords.close()
        await close()
        if embedded is not None:
            embedded.stop()
