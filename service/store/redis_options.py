"""What every redis-py client of the store is made with, whatever the topology: the credentials,
database and TLS of ``REDIS_URL`` for servers found elsewhere (a sentinel's master, a cluster's
nodes), and connections that report a write to a closed socket as a connection error.

Its own module so that ``topology`` (single server, Sentinel) and ``cluster`` share it without
importing each other: ``topology`` picks ``cluster`` for ``FILEHOST_REDIS_MODE=cluster``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis
from redis.connection import SSLConnection, parse_url


class _ClosedSocketIsConnectionError:
    """uvloop raises RuntimeError, not OSError, for a write to a socket that is already closed
    (Redis killed between accepting a connection and answering its handshake). redis-py turns
    only OSError into ConnectionError, so without this that request would be a 500, not a 503
    (found by tests/system/hardening/test_redis_faults.py)."""

    async def _send_packed_command(self, command: Iterable[bytes]) -> None:
        try:
            # A mixin: the method is the connection class's it is mixed into, which the type
            # checker cannot see here.
            await super()._send_packed_command(command)  # type: ignore[misc]
        except RuntimeError as error:
            raise OSError(f"write to a closed connection: {error}") from None


def closed_socket_is_connection_error_class(base: type) -> type:
    """``base`` (a redis-py connection class) with a write to a closed socket a connection
    error."""
    return type(base.__name__, (_ClosedSocketIsConnectionError, base), {})


def closed_socket_is_connection_error(client: Redis) -> Redis:
    """``client``, its pool's connections made with ``closed_socket_is_connection_error_class``."""
    pool = client.connection_pool
    # TCP, TLS, Unix socket or Sentinel-managed, as configured
    pool.connection_class = closed_socket_is_connection_error_class(pool.connection_class)
    return client


def node_options(url: str) -> dict[str, Any]:
    """The credentials, database and TLS of ``REDIS_URL``, for servers found elsewhere."""
    options = parse_url(url)
    found: dict[str, Any] = {
        name: options[name] for name in ("username", "password", "db") if options.get(name)
    }
    if options.get("connection_class") is SSLConnection:
        found["ssl"] = True
    return found
