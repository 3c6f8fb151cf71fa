"""Signing in leads back to the dashboard address that was asked for: a copied link opened in a
new tab (whose sessionStorage holds no session) shows its folder, order and preview once signed
in, and nothing but one of the dashboard's own pages on this origin is ever gone to."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Page, expect

from tests.support.api import PASSWORD
from tests.support.browser import Dashboard, Tab, sign_in

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def sign_in_here(page: Page, email: str) -> None:
    """The login form the page was sent to, filled in and sent."""
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()


async def test_a_copied_link_leads_back_to_its_folder_order_and_preview_after_sign_in(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    status, body = await dashboard.api("POST", "/folders", token=token, json={"name": "Projects"})
    assert status == 201, body
    folder = body["data"]["id"]
    file = (await dashboard.upload(token, "notes.txt", folder_id=folder))["id"]

    # A new tab: the link sends it to sign in, and signing in brings it back.
    link = f"/files?folder={folder}&sort=name&preview={file}"
    fresh = await tab.context.new_page()
    await fresh.goto(link)
    await fresh.wait_for_url(f"{dashboard.base}/")
    await expect(fresh.locator("#notice")).to_have_text("Sign in to manage your files.")
    await sign_in_here(fresh, user)
    await fresh.wait_for_url(f"{dashboard.base}{link}")
    await expect(fresh.locator("#files-title")).to_have_text("Projects")
    await expect(fresh.locator("#files-sort")).to_have_value("name")
    await expect(fresh.locator("#preview-title")).to_have_text("notes.txt")

    # Used once: signing in again in that tab goes to the keys page.
    await fresh.keyboard.press("Escape")
    await expect(fresh.locator("#preview-dialog")).to_be_hidden()
    await fresh.get_by_role("button", name="Log out").click()
    await fresh.wait_for_url(f"{dashboard.base}/")
    await sign_in_here(fresh, user)
    await fresh.wait_for_url("**/keys")


@pytest.mark.parametrize(
    "remembered",
    [
        "//elsewhere.example/keys",
        "/\\elsewhere.example/keys",
        "https://elsewhere.example/files",
        "javascript:alert(1)",
        "/no/such/page",
        "/static/js/api.js",
    ],
)
async def test_signing_in_never_leads_off_the_dashboards_own_pages(
    tab: Tab, user: str, dashboard: Dashboard, remembered: str
) -> None:
    page = tab.page
    await page.goto("/")
    await page.evaluate(
        "(address) => sessionStorage.setItem('filehost.return', address)", remembered
    )
    await sign_in_here(page, user)
    await page.wait_for_url(re.compile(re.escape(dashboard.base) + r"/keys$"))
