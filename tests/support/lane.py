"""Requests sent as bytes on one connection, for the gateway lane's tests: what the lane
answered (``count_lane_answers``), each request's exact answer, and answers compared byte for
byte but for what differs by design (``Date``, a generated request id)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from typing import Any

import pytest

from service.api.gateway import GatewayLane

_GENERATED_ID = re.compile(r"X-Request-ID: [0-9a-f]{32}\r\n")
HANDED_BACK = "handed back "
# The lane answers GET /files only under a public URL (a file's url is made from it).
LANE_PUBLIC_URL = "https://files.example.test"


def count_lane_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests the lane took from now on, in order (each as it takes it);
    one it then handed to aiohttp is followed by ``HANDED_BACK`` and its path."""
    answered: list[str] = []
    answer = GatewayLane.answer

    async def counted(self: GatewayLane, route: Any, message: Any, *rest: Any) -> bytes | None:
        answered.append(message.path)
        reply = await answer(self, route, message, *rest)
        if reply is None:
            answered.append(HANDED_BACK + message.path)
        return reply

    monkeypatch.setattr(GatewayLane, "answer", counted)
    return answered


async def pipelined(port: int, raw: bytes, answers: int = 1) -> list[bytes]:
    """Send ``raw`` (one or more requests) at once on one connection; the answers, in order."""
    return await exchange(port, [raw], answers)


async def exchange(
    port: int, requests: list[bytes], answers: int = 0, bodies: bool = True
) -> list[bytes]:
    """Send each request on one connection once the answer to the one before it came; the
    answers, in order (``answers`` of them for the last, when it holds several requests; their
    heads only, without ``bodies``)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        result = []
        for index, raw in enumerate(requests):
            writer.write(raw)
            expected = answers if answers and index == len(requests) - 1 else 1
            for _ in range(expected):
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                length = re.search(rb"Content-Length: (\d+)", head)
                body = b""
                if length and bodies:
                    body = await reader.readexactly(int(length.group(1)))
                result.append(head + body)
        return result
    finally:
        writer.close()


async def held_at_the_store(
    port: int, request: bytes, redis_client: Any
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sent ``request`` while the store (one server) is paused for 200 ms, so
    that the request waits for Redis's reply when this returns."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    redis_client.execute_command("CLIENT", "PAUSE", 200)
    writer.write(request)
    await writer.drain()
    await asyncio.sleep(0.05)
    return reader, writer


def raw_get(path: str, headers: dict[str, str], version: str = "1.1") -> bytes:
    lines = [f"GET {path} HTTP/{version}", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def comparable(answer: bytes) -> bytes:
    """``answer`` with what differs between two servers' answers by design made the same."""
    answer = re.sub(rb"Date: [^\r]*\r\n", b"Date: -\r\n", answer)
    # Both servers take from the same credential's bucket: what remains differs by a request.
    answer = re.sub(rb'(RateLimit: "credential";r=)\d+', rb"\1-", answer)
    return _GENERATED_ID.sub("X-Request-ID: generated\r\n", answer.decode("latin-1")).encode(
        "latin-1"
    )


async def driven_without_a_task(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """What ``coroutine`` returns, driven as the gateway lane drives a request: from the event
    loop's callbacks, with no task current, resumed by the futures it awaits."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Any] = loop.create_future()

    def advance(_: object = None) -> None:
        try:
            awaited = coroutine.send(None)
        except StopIteration as done:
            outcome.set_result(done.value)
        except BaseException as error:  # handed to the caller as it is
            outcome.set_exception(error)
        else:
            if getattr(awaited, "_asyncio_future_blocking", None):
                awaited._asyncio_future_blocking = False
                awaited.add_done_callback(advance)
            elif awaited is None:
                loop.call_soon(advance)
            else:
                coroutine.close()
                outcome.set_exception(TypeError(f"cannot wait for {awaited!r} without a task"))

    loop.call_soon(advance)
    return await outcome
