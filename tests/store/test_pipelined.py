"""The auto-pipelined hot-path connection: right replies to the right callers, fails fast."""

from __future__ import annotations

import asyncio

import hiredis
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.store.pipelined import ARG, CommandTemplate, PipelinedRedis, ScriptCall
from tests.support.lane import driven_without_a_task
from tests.support.redis import RedisServer, free_port


async def test_concurrent_commands_each_get_their_own_reply(redis_url, redis_client) -> None:
    for n in range(300):
        redis_client.hset(f"h:{n}", mapping={"u": f"user{n}", "p": n})
    client = PipelinedRedis(redis_url, 1.0)
    try:
        replies = await asyncio.gather(
            *(client.execute("HMGET", f"h:{n}", "u", "p", "missing") for n in range(300))
        )
        assert replies == [[f"user{n}", str(n), None] for n in range(300)]
    finally:
        await client.aclose()


async def test_an_error_reply_fails_only_its_own_command(redis_url, redis_client) -> None:
    redis_client.set("plain", "x")
    client = PipelinedRedis(redis_url, 1.0)
    try:
        wrong, right = await asyncio.gather(
            client.execute("HMGET", "plain", "u"),
            client.execute("GET", "plain"),
            return_exceptions=True,
        )
        assert isinstance(wrong, ResponseError) and "WRONGTYPE" in str(wrong)
        assert right == "x"
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("args", "values"),
    [
        (("HGETALL", ARG), (b"fh:{usr_1}:files",)),
        (("HMGET", ARG, "u", "k"), (b"",)),
        (("EVALSHA", "0" * 40, 2, ARG, ARG, ARG, 10_000, 2_000_000, "u"), (b"k", b"r", b"17")),
        # A "%" in a fixed argument (a Lua script's string.format) or in a value is kept as is.
        (("EVAL", "return string.format('%.0f', ARGV[1])", 0, ARG), (b"100%d%s",)),
        (("SET", ARG, "caf\u00e9", "PX", 5), (b"bin\r\n\x00",)),
    ],
)
def test_a_template_packs_what_hiredis_packs(args: tuple, values: tuple[bytes, ...]) -> None:
    filled = iter(values)
    expected = tuple(next(filled) if arg is ARG else arg for arg in args)
    assert CommandTemplate(*args).pack(*values) == hiredis.pack_command(expected)


def test_a_template_refuses_the_wrong_number_of_values() -> None:
    template = CommandTemplate("HMGET", ARG, "u")
    with pytest.raises(TypeError):
        template.pack(b"a", b"b")
    with pytest.raises(TypeError):
        template.pack()


async def test_a_script_unknown_to_the_server_is_sent_once_by_source(
    redis_url, redis_client
) -> None:
    source = "return {KEYS[1], ARGV[1], ARGV[2]}"
    sha = redis_client.script_load(source)
    redis_client.script_flush()
    call = ScriptCall(source, sha, 1, ARG, ARG, "fixed")
    client = PipelinedRedis(redis_url, 1.0)
    try:
        redis_client.config_resetstat()
        assert await client.run_script(call, b"key", b"value") == ["key", "value", "fixed"]
        assert await client.run_script(call, b"k2", b"v2") == ["k2", "v2", "fixed"]
        stats = redis_client.info("commandstats")
        assert stats["cmdstat_eval"]["calls"] == 1  # after the NOSCRIPT, the server has it
        assert stats["cmdstat_evalsha"]["calls"] == 2
    finally:
        await client.aclose()


async def test_db_and_password_from_the_url_are_used(tmp_path) -> None:
    server = RedisServer(free_port(), tmp_path, ("--requirepass", "s3cret", "--appendonly", "no"))
    server.start()
    client = PipelinedRedis(f"redis://:s3cret@127.0.0.1:{server.port}/3", 1.0)
    try:
        await client.execute("SET", "where", "db3")
        assert await client.execute("GET", "where") == "db3"
        refused = PipelinedRedis(f"redis://127.0.0.1:{server.port}/0", 1.0)
        with pytest.raises(ResponseError):
            await refused.execute("GET", "where")
        await refused.aclose()
    finally:
        await client.aclose()
        server.stop()


