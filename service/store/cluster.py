"""Redis Cluster (``FILEHOST_REDIS_MODE=cluster``): redis-py's cluster client for everything but
the hot path, and for the hot path one auto-pipelined connection per node per worker, each
command sent to the node that serves its key's slot.

Every operation of the store touches one slot per command or script: an account's keys share
the hash tag ``{usr_…}``, a digest entry stands alone, and its rate bucket's hash tag is the
entry's whole name (``service.store.keys``). Writes that pair a digest entry with account keys
are separate commands in a crash-safe order (README, "Redis Cluster").

The hot path keeps its one round trip: the slot is computed here (CRC16 of the key or its hash
tag, as Redis does) from the command already packed, and the command goes to the node the slot
map names. ``MOVED`` (the slot has moved for good: a resharding, a failover) updates the map for
that slot at once, sends the command on to the new node, and refreshes the whole map in the
background (``CLUSTER SLOTS``); ``ASK`` (the slot is being migrated and the key is already on the
target) sends ``ASKING`` and the command to the target, together on its connection. A lost node
is a 503 for its slots, and the map is read again every 250 ms until it names another node for
them (a replica promoted) or the node is back. ``TRYAGAIN`` (a script whose keys are split
between the two nodes for the moment of a slot's migration) is sent again after 20 ms, a few
times; then it, and ``CLUSTERDOWN`` (a cluster without a majority), are errors: 503, fail closed.
Never logs arguments (digests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import hiredis
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.config import Settings
from service.store.pipelined import PipelinedRedis, ScriptCall
from service.store.redis_options import closed_socket_is_connection_error_class, node_options
from service.store.slots import SLOTS, key_slot

log = logging.getLogger("service.store")

# Redirections followed for one command before it fails (a slot moved again while followed).
_REDIRECTS = 5
# How long to wait before sending again a command answered TRYAGAIN (at most _REDIRECTS times).
_TRY_AGAIN_SECONDS = 0.02
# After a node is lost, the slot map is read this often, for at most this long, until it no
# longer names the node (its replica was promoted) or the node answers again.
_FAILOVER_POLL_SECONDS = 0.25
_FAILOVER_WATCH_SECONDS = 60.0
_SCRIPT_COMMANDS = frozenset({b"EVAL", b"EVALSHA", b"EVAL_RO", b"EVALSHA_RO", b"FCALL"})
_ASKING = hiredis.pack_command(("ASKING",))


def first_key(command: bytes) -> bytes | None:
    """The first key of a command packed in the protocol's encoding (the argument after the
    command's name, or after a script and its key count), None when it has none."""
    # *<n>\r\n then $<length>\r\n<argument>\r\n for each argument
    position = command.index(b"\n") + 1
    arguments: list[bytes] = []
    wanted = 2
    while len(arguments) < wanted:
        end = command.index(b"\r", position)
        length = int(command[position + 1 : end])
        start = end + 2
        arguments.append(command[start : start + length])
        position = start + length + 2
        if len(arguments) == 1 and arguments[0].upper() in _SCRIPT_COMMANDS:
            wanted = 4
        if len(arguments) == 3 and int(arguments[2]) == 0:
            return None
    return arguments[-1]


def _address(target: str, asked: tuple[str, int]) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return (host or asked[0], int(port))


