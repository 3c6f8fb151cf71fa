"""A shared sound or video is one view however a browser plays it: the view of a browser's
opening gives a grant, a cookie for that address, and the ranges the browser's own view then asks
with it count nothing and are served past ``max_views``; anything else (another opening, another
address, a forged or stale grant, an alias that may no longer be used) is counted or refused as
before. Over HTTP, on the fixtures' real Redis (and the API suite's cluster run)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest

from service.auth.alias_access import VIEW_GRANT_NAME, VIEW_GRANT_SECONDS
from tests.support.aliases import alias, edit_alias
from tests.support.aliases import public as public_with_jar
from tests.support.api import Api, assert_error, bearer
from tests.support.files import uploaded
from tests.support.images import wav

# What Chromium sends for a navigation, and then for its own view's first range.
NAVIGATION = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "*/*;q=0.8"
}
FIRST_RANGE = {"Accept": "*/*", "Range": "bytes=0-"}
PROXY = ipaddress.ip_network("127.0.0.0/8")


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    # Behind a proxy on loopback, so that a test can send from other client addresses.
    return await make_api(data_dir=tmp_path, trusted_proxies=(PROXY,))


async def views_of(api: Api, token: str, alias_id: str) -> int:
    response = await api.client.get(f"/api/v1/aliases/{alias_id}", headers=bearer(token))
    return (await response.json())["data"]["views"]


async def shared_sound(api: Api, token: str, slug: str, **made: Any) -> dict[str, Any]:
    file = await uploaded(api, wav(10), token=token, filename="tone.wav", content_type="audio/wav")
    return await alias(api, {"file_id": file["id"], "slug": slug, **made}, token=token)


async def public(api: Api, path: str, **headers: str) -> Any:
    """``GET`` of a public path with exactly the cookies in ``headers``: the test client's jar
    would send back what the last answer gave."""
    api.client.session.cookie_jar.clear()
    return await public_with_jar(api, path, **headers)


def grant_of(response: Any) -> str:
    """The grant cookie the answer gave, checked for its attributes."""
    given = response.headers.getall("Set-Cookie", [])
    assert len(given) == 1, given
    cookie = given[0]
    name, _, rest = cookie.partition("=")
    assert name == VIEW_GRANT_NAME
    value = rest.split(";")[0]
    attributes = {part.strip().split("=")[0].lower(): part for part in cookie.split(";")[1:]}
    assert attributes.keys() >= {"httponly", "path", "max-age", "samesite"}
    assert f"Max-Age={VIEW_GRANT_SECONDS}" in cookie
    assert "SameSite=Lax" in cookie and "Secure" not in cookie
    return value


def with_grant(value: str, **headers: str) -> dict[str, str]:
    return {**headers, "Cookie": f"{VIEW_GRANT_NAME}={value}"}


async def test_a_browsers_opening_is_one_view_and_its_ranges_play_past_the_limit(
    api: Api,
) -> None:
    token = await api.user_with_session()
    made = await shared_sound(api, token, "tune", max_views=1)
    opened = await public(api, "/a/tune", **NAVIGATION)
    assert opened.status == 200 and len(await opened.read()) == len(wav(10))
    grant = grant_of(opened)
    assert re.search(r"Path=/a/tune(;|$)", opened.headers["Set-Cookie"])
    assert await views_of(api, token, made["id"]) == 1
    # The browser's own view asks again in ranges, as it plays and seeks.
    for asked, length in (("bytes=0-", 80_044), ("bytes=40000-40999", 1_000), ("bytes=0-", 80_044)):
        part = await public(api, "/a/tune", **with_grant(grant, Range=asked, Accept="*/*"))
        assert (part.status, len(await part.read())) == (206, length)
        assert "Set-Cookie" not in part.headers
    assert await views_of(api, token, made["id"]) == 1
    # Opening it again is another view, which the limit refuses, grant or not; so is a range
    # without the grant.
    assert (await public(api, "/a/tune", **with_grant(grant, **NAVIGATION))).status == 404
    await assert_error(await public(api, "/a/tune", **FIRST_RANGE), 404, "alias_not_found")
    await assert_error(
        await public(api, "/a/tune", **with_grant(grant, Accept="*/*")), 404, "alias_not_found"
    )
    assert await views_of(api, token, made["id"]) == 1


async def test_a_grant_counts_nothing_on_an_alias_without_a_limit(api: Api) -> None:
    token = await api.user_with_session()
    made = await shared_sound(api, token, "free-tune")
    grant = grant_of(await public(api, "/a/free-tune", **NAVIGATION))
    for _ in range(3):
        assert (await public(api, "/a/free-tune", **with_grant(grant, **FIRST_RANGE))).status == 206
    assert await views_of(api, token, made["id"]) == 1
    assert (await public(api, "/a/free-tune", **FIRST_RANGE)).status == 206  # no grant: a view
    assert await views_of(api, token, made["id"]) == 2


async def test_only_a_browsers_opening_of_a_sound_or_video_gets_a_grant(api: Api) -> None:
    token = await api.user_with_session()
    await shared_sound(api, token, "api-tune")
    note = await uploaded(api, b"a note", token=token, filename="note.txt")
    await alias(api, {"file_id": note["id"], "slug": "note"}, token=token)
    for path, headers in (
        ("/a/api-tune", {}),  # an API client
        ("/a/api-tune", {"Accept": "application/json"}),
        ("/a/api-tune", {**NAVIGATION, "Range": "bytes=0-"}),  # a range is never an opening
        ("/a/note", NAVIGATION),  # a browser shows text itself, from one answer
    ):
        answer = await public(api, path, **headers)
        assert answer.status in (200, 206)
        assert "Set-Cookie" not in answer.headers, (path, headers)
    head = await api.client.head("/a/api-tune", headers=NAVIGATION)
    assert head.status == 200 and "Set-Cookie" not in head.headers


async def test_a_grant_holds_only_for_its_address_its_client_and_its_time(
    api: Api, clock: Any
) -> None:
    token = await api.user_with_session()
    made = await shared_sound(api, token, "guarded", max_views=2)
    other = await shared_sound(api, token, "other-tune", max_views=5)
    grant = grant_of(await public(api, "/a/guarded", **NAVIGATION))
    alias_id, expires, signature = grant.split(".")
    forged = [
        f"{alias_id}.{int(expires) + 1}.{signature}",  # a later expiry
        f"{alias_id}.{expires}.{'0' * 64}",
        f"{other['id']}.{expires}.{signature}",  # another alias
        "not-a-grant",
    ]
    for value in forged:  # each a view of its own, as without a grant
        part = await public(api, "/a/guarded", **with_grant(value, **FIRST_RANGE))
        assert part.status in (206, 404)
    assert await views_of(api, token, made["id"]) == 2
    # The real one still plays; sent to another alias, it is nothing there.
    assert (await public(api, "/a/guarded", **with_grant(grant, **FIRST_RANGE))).status == 206
    assert (await public(api, "/a/other-tune", **with_grant(grant, **FIRST_RANGE))).status == 206
    assert await views_of(api, token, other["id"]) == 1
    # From another client address it is no grant (the limit is reached: refused).
    elsewhere = with_grant(grant, **FIRST_RANGE, **{"X-Forwarded-For": "203.0.113.9"})
    await assert_error(await public(api, "/a/guarded", **elsewhere), 404, "alias_not_found")
    # Past its time, neither.
    clock.advance(seconds=VIEW_GRANT_SECONDS + 1)
    await assert_error(
        await public(api, "/a/guarded", **with_grant(grant, **FIRST_RANGE)), 404, "alias_not_found"
    )


async def test_a_grant_never_outlasts_what_makes_an_alias_unusable(api: Api) -> None:
    token = await api.user_with_session()
    made = await shared_sound(api, token, "stopped", max_views=1)
    grant = grant_of(await public(api, "/a/stopped", **NAVIGATION))
    await edit_alias(api, made["id"], {"enabled": False}, token=token)
    await assert_error(
        await public(api, "/a/stopped", **with_grant(grant, **FIRST_RANGE)), 404, "alias_not_found"
    )
    await edit_alias(api, made["id"], {"enabled": True}, token=token)
    assert (await public(api, "/a/stopped", **with_grant(grant, **FIRST_RANGE))).status == 206
    # Its slug given to another alias: the grant was the old one's, so it counts there.
    await edit_alias(api, made["id"], {"slug": "moved-away"}, token=token)
    again = await shared_sound(api, token, "stopped", max_views=1)
    assert (await public(api, "/a/stopped", **with_grant(grant, **FIRST_RANGE))).status == 206
    assert await views_of(api, token, again["id"]) == 1
    await assert_error(
        await public(api, "/a/stopped", **with_grant(grant, **FIRST_RANGE)), 404, "alias_not_found"
    )


async def test_a_protected_sound_plays_with_both_cookies(api: Api) -> None:
    token = await api.user_with_session()
    made = await shared_sound(api, token, "locked-tune", max_views=1, password="letmein1")
    api.client.session.cookie_jar.clear()
    form = await api.client.post(
        "/a/locked-tune",
        data={"password": "letmein1"},
        headers=NAVIGATION,
        allow_redirects=False,
    )
    assert form.status == 303
    password_cookie = form.headers["Set-Cookie"].split(";", 1)[0]
    opened = await public(api, "/a/locked-tune", **NAVIGATION, Cookie=password_cookie)
    assert opened.status == 200
    grant = grant_of(opened)
    both = f"{password_cookie}; {VIEW_GRANT_NAME}={grant}"
    part = await public(api, "/a/locked-tune", **FIRST_RANGE, Cookie=both)
    assert part.status == 206
    assert await views_of(api, token, made["id"]) == 1
    # The grant alone does not open it: the password's cookie still does.
    refused = await public(api, "/a/locked-tune", **with_grant(grant, **FIRST_RANGE))
    await assert_error(refused, 401, "alias_password_required")
