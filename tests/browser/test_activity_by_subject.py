"""One key's or one session's activity, as a person finds it in headless Chromium: the keys
page's "Activity" link of a key lists what was done to that key and what it did, and nothing of
another key; the list says what it is showing, by the key's name once an event names it; the type
filter keeps to that key; a session named in a row leads to that session's activity, and "Show all
activity" back to everything. The sessions page's link does the same for a session. An address
whose id is no key's shows everything. No CSP violation, a clean console."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from playwright.async_api import Page, expect

from tests.support.api import PASSWORD
from tests.support.browser import (
    Dashboard,
    Tab,
    clean_console,
    key_row,
    own_session_id,
    sign_in,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def key_made(dashboard: Dashboard, token: str, name: str) -> dict[str, Any]:
    status, body = await dashboard.api(
        "POST",
        "/keys",
        token=token,
        json={"name": name, "permissions": ["files.read", "files.write"], "expires_days": 30},
    )
    assert status == 201, body
    return dict(body["data"])


async def upload_with_key(dashboard: Dashboard, secret: str, name: str) -> None:
    form = aiohttp.FormData()
    form.add_field("file", b"made by a script", filename=name, content_type="text/plain")
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/files", data=form, headers={"X-API-Key": secret}
    ) as response:
        assert response.status == 201, await response.text()


def rows_of(page: Page) -> Any:
    return page.locator("#activity-body tr")


async def loaded(page: Page) -> None:
    await page.wait_for_url("**/activity?**")
    await expect(page.locator("#activity-loading")).to_be_hidden()


async def test_a_key_s_activity_from_its_row_and_a_session_s_from_an_event(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    deploy = await key_made(dashboard, token, "deploy bot")
    other = await key_made(dashboard, token, "other script")
    await upload_with_key(dashboard, deploy["secret_key"], "build.log")
    await upload_with_key(dashboard, other["secret_key"], "other.log")
    status, body = await dashboard.api(
        "PATCH", f"/keys/{deploy['id']}", token=token, json={"enabled": False}
    )
    assert status == 200, body
    await page.reload()
    await expect(page.locator("#keys-loading")).to_be_hidden()

    await key_row(page, "deploy bot").get_by_role("link", name="Activity of key deploy bot").click()
    await loaded(page)

    assert parse_qs(urlsplit(page.url).query) == {"key_id": [deploy["id"]]}
    await expect(rows_of(page)).to_have_count(3)
    await expect(rows_of(page).locator(".event-label")).to_have_text(
        ["Key disabled", "File uploaded", "Key created"]
    )
    await expect(page.locator("#activity-body")).not_to_contain_text("other")
    scope = page.locator("#activity-scope")
    await expect(scope).to_have_text(
        re.compile(r"^Showing only: Key “deploy bot” fhk_\w+\.\.\. · Show all activity$")
    )
    # The key is not a link to the list already shown; the session that made it is one.
    uploaded = rows_of(page).nth(1)
    await expect(uploaded.locator(".event-actor a")).to_have_count(0)
    await expect(uploaded.locator(".event-actor")).to_contain_text("Key “deploy bot”")

    # The type filter keeps to the key, and says so when nothing is left.
    select = page.get_by_label("Event type")
    await select.select_option("file.uploaded")
    await expect(rows_of(page)).to_have_count(1)
    assert parse_qs(urlsplit(page.url).query) == {
        "key_id": [deploy["id"]],
        "type": ["file.uploaded"],
    }
    await select.select_option("file.deleted")
    await expect(page.locator("#activity-empty")).to_have_text(
        "No “File deleted” activity of this key yet."
    )
    await select.select_option(label="All activity")
    await expect(rows_of(page)).to_have_count(3)

    # The session that created the key, named in that row, leads to its own activity.
    session_id = await own_session_id(dashboard, token)
    created = rows_of(page).nth(2)
    await created.locator(".event-actor a").click()
    await page.wait_for_url(f"**/activity?session_id={session_id}")
    await expect(page.locator("#activity-loading")).to_be_hidden()
    await expect(rows_of(page).locator(".event-label")).to_have_text(
        ["Key disabled", "Key created", "Key created", "Signed in"]
    )
    await expect(scope).to_contain_text("Showing only: Session from")

    await scope.get_by_role("link", name="Show all activity").click()
    await page.wait_for_url("**/activity")
    await expect(page.locator("#activity-loading")).to_be_hidden()
    await expect(scope).to_be_hidden()
    await expect(rows_of(page)).to_have_count(6)  # with the other key's upload
    assert await violations(page) == []
    assert clean_console(tab) == []


async def test_a_session_s_activity_from_the_sessions_page(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    status, body = await dashboard.api(
        "POST", "/auth/login", json={"email": user, "password": PASSWORD}
    )
    assert status == 200, body
    elsewhere = body["data"]["token"]
    await key_made(dashboard, elsewhere, "made elsewhere")
    elsewhere_id = await own_session_id(dashboard, elsewhere)
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Sessions").click()
    await page.wait_for_url("**/sessions")
    row = page.locator(f"tr[data-session-id='{elsewhere_id}']")

    await row.get_by_role("link", name=re.compile("^Activity of the session on ")).click()
    await loaded(page)

    assert parse_qs(urlsplit(page.url).query) == {"session_id": [elsewhere_id]}
    await expect(rows_of(page).locator(".event-label")).to_have_text(["Key created", "Signed in"])
    await expect(page.locator("#activity-scope")).to_contain_text("Showing only: Session from")
    assert clean_console(tab) == []


async def test_an_address_whose_id_is_no_key_s_shows_everything(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    await page.goto('/activity?key_id=key_"nonsense')
    await expect(page.locator("#activity-loading")).to_be_hidden()

    await expect(page.locator("#activity-scope")).to_be_hidden()
    await expect(rows_of(page).locator(".event-label")).to_have_text(["Signed in"])
    assert clean_console(tab) == []
