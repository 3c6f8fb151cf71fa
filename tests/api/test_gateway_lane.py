"""The gateway lane (``service.api.gateway``) answers what aiohttp's handling answers, byte
for byte but for ``Date`` and a generated request id, and only what it should: each case is
sent over a raw connection to a server with the lane and to one without it, and the lane's own
answers are counted, so a case the lane did not take cannot pass as one it did."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import socket
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from service.api.access_log import AccessLogger
from service.api.context import AUTHENTICATOR, SETTINGS
from service.app import create_app
from service.observability.log_lines import LineBuffer
from tests.support.aliases import alias
from tests.support.api import Api, EnvelopeTestServer, bearer
from tests.support.files import uploaded
from tests.support.folders import folder
from tests.support.lane import (
    comparable,
    exchange,
    held_at_the_store,
    pipelined,
    raw_get,
)
from tests.support.metrics import value

VERIFY = "/api/v1/auth/verify"
FILES = "/api/v1/files"


def _key_may_read(key: str) -> dict[str, str]:
    """A verify sub-request's headers asking whether ``key`` may read files."""
    return {"X-API-Key": key, "X-Required-Permission": "files.read"}


@pytest.fixture
async def credentials(both: tuple[Api, Api], clock: Any) -> dict[str, str]:
    api = both[0]
    token = await api.user_with_session("lane@example.com")
    reader = await api.create_key(token, permissions=["files.read"])
    writer = await api.create_key(token, name="writer", permissions=["files.write"])
    # Keys refused each for its reason: expired, revoked, reported leaked, rolled out.
    expired = await api.create_key(token, name="expired", expires_days=1)
    revoked = await api.create_key(token, name="revoked")
    leaked = await api.create_key(token, name="leaked")
    rolled = await api.create_key(token, name="rolled")
    gone = await api.client.delete(f"/api/v1/keys/{revoked['id']}", headers=bearer(token))
    assert gone.status == 200
    reported = await api.client.post(
        "/api/v1/keys/leaked", json={"secrets": [leaked["secret_key"]]}
    )
    assert reported.status == 202
    rolling = await api.client.post(f"/api/v1/keys/{rolled['id']}/roll", headers=bearer(token))
    assert rolling.status == 201
    clock.advance(days=1, seconds=1)
    token = await api.login("lane@example.com")  # the first session's day is over too
    await uploaded(api, b"hello", token=token, filename="a.txt")
    # Keys bound to folders: one to a folder holding a file, one whose folder was deleted.
    inside = await folder(api, "Inside", token=token)
    outside = await folder(api, "Outside", token=token)
    gone = await folder(api, "Gone", token=token)
    inside_file = await uploaded(api, b"in", token=token, folder_id=inside["id"])
    outside_file = await uploaded(api, b"out", token=token, folder_id=outside["id"])
    reading = ["files.read", "folders.read", "aliases.read"]
    bound = await api.create_key(
        token, name="bound", permissions=reading, folder_ids=[inside["id"]]
    )
    emptied = await api.create_key(
        token, name="emptied", permissions=reading, folder_ids=[gone["id"]]
    )
    deleted = await api.client.delete(f"/api/v1/folders/{gone['id']}", headers=bearer(token))
    assert deleted.status == 200
    inside_alias = await alias(api, {"file_id": inside_file["id"]}, token=token)
    return {
        "token": token,
        "reader": reader["secret_key"],
        "writer": writer["secret_key"],
        "expired": expired["secret_key"],
        "revoked": revoked["secret_key"],
        "leaked": leaked["secret_key"],
        "rolled": rolled["secret_key"],
        "bound": bound["secret_key"],
        "emptied": emptied["secret_key"],
        "inside_file": inside_file["id"],
        "outside_file": outside_file["id"],
        "outside_folder": outside["id"],
        "inside_folder": inside["id"],
        "inside_alias": inside_alias["id"],
    }