async def test_a_refused_password_leaves_no_connection_open(tmp_path) -> None:
    server = RedisServer(free_port(), tmp_path, ("--requirepass", "s3cret", "--appendonly", "no"))
    server.start()
    admin = PipelinedRedis(f"redis://:s3cret@127.0.0.1:{server.port}/0", 1.0)

    async def connected() -> int:
        info = await admin.execute("INFO", "clients")
        return int(info.split("connected_clients:")[1].split()[0])

    try:
        before = await connected()
        wrong = PipelinedRedis(f"redis://:wrong@127.0.0.1:{server.port}/0", 1.0)
        for _ in range(5):
            with pytest.raises(ResponseError):
                await wrong.execute("PING")
        await wrong.aclose()
        for _ in range(100):  # the server sees closed sockets a moment later: bounded poll
            if await connected() == before:
                break
            await asyncio.sleep(0.01)
        assert await connected() == before, "a refused handshake left its socket open"
    finally:
        await admin.aclose()
        server.stop()


async def test_a_stopped_server_fails_commands_and_a_restart_recovers(tmp_path) -> None:
    server = RedisServer(free_port(), tmp_path, ("--appendonly", "no"))
    server.start()
    client = PipelinedRedis(f"redis://127.0.0.1:{server.port}/0", 0.5)
    try:
        assert await client.execute("PING") == "PONG"
        server.stop()
        with pytest.raises(RedisConnectionError):
            await client.execute("PING")
        with pytest.raises(RedisConnectionError):  # still down: refused, not hung
            await client.execute("PING")
        server.start()
        assert await client.execute("PING") == "PONG"
    finally:
        await client.aclose()
        server.stop()


async def test_a_server_that_never_answers_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(30)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = PipelinedRedis(f"redis://127.0.0.1:{port}/0", 0.2)
    try:
        with pytest.raises(RedisTimeoutError):
            await asyncio.wait_for(client.execute("PING"), 5)
    finally:
        await client.aclose()
        server.close()


async def test_nothing_listening_is_a_connection_error() -> None:
    client = PipelinedRedis(f"redis://127.0.0.1:{free_port()}/0", 0.5)
    with pytest.raises(RedisConnectionError):
        await client.execute("PING")
    await client.aclose()


async def test_it_connects_for_a_caller_without_a_task(redis_url, redis_client) -> None:
    """The gateway lane's requests run without a task (service.api._aiohttp): a worker's first
    one opens the connection, as does the first after it dropped (asyncio's timeouts need a
    task, wait_for's too from Python 3.12)."""
    redis_client.hset("h", mapping={"u": "x"})
    client = PipelinedRedis(redis_url, 1.0)
    try:
        assert await driven_without_a_task(client.execute("HMGET", "h", "u")) == ["x"]
        client._protocol.close()  # type: ignore[union-attr]  # as if the server had dropped it
        await asyncio.sleep(0.05)
        assert await driven_without_a_task(client.execute("HMGET", "h", "u")) == ["x"]
    finally:
        await client.aclose()


def test_it_works_on_uvloop_which_the_server_runs(redis_url, redis_client) -> None:
    # uvloop's transports are not asyncio.Transport subclasses; the workers run on uvloop.
    import uvloop

    redis_client.hset("h", mapping={"u": "x"})

    async def lookups() -> list:
        client = PipelinedRedis(redis_url, 1.0)
        try:
            return await asyncio.gather(*(client.execute("HMGET", "h", "u") for _ in range(50)))
        finally:
            await client.aclose()

    assert uvloop.run(lookups()) == [["x"]] * 50
