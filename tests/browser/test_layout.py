"""What every page of the dashboard shares, as a person sees it: one layout and one width (the
top bar's content lined up with the page's), an unknown address answered with a page in that
layout (the navigation when signed in) while the API's unknown addresses stay JSON, and the
system's dark mode followed, every text keeping a WCAG AA contrast in either scheme."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.support.browser import (
    Dashboard,
    Tab,
    create_key,
    low_contrasts,
    screenshot,
    sign_in,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

SIGNED_IN_PAGES = [
    "/keys",
    "/files",
    "/aliases",
    "/sessions",
    "/security",
    "/activity",
    "/settings",
    "/no/such/page",
]


async def layout_of(page: Page) -> dict[str, Any]:
    """Where the top bar's content, the main column and the page's heading are."""
    return await page.evaluate(
        """() => {
            const box = (selector) => {
                const rect = document.querySelector(selector).getBoundingClientRect();
                return [Math.round(rect.left), Math.round(rect.width)];
            };
            const main = document.querySelector('main');
            const padding = parseFloat(getComputedStyle(main).paddingLeft);
            return {
                bar: box('.topbar .bar'),
                main: box('main'),
                brand: Math.round(document.querySelector('.brand').getBoundingClientRect().left),
                heading: Math.round(document.querySelector('h1').getBoundingClientRect().left),
                content: Math.round(main.getBoundingClientRect().left + padding),
            };
        }"""
    )


async def open_page(page: Page, path: str) -> None:
    await page.goto(path)
    await expect(page.locator(".topbar .bar")).to_be_visible()
    await expect(page.locator("h1")).to_be_visible()


async def test_every_page_shares_one_layout_and_width(tab: Tab, user: str) -> None:
    page = tab.page
    await page.set_viewport_size({"width": 1800, "height": 900})  # wider than the page
    await open_page(page, "/")
    layouts = {"/": await layout_of(page)}
    await sign_in(page, user)
    for path in SIGNED_IN_PAGES:
        await open_page(page, path)
        layouts[path] = await layout_of(page)
    first = layouts["/"]
    assert first["main"][1] < 1800  # a width of its own, centred
    for path, layout in layouts.items():
        assert layout == first, (path, layout, first)
        # The service's name, the heading and the cards start on one line.
        assert layout["brand"] == layout["heading"] == layout["content"], (path, layout)


async def test_an_unknown_address_shows_a_page_with_the_navigation(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page

    # Signed out: the page, in the layout, and the way to sign in.
    response = await page.goto("/no/such/page?x=1")
    assert response is not None and response.status == 404
    await expect(page).to_have_title("Page not found · filehost")
    await expect(page.get_by_role("heading", name="Page not found", level=1)).to_be_visible()
    await expect(page.locator("#not-found-path")).to_have_text("/no/such/page")
    await expect(page.get_by_role("navigation", name="Pages")).to_have_count(0)
    await page.get_by_role("link", name="Sign in").click()
    await page.wait_for_url(f"{dashboard.base}/")

    # Signed in: the navigation and the account, as on every page, and the pages to go to.
    await sign_in(page, user)
    response = await page.goto("/keys/missing")
    assert response is not None and response.status == 404
    nav = page.get_by_role("navigation", name="Pages")
    await expect(nav.get_by_role("link")).to_have_text(
        ["API keys", "Files", "Aliases", "Sessions", "Security", "Activity", "Settings"]
    )
    await expect(nav.locator("[aria-current]")).to_have_count(0)  # none of them is this one
    await expect(page.locator("#account-email")).to_have_text(user)
    await expect(page.locator("#not-found-links a")).to_have_text(
        ["API keys", "Files", "Aliases", "Sessions", "Security", "Activity", "Settings"]
    )
    await screenshot(page, "not-found")
    await nav.get_by_role("link", name="Sessions").click()
    await page.wait_for_url("**/sessions")
    assert await violations(page) == []

    # The API's unknown addresses stay its JSON error, even to a browser.
    response = await page.goto("/api/v1/no-such-thing")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("application/json")
    assert (await response.json())["error"]["code"] == "route_not_found"


async def colours_of(page: Page) -> tuple[str, str]:
    return await page.evaluate(
        "() => ['backgroundColor', 'color'].map((name) => getComputedStyle(document.body)[name])"
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_dashboard_follows_the_system_scheme_and_keeps_its_contrast(
    tab: Tab, user: str, scheme: str
) -> None:
    page = tab.page
    # No transitions: a button's colours are measured as they are, not half-way to a hover.
    await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
    await page.goto("/")
    background, text = await colours_of(page)
    # Dark on light, or light on dark, as the system asks.
    expected = ("rgb(243, 244, 246)", "rgb(17, 24, 39)")
    if scheme == "dark":
        expected = ("rgb(15, 23, 42)", "rgb(226, 232, 240)")
    assert (background, text) == expected
    assert await low_contrasts(page) == [], "/"

    await sign_in(page, user)
    await create_key(page, "contrast", ["files.read"])  # the secret panel, the list, a badge
    await page.get_by_role("button", name="Disable key contrast").click()
    await page.get_by_role("dialog").get_by_role("button", name="Disable key").click()
    await expect(page.locator("#keys-body tr.is-disabled")).to_have_count(1)
    assert await low_contrasts(page) == [], "/keys"
    await page.get_by_role("button", name="Edit key contrast").click()
    assert await low_contrasts(page) == [], "/keys, editing"
    await page.get_by_role("button", name="Revoke key contrast").click()
    assert await low_contrasts(page) == [], "/keys, a dialog"
    await screenshot(page, f"keys-dialog-{scheme}")
    await page.keyboard.press("Escape")
    for path in SIGNED_IN_PAGES:
        await open_page(page, path)
        await expect(page.locator("[id$='-loading']:visible")).to_have_count(0)
        assert await low_contrasts(page) == [], path
        await screenshot(page, f"{path.strip('/').replace('/', '-')}-{scheme}")
