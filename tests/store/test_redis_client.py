"""The redis-py client the app makes (``service.app.connect_redis``), on uvloop like the workers."""

from __future__ import annotations

import uvloop
from redis.exceptions import ConnectionError as RedisConnectionError

from service.app import connect_redis


def test_a_write_to_a_socket_closed_under_the_client_is_a_connection_error(redis_url) -> None:
    # Redis killed between accepting a connection and answering it: the client still holds the
    # connection, its transport already closed. uvloop raises RuntimeError for that write; it
    # must come out as a ConnectionError (503, and retried once), never as an unexpected 500.
    async def write_after_close() -> object:
        client = connect_redis(redis_url, 1.0)
        try:
            await client.ping()
            (connection,) = client.connection_pool._available_connections
            connection._writer.transport.close()
            try:
                return await client.set("after", "close")
            except RedisConnectionError as error:
                return error
        finally:
            await client.aclose()

    outcome = uvloop.run(write_after_close())
    assert outcome is True or isinstance(outcome, RedisConnectionError), outcome
