"""The gateway lane's route for vanity aliases (``routes.public_aliases.lane_route``): once a
worker served a small file whole through an alias without a password, that alias's next plain
``GET``s are the lane's, answered byte for byte as aiohttp's handling answers them (but for
``Date`` and a generated request id), the view counted once. Whatever changed about the alias
or its file since, the lane either answers it as aiohttp would or hands the request to aiohttp,
which answers what the alias is now: never the old file, never a view counted twice. Each case
is sent on raw connections to a server with the lane and to one without it, on one store."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from service.api.context import POLICY
from tests.support.aliases import alias, edit_alias, listed
from tests.support.api import Api, bearer
from tests.support.blobs import put_back, take_bytes
from tests.support.files import uploaded
from tests.support.folders import folder
from tests.support.lane import (
    HANDED_BACK,
    comparable,
    exchange,
    held_at_the_store,
    raw_get,
)
from tests.support.metrics import samples

ALIASES = "/api/v1/aliases"
SHARED = "/a/shared"


@pytest.fixture
async def shared(both: tuple[Api, Api]) -> dict[str, Any]:
    """An account's small text file behind the alias ``shared``, served once by the lane's
    server (through aiohttp: the worker learns it there)."""
    lane, _ = both
    token = await lane.user_with_session("lane-alias@example.com")
    file = await uploaded(lane, b"hello, lane", token=token, filename="greeting.txt")
    made = await alias(lane, {"file_id": file["id"], "slug": "shared"}, token=token)
    return {"token": token, "file": file, "alias": made}


async def _views(api: Api, token: str, alias_id: str) -> int:
    response = await api.client.get(f"{ALIASES}/{alias_id}", headers=bearer(token))
    return (await response.json())["data"]["views"]


def _port(api: Api) -> int:
    return api.client.server.port


async def _learnt_then_the_lanes(port: int, path: str) -> None:
    """A ``GET`` of ``path`` the worker learns the alias from (aiohttp's, and so is the rest of
    its connection), then one the lane answers, on a connection of its own."""
    await exchange(port, [raw_get(path, {})])
    await exchange(port, [raw_get(path, {})])


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _body(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


async def test_an_alias_served_once_is_the_lanes_and_answered_as_aiohttp_answers_it(
    both: tuple[Api, Api], shared: dict[str, Any], lane_answers: list[str]
) -> None:
    lane, plain = both
    first = await exchange(_port(lane), [raw_get(SHARED, {})])
    assert lane_answers == []  # aiohttp's: the worker did not know the alias yet
    via_lane = await exchange(_port(lane), [raw_get(SHARED, {})] * 2)
    assert lane_answers == [SHARED, SHARED]
    via_aiohttp = await exchange(_port(plain), [raw_get(SHARED, {})] * 2)
    for answer in (*first, *via_lane):
        assert comparable(answer) == comparable(via_aiohttp[0])
    assert _status(via_lane[0]) == 200 and _body(via_lane[0]) == b"hello, lane"
    assert b'Content-Disposition: inline; filename="greeting.txt"' in via_lane[0]
    assert await _views(lane, shared["token"], shared["alias"]["id"]) == 5
    metrics = await lane.client.get("/metrics")
    counted = samples(await metrics.text())
    assert counted[("filehost_download_bytes_total", frozenset({("via", "alias")}))] >= 3 * 11


async def test_a_clients_request_id_is_kept_and_other_slugs_are_not_the_lanes(
    both: tuple[Api, Api], shared: dict[str, Any], lane_answers: list[str]
) -> None:
    lane, _ = both
    await exchange(_port(lane), [raw_get(SHARED, {})])
    [answer] = await exchange(_port(lane), [raw_get(SHARED, {"X-Request-ID": "mine-1"})])
    assert b"X-Request-ID: mine-1\r\n" in answer
    # Another spelling of the slug is another path: aiohttp's until the worker served it.
    [other] = await exchange(_port(lane), [raw_get("/a/SHARED", {})])
    assert _body(other) == b"hello, lane"
    assert lane_answers == [SHARED]


@pytest.mark.parametrize(
    ("request_line", "extra"),
    [
        ("GET /a/shared HTTP/1.0", ""),
        ("GET /a/shared HTTP/1.1", "Connection: close\r\n"),
        ("GET /a/shared?x=1 HTTP/1.1", ""),
        ("GET /a/shared/ HTTP/1.1", ""),
        ("HEAD /a/shared HTTP/1.1", ""),
        ("GET /a/shared HTTP/1.1", "Range: bytes=0-1\r\n"),
        ("GET /a/shared HTTP/1.1", 'If-None-Match: "x"\r\n'),
        ("GET /a/shared HTTP/1.1", 'If-Range: "x"\r\nRange: bytes=0-1\r\n'),
    ],
)
async def test_requests_the_lane_does_not_take_are_answered_by_aiohttp(
    request_line: str,
    extra: str,
    both: tuple[Api, Api],
    shared: dict[str, Any],
    lane_answers: list[str],
) -> None:
    lane, _ = both
    await exchange(_port(lane), [raw_get(SHARED, {})])
    raw = f"{request_line}\r\nHost: x\r\n{extra}\r\n".encode()
    [answer] = await exchange(_port(lane), [raw], bodies=False)
    assert lane_answers == []
    assert answer.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")) and b"X-Request-ID: " in answer


async def _change(api: Api, case: str, shared: dict[str, Any], redis_client: Any) -> dict[str, str]:
    """Change the shared alias or its file as ``case`` says; headers its next request sends."""
    token, file, made = shared["token"], shared["file"], shared["alias"]
    if case == "file renamed":
        renamed = await api.client.patch(
            f"/api/v1/files/{file['id']}", json={"name": "renamed.txt"}, headers=bearer(token)
        )
        assert renamed.status == 200
    elif case in ("password set", "password set, a browser asks"):
        changed = await edit_alias(api, made["id"], {"password": "open sesame"}, token=token)
        assert changed.status == 200
    elif case == "disabled":
        assert (await edit_alias(api, made["id"], {"enabled": False}, token=token)).status == 200
    elif case == "file deleted":
        deleted = await api.client.delete(f"/api/v1/files/{file['id']}", headers=bearer(token))
        assert deleted.status == 200
    elif case == "slug moved to another alias":
        assert (await edit_alias(api, made["id"], {"slug": "moved"}, token=token)).status == 200
        other = await uploaded(api, b"another file", token=token, filename="other.txt")
        await alias(api, {"file_id": other["id"], "slug": "shared"}, token=token)
    elif case == "slug given to a folder":
        gone = await api.client.delete(f"{ALIASES}/{made['id']}", headers=bearer(token))
        assert gone.status == 200
        shelf = await folder(api, "Shelf", token=token)
        await alias(api, {"folder_id": shelf["id"], "slug": "shared"}, token=token)
    if case == "password set, a browser asks":
        return {"Accept": "text/html"}
    return {}


CHANGES = [
    "file renamed",
    "password set",
    "password set, a browser asks",
    "disabled",
    "file deleted",
    "slug moved to another alias",
    "slug given to a folder",
]


@pytest.mark.parametrize("case", CHANGES)
async def test_after_a_change_the_next_request_is_answered_as_aiohttp_answers_it(
    case: str,
    both: tuple[Api, Api],
    shared: dict[str, Any],
    lane_answers: list[str],
    redis_client: Any,
) -> None:
    lane, plain = both
    await _learnt_then_the_lanes(_port(lane), SHARED)
    assert lane_answers == [SHARED]
    headers = await _change(lane, case, shared, redis_client)

    [via_lane] = await exchange(_port(lane), [raw_get(SHARED, headers)])
    [via_aiohttp] = await exchange(_port(plain), [raw_get(SHARED, headers)])
    assert comparable(via_lane) == comparable(via_aiohttp), case
    assert b"hello, lane" not in _body(via_lane) or case == "file renamed"
    if case == "file renamed":  # still the lane's own: only the record changed
        assert lane_answers == [SHARED, SHARED]
        assert b'filename="renamed.txt"' in via_lane
    else:  # handed to aiohttp, which answers what the alias is now
        assert lane_answers == [SHARED, SHARED, HANDED_BACK + SHARED]
        # From then on the slug is aiohttp's, unless it served a small file whole again.
        await exchange(_port(lane), [raw_get(SHARED, headers)])
        again = [SHARED] if case == "slug moved to another alias" else []
        assert lane_answers == [SHARED, SHARED, HANDED_BACK + SHARED, *again]


async def test_a_view_is_counted_once_for_the_alias_the_slug_names_now(
    both: tuple[Api, Api], shared: dict[str, Any], lane_answers: list[str], redis_client: Any
) -> None:
    lane, _ = both
    await _learnt_then_the_lanes(_port(lane), SHARED)
    await _change(lane, "slug moved to another alias", shared, redis_client)
    [answer] = await exchange(_port(lane), [raw_get(SHARED, {})])
    assert _body(answer) == b"another file"
    views = {item["slug"]: item["views"] for item in await listed(lane, token=shared["token"])}
    assert views == {"moved": 2, "shared": 1}


async def test_an_alias_used_up_in_the_lane_is_not_found_and_never_over_counted(
    both: tuple[Api, Api], shared: dict[str, Any], lane_answers: list[str]
) -> None:
    lane, _ = both
    token, made = shared["token"], shared["alias"]
    assert (await edit_alias(lane, made["id"], {"max_views": 3}, token=token)).status == 200
    answers = await exchange(_port(lane), [raw_get(SHARED, {})])  # learnt
    answers += await exchange(_port(lane), [raw_get(SHARED, {})] * 4)
    assert [_status(answer) for answer in answers] == [200, 200, 200, 404, 404]
    assert b'"code":"alias_not_found"' in answers[3]
    # The fourth, used up, is handed back; aiohttp answers it and what follows it.
    assert lane_answers == [SHARED, SHARED, SHARED, HANDED_BACK + SHARED]
    assert await _views(lane, token, made["id"]) == 3


async def test_an_address_past_its_rate_is_refused_in_the_lane_as_by_aiohttp(
    make_api: Any, lane_answers: list[str]
) -> None:
    lane = await make_api(alias_rate_per_second=1, alias_rate_burst=2)
    plain = await make_api(alias_rate_per_second=1, alias_rate_burst=2, gateway_lane=False)
    token = await lane.user_with_session("rate@example.com")
    file = await uploaded(lane, b"popular", token=token)
    made = await alias(lane, {"file_id": file["id"], "slug": "popular"}, token=token)
    answers = await exchange(_port(lane), [raw_get("/a/popular", {})])  # learnt
    answers += await exchange(_port(lane), [raw_get("/a/popular", {})] * 2)
    assert [_status(answer) for answer in answers] == [200, 200, 429]
    assert lane_answers == ["/a/popular", "/a/popular"]  # the second and the refused third
    [theirs] = await exchange(_port(plain), [raw_get("/a/popular", {})])
    assert comparable(answers[2]) == comparable(theirs)
    assert re.search(rb"Retry-After: \d+\r\n", answers[2])
    assert await _views(lane, token, made["id"]) == 2  # the refused request's view given back


async def test_a_handed_back_request_takes_one_request_of_its_addresss_rate(
    make_api: Any, lane_answers: list[str]
) -> None:
    """The lane takes the request from the address's bucket with the alias's view; a request it
    hands to aiohttp's handling is not taken again there."""
    lane = await make_api(alias_rate_per_second=1, alias_rate_burst=3)
    token = await lane.user_with_session("burst@example.com")
    file = await uploaded(lane, b"three", token=token)
    made = await alias(lane, {"file_id": file["id"], "slug": "three"}, token=token)
    await _learnt_then_the_lanes(_port(lane), "/a/three")
    assert (await edit_alias(lane, made["id"], {"enabled": False}, token=token)).status == 200
    # The third of a burst of three: handed back by the lane, not found, not refused its rate.
    [third] = await exchange(_port(lane), [raw_get("/a/three", {})])
    assert lane_answers == ["/a/three", "/a/three", HANDED_BACK + "/a/three"]
    assert _status(third) == 404, third
    assert b'"code":"alias_not_found"' in third


