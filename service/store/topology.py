"""The store's connections, for each Redis topology (``FILEHOST_REDIS_MODE``, docs/scaling.md).

Every worker has two: redis-py's asyncio client for everything but the hot path, and the hot
path's auto-pipelined connection (``service.store.pipelined``). Both fail fast and closed: bounded
timeouts, and one immediate retry only when the connection fails (a pooled connection Redis closed
by a restart), never after a timeout: a command whose reply is late may have run, and running a
write twice answers wrongly (a revocation would find its key gone, 404). So an unreachable store
is a 503 within about one timeout.

- ``single``: one server named by ``REDIS_URL`` (or the embedded store's socket).
- ``sentinel``: the master that Redis Sentinel names. redis-py's Sentinel client asks the sentinels
  for the master on every new connection and drops a connection whose server answers
  ``READONLY`` (a master demoted by a failover); the hot connection does the same: it asks the
  sentinels on every (re)connection, uses a server only once it says (``ROLE``) it is the master,
  and drops its connection on ``READONLY``. Meanwhile requests are 503.
- ``cluster``: Redis Cluster; see ``service.store.cluster``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from service.config import Settings
from service.store.cluster import connect_cluster, connect_cluster_client
from service.store.keys import RedisKeys
from service.store.pipelined import PipelinedRedis
from service.store.redis_options import closed_socket_is_connection_error, node_options

log = logging.getLogger("service.store")


def _fail_fast(timeout_seconds: float) -> dict[str, Any]:
    return {
        "socket_timeout": timeout_seconds,
        "socket_connect_timeout": timeout_seconds,
        "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        "health_check_interval": 0,
    }


def connect_redis(url: str, timeout_seconds: float) -> Redis:
    """A client of one server that fails fast: bounded timeouts and one immediate retry of a
    failed connection (see the module), so a dead store turns into a 503 within about one
    timeout instead of a hanging request."""
    client = Redis.from_url(url, decode_responses=True, **_fail_fast(timeout_seconds))
    return closed_socket_is_connection_error(client)


def _sentinel(settings: Settings) -> Sentinel:
    timeout = settings.redis_timeout_seconds
    return Sentinel(
        list(settings.sentinels),
        # Each sentinel is asked once per discovery; the next one is tried when it fails.
        sentinel_kwargs={
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "retry": Retry(NoBackoff(), 0),
        },
    )


def connect_sentinel_master(settings: Settings, sentinel: Sentinel) -> Redis:
    """redis-py's client of the master the sentinels name (``FILEHOST_SENTINEL_MASTER``)."""
    client = sentinel.master_for(
        settings.sentinel_master or "",
        decode_responses=True,
        **_fail_fast(settings.redis_timeout_seconds),
        **node_options(settings.redis_url or ""),
    )
    return closed_socket_is_connection_error(client)


@dataclass
class StoreConnections:
    """A worker's connections to the store: redis-py's client and the hot connection."""

    client: Any  # redis.asyncio.Redis, or RedisCluster in cluster mode
    hot: Any  # PipelinedRedis, or ClusterPipelinedRedis in cluster mode
    replica_wait: ReplicaWait | None = None
    _sentinel: Sentinel | None = None

    async def aclose(self) -> None:
        await self.hot.aclose()
        await self.client.aclose()
        if self._sentinel is not None:
            for client in self._sentinel.sentinels:
                await client.aclose()


def connect_store(
    settings: Settings, observe: Callable[[float], None] | None = None
) -> StoreConnections:
    """Both connections for ``settings`` (``redis_url`` set: serve puts the embedded store's
    there). ``observe`` is given each hot-path command's seconds from send to reply."""
    url = settings.redis_url
    if url is None:
        raise ValueError("connect_store needs settings.redis_url")
    timeout = settings.redis_timeout_seconds
    if settings.redis_mode == "cluster":
        return StoreConnections(*connect_cluster(settings, observe))
    if settings.redis_mode == "sentinel":
        sentinel = _sentinel(settings)
        master = settings.sentinel_master or ""
        client = connect_sentinel_master(settings, sentinel)

        async def locate() -> tuple[str, int]:
            host, port = await sentinel.discover_master(master)
            return str(host), int(port)

        hot = PipelinedRedis(url, timeout, observe, locate=locate, require_master=True)
        connections = StoreConnections(client, hot, _sentinel=sentinel)
    else:
        connections = StoreConnections(
            connect_redis(url, timeout), PipelinedRedis(url, timeout, observe)
        )
    if settings.replica_wait_ms:
        connections.replica_wait = ReplicaWait(
            connections.client, settings.redis_prefix, settings.replica_wait_ms
        )
    return connections


def connect_client(settings: Settings, url: str) -> tuple[Any, Callable[[], Any]]:
    """redis-py's client alone (the CLI), and how to close it."""
    if settings.redis_mode == "cluster":
        cluster = connect_cluster_client(settings)
        return cluster, cluster.aclose
    if settings.redis_mode == "sentinel":
        sentinel = _sentinel(settings)
        client = connect_sentinel_master(settings, sentinel)

        async def close() -> None:
            await client.aclose()
            for each in sentinel.sentinels:
                await each.aclose()

        return client, close
    client = connect_redis(url, settings.redis_timeout_seconds)
    return client, client.aclose


class ReplicaWait:
    """Waits, after a write that must survive a failover, until a replica has it (``WAIT``).

    ``WAIT`` counts the replicas that have every write up to the calling connection's last one,
    and redis-py may send it on another connection than the write's; so a write of its own (a
    marker key) goes just before it, on the same connection, in one pipeline. Replication is one
    ordered stream, so a replica that has the marker has every write the master made before it.
    Best effort: waits at most ``timeout_ms``; a write not confirmed in time, or a failed wait, is
    logged and the answer is the same, since the write itself was made and can't be taken back
    (a revocation answered 503 would not be undone, and its retry would say "not found")."""

    def __init__(self, client: Redis, prefix: str, timeout_ms: int) -> None:
        self._client = client
        self._marker = RedisKeys(prefix).replicated_marker
        self._timeout_ms = timeout_ms

    async def __call__(self) -> None:
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.set(self._marker, 1, px=60_000)
                pipe.wait(1, self._timeout_ms)
                _, confirmed = await pipe.execute()
        except RedisError as error:
            log.warning("could not wait for a replica: %s", type(error).__name__)
            return
        if confirmed < 1:
            log.warning("a write is on no replica after %d ms", self._timeout_ms)

    def wrap(self, stores: Iterable[Any]) -> None:
        """Make each store's writes that change credentials or accounts (its
        ``WAITS_FOR_REPLICA``) wait for a replica once they are done, whether they succeeded or
        refused (a refusal may have written too). Those on every request (the lookups with
        their rate buckets, renewals and last-use stamps) and the login-failure counts never
        wait."""
        for store in stores:
            for name in getattr(store, "WAITS_FOR_REPLICA", ()):
                setattr(store, name, self._waiting(getattr(store, name)))

    def _waiting(self, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def waiting(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            finally:
                await self()

        return waiting
