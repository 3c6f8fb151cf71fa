"""A vanity alias's public pages in headless Chromium, as a person who was sent the link uses
them: the password form of a protected file, then the file; the form of a protected folder, then
its listing through the cookie, a folder and a file below it. Plain pages without script, under
a Content-Security-Policy the browser reports no violation of, styled by their one stylesheet."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from playwright.async_api import expect

from tests.support.api import PASSWORD
from tests.support.browser import RECORD_VIOLATIONS, Dashboard, Tab, directives, violations

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
    dashboard: Dashboard, token: str, data: bytes, name: str, folder_id: str | None = None
) -> dict[str, Any]:
    form = aiohttp.FormData()
    if folder_id is not None:
        form.add_field("folder_id", folder_id)
    form.add_field("file", data, filename=name, content_type="text/plain")
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
    await tab.context.add_init_script(RECORD_VIOLATIONS)
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
    await tab.context.add_init_script(RECORD_VIOLATIONS)
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
