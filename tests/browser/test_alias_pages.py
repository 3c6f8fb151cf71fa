"""A vanity alias's public pages in headless Chromium, as a person who was sent the link uses
them: the password form of a protected file, then the file; the form of a protected folder, then
its listing through the cookie, a folder and a file below it; a link that can't be used. Plain
pages without script, under a Content-Security-Policy the browser reports no violation of,
styled by their one stylesheet in the dashboard's look: light and dark as the system asks, every
text at a WCAG AA contrast, readable at 375 px without scrolling sideways."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from playwright.async_api import Page, expect

from tests.support.api import PASSWORD
from tests.support.browser import (
    Dashboard,
    Tab,
    directives,
    low_contrasts,
    no_horizontal_scroll,
    screenshot,
    violations,
)
from tests.support.images import image_bytes, wav

pytestmark = pytest.mark.asyncio(loop_scope="module")

ALIAS_PAGE_CSP = {
    "default-src": ["'none'"],
    "style-src": ["'self'"],
    "img-src": ["'self'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
    "require-trusted-types-for": ["'script'"],
    "trusted-types": ["'none'"],
}


async def _call(
    dashboard: Dashboard, method: str, path: str, token: str, **kwargs: Any
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with dashboard.http.request(
        method, f"{dashboard.base}/api/v1{path}", headers=headers, **kwargs
    ) as response:
        assert response.status in (200, 201), await response.text()
        return (await response.json())["data"]


async def _owner(dashboard: Dashboard, user: str) -> str:
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/auth/login", json={"email": user, "password": PASSWORD}
    ) as response:
        return (await response.json())["data"]["token"]


async def _upload(
    dashboard: Dashboard,
    token: str,
    data: bytes,
    name: str,
    folder_id: str | None = None,
    content_type: str = "text/plain",
) -> dict[str, Any]:
    form = aiohttp.FormData()
    if folder_id is not None:
        form.add_field("folder_id", folder_id)
    form.add_field("file", data, filename=name, content_type=content_type)
    return await _call(dashboard, "POST", "/files", token, data=form)


def _unexpected(console: list[str]) -> list[str]:
    """What the console said beyond the 401 of the password form's page itself."""
    return [line for line in console if "status of 401" not in line]


async def _styled(tab: Tab) -> None:
    """The page's one stylesheet was loaded and applied under its policy."""
    width = await tab.page.evaluate(
        "() => getComputedStyle(document.querySelector('main.shared')).maxWidth"
    )
    assert width == "960px"