async def test_pipelined_alias_requests_are_answered_in_order_a_handed_back_one_first(
    both: tuple[Api, Api], shared: dict[str, Any], lane_answers: list[str]
) -> None:
    lane, _ = both
    token, made = shared["token"], shared["alias"]
    await exchange(_port(lane), [raw_get(SHARED, {})])
    assert (await edit_alias(lane, made["id"], {"max_views": 3}, token=token)).status == 200
    raw = b"".join(raw_get(SHARED, {"X-Request-ID": f"r{n}"}) for n in range(4))
    answers = await exchange(_port(lane), [raw_get(SHARED, {"X-Request-ID": "first"}), raw], 4)
    ids = [re.search(rb"X-Request-ID: (\S+)", answer).group(1) for answer in answers]  # type: ignore[union-attr]
    assert ids == [b"first", b"r0", b"r1", b"r2", b"r3"]
    assert [_status(answer) for answer in answers] == [200, 200, 404, 404, 404]
    # The lane took the first of the pipeline (aiohttp's loop was idle) and it was used up
    # then: handed back, it was answered first, the rest behind it by aiohttp.
    assert lane_answers[:2] == [SHARED, SHARED]
    assert await _views(lane, token, made["id"]) == 3


async def test_bytes_no_longer_kept_or_not_as_recorded_are_handed_to_aiohttp(
    both: tuple[Api, Api], shared: dict[str, Any], lane_answers: list[str]
) -> None:
    # A blob never changes in place; one that did (a disk fault, a hand edit) is not served
    # from memory, and the lane leaves it to aiohttp's handling, which streams what is there.
    lane, plain = both
    await _learnt_then_the_lanes(_port(lane), SHARED)
    await take_bytes(lane, shared["file"]["id"])
    await put_back(lane, shared["file"]["id"], b"HELLO, LANE")
    for api in both:  # what each worker kept of the old bytes is forgotten
        api.app[POLICY].files._small._kept.clear()

    [via_lane] = await exchange(_port(lane), [raw_get(SHARED, {})])
    [via_aiohttp] = await exchange(_port(plain), [raw_get(SHARED, {})])
    assert comparable(via_lane) == comparable(via_aiohttp)
    assert _body(via_lane) == b"HELLO, LANE"
    assert lane_answers == [SHARED, SHARED, HANDED_BACK + SHARED]
    assert await _views(lane, shared["token"], shared["alias"]["id"]) == 4