class ClusterPipelinedRedis:
    """The hot path's connections to a Redis Cluster: one ``PipelinedRedis`` per node, commands
    routed by slot. Same interface as ``PipelinedRedis`` (``execute``, ``execute_packed``,
    ``run_script``, ``aclose``). ``url`` gives the credentials and TLS of every node, ``seeds``
    the nodes asked for the slot map first."""

    def __init__(
        self,
        url: str,
        seeds: list[tuple[str, int]],
        timeout_seconds: float,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self._url = url
        self._seeds = list(seeds)
        self._timeout = timeout_seconds
        self._observe = observe
        self._slots: list[tuple[str, int] | None] = [None] * SLOTS
        self._nodes: dict[tuple[str, int], PipelinedRedis] = {}
        self._refresh_lock: asyncio.Lock | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        self._watching: set[tuple[str, int]] = set()
        self._watchers: set[asyncio.Task[None]] = set()
        self.refreshes = 0  # slot maps read (tests look at it)

    def _node(self, address: tuple[str, int]) -> PipelinedRedis:
        node = self._nodes.get(address)
        if node is None:

            async def locate() -> tuple[str, int]:
                return address

            node = PipelinedRedis(self._url, self._timeout, self._observe, locate=locate)
            self._nodes[address] = node
        return node

    async def execute(self, *args: str | bytes | int) -> Any:
        return await self.execute_packed(hiredis.pack_command(args))

    async def execute_packed(self, command: bytes) -> Any:
        """Send one packed command to the node serving its key's slot and return its reply."""
        key = first_key(command)
        slot = 0 if key is None else key_slot(key)
        address = self._slots[slot]
        if address is None:
            await self.refresh()
            address = self._slots[slot]
            if address is None:
                raise RedisConnectionError(f"no node of the cluster serves slot {slot}")
        asking = False
        for attempt in range(_REDIRECTS):
            node = self._node(address)
            try:
                if asking:
                    return await node.execute_asking(command)
                return await node.execute_packed(command)
            except ResponseError as error:
                message = str(error)
                if message.startswith("TRYAGAIN") and attempt < _REDIRECTS - 1:
                    # A script's keys split between two nodes for the moment of a migration.
                    await asyncio.sleep(_TRY_AGAIN_SECONDS)
                elif message.startswith("MOVED "):
                    _, moved, target = message.split(" ", 2)
                    address = _address(target, address)
                    self._slots[int(moved)] = address
                    self._refresh_soon()
                    asking = False
                elif message.startswith("ASK "):
                    address = _address(message.split(" ", 2)[2], address)
                    asking = True
                else:
                    raise
            except RedisConnectionError:
                self._follow_failover(address)
                raise
        raise RedisConnectionError("too many cluster redirections")

    async def run_script(self, call: ScriptCall, *values: bytes) -> Any:
        """Run a script by its SHA1, sending its source once if the node lacks it."""
        try:
            return await self.execute_packed(call.by_sha.pack(*values))
        except ResponseError as error:
            if not str(error).startswith("NOSCRIPT"):
                raise
        return await self.execute_packed(call.by_source.pack(*values))

    def _follow_failover(self, lost: tuple[str, int]) -> None:
        """A node is unreachable: until the slot map no longer names it (its replica promoted)
        or it answers again, read the map every ``_FAILOVER_POLL_SECONDS`` in the background, so
        that every worker follows a failover by itself, not only at its next failed request."""
        if lost in self._watching:
            return
        self._watching.add(lost)
        task = asyncio.get_running_loop().create_task(self._watch(lost))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _watch(self, lost: tuple[str, int]) -> None:
        try:
            deadline = time.monotonic() + _FAILOVER_WATCH_SECONDS
            while time.monotonic() < deadline:
                with contextlib.suppress(RedisError):
                    await self.refresh(asking_again=True)
                    if lost not in self._slots:
                        return
                with contextlib.suppress(RedisError):
                    await self._node(lost).execute("PING")
                    return
                await asyncio.sleep(_FAILOVER_POLL_SECONDS)
        finally:
            self._watching.discard(lost)

    def _refresh_soon(self) -> None:
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.get_running_loop().create_task(self._quiet_refresh())

    async def _quiet_refresh(self) -> None:
        with contextlib.suppress(RedisError):
            await self.refresh(asking_again=True)

    async def refresh(self, asking_again: bool = False) -> None:
        """Read the slot map (``CLUSTER SLOTS``) from the first known node that answers; unless
        ``asking_again``, not when another refresh finished while this one waited for it."""
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        seen = self.refreshes
        async with self._refresh_lock:
            if self.refreshes != seen and not asking_again:
                return  # read while this one waited (many requests at the first use)
            known = list(dict.fromkeys([*self._nodes, *self._seeds]))
            # Nodes known to be lost last: a dead host may take the whole timeout to refuse.
            candidates = [a for a in known if a not in self._watching]
            candidates += [a for a in known if a in self._watching]
            for address in candidates:
                try:
                    reply = await self._node(address).execute("CLUSTER", "SLOTS")
                except RedisError:
                    continue
                self._load(reply, address)
                return
            raise RedisConnectionError("no node of the cluster answered")

    def _load(self, reply: list[Any], asked: tuple[str, int]) -> None:
        slots: list[tuple[str, int] | None] = [None] * SLOTS
        for first, last, primary, *_replicas in reply:
            host, port = primary[0], int(primary[1])
            address = (host or asked[0], port)
            for slot in range(int(first), int(last) + 1):
                slots[slot] = address
        self._slots = slots
        self.refreshes += 1
        serving = set(slots)
        for address in [address for address in self._nodes if address not in serving]:
            node = self._nodes.pop(address)
            asyncio.get_running_loop().create_task(node.aclose())

    async def aclose(self) -> None:
        for watcher in list(self._watchers):
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if self._refresh_task is not None:
            self._refresh_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError):
                await self._refresh_task
        nodes, self._nodes = list(self._nodes.values()), {}
        for node in nodes:
            await node.aclose()


