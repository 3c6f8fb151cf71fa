"""What every page of the dashboard shares, as a person sees it: an unknown address answered
with a page in the dashboard's layout (the navigation when signed in), while the API's unknown
addresses stay JSON."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.support.browser import (
    RECORD_VIOLATIONS,
    Dashboard,
    Tab,
    screenshot,
    sign_in,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_an_unknown_address_shows_a_page_with_the_navigation(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await tab.context.add_init_script(RECORD_VIOLATIONS)

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
        ["API keys", "Files", "Sessions", "Activity"]
    )
    await expect(nav.locator("[aria-current]")).to_have_count(0)  # none of them is this one
    await expect(page.locator("#account-email")).to_have_text(user)
    await expect(page.locator("#not-found-links a")).to_have_text(
        ["API keys", "Files", "Sessions", "Activity"]
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
