"""The settings page as a person uses it, in headless Chromium: each setting shown with what it
changes, a value out of bounds refused by the field before anything is sent, a change saved and
read back from the API (and after a reload), and the service's own refusal (a default folder
deleted meanwhile) shown by its field; below them, what the account holds against the limits,
as the API counts it, or why it could not be read. No CSP violation and nothing on the console
throughout."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.support.browser import (
    Dashboard,
    Tab,
    no_horizontal_scroll,
    screenshot,
    sign_in,
    until,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def open_settings_page(page: Page) -> None:
    """From a signed-in page, through the navigation."""
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Settings").click()
    await page.wait_for_url("**/settings")
    await expect(page.locator("#settings-loading")).to_be_hidden()
    await expect(page.locator("#settings-form")).to_be_visible()
    current = page.get_by_role("link", name="Settings", exact=True)
    await expect(current).to_have_attribute("aria-current", "page")


async def make_folder(
    dashboard: Dashboard, token: str, name: str, parent: str | None = None
) -> str:
    body = {"name": name} if parent is None else {"name": name, "parent_id": parent}
    status, answer = await dashboard.api("POST", "/folders", token=token, json=body)
    assert status == 201, answer
    folder_id: str = answer["data"]["id"]
    return folder_id


async def settings_of(dashboard: Dashboard, token: str) -> dict[str, object]:
    status, body = await dashboard.api("GET", "/settings", token=token)
    assert status == 200, body
    data: dict[str, object] = body["data"]
    return data


async def test_change_the_settings_checked_first_then_saved_and_shown_again(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    projects = await make_folder(dashboard, token, "Projects")
    await make_folder(dashboard, token, "2025", projects)
    await open_settings_page(page)

    # Every setting as it is, with what it means.
    await expect(page.get_by_label("Default key lifetime, in days")).to_have_value("")
    await expect(page.locator("#setting-key-expiry-hint")).to_contain_text("90 days")
    folder = page.get_by_label("Default folder for uploads")
    await expect(folder).to_have_value("")
    await expect(folder.locator("option")).to_have_text(
        ["The top level (no folder)", "Projects", "Projects / 2025"]
    )
    await expect(page.get_by_label("Serve my aliases to the public")).to_be_checked()
    await expect(page.locator("#setting-public-hint")).to_contain_text("kill switch")

    # Out of bounds: said by the field, focused, and nothing sent.
    patches: list[str] = []
    page.on(
        "request",
        lambda request: patches.append(request.url) if request.method == "PATCH" else None,
    )
    await page.get_by_label("Default key lifetime, in days").fill("0")
    await page.get_by_label("Amount").fill("3651")  # days: the service's bound is ten years
    await page.get_by_label("Default alias view limit").fill("many")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.locator("#settings-error")).to_have_text(
        "Nothing was saved: 3 settings need correcting."
    )
    await expect(page.locator("#setting-key-expiry-problem")).to_contain_text("from 1 to 3650")
    await expect(page.locator("#setting-alias-expiry-problem")).to_have_text(
        "A whole number, from 1 minute to 3650 days in all, or empty."
    )
    await expect(page.locator("#setting-alias-expiry-hint")).to_contain_text(
        "from 1 minute to ten years"
    )
    await expect(page.locator("#setting-alias-views-problem")).to_contain_text("at least 1")
    await expect(page.get_by_label("Default key lifetime, in days")).to_be_focused()
    await expect(page.get_by_label("Default key lifetime, in days")).to_have_attribute(
        "aria-invalid", "true"
    )
    assert patches == []
    assert (await settings_of(dashboard, token))["default_key_expires_days"] is None

    # Corrected, and every setting changed at once.
    await page.get_by_label("Default key lifetime, in days").fill("30")
    await folder.select_option(label="Projects / 2025")
    await page.get_by_label("Amount").fill("2")
    await page.get_by_label("Unit").select_option(label="hours")
    await page.get_by_label("Default alias view limit").fill("5")
    await page.get_by_label("Serve my aliases to the public").uncheck()
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.locator("#settings-status")).to_contain_text("Saved the default key lifetime")
    await expect(page.locator("#settings-error")).to_be_hidden()
    await expect(page.locator("#setting-key-expiry-problem")).to_be_hidden()
    saved = await settings_of(dashboard, token)
    folder_id = await folder.input_value()
    assert saved == {
        "default_key_expires_days": 30,
        "default_folder_id": folder_id,
        "default_alias_expires_in_seconds": 7200,
        "default_alias_max_views": 5,
        "public_aliases_enabled": False,
    }
    # Saving again sends nothing: the form is as saved.
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.locator("#settings-status")).to_have_text(
        "Nothing to save: the settings are as saved."
    )

    # A reload shows them as saved; emptying a field sets it back to its default.
    await page.reload()
    await expect(page.locator("#settings-form")).to_be_visible()
    await expect(page.get_by_label("Default key lifetime, in days")).to_have_value("30")
    await expect(folder).to_have_value(folder_id)
    await expect(page.get_by_label("Amount")).to_have_value("2")
    await expect(page.get_by_label("Unit")).to_have_value("3600")
    await expect(page.get_by_label("Serve my aliases to the public")).not_to_be_checked()
    await page.get_by_label("Default key lifetime, in days").fill("")
    await page.get_by_label("Serve my aliases to the public").check()
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.locator("#settings-status")).to_have_text(
        "Saved the default key lifetime, public aliases."
    )
    saved = await settings_of(dashboard, token)
    assert saved["default_key_expires_days"] is None
    assert saved["public_aliases_enabled"] is True
    assert saved["default_alias_max_views"] == 5

    await no_horizontal_scroll(page)
    await screenshot(page, "settings")
    assert await violations(page) == []
    assert [line for line in tab.console if not line.startswith("debug")] == []


async def test_the_services_refusal_is_shown_by_its_setting(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    doomed = await make_folder(dashboard, token, "Doomed")
    await open_settings_page(page)
    # Deleted elsewhere after the page listed it: the service refuses it, naming the setting.
    status, body = await dashboard.api("DELETE", f"/folders/{doomed}", token=token)
    assert status == 200, body
    await page.get_by_label("Default folder for uploads").select_option(label="Doomed")
    await page.get_by_role("button", name="Save settings").click()
    error = page.locator("#settings-error")
    await expect(error).to_contain_text("Nothing was saved:")
    problem = page.locator("#setting-folder-problem")
    await expect(problem).to_contain_text("one of the account's folders")
    await expect(page.get_by_label("Default folder for uploads")).to_be_focused()
    assert (await settings_of(dashboard, token))["default_folder_id"] is None


async def test_leaving_with_changes_not_saved_asks_first(tab: Tab, user: str) -> None:
    page = tab.page
    await sign_in(page, user)
    await open_settings_page(page)
    asked: list[str] = []

    async def stay(dialog: Any) -> None:
        asked.append(dialog.type)
        await dialog.dismiss()  # "stay on the page"

    page.on("dialog", stay)
    nav = page.get_by_role("navigation", name="Pages")
    await page.get_by_label("Default alias view limit").fill("7")
    await nav.get_by_role("link", name="Files").click()
    await until(lambda: asked == ["beforeunload"], "leaving was not asked about")
    assert page.url.endswith("/settings")
    await expect(page.get_by_label("Default alias view limit")).to_have_value("7")  # kept
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.locator("#settings-status")).to_contain_text("Saved")
    # Saved: the page is left without a question.
    await nav.get_by_role("link", name="Files").click()
    await expect(page).to_have_url(re.compile(r"/files$"))
    assert asked == ["beforeunload"]


def usage_row(page: Page, what: str) -> Any:
    return page.locator(f"#usage-body tr[data-usage='{what}']")


async def test_what_the_account_holds_is_shown_against_the_limits(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    await dashboard.upload(token, "cat.png", b"P" * 5000, "image/png")
    await dashboard.upload(token, "notes.txt", b"T" * 50)
    await make_folder(dashboard, token, "Work")
    status, body = await dashboard.api(
        "POST", "/keys", token=token, json={"name": "reader", "permissions": ["files.read"]}
    )
    assert status == 201, body

    await open_settings_page(page)

    await expect(page.locator("#usage-loading")).to_be_hidden()
    status, body = await dashboard.api("GET", "/usage", token=token)
    limits = body["data"]
    files = usage_row(page, "Files")
    await expect(files.locator(".usage-count")).to_have_text(f"2 of {limits['files']['max']:,}")
    await expect(files.locator(".usage-note")).to_have_text(
        "4.9 KiB in all, up to 100 MiB a file; images 1 (4.9 KiB), text 1 (50 bytes)."
    )
    await expect(files.locator("meter")).to_have_attribute("value", "2")
    await expect(files.get_by_role("meter", name="Files")).to_have_count(1)
    await expect(usage_row(page, "Folders").locator(".usage-count")).to_have_text(
        f"1 of {limits['folders']['max']:,}"
    )
    await expect(usage_row(page, "Public links").locator(".usage-count")).to_have_text(
        f"0 of {limits['aliases']['max']:,}"
    )
    await expect(usage_row(page, "API keys").locator(".usage-count")).to_have_text(
        f"1 of {limits['keys']['max']:,}"
    )
    await page.set_viewport_size({"width": 375, "height": 740})
    await no_horizontal_scroll(page)
    await page.set_viewport_size({"width": 1280, "height": 800})

    # Not read: said, and the settings above still work.
    async def unavailable(route: Any) -> None:
        await route.fulfill(
            status=503,
            content_type="application/json",
            headers={"Retry-After": "2"},
            body='{"success":false,"error":{"code":"store_unavailable",'
            '"message":"The service is temporarily unavailable. Retry shortly."}}',
        )

    await page.route("**/api/v1/usage", unavailable)
    await page.reload()
    await expect(page.locator("#usage-error")).to_contain_text(
        "Loading what your account holds failed"
    )
    await expect(page.locator("#usage-table")).to_be_hidden()
    await expect(page.locator("#settings-form")).to_be_visible()
    await page.unroute("**/api/v1/usage", unavailable)
    assert await violations(page) == []