class _Pipeline(ClusterPipeline):
    """A cluster pipeline for scripts (the login-failure counts): sends a registered script's
    source (``EVAL``) rather than its SHA1, since redis-py loads a pipeline's scripts only on a
    single server and a node that has not seen the script would answer ``NOSCRIPT``; and is
    itself when awaited. Use it with ``async with``."""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        # Made only by FailClosedCluster.pipeline, whose client has them; typed as redis-py's.
        source = self.cluster_client.script_sources.get(sha)  # type: ignore[attr-defined]
        if source is None:
            return super().evalsha(sha, numkeys, *keys_and_args)
        return self.eval(source, numkeys, *keys_and_args)

    def __await__(self) -> Any:
        # A script called with ``client=pipe`` awaits what ``evalsha`` returns: the pipeline.
        # redis-py's cluster pipeline would start again then, dropping the commands queued so
        # far; it was started by ``async with``, so it is itself here.
        return self._itself().__await__()

    async def _itself(self) -> _Pipeline:
        return self

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute(*args, **kwargs)
        except RedisClusterException as error:
            raise RedisConnectionError(f"cluster: {type(error).__name__}") from None


class FailClosedCluster(RedisCluster):
    """redis-py's cluster client, whose own errors (no node reachable, slots not covered) are
    ``RedisError``s like every other store failure, so the HTTP layer answers 503, not 500."""

    # A command whose reply timed out may have run: sent again once the cluster is found anew,
    # a write would run twice. Only errors that say it did not run are retried.
    ERRORS_ALLOW_RETRY = tuple(
        error for error in RedisCluster.ERRORS_ALLOW_RETRY if error is not RedisTimeoutError
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.script_sources: dict[str, str] = {}

    def register_script(self, script: Any) -> Any:
        registered = super().register_script(script)
        self.script_sources[registered.sha] = script
        return registered

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        if shard_hint:
            raise RedisClusterException("shard_hint is deprecated in cluster mode")
        return _Pipeline(self, transaction)

    async def initialize(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().initialize(*args, **kwargs)
        except RedisClusterException as error:
            raise RedisConnectionError(f"cluster: {type(error).__name__}") from None

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_command(*args, **kwargs)
        except RedisClusterException as error:
            raise RedisConnectionError(f"cluster: {type(error).__name__}") from None


def seed_nodes(settings: Settings) -> list[tuple[str, int]]:
    """``REDIS_URL``'s node, then ``FILEHOST_CLUSTER_SEEDS``."""
    parts = urlsplit(settings.redis_url or "")
    return [(parts.hostname or "localhost", parts.port or 6379), *settings.cluster_seeds]


def connect_cluster_client(settings: Settings) -> FailClosedCluster:
    """redis-py's cluster client: bounded timeouts, redirections followed without pausing."""
    options = node_options(settings.redis_url or "")
    options.pop("db", None)
    timeout = settings.redis_timeout_seconds
    client = FailClosedCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in seed_nodes(settings)],
        decode_responses=True,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 2),
        # Slots a lost master left uncovered are 503s of their own; the others are served.
        require_full_coverage=False,
        **options,
    )
    manager = client.nodes_manager
    base = manager.connection_kwargs.get("connection_class")
    if base is not None:
        manager.connection_kwargs["connection_class"] = closed_socket_is_connection_error_class(
            base
        )
    return client


def connect_cluster(
    settings: Settings, observe: Callable[[float], None] | None = None
) -> tuple[FailClosedCluster, ClusterPipelinedRedis]:
    hot = ClusterPipelinedRedis(
        settings.redis_url or "", seed_nodes(settings), settings.redis_timeout_seconds, observe
    )
    return connect_cluster_client(settings), hot