# Each case: (path, headers) with {token}, {reader} and {writer} filled in.
CASES = {
    "verify, key holding the permission": (
        VERIFY,
        {"X-API-Key": "{reader}", "X-Required-Permission": "files.read"},
    ),
    "verify, key lacking the permission": (
        VERIFY,
        {"X-API-Key": "{writer}", "X-Required-Permission": "files.read"},
    ),
    "verify, session": (
        VERIFY,
        {"Authorization": "Bearer {token}", "X-Required-Permission": "files.write"},
    ),
    "verify, original request nginx sends": (
        VERIFY,
        {"X-API-Key": "{reader}", "X-Original-Method": "GET", "X-Original-URI": "/api/v1/files"},
    ),
    "verify, key on the key endpoints": (
        VERIFY,
        {"X-API-Key": "{reader}", "X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/api/v1/keys"},
    ),
    "verify, no credential": (VERIFY, {"X-Required-Permission": "files.read"}),
    "verify, malformed key": (
        VERIFY,
        {"X-API-Key": "fhk_notakey", "X-Required-Permission": "files.read"},
    ),
    "verify, both credentials": (
        VERIFY,
        {
            "X-API-Key": "{reader}",
            "Authorization": "Bearer {token}",
            "X-Required-Permission": "files.read",
        },
    ),
    "verify, unknown permission name": (
        VERIFY,
        {"X-API-Key": "{reader}", "X-Required-Permission": "files.delete"},
    ),
    "verify, no permission named": (VERIFY, {"X-API-Key": "{reader}"}),
    "verify, a client's request id": (
        VERIFY,
        {"X-API-Key": "{reader}", "X-Required-Permission": "files.read", "X-Request-ID": "gw-1"},
    ),
    "verify, key as a Bearer token": (
        VERIFY,
        {"Authorization": "Bearer {reader}", "X-Required-Permission": "files.read"},
    ),
    "verify, key as a Bearer token on the key endpoints": (
        VERIFY,
        {
            "Authorization": "Bearer {reader}",
            "X-Original-Method": "GET",
            "X-Original-URI": "/api/v1/keys",
        },
    ),
    "verify, key in both headers": (
        VERIFY,
        {
            "X-API-Key": "{reader}",
            "Authorization": "Bearer {reader}",
            "X-Required-Permission": "files.read",
        },
    ),
    "verify, malformed key as a Bearer token": (
        VERIFY,
        {"Authorization": "Bearer fhk_notakey", "X-Required-Permission": "files.read"},
    ),
    "verify, expired key": (
        VERIFY,
        {"X-API-Key": "{expired}", "X-Required-Permission": "files.read"},
    ),
    "verify, revoked key": (
        VERIFY,
        {"X-API-Key": "{revoked}", "X-Required-Permission": "files.read"},
    ),
    "verify, key revoked as leaked, as a Bearer token": (
        VERIFY,
        {"Authorization": "Bearer {leaked}", "X-Required-Permission": "files.read"},
    ),
    "verify, rolled-out secret": (
        VERIFY,
        {"X-API-Key": "{rolled}", "X-Required-Permission": "files.read"},
    ),
    "verify, bound key, a file inside": (
        VERIFY,
        {
            "X-API-Key": "{bound}",
            "X-Original-Method": "GET",
            "X-Original-URI": "/api/v1/files/{inside_file}/content",
        },
    ),
    "verify, bound key, a file outside": (
        VERIFY,
        {
            "X-API-Key": "{bound}",
            "X-Original-Method": "GET",
            "X-Original-URI": "/api/v1/files/{outside_file}",
        },
    ),
    "verify, bound key, a folder outside, Traefik's way": (
        VERIFY,
        {
            "X-API-Key": "{bound}",
            "X-Forwarded-Method": "GET",
            "X-Forwarded-Uri": "/api/v1/folders/{outside_folder}",
        },
    ),
    "verify, bound key, a listing of a folder outside": (
        VERIFY,
        {
            "X-API-Key": "{bound}",
            "X-Original-Method": "GET",
            "X-Original-URI": "/api/v1/files?folder_id={outside_folder}",
        },
    ),
    "verify, bound key, an alias": (
        VERIFY,
        {
            "X-API-Key": "{bound}",
            "X-Original-Method": "GET",
            "X-Original-URI": "/api/v1/aliases/als_0a1B2c3D4e5F6g7H8i9J0k",
        },
    ),
    "verify, bound key, an alias inside": (
        VERIFY,
        {
            "X-API-Key": "{bound}",
            "X-Original-Method": "GET",
            "X-Original-URI": "/api/v1/aliases/{inside_alias}",
        },
    ),
    "verify, bound key, a collection": (
        VERIFY,
        {"X-API-Key": "{bound}", "X-Original-Method": "POST", "X-Original-URI": "/api/v1/files"},
    ),
    "verify, bound key, the listed folder spelled as an array": (
        VERIFY,
        {
            "X-API-Key": "{bound}",
            "X-Original-Method": "GET",
            "X-Original-URI": "/api/v1/files?folder_id%5B%5D={inside_folder}",
        },
    ),
    "verify, bound key, a permission named": (
        VERIFY,
        {"Authorization": "Bearer {bound}", "X-Required-Permission": "files.read"},
    ),
    "verify, key whose folders were deleted": (
        VERIFY,
        {"X-API-Key": "{emptied}", "X-Required-Permission": "files.read"},
    ),
    "files, key": (FILES, {"X-API-Key": "{reader}"}),
    "files, bound key": (FILES, {"X-API-Key": "{bound}"}),
    "files, key whose folders were deleted": (FILES, {"X-API-Key": "{emptied}"}),
    "files, revoked key": (FILES, {"X-API-Key": "{revoked}"}),
    "files, expired key as a Bearer token": (FILES, {"Authorization": "Bearer {expired}"}),
    "files, key as a Bearer token": (FILES, {"Authorization": "Bearer {reader}"}),
    "files, key lacking files.read as a Bearer token": (
        FILES,
        {"Authorization": "bearer {writer}"},
    ),
    "files, session": (FILES, {"Authorization": "Bearer {token}"}),
    "files, key lacking files.read": (FILES, {"X-API-Key": "{writer}"}),
    "files, unsupported scheme": (FILES, {"Authorization": "Basic YTpi"}),
    "files, no credential": (FILES, {}),
}


