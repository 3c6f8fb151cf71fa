"""The dashboard by keyboard alone, its labels and visible focus, and a phone-width screen."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Page, expect

from tests.support.api import PASSWORD
from tests.support.browser import (
    SECRET_PATTERN,
    Dashboard,
    Tab,
    assert_focus_is_visible,
    create_key,
    focused,
    key_row,
    no_horizontal_scroll,
    screenshot,
    sign_in,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

MAX_TABS = 40


async def tab_to(page: Page, target: str, *, backwards: bool = False) -> list[str]:
    """Press Tab (or Shift+Tab) until ``target`` has the focus; returns the stops on the way."""
    stops: list[str] = []
    for _ in range(MAX_TABS):
        await page.keyboard.press("Shift+Tab" if backwards else "Tab")
        stops.append(await focused(page))
        if stops[-1] == target:
            return stops
    raise AssertionError(f"Tab never reached {target}; it went through {stops}")


async def test_sign_in_create_and_revoke_a_key_with_the_keyboard_only(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await page.goto("/")
    # The email field has the focus on arrival; the order is email, password, button.
    await expect(page.get_by_label("Email")).to_be_focused()
    await page.keyboard.type(user)
    await page.keyboard.press("Tab")
    assert await focused(page) == "#login-password"
    await assert_focus_is_visible(page)
    await page.keyboard.type(PASSWORD)
    await page.keyboard.press("Tab")
    assert await focused(page) == "#login-submit"
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/keys")
    await expect(page.locator("#keys-empty")).to_be_visible()

    # The focus order follows the page: skip link, the pages, log out, then "Create key".
    stops = await tab_to(page, "#create-open")
    assert stops == [
        "a",
        "#nav-keys",
        "#nav-files",
        "#nav-aliases",
        "#nav-sessions",
        "#nav-security",
        "#nav-activity",
        "#nav-settings",
        "#logout",
        "#create-open",
    ], stops
    await assert_focus_is_visible(page)
    # It opens the dialog on the name; the form from the top, then Cancel and Create key.
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Create a key")
    await expect(dialog).to_be_visible()
    await expect(page.get_by_label("Name", exact=True)).to_be_focused()
    await page.keyboard.type("keyboard key")
    stops = await tab_to(page, "#perm-files-read")
    assert stops == ["#perm-files-read"]
    await assert_focus_is_visible(page)
    await page.keyboard.press("Space")
    stops = await tab_to(page, "summary")  # the permissions for features not yet available
    assert stops == [
        "#perm-files-write",
        "#perm-folders-read",
        "#perm-folders-write",
        "#perm-aliases-read",
        "#perm-aliases-write",
        "#perm-settings-read",
        "#perm-settings-write",
        "summary",
    ], stops
    await page.keyboard.press("Enter")  # open them
    await tab_to(page, "#perm-keys-read")
    await page.keyboard.press("Space")
    stops = await tab_to(page, "#key-expiry")
    assert stops[-2] == "#perm-keys-write", stops  # every checkbox in order, then expiry
    await assert_focus_is_visible(page)
    await page.keyboard.press("ArrowDown")  # 90 days -> 180 days, without opening the list
    await expect(page.get_by_label("Expires after")).to_have_value("180")
    # Then the folders it reaches (one stop: the chosen radio button), Cancel and Create key.
    assert await tab_to(page, "#create-submit") == [
        "#create-folders-all",
        "#create-cancel",
        "#create-submit",
    ]
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    await expect(dialog).to_be_hidden()

    # The secret panel takes the focus, and its buttons are the next stops.
    await expect(page.locator("#new-secret")).to_be_visible()
    await expect(page.locator("#new-secret-title")).to_be_focused()
    secret = await page.locator("#new-secret-value").input_value()
    assert SECRET_PATTERN.match(secret)
    assert await tab_to(page, "#dismiss-secret") == [
        "#new-secret-value",
        "#copy-secret",
        "#copy-usage",
        "#dismiss-secret",
    ]
    await page.keyboard.press("Enter")
    await expect(page.locator("#new-secret")).to_be_hidden()
    await expect(page.get_by_role("button", name="Create key")).to_be_focused()
    row = key_row(page, "keyboard key")
    await expect(row.locator("td.key-permissions li")).to_have_text(["files.read", "keys.read"])
    status, _ = await dashboard.api("GET", "/files", key=secret)
    assert status == 200

    # Escape leaves the dialog with nothing created, the focus back on "Create key".
    await page.keyboard.press("Enter")
    await expect(dialog).to_be_visible()
    await page.keyboard.type("never made")
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await expect(page.get_by_role("button", name="Create key")).to_be_focused()
    await expect(page.locator("#keys-body tr")).to_have_count(1)

    # Back up to the key's Revoke button; the dialog opens on Cancel, and Escape closes it.
    key_id = await row.get_attribute("data-key-id")
    await tab_to(page, f"revoke:{key_id}", backwards=True)
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    await expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    assert await focused(page) == f"revoke:{key_id}"  # focus returns to the button
    await expect(row).to_have_count(1)

    # Open it again with Space, move to "Revoke key" and confirm with Enter.
    await page.keyboard.press("Space")
    await expect(dialog).to_be_visible()
    await page.keyboard.press("Tab")
    assert await focused(page) == "#revoke-confirm"
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    await expect(dialog).to_be_hidden()
    await expect(row).to_have_count(0)
    await expect(page.locator("#keys-title")).to_be_focused()
    status, body = await dashboard.api("GET", "/files", key=secret)
    assert status == 401 and body["error"]["code"] == "api_key_revoked"


async def test_every_control_has_a_label_and_every_button_a_name(tab: Tab, user: str) -> None:
    page = tab.page
    unlabeled = """() => Array.from(document.querySelectorAll('input, select, textarea'))
        .filter((el) => el.labels.length === 0 || !el.labels[0].textContent.trim())
        .map((el) => el.id || el.name)"""
    nameless = """() => Array.from(document.querySelectorAll('button, a[href]'))
        .filter((el) => !el.textContent.trim() && !el.getAttribute('aria-label'))
        .map((el) => el.outerHTML)"""
    await page.goto("/")
    assert await page.evaluate(unlabeled) == []
    assert await page.evaluate(nameless) == []
    assert await page.evaluate("() => document.documentElement.lang") == "en"
    await sign_in(page, user)
    await create_key(page, "labelled", ["files.read"])
    assert await page.evaluate(unlabeled) == []
    assert await page.evaluate(nameless) == []
    await page.get_by_role("button", name="Create key").click()  # the dialog's controls too
    assert await page.evaluate(nameless) == []
    # Each Revoke button names its key, so a screen reader's list of buttons is unambiguous.
    await expect(page.get_by_role("button", name="Revoke key labelled")).to_have_count(1)
    # The folder choice of the key form, listed.
    dialog = page.get_by_role("dialog", name="Create a key")
    await dialog.get_by_label("Only the folders chosen").check()
    assert await page.evaluate(unlabeled) == []
    await dialog.get_by_role("button", name="Cancel").click()

    # The settings page, and the files page with a folder and its dialogs.
    await page.goto("/settings")
    await expect(page.locator("#settings-form")).to_be_visible()
    assert await page.evaluate(unlabeled) == []
    assert await page.evaluate(nameless) == []
    await page.goto("/files")
    await page.get_by_role("button", name="New folder").click()
    await page.get_by_role("dialog").get_by_label("Name").fill("labelled folder")
    await page.get_by_role("dialog").get_by_role("button", name="Create folder").click()
    await expect(page.get_by_role("button", name="Delete folder labelled folder")).to_have_count(1)
    assert await page.evaluate(unlabeled) == []
    assert await page.evaluate(nameless) == []
    # The aliases page with an alias and its create dialog.
    await page.goto("/aliases")
    await page.get_by_role("button", name="Create alias").click()
    dialog = page.get_by_role("dialog", name="Create an alias")
    await dialog.get_by_label("A folder").check()
    await dialog.get_by_role("button", name="Create alias").click()
    await expect(page.locator("#aliases-body tr")).to_have_count(1)
    assert await page.evaluate(unlabeled) == []
    assert await page.evaluate(nameless) == []
    # The security page (its factors set up: tests/browser/test_security_page.py).
    await page.goto("/security")
    await expect(page.locator("#mfa-loading")).to_be_hidden()
    assert await page.evaluate(unlabeled) == []
    assert await page.evaluate(nameless) == []


async def test_a_phone_width_screen_never_scrolls_sideways(tab: Tab, user: str) -> None:
    page = tab.page
    await page.set_viewport_size({"width": 375, "height": 740})
    await page.goto("/")
    assert await page.evaluate("() => window.innerWidth") == 375
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-login")

    await sign_in(page, user)
    # A long name with a 40-character word in it must wrap, not widen the page.
    long_name = "nightly backup of the shared team folder to cold storage " + "x" * 40
    await create_key(
        page, long_name, ["files.read", "files.write", "folders.read", "settings.read"]
    )
    await create_key(page, "phone", ["aliases.read"], 7)
    await expect(page.locator("#keys-body tr")).to_have_count(2)
    await no_horizontal_scroll(page)  # the secret panel and the list, as cards
    await screenshot(page, "phone-keys-new-secret")

    # Each key is a card: the column names are shown beside the values.
    label = await page.evaluate(
        """() => getComputedStyle(
            document.querySelector('#keys-body td.key-prefix'), '::before').content"""
    )
    assert label == '"Prefix"'
    await page.get_by_role("button", name="Revoke key phone").click()
    await expect(page.get_by_role("dialog")).to_be_visible()
    box = await page.get_by_role("dialog").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-revoke-dialog", full_page=False)
    await page.keyboard.press("Escape")
    await page.get_by_role("button", name=re.compile("^I've saved it")).click()
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-keys")
    await page.goto("/security")
    await expect(page.locator("#mfa-loading")).to_be_hidden()
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-security")
