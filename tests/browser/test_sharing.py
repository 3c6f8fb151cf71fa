"""Sharing a file once and editing its link, in headless Chromium at 375 px in either scheme:
"Share" on the files page offers a link, makes one, copies it, and the second Share shows that
same link (one alias); the aliases page's "Edit" changes each field (address, expiry, view
limit, password set and removed, enabled) with the create dialog's checks, and a link plain
again is what Share finds. A folder's row shares the folder the same way. Each step is checked
through the API and the public link; AA contrast and no sideways scroll in the dialogs."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Page, expect

from tests.support.browser import (
    Dashboard,
    Tab,
    folder_row,
    low_contrasts,
    no_horizontal_scroll,
    same_time_as,
    screenshot,
    sign_in,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def aliases_of(dashboard: Dashboard, token: str) -> list[dict[str, Any]]:
    status, body = await dashboard.api("GET", "/aliases", token=token)
    assert status == 200, body
    return body["data"]["aliases"]  # type: ignore[no-any-return]


async def public(dashboard: Dashboard, slug: str, password: str | None = None) -> int:
    headers = {"X-Alias-Password": password} if password else {}
    async with dashboard.http.get(f"{dashboard.base}/a/{slug}", headers=headers) as response:
        await response.read()
        return response.status


async def share(page: Page, name: str) -> Any:
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Files").click()
    await expect(page.locator("#files-loading")).to_be_hidden()
    row = page.locator("#files-body tr").filter(has_text=name)
    await row.get_by_role("button", name=f"Share {name}").click()
    dialog = page.get_by_role("dialog", name=f"Share {name}")
    await expect(dialog).to_be_visible()
    return dialog


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_share_once_then_edit_every_field_of_the_link(
    tab: Tab, user: str, dashboard: Dashboard, scheme: str
) -> None:
    page = tab.page
    await tab.allow_clipboard(dashboard.base)
    await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
    await page.set_viewport_size({"width": 375, "height": 740})
    await same_time_as(page, dashboard.clock)
    await sign_in(page, user)
    token = await tab.stored_token()
    form = aiohttp.FormData()
    form.add_field("file", b"shared bytes", filename="notes.txt", content_type="text/plain")
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/files", data=form, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 201

    # The first Share offers a link; made, it is copied and works without a credential.
    dialog = await share(page, "notes.txt")
    await expect(dialog.locator("#share-said")).to_contain_text("notes.txt has no public link")
    assert await aliases_of(dashboard, token) == []
    await dialog.get_by_role("button", name="Make a link").click()
    await expect(dialog.locator("#share-said")).to_contain_text("Made a public link to notes.txt")
    (made,) = await aliases_of(dashboard, token)
    assert made["max_views"] is None and not made["password_protected"]
    await expect(dialog.locator("#share-link")).to_have_text(made["url"])
    await dialog.get_by_role("button", name="Copy link").click()
    await expect(dialog.locator("#share-copy-status")).to_have_text(
        f"Copied {made['url']} to the clipboard."
    )
    assert await page.evaluate("() => navigator.clipboard.readText()") == made["url"]
    assert await public(dashboard, made["slug"]) == 200
    assert await low_contrasts(page) == [], "the share dialog"
    await no_horizontal_scroll(page)
    await screenshot(page, f"share-{scheme}")
    await dialog.get_by_role("button", name="Close").click()

    # The second Share shows the same link: still one alias.
    dialog = await share(page, "notes.txt")
    await expect(dialog.locator("#share-said")).to_contain_text("has a public link already")
    await expect(dialog.locator("#share-link")).to_have_text(made["url"])
    await expect(dialog.get_by_role("button", name="Make a link")).to_be_hidden()
    assert len(await aliases_of(dashboard, token)) == 1
    await page.keyboard.press("Escape")

    # Edited on the aliases page: the create dialog's checks first, nothing sent.
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Aliases").click()
    await expect(page.locator("#aliases-loading")).to_be_hidden()
    await page.get_by_role("button", name=f"Edit alias {made['slug']}").click()
    edit = page.get_by_role("dialog", name=f"Edit the alias {made['slug']}")
    await expect(edit.get_by_label("Address")).to_have_value(made["slug"])
    await expect(edit.get_by_label("Expires")).to_have_value("keep")
    await edit.get_by_label("Address").fill("a!")
    await edit.get_by_label("View limit").fill("0")
    await edit.get_by_label("Set one").check()
    await edit.get_by_label("New password").fill("abc")
    await edit.get_by_role("button", name="Save changes").click()
    await expect(edit.locator("#alias-edit-error")).to_have_text(
        "Nothing was changed: 3 fields need correcting."
    )
    await expect(edit.locator("#alias-edit-slug-problem")).to_have_text(
        "3 to 64 letters, digits, - or _."
    )
    await expect(edit.locator("#alias-edit-views-problem")).to_have_text(
        "A whole number of at least 1, or empty."
    )
    await expect(edit.locator("#alias-edit-password-problem")).to_have_text(
        "From 4 to 1024 characters, or empty for none."
    )
    await expect(edit.get_by_label("Address")).to_be_focused()
    assert await low_contrasts(page) == [], "the edit dialog with its problems"
    await no_horizontal_scroll(page)
    assert await aliases_of(dashboard, token) == [{**made, "views": 1}]

    # Every field changed at once: one PATCH.
    await edit.get_by_label("Address").fill(f"renamed-{scheme}")
    await edit.get_by_label("Expires").select_option(label="7 days from now")
    await edit.get_by_label("View limit").fill("5")
    await edit.get_by_label("New password").fill("hunter22")
    await edit.get_by_label("Enabled: the link works").uncheck()
    await edit.get_by_role("button", name="Save changes").click()
    await expect(edit).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text(
        re.compile(rf"^Saved the alias http://127\.0\.0\.1:\d+/a/renamed-{scheme}\.$")
    )
    (changed,) = await aliases_of(dashboard, token)
    assert changed["id"] == made["id"] and changed["slug"] == f"renamed-{scheme}"
    assert changed["max_views"] == 5 and changed["password_protected"] is True
    assert changed["enabled"] is False and changed["expires_at"] is not None
    row = page.locator("#aliases-body tr", has_text=f"renamed-{scheme}")
    await expect(row.locator("td.alias-status")).to_have_text("Disabled")
    await expect(row.locator("td.alias-views")).to_have_text("1 of 5")
    await expect(row.locator("td.alias-password")).to_have_text("Set")
    await expect(row.locator("td.alias-expires .ago")).to_have_text("in 7 days")
    assert await public(dashboard, made["slug"]) == 404
    assert await public(dashboard, f"renamed-{scheme}", "hunter22") == 404  # disabled

    # Changed back to a plain link: the password removed, no limit, no expiry, enabled.
    await row.get_by_role("button", name=f"Edit alias renamed-{scheme}").click()
    edit = page.get_by_role("dialog", name=f"Edit the alias renamed-{scheme}")
    await expect(edit.get_by_label("View limit")).to_have_value("5")
    await expect(edit.get_by_label("Keep the password")).to_be_checked()
    await edit.get_by_label("Remove it: anyone with the link may open it").check()
    await expect(edit.get_by_label("New password")).to_be_disabled()
    await edit.get_by_label("Expires").select_option(label="Never")
    await edit.get_by_label("View limit").fill("")
    await edit.get_by_label("Enabled: the link works").check()
    await edit.get_by_role("button", name="Save changes").click()
    await expect(edit).to_be_hidden()
    (plain,) = await aliases_of(dashboard, token)
    assert plain["password_protected"] is False and plain["max_views"] is None
    assert plain["expires_at"] is None and plain["enabled"] is True
    assert await public(dashboard, f"renamed-{scheme}") == 200
    await expect(row.locator("td.alias-status")).to_have_text("Enabled")
    await no_horizontal_scroll(page)
    assert await low_contrasts(page) == [], "/aliases"

    # That link is what Share finds now.
    dialog = await share(page, "notes.txt")
    await expect(dialog.locator("#share-link")).to_have_text(plain["url"])
    assert len(await aliases_of(dashboard, token)) == 1
    assert await violations(page) == []
    assert [line for line in tab.console if not line.startswith("debug")] == []


async def test_a_folder_is_shared_from_its_row_as_a_file_is(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    status, body = await dashboard.api("POST", "/folders", token=token, json={"name": "Trip"})
    assert status == 201, body
    folder_id = body["data"]["id"]
    await dashboard.upload(token, "beach.txt", b"sand", "text/plain", folder_id=folder_id)
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Files").click()
    await expect(page.locator("#files-loading")).to_be_hidden()

    row = folder_row(page, "Trip")
    await row.get_by_role("button", name="Share folder Trip").click()
    dialog = page.get_by_role("dialog", name="Share Trip")
    await expect(dialog.locator("#share-said")).to_contain_text("Trip has no public link")
    await dialog.get_by_role("button", name="Make a link").click()
    await expect(dialog.locator("#share-said")).to_have_text(
        "Made a public link to Trip: anyone with it can open the folder and everything in it."
    )
    [made] = await aliases_of(dashboard, token)
    assert made["target"] == {"type": "folder", "id": folder_id}
    await expect(dialog.locator("#share-link")).to_have_text(made["url"])
    async with dashboard.http.get(
        f"{dashboard.base}/a/{made['slug']}", headers={"Accept": "application/json"}
    ) as response:
        assert response.status == 200
        listed = (await response.json())["data"]
    assert [file["name"] for file in listed["files"]] == ["beach.txt"]
    await dialog.get_by_role("button", name="Close").click()

    # Shared again, it is that link: still one alias.
    await row.get_by_role("button", name="Share folder Trip").click()
    await expect(dialog.locator("#share-said")).to_contain_text("has a public link already")
    await expect(dialog.locator("#share-link")).to_have_text(made["url"])
    assert len(await aliases_of(dashboard, token)) == 1
    assert await violations(page) == []