@pytest.mark.parametrize("case", CASES)
async def test_the_lane_answers_as_aiohttps_handling_does(
    case: str,
    both: tuple[Api, Api],
    credentials: dict[str, str],
    lane_answers: list[str],
) -> None:
    path, template = CASES[case]
    headers = {name: value.format(**credentials) for name, value in template.items()}
    lane, plain = both
    # Twice on each connection: a connection's first request and a kept-alive one.
    via_lane = await exchange(lane.client.server.port, [raw_get(path, headers)] * 2)
    assert lane_answers == [path, path]
    via_aiohttp = await exchange(plain.client.server.port, [raw_get(path, headers)] * 2)
    assert lane_answers == [path, path]
    for ours, theirs in zip(via_lane, via_aiohttp, strict=True):
        assert comparable(ours) == comparable(theirs)
    assert b"fhk_" not in b"".join(via_lane) and b"fhs_" not in b"".join(via_lane)


async def test_the_lane_names_a_bound_keys_folders_and_no_others(
    both: tuple[Api, Api], credentials: dict[str, str], lane_answers: list[str]
) -> None:
    port = both[0].client.server.port
    uris = [
        "/api/v1/files",  # what verify leaves to the upstream: a collection
        "/api/v1/files/{inside_file}",
        "/api/v1/aliases/{inside_alias}",  # read through redis-py, in a task
    ]
    bound = {"X-API-Key": credentials["bound"]}
    for credential in (bound, {"Authorization": f"Bearer {credentials['token']}"}):
        for uri in uris:
            headers = {
                **credential,
                "X-Original-Method": "GET",
                "X-Original-URI": uri.format(**credentials),
                "X-Required-Permission": "files.read",
            }
            [answer] = await exchange(port, [raw_get(VERIFY, headers)])
            head = answer.partition(b"\r\n\r\n")[0]
            assert head.startswith(b"HTTP/1.1 200 OK"), (uri, answer)
            named = re.findall(rb"\r\nX-Auth-Folder-Ids: ([^\r]*)", head)
            assert named == ([credentials["inside_folder"].encode()] if credential is bound else [])
    assert lane_answers == [VERIFY] * 6


