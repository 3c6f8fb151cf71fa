"""The redis-py client the app makes (``service.app.connect_redis``), on uvloop like the workers."""

from __future__ import annotations

import asyncio

import uvloop
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

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


def test_a_command_whose_reply_is_late_is_not_sent_again() -> None:
    # A reply that does not come within the timeout may belong to a command Redis ran: sending
    # it again would run a write twice (a revocation retried so would find its key gone and
    # answer 404). The request fails with a timeout (503) after the command was sent once.
    async def late_reply() -> tuple[object, int]:
        received: list[bytes] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(65536):
                received.append(data)
                if b"HELLO" in data or b"CLIENT" in data:  # the handshake is answered
                    writer.write(b"+OK\r\n" * data.count(b"*"))
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = connect_redis(f"redis://127.0.0.1:{port}", 0.3)
        try:
            try:
                outcome: object = await client.incr("counted")
            except RedisTimeoutError as error:
                outcome = error
        finally:
            await client.aclose()
            server.close()
        return outcome, sum(data.count(b"INCR") for data in received)

    outcome, sent = uvloop.run(late_reply())
    assert isinstance(outcome, RedisTimeoutError), outcome
    assert sent == 1