async def test_with_the_public_rate_off_the_lane_serves_without_a_bucket(
    make_api: Any, lane_answers: list[str], redis_client: Any
) -> None:
    api = await make_api(alias_rate_per_second=0)
    token = await api.user_with_session("no-rate@example.com")
    file = await uploaded(api, b"unlimited", token=token)
    made = await alias(api, {"file_id": file["id"], "slug": "unlimited"}, token=token)
    answers = await exchange(_port(api), [raw_get("/a/unlimited", {})])  # learnt
    answers += await exchange(_port(api), [raw_get("/a/unlimited", {})] * 2)
    assert [_body(answer) for answer in answers] == [b"unlimited"] * 3
    assert lane_answers == ["/a/unlimited"] * 2
    # No client address's bucket (the session's own, made by the setup, expires by itself).
    assert not [key for key in redis_client.keys("fh:rate:*") if "{alias-ip:" in key]
    assert await _views(api, token, made["id"]) == 3


async def test_a_hand_back_whose_client_is_gone_is_dropped_quietly(
    both: tuple[Api, Api],
    shared: dict[str, Any],
    lane_answers: list[str],
    redis_client: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lane, _ = both
    await exchange(_port(lane), [raw_get(SHARED, {})])
    token, made = shared["token"], shared["alias"]
    assert (await edit_alias(lane, made["id"], {"enabled": False}, token=token)).status == 200
    _, writer = await held_at_the_store(_port(lane), raw_get(SHARED, {}), redis_client)
    writer.close()  # gone before the lane learns the alias changed
    await asyncio.sleep(0.3)
    assert lane_answers == [SHARED, HANDED_BACK + SHARED]
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]
    [answer] = await exchange(_port(lane), [raw_get(SHARED, {})])
    assert _status(answer) == 404