async def test_a_protected_file_asks_for_its_password_then_shows_the_file(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    token = await _owner(dashboard, user)
    file = await _upload(dashboard, token, b"hello from a shared link", "note.txt")
    made = await _call(
        dashboard,
        "POST",
        "/aliases",
        token,
        json={"file_id": file["id"], "password": "letmein1"},
    )
    page = tab.page
    response = await page.goto(f"/a/{made['slug']}")
    assert response is not None and response.status == 401
    assert (
        directives(await response.header_value("content-security-policy") or "") == ALIAS_PAGE_CSP
    )
    await expect(page.get_by_role("heading", name="This link is protected")).to_be_visible()
    await _styled(tab)

    await page.get_by_label("Password").fill("not it")
    await page.get_by_role("button", name="Open").click()
    await expect(page.get_by_role("alert")).to_have_text("That password is not right.")
    assert await violations(page) == []
    assert "not it" not in page.url

    await page.get_by_label("Password").fill("letmein1")
    await page.get_by_role("button", name="Open").click()
    await expect(page.locator("body")).to_have_text("hello from a shared link")
    assert "letmein1" not in page.url
    assert _unexpected(tab.console) == []


async def test_a_shared_image_and_sound_opened_from_the_link_show_as_the_browser_shows_them(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    # The browser's own view of an image centres it with inline style, and that of a sound or
    # video plays it from the document's own address: the files' policy allows both.
    token = await _owner(dashboard, user)
    image = await _upload(
        dashboard, token, image_bytes("PNG", (200, 120)), "red.png", content_type="image/png"
    )
    # Past the size a worker keeps in memory (64 KiB), so streamed, and asked for in ranges.
    sound = await _upload(dashboard, token, wav(10), "tone.wav", content_type="audio/wav")
    page = tab.page
    await page.set_viewport_size({"width": 800, "height": 600})
    for file, opened in ((image, 2), (sound, 1)):
        made = await _call(dashboard, "POST", "/aliases", token, json={"file_id": file["id"]})
        for _ in range(opened):  # an image again, as a worker serves a small file once known
            response = await page.goto(f"/a/{made['slug']}")
            assert response is not None and response.status == 200
            if file is image:
                box = await page.locator("img").bounding_box()
                assert box == {"x": 300, "y": 240, "width": 200, "height": 120}
            else:
                await _plays(page, 10)
    assert tab.console == []

    # Behind a password too: the form's answer leads to the file's address with the cookie,
    # which the browser's view asks again, and a reload shows it again.
    made = await _call(
        dashboard, "POST", "/aliases", token, json={"file_id": sound["id"], "password": "letmein1"}
    )
    await page.goto(f"/a/{made['slug']}")
    await page.get_by_label("Password").fill("letmein1")
    await page.get_by_role("button", name="Open").click()
    await _plays(page, 10)
    assert page.url.endswith(f"/a/{made['slug']}")
    await page.reload()
    await _plays(page, 10)
    # Chromium carries the form's icon over to the file's view at the same address; the files'
    # policy loads no image but the file.
    icon = "Loading the image '" + dashboard.base + "/static/favicon.svg' violates"
    assert [line for line in _unexpected(tab.console) if icon not in line] == []


async def test_a_sound_shared_for_one_view_plays_and_is_that_one_view(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    # The browser's own view asks the address again in ranges: the opening's view covers them.
    token = await _owner(dashboard, user)
    sound = await _upload(dashboard, token, wav(10), "tone.wav", content_type="audio/wav")
    made = await _call(
        dashboard, "POST", "/aliases", token, json={"file_id": sound["id"], "max_views": 1}
    )
    page = tab.page
    response = await page.goto(f"/a/{made['slug']}")
    assert response is not None and response.status == 200
    await _plays(page, 10)
    await page.locator("video").evaluate("(sound) => { sound.currentTime = 7; }")
    await expect(page.locator("video")).to_have_js_property("readyState", 4)
    assert (await _call(dashboard, "GET", f"/aliases/{made['id']}", token))["views"] == 1
    assert tab.console == []
    # Opened again, it is a second view, which its one was.
    response = await page.goto(f"/a/{made['slug']}")
    assert response is not None and response.status == 404


async def _plays(page: Page, seconds: int) -> None:
    """The page is the browser's own view of a sound or video, loaded whole and ready to play."""
    played = page.locator("video")
    await expect(played).to_have_js_property("readyState", 4)
    assert await played.evaluate("(sound) => sound.duration") == seconds


async def test_a_protected_folder_opens_with_its_cookie_and_leads_below(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    token = await _owner(dashboard, user)
    top = await _call(dashboard, "POST", "/folders", token, json={"name": "Holiday <2026>"})
    inner = await _call(
        dashboard, "POST", "/folders", token, json={"name": "Day one", "parent_id": top["id"]}
    )
    await _upload(dashboard, token, b"the plan", "plan-list.txt", top["id"])
    await _upload(dashboard, token, b"beach", "beach.txt", inner["id"])
    made = await _call(
        dashboard,
        "POST",
        "/aliases",
        token,
        json={"folder_id": top["id"], "password": "sunshine"},
    )
    page = tab.page
    await page.goto(f"/a/{made['slug']}")
    await page.get_by_label("Password").fill("sunshine")
    await page.get_by_role("button", name="Open").click()

    await expect(page.get_by_role("heading", name="Holiday <2026>", level=1)).to_be_visible()
    await expect(page.get_by_role("link", name="plan-list.txt")).to_be_visible()
    await _styled(tab)
    cookies = await tab.context.cookies()
    assert [(c["name"], c["path"], c["httpOnly"]) for c in cookies] == [
        ("fh_alias", f"/a/{made['slug']}", True)
    ]
    assert "sunshine" not in str(cookies)

    await page.get_by_role("link", name="Day one").click()
    await expect(page.get_by_role("heading", name="Day one", level=1)).to_be_visible()
    crumbs = page.get_by_role("navigation", name="Folders")
    await expect(crumbs.get_by_role("link", name="Holiday <2026>")).to_be_visible()
    await page.get_by_role("link", name="beach.txt").click()
    await expect(page.locator("body")).to_have_text("beach")
    await page.go_back()
    await crumbs.get_by_role("link", name="Holiday <2026>").click()
    await expect(page.get_by_role("link", name="Day one")).to_be_visible()
    assert await violations(page) == []
    assert _unexpected(tab.console) == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_public_pages_read_well_in_either_scheme_at_375_px(
    tab: Tab, user: str, dashboard: Dashboard, scheme: str
) -> None:
    token = await _owner(dashboard, user)
    top = await _call(dashboard, "POST", "/folders", token, json={"name": f"Shared {scheme}"})
    await _call(
        dashboard, "POST", "/folders", token, json={"name": "Inner", "parent_id": top["id"]}
    )
    long_name = "a-rather-long-file-name-that-has-no-spaces-anywhere-in-it-" * 2 + ".txt"
    await _upload(dashboard, token, b"x" * 1536, long_name, top["id"])
    await _upload(dashboard, token, b"y", "one.bin", top["id"], "application/x-something-long")
    shared = await _call(dashboard, "POST", "/aliases", token, json={"folder_id": top["id"]})
    file = await _upload(dashboard, token, b"secret", "secret.txt")
    locked = await _call(
        dashboard, "POST", "/aliases", token, json={"file_id": file["id"], "password": "letmein1"}
    )
    page = tab.page
    await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
    background = {"light": "rgb(243, 244, 246)", "dark": "rgb(15, 23, 42)"}[scheme]

    await page.set_viewport_size({"width": 1280, "height": 800})
    await page.goto(f"/a/{shared['slug']}")
    await expect(page.get_by_role("columnheader", name="Size")).to_be_visible()
    assert await low_contrasts(page) == [], "the listing"
    await page.set_viewport_size({"width": 375, "height": 800})
    await expect(page.get_by_role("link", name=long_name)).to_be_visible()
    files = page.locator("table.files")
    await expect(files.get_by_text("1.5 KiB", exact=True)).to_be_visible()
    await expect(files.get_by_text("1 byte", exact=True)).to_be_visible()
    await expect(files.locator("time.when .ago").first).to_have_text("now")
    await _styled(tab)
    body = await page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert body == background
    await no_horizontal_scroll(page)
    assert await low_contrasts(page) == [], "the listing at 375 px"
    await screenshot(page, f"alias-listing-375-{scheme}")

    for path, status, heading in (
        ("/a/no-such-link-at-all", 404, "This link is not available"),
        (f"/a/{locked['slug']}", 401, "This link is protected"),
    ):
        response = await page.goto(path)
        assert response is not None and response.status == status
        await expect(page.get_by_role("heading", name=heading)).to_be_visible()
        await _styled(tab)
        await no_horizontal_scroll(page)
        assert await low_contrasts(page, texts=4) == [], path
    await screenshot(page, f"alias-password-375-{scheme}")
    await page.get_by_label("Password").fill("wrong")
    await page.get_by_role("button", name="Open").click()
    await expect(page.get_by_role("alert")).to_have_text("That password is not right.")
    assert await low_contrasts(page, texts=4) == [], "the form's problem"
    assert await violations(page) == []
