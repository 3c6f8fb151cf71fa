"""A public link as a chat's link unfurler fetches it (Discord, Slack, Mastodon, iMessage, X,
Telegram, with the User-Agents they send): for an alias without a password or a view limit, a
page of Open Graph and Twitter-card metadata (the name, the size, the thumbnail of an image, the
file of a video) whose fetches spend no view; for any other alias no metadata and still no view;
browsers and API clients answered as before. Over HTTP, on the fixtures' real Redis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.aliases import ALIASES, alias, public
from tests.support.api import Api, assert_error, bearer
from tests.support.files import uploaded
from tests.support.folders import folder
from tests.support.images import image_bytes, opened
from tests.support.lane import exchange, raw_get
from tests.support.link_previews import (
    CHROME,
    CURL,
    DISCORD,
    MASTODON,
    SAFARI_IPHONE,
    SLACK,
    UNFURLERS,
    metadata,
)

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


def origin_of(api: Api) -> str:
    return str(api.client.make_url("")).rstrip("/")


async def views_of(api: Api, token: str, alias_id: str) -> int:
    response = await api.client.get(f"{ALIASES}/{alias_id}", headers=bearer(token))
    return int((await response.json())["data"]["views"])


async def unfurled(api: Api, path: str, user_agent: str, accept: str = "*/*") -> Any:
    return await public(api, path, **{"User-Agent": user_agent, "Accept": accept})


@pytest.mark.parametrize("unfurler", sorted(UNFURLERS))
async def test_an_image_link_unfurls_with_its_thumbnail_and_spends_no_view(
    api: Api, unfurler: str
) -> None:
    token = await api.user_with_session()
    data = image_bytes("PNG", (1200, 600))
    file = await uploaded(
        api, data, token=token, filename="Beach <at> dawn.png", content_type="image/png"
    )
    made = await alias(api, {"file_id": file["id"], "slug": "beach"}, token=token)
    url = f"{origin_of(api)}/a/beach"
    for accept in ("text/html", "*/*"):  # whatever the unfurler says it accepts
        response = await unfurled(api, "/a/beach", UNFURLERS[unfurler], accept)
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
        found = metadata(await response.text())
        assert found == {
            "og:type": "website",
            "og:site_name": "filehost",
            "og:title": "Beach <at> dawn.png",
            "og:description": f"{file['size'] / 1024:.1f} KiB · image/png",
            "og:url": url,
            "og:image": f"{url}/thumbnail",
            "og:image:type": "image/webp",
            "og:image:alt": "Beach <at> dawn.png",
            "twitter:card": "summary_large_image",
            "twitter:image": f"{url}/thumbnail",
            "twitter:title": "Beach <at> dawn.png",
            "twitter:description": f"{file['size'] / 1024:.1f} KiB · image/png",
        }
        assert "<at>" not in await response.text()  # escaped
    image = await unfurled(api, "/a/beach/thumbnail", UNFURLERS[unfurler], "image/*")
    assert (image.status, image.headers["Content-Type"]) == (200, "image/webp")
    assert opened(await image.read()).size == (320, 160)
    assert await views_of(api, token, made["id"]) == 0
    # A person's browser, and curl, get the file as ever, and count.
    for user_agent, accept in (
        (CHROME, BROWSER_ACCEPT),
        (SAFARI_IPHONE, BROWSER_ACCEPT),
        (CURL, "*/*"),
    ):
        response = await public(api, "/a/beach", **{"User-Agent": user_agent, "Accept": accept})
        assert (response.status, await response.read()) == (200, data)
    assert await views_of(api, token, made["id"]) == 3


async def test_a_video_link_unfurls_with_the_video_and_spends_no_view(api: Api) -> None:
    token = await api.user_with_session()
    video = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 64
    file = await uploaded(api, video, token=token, filename="clip.mp4", content_type="video/mp4")
    made = await alias(api, {"file_id": file["id"], "slug": "clip"}, token=token)
    url = f"{origin_of(api)}/a/clip"
    found = metadata(await (await unfurled(api, "/a/clip", DISCORD)).text())
    assert found["og:video"] == found["og:video:url"] == f"{url}/{file['id']}"
    assert (found["og:video:type"], found["og:type"]) == ("video/mp4", "video.other")
    assert found["twitter:card"] == "summary" and "og:image" not in found
    played = await unfurled(api, f"/a/clip/{file['id']}", DISCORD, "video/*")
    assert (played.status, await played.read()) == (200, video)
    await assert_error(await unfurled(api, "/a/clip/thumbnail", DISCORD), 404, "alias_not_found")
    assert await views_of(api, token, made["id"]) == 0
    # Anyone else fetching the file at its id counts, as at the alias.
    assert (await public(api, f"/a/clip/{file['id']}")).status == 200
    assert await views_of(api, token, made["id"]) == 1


async def test_a_protected_or_counted_link_tells_an_unfurler_nothing_and_keeps_its_views(
    api: Api,
) -> None:
    token = await api.user_with_session()
    png = image_bytes("PNG", (100, 100))
    file = await uploaded(api, png, token=token, filename="secret.png", content_type="image/png")
    once = await alias(api, {"file_id": file["id"], "slug": "once", "max_views": 1}, token=token)
    await alias(
        api, {"file_id": file["id"], "slug": "locked", "password": "open sesame 1"}, token=token
    )
    for user_agent in (DISCORD, SLACK):
        response = await unfurled(api, "/a/once", user_agent, "text/html")
        assert response.status == 200
        page = await response.text()
        assert metadata(page) == {} and "secret.png" not in page
        locked = await unfurled(api, "/a/locked", user_agent, "text/html")
        assert locked.status == 401
        assert metadata(await locked.text()) == {}
        for path in ("/a/once/thumbnail", "/a/locked/thumbnail"):
            await assert_error(await unfurled(api, path, user_agent), 404, "alias_not_found")
    assert await views_of(api, token, once["id"]) == 0
    # A made-up unfurler's User-Agent gains nothing: the file at its id counts, to the limit.
    taken = await unfurled(api, f"/a/once/{file['id']}", DISCORD)
    assert (taken.status, await taken.read()) == (200, png)
    assert await views_of(api, token, once["id"]) == 1
    await assert_error(await public(api, "/a/once"), 404, "alias_not_found")


async def test_a_folder_link_unfurls_with_its_name(api: Api) -> None:
    token = await api.user_with_session()
    holiday = await folder(api, "Holiday 2025", token=token)
    made = await alias(api, {"folder_id": holiday["id"], "slug": "holiday"}, token=token)
    found = metadata(await (await unfurled(api, "/a/holiday", MASTODON)).text())
    assert (found["og:title"], found["og:description"]) == ("Holiday 2025", "A shared folder")
    assert found["twitter:card"] == "summary" and "og:image" not in found
    await assert_error(
        await unfurled(api, "/a/holiday/thumbnail", MASTODON), 404, "alias_not_found"
    )
    assert await views_of(api, token, made["id"]) == 0


async def test_the_gateway_lane_hands_an_unfurler_to_its_preview(
    api: Api, lane_answers: list[str]
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"small", token=token, filename="s.txt", content_type="text/plain")
    made = await alias(api, {"file_id": file["id"], "slug": "small"}, token=token)
    assert await (await public(api, "/a/small")).read() == b"small"  # learnt
    # Each on a connection of its own, as a connection aiohttp served stays aiohttp's.
    port = api.client.server.port
    [answer] = await exchange(port, [raw_get("/a/small", {})])
    assert answer.endswith(b"\r\n\r\nsmall")
    assert lane_answers == ["/a/small"]
    [preview] = await exchange(port, [raw_get("/a/small", {"User-Agent": DISCORD})])
    found = metadata(preview.partition(b"\r\n\r\n")[2].decode())
    assert found["og:title"] == "s.txt" and found["og:description"] == "5 bytes · text/plain"
    assert lane_answers == ["/a/small"]
    assert await views_of(api, token, made["id"]) == 2