def _made_by_the_service(thing: object) -> bool:
    """Whether ``thing`` is an object of the service's code or one of its functions' frames."""
    code = getattr(thing, "f_code", None)
    if code is not None:
        return "/service/" in code.co_filename
    return type(thing).__module__.startswith("service.")


@pytest.mark.parametrize("case", CASES)
async def test_the_lanes_answers_leave_no_reference_cycles(
    case: str, both: tuple[Api, Api], credentials: dict[str, str], lane_answers: list[str]
) -> None:
    # A cycle per answer (an error held by a local of a frame in its own traceback, say) is
    # garbage only the collector frees: on the gateway's path that made collections run every
    # few hundred requests. The server is tuned on the premise that requests make none.
    path, template = CASES[case]
    headers = {name: value.format(**credentials) for name, value in template.items()}
    port = both[0].client.server.port
    await exchange(port, [raw_get(path, headers)])
    # What the first answer left running (its key's last use, whose script Redis may not have
    # yet: redis-py's retry leaves a cycle from Python 3.12) is not what is measured.
    await both[0].app[AUTHENTICATOR]._background.drain()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to look at
    try:
        await exchange(port, [raw_get(path, headers)] * 3)
        gc.collect()
        ours = [type(thing).__name__ for thing in gc.garbage if _made_by_the_service(thing)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert lane_answers == [path] * 4
    assert ours == []


@pytest.mark.parametrize(
    ("request_line", "extra"),
    [
        ("GET /api/v1/files HTTP/1.0", ""),
        ("GET /api/v1/files HTTP/1.1", "Connection: close\r\n"),
        ("GET /api/v1/files?limit=1 HTTP/1.1", ""),
        ("HEAD /api/v1/auth/verify HTTP/1.1", ""),
        ("GET /api/v1/files/ HTTP/1.1", ""),
        ("GET /api/v1/files HTTP/1.1", "Content-Length: 2\r\n"),
    ],
)
async def test_requests_the_lane_does_not_take_are_answered_by_aiohttp(
    request_line: str,
    extra: str,
    both: tuple[Api, Api],
    credentials: dict[str, str],
    lane_answers: list[str],
) -> None:
    lane, _ = both
    body = "{}" if "Content-Length" in extra else ""
    raw = f"{request_line}\r\nHost: x\r\nX-API-Key: {credentials['reader']}\r\n{extra}\r\n{body}"
    [answer] = await exchange(lane.client.server.port, [raw.encode()], bodies=False)
    assert lane_answers == []
    assert answer.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")) and b"X-Request-ID: " in answer


async def test_pipelined_requests_are_answered_in_order_whichever_way_each_goes(
    both: tuple[Api, Api], credentials: dict[str, str], lane_answers: list[str]
) -> None:
    lane, _ = both
    key = _key_may_read(credentials["reader"])
    session = {"Authorization": f"Bearer {credentials['token']}"}
    raw = (
        raw_get(VERIFY, {**key, "X-Request-ID": "r1"})  # the lane
        + raw_get("/api/v1/auth/session", {**session, "X-Request-ID": "r2"})  # aiohttp
        + raw_get(VERIFY, {**key, "X-Request-ID": "r3"})  # behind aiohttp's: aiohttp
        + raw_get(FILES, {**session, "X-Request-ID": "r4"})
    )
    answers = await pipelined(lane.client.server.port, raw, 4)
    ids = [re.search(rb"X-Request-ID: (\S+)", answer).group(1) for answer in answers]
    assert ids == [b"r1", b"r2", b"r3", b"r4"]
    assert all(answer.startswith(b"HTTP/1.1 200 OK") for answer in answers)
    assert lane_answers == [VERIFY]
    # The connection is idle again: its next request is the lane's.
    more = await pipelined(lane.client.server.port, raw_get(VERIFY, key) * 3, 3)
    assert all(answer.startswith(b"HTTP/1.1 200 OK") for answer in more)
    assert lane_answers == [VERIFY] * 2  # the first; the two behind it wait for it in aiohttp


async def test_a_lane_request_is_counted_and_logged_as_any_other(
    make_api: Any,
    aiohttp_client: Any,
    clock: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    lane_answers: list[str],
    tmp_path: Path,
) -> None:
    api = await make_api()
    token = await api.user_with_session("logged@example.com")
    key = (await api.create_key(token))["secret_key"]
    # The log's own line buffer, writing into a file of this test's.
    log_file = tmp_path / "access.log"
    with log_file.open("wb") as output:
        request_lines = LineBuffer(output.fileno())
        monkeypatch.setattr("service.api.gateway.LINES", request_lines)
        # The service's own access log at INFO, as production serves.
        caplog.set_level(logging.INFO, logger="aiohttp.access")
        app = create_app(api.app[SETTINGS], clock=clock)
        server = EnvelopeTestServer(app)
        await server.start_server(access_log_class=AccessLogger)
        client = await aiohttp_client(server)
        request = raw_get(VERIFY, _key_may_read(key))
        answers = await exchange(client.server.port, [request] * 3)
        assert all(answer.startswith(b"HTTP/1.1 200 OK") for answer in answers)
        assert lane_answers == [VERIFY] * 3
        request_lines.flush()
    lines = log_file.read_bytes().splitlines()
    logged = [orjson.loads(line) for line in lines]
    assert [entry["status"] for entry in logged] == [200, 200, 200]
    assert {entry["route"] for entry in logged} == {VERIFY}
    assert all(entry["credential"] == "api_key" and entry["auth"] == "ok" for entry in logged)
    assert not any(key in line.decode() for line in lines)
    text = await (await client.get("/metrics")).text()
    requests = "filehost_http_requests_total"
    assert value(text, requests, route=VERIFY, method="GET", status="200") == 3
    checks = "filehost_auth_checks_total"
    assert value(text, checks, credential="api_key", outcome="ok") == 3


async def test_a_client_gone_mid_request_leaves_the_lane_serving(
    both: tuple[Api, Api],
    credentials: dict[str, str],
    redis_client: Any,
    lane_answers: list[str],
) -> None:
    lane, _ = both
    request = raw_get(VERIFY, _key_may_read(credentials["reader"]))
    _, writer = await held_at_the_store(lane.client.server.port, request, redis_client)
    writer.close()  # gone before its answer
    await asyncio.sleep(0.3)
    assert lane_answers == [VERIFY]
    [answer] = await exchange(lane.client.server.port, [request])
    assert answer.startswith(b"HTTP/1.1 200 OK")
    assert lane_answers == [VERIFY, VERIFY]


async def test_shutdown_waits_for_the_lanes_request_in_hand(
    both: tuple[Api, Api],
    credentials: dict[str, str],
    redis_client: Any,
    lane_answers: list[str],
) -> None:
    lane, _ = both
    request = raw_get(VERIFY, _key_may_read(credentials["reader"]))
    reader, writer = await held_at_the_store(lane.client.server.port, request, redis_client)
    try:
        assert lane_answers == [VERIFY]
        closing = asyncio.ensure_future(lane.client.server.close())  # stops as SIGTERM does
        answer = await asyncio.wait_for(reader.read(), 10)  # all it is sent, until it is closed
        await closing
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200 OK"), answer
    assert b"X-Auth-Credential: api_key" in answer


def _split_randomly(raw: bytes, seed: int, largest: int) -> list[bytes]:
    """``raw`` cut into pieces of 1 to ``largest`` bytes, the same cuts for the same seed."""
    import random

    rng = random.Random(seed)
    pieces, start = [], 0
    while start < len(raw):
        end = start + rng.randint(1, largest)
        pieces.append(raw[start:end])
        start = end
    return pieces


async def _answers_to_pipeline(port: int, pieces: list[bytes], count: int) -> list[bytes]:
    """Write ``pieces`` on one connection without reading between them, then read until
    ``count`` answers came or none came for 2 s; the answers' request ids, in order. The client
    is a plain socket in a thread of its own, as an outside client is: the server, on this
    process's loop, reads the pieces as the kernel hands them over, many reads for many pieces."""
    return await asyncio.to_thread(_pipeline_from_a_thread, port, pieces, count)


def _pipeline_from_a_thread(port: int, pieces: list[bytes], count: int) -> list[bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in pieces:
            sock.sendall(piece)
            if len(pieces) > 1:
                time.sleep(0.005)  # the server reads each piece on its own
        received, ids = b"", []
        while len(ids) < count:
            head_end = received.find(b"\r\n\r\n")
            if head_end >= 0:
                head = received[: head_end + 4]
                length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                if len(received) >= head_end + 4 + length:
                    assert head.startswith(b"HTTP/1.1 200 OK"), head
                    ids.append(re.search(rb"X-Request-ID: (\S+)", head).group(1))
                    received = received[head_end + 4 + length :]
                    continue
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            received += chunk
        return ids


# How the pipeline's bytes reach the server: in one write; cut once, mid-request, with over 32
# requests after the cut; or in random pieces, small or of up to about 60 requests each.
WHOLE, CUT_ONCE = "whole", "cut once"


@pytest.mark.parametrize(
    ("count", "split"),
    [
        (33, WHOLE),
        (40, WHOLE),
        (100, WHOLE),
        (150, CUT_ONCE),
        (150, (1, 400)),  # (seed, largest piece in bytes)
        (150, (2, 400)),
        (150, (3, 12_000)),
        (300, (4, 12_000)),
    ],
)
async def test_every_pipelined_request_is_answered_in_order_as_without_the_lane(
    count: int,
    split: str | tuple[int, int],
    make_api: Any,
    lane_answers: list[str],
) -> None:
    # aiohttp's parser stops at 32 requests in flight and is fed again only by aiohttp's own
    # queue draining: requests the lane takes must not leave the rest of a pipeline unread.
    lane = await make_api(rate_limit_burst=10_000)
    plain = await make_api(rate_limit_burst=10_000, gateway_lane=False)
    token = await lane.user_with_session("pipeline@example.com")
    key = _key_may_read((await lane.create_key(token))["secret_key"])
    raw = b"".join(raw_get(VERIFY, {**key, "X-Request-ID": f"p{n}"}) for n in range(count))
    if split == WHOLE:
        pieces = [raw]
    elif split == CUT_ONCE:
        cut = len(raw) * 2 // 15 + 7  # inside the 21st request of 150
        pieces = [raw[:cut], raw[cut:]]
    else:
        pieces = _split_randomly(raw, *split)
    expected = [f"p{n}".encode() for n in range(count)]
    assert await _answers_to_pipeline(plain.client.server.port, pieces, count) == expected
    assert await _answers_to_pipeline(lane.client.server.port, pieces, count) == expected
    assert lane_answers  # the lane took part
