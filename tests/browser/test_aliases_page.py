"""The aliases page and the uploader downloads as a person uses them, in headless Chromium: an
alias of a file made with an address, expiry, view limit and password (checked first, the
service's refusal by its field), its link copied and opened on the public side, its views, then
disabled, enabled and deleted behind a confirmation; an alias of a folder taking the account's
defaults; and "Set up ShareX" and "curl script" on the keys page, each downloading a file that
holds a key shown once, which may only upload, into the folder chosen. Each step is checked
through the API or the public link."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Page, expect

from tests.support.browser import (
    SECRET_PATTERN,
    Dashboard,
    Tab,
    key_row,
    no_horizontal_scroll,
    same_time_as,
    screenshot,
    sign_in,
    violations,
)
from tests.support.clock import parse_iso

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def upload(
    dashboard: Dashboard, token: str, name: str, data: bytes, *, key: str | None = None
) -> dict[str, Any]:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name, content_type="text/plain")
    headers = {"X-API-Key": key} if key else {"Authorization": f"Bearer {token}"}
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/files", data=form, headers=headers
    ) as response:
        body = await response.json()
        assert response.status == 201, body
        return body["data"]  # type: ignore[no-any-return]


async def make_folder(dashboard: Dashboard, token: str, name: str) -> str:
    status, body = await dashboard.api("POST", "/folders", token=token, json={"name": name})
    assert status == 201, body
    return body["data"]["id"]  # type: ignore[no-any-return]


async def public(dashboard: Dashboard, slug: str, password: str | None = None) -> int:
    headers = {"X-Alias-Password": password} if password else {}
    async with dashboard.http.get(f"{dashboard.base}/a/{slug}", headers=headers) as response:
        await response.read()
        return response.status


async def aliases_of(dashboard: Dashboard, token: str) -> list[dict[str, Any]]:
    status, body = await dashboard.api("GET", "/aliases", token=token)
    assert status == 200, body
    return body["data"]["aliases"]  # type: ignore[no-any-return]


def alias_row(page: Page, slug: str) -> Any:
    return page.locator("#aliases-body tr").filter(
        has=page.locator("td.alias-url a", has_text=re.compile(f"/a/{re.escape(slug)}$"))
    )


async def open_aliases_page(page: Page) -> None:
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Aliases").click()
    await page.wait_for_url("**/aliases")
    await expect(page.locator("#aliases-loading")).to_be_hidden()
    current = page.get_by_role("link", name="Aliases", exact=True)
    await expect(current).to_have_attribute("aria-current", "page")


def console_beyond_refusals(tab: Tab) -> list[str]:
    return [
        line
        for line in tab.console
        if not line.startswith("debug") and "Failed to load resource" not in line
    ]


async def test_an_alias_of_a_file_made_used_disabled_enabled_and_deleted(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await same_time_as(page, dashboard.clock)
    await sign_in(page, user)
    token = await tab.stored_token()
    await upload(dashboard, token, "report.txt", b"the report")
    await open_aliases_page(page)
    await expect(page.locator("#aliases-empty")).to_be_visible()

    # Made with every field; a bad address is said by its field before anything is sent.
    await page.get_by_role("button", name="Create alias").click()
    dialog = page.get_by_role("dialog", name="Create an alias")
    await expect(dialog.get_by_label("Which one")).to_have_value(re.compile("^fil_"))
    await expect(dialog.get_by_label("Which one").locator("option")).to_have_text(["report.txt"])
    await dialog.get_by_label("Address (optional)").fill("a!")
    await dialog.get_by_label("Password (optional)").fill("abc")
    await dialog.get_by_role("button", name="Create alias").click()
    await expect(dialog.locator("#alias-error")).to_have_text(
        "Nothing was created: 2 fields need correcting."
    )
    await expect(dialog.locator("#alias-slug-problem")).to_have_text(
        "3 to 64 letters, digits, - or _."
    )
    await expect(dialog.get_by_label("Address (optional)")).to_be_focused()
    assert await aliases_of(dashboard, token) == []
    await dialog.get_by_label("Address (optional)").fill("my-report")
    await dialog.get_by_label("Expires").select_option(label="After 7 days")
    # No limit in the settings: nothing to waive.
    await expect(dialog.get_by_label("No view limit, whatever your settings say")).to_be_hidden()
    await dialog.get_by_label("View limit (optional)").fill("3")
    await dialog.get_by_label("Password (optional)").fill("hunter22")
    await dialog.get_by_role("button", name="Create alias").click()
    await expect(dialog).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text(
        re.compile(r"^Created the alias http://127\.0\.0\.1:\d+/a/my-report\.$")
    )
    (made,) = await aliases_of(dashboard, token)
    assert made["slug"] == "my-report" and made["max_views"] == 3
    assert made["password_protected"] is True and made["enabled"] is True
    assert made["target"]["type"] == "file"
    row = alias_row(page, "my-report")
    await expect(row.locator("td.alias-target")).to_have_text("File report.txt")
    await expect(row.locator("td.alias-status")).to_have_text("Enabled")
    await expect(row.locator("td.alias-views")).to_have_text("0 of 3")
    await expect(row.locator("td.alias-password")).to_have_text("Set")
    await expect(row.locator("td.alias-expires .ago")).to_have_text("in 7 days")

    # The link works with its password, and its view is counted.
    assert await public(dashboard, "my-report") == 401
    assert await public(dashboard, "my-report", "hunter22") == 200
    await row.get_by_role("button", name="Copy link alias my-report").click()
    await expect(page.locator("#alias-copy-status")).not_to_have_text("")
    await page.reload()
    await expect(row.locator("td.alias-views")).to_have_text("1 of 3")

    # The same address again: the service's refusal, by the address.
    await page.get_by_role("button", name="Create alias").click()
    await dialog.get_by_label("Address (optional)").fill("My-Report")
    await dialog.get_by_role("button", name="Create alias").click()
    await expect(dialog.locator("#alias-error")).to_have_text(
        "Nothing was created: that address is taken."
    )
    await expect(dialog.locator("#alias-slug-problem")).not_to_have_text("")
    await dialog.get_by_role("button", name="Cancel").click()
    assert len(await aliases_of(dashboard, token)) == 1

    # Disabled: the link is "not found"; enabled again, it works.
    await row.get_by_role("button", name="Disable alias my-report").click()
    await expect(page.locator("#page-status")).to_have_text("Disabled the alias my-report.")
    await expect(row.locator("td.alias-status")).to_have_text("Disabled")
    assert (await aliases_of(dashboard, token))[0]["enabled"] is False
    assert await public(dashboard, "my-report", "hunter22") == 404
    await row.get_by_role("button", name="Enable alias my-report").click()
    await expect(page.locator("#page-status")).to_have_text("Enabled the alias my-report.")
    await expect(row.locator("td.alias-status")).to_have_text("Enabled")
    assert await public(dashboard, "my-report", "hunter22") == 200
    await no_horizontal_scroll(page)
    await screenshot(page, "aliases")

    # Deleted after a confirmation naming the link and what stays.
    await row.get_by_role("button", name="Delete alias my-report").click()
    confirm = page.get_by_role("dialog")
    await expect(confirm.locator("#alias-delete-title")).to_have_text("Delete the alias my-report?")
    await expect(confirm.locator("#alias-delete-description")).to_contain_text(
        "/a/my-report answers “not found” from now on"
    )
    await expect(confirm.locator("#alias-delete-description")).to_contain_text(
        "The file report.txt itself is kept."
    )
    await expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    await confirm.get_by_role("button", name="Delete alias").click()
    await expect(page.locator("#page-status")).to_have_text("Deleted the alias my-report.")
    await expect(page.locator("#aliases-empty")).to_be_visible()
    assert await aliases_of(dashboard, token) == []
    assert await public(dashboard, "my-report", "hunter22") == 404

    # The activity page names the alias by its address.
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Activity").click()
    await page.get_by_label("Event type").select_option(label="Alias deleted")
    await expect(page.locator("#activity-body tr")).to_have_count(1)
    await expect(page.locator("#activity-body td.event-target")).to_contain_text(
        "Alias /a/my-report"
    )
    assert await violations(page) == []
    assert console_beyond_refusals(tab) == []


async def test_an_alias_of_a_folder_takes_the_accounts_defaults(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    await make_folder(dashboard, token, "Shared")
    status, body = await dashboard.api(
        "PATCH",
        "/settings",
        token=token,
        json={"default_alias_max_views": 5, "public_aliases_enabled": False},
    )
    assert status == 200, body
    await open_aliases_page(page)
    # The kill switch is off: the page says so.
    await expect(page.locator("#aliases-off")).to_be_visible()
    await page.get_by_role("button", name="Create alias").click()
    dialog = page.get_by_role("dialog", name="Create an alias")
    await dialog.get_by_label("A folder").check()
    await expect(dialog.get_by_label("Which one").locator("option")).to_have_text(["Shared"])
    await expect(dialog.locator("#alias-views-hint")).to_contain_text("your settings' limit, 5")
    await expect(dialog.locator("#alias-expiry-hint")).to_have_text("Your settings: never.")
    await dialog.get_by_role("button", name="Create alias").click()
    await expect(dialog).to_be_hidden()
    (made,) = await aliases_of(dashboard, token)
    assert made["target"]["type"] == "folder" and made["max_views"] == 5
    assert made["expires_at"] is None and made["password_protected"] is False
    assert re.fullmatch(r"[A-Za-z0-9]{10,}", made["slug"])
    row = alias_row(page, made["slug"])
    await expect(row.locator("td.alias-target")).to_have_text("Folder Shared")
    await expect(row.locator("td.alias-views")).to_have_text("0 of 5")
    await expect(row.locator("td.alias-password")).to_have_text("None")

    # A limit the settings set can be waived for one alias.
    await page.get_by_role("button", name="Create alias").click()
    await dialog.get_by_label("A folder").check()
    waive = dialog.get_by_label("No view limit, whatever your settings say")
    await expect(waive).to_be_visible()
    await waive.check()
    await expect(dialog.get_by_label("View limit (optional)")).to_be_disabled()
    await dialog.get_by_role("button", name="Create alias").click()
    await expect(dialog).to_be_hidden()
    unlimited = next(
        alias for alias in await aliases_of(dashboard, token) if alias["id"] != made["id"]
    )
    assert unlimited["max_views"] is None
    row = alias_row(page, unlimited["slug"])
    await expect(row.locator("td.alias-views")).to_have_text("0 (no limit)")


@pytest.mark.parametrize(
    ("button", "kind", "extension"),
    [("Set up ShareX", "sharex", ".sxcu"), ("curl script", "curl", ".sh")],
)
async def test_an_uploader_download_holds_a_key_shown_once_that_may_only_upload(
    tab: Tab, user: str, dashboard: Dashboard, button: str, kind: str, extension: str
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    inbox = await make_folder(dashboard, token, "Inbox")

    await page.get_by_role("button", name=button).click()
    dialog = page.get_by_role("dialog")
    await expect(dialog.get_by_label("Uploader's name")).to_be_focused()
    await dialog.get_by_label("Uploader's name").fill(f"{kind} laptop")
    await expect(dialog.get_by_label("Uploads go to").locator("option")).to_have_text(
        ["Where your settings send uploads", "Inbox"]
    )
    await dialog.get_by_label("Uploads go to").select_option(label="Inbox")
    # ShareX's key for a year; curl's as the settings say (no setting: 90 days).
    await expect(dialog.get_by_label("How long the key lasts")).to_have_value("")
    if kind == "sharex":
        await dialog.get_by_label("How long the key lasts").select_option(label="365 days")
    async with page.expect_download() as downloading:
        await dialog.get_by_role("button", name="Create key and download").click()
    download = await downloading.value
    assert download.suggested_filename == f"filehost-{kind}-laptop{extension}"
    content = (await download.path()).read_text()
    await expect(dialog).to_be_hidden()

    # The key is shown once, as any new key, and is the one in the file.
    await expect(page.locator("#new-secret")).to_be_visible()
    await expect(page.locator("#new-secret-name")).to_have_text(f"{kind} laptop")
    secret = await page.locator("#new-secret-value").input_value()
    assert SECRET_PATTERN.match(secret)
    assert secret in content
    if kind == "sharex":
        assert json.loads(content)["Headers"]["X-API-Key"] == secret
    else:
        assert content.startswith("#!")
    await expect(page.locator("#page-status")).to_have_text(
        f"Downloaded filehost-{kind}-laptop{extension}, which holds the key {kind} laptop."
    )
    row = key_row(page, f"{kind} laptop")
    await expect(row.locator("td.key-permissions li")).to_have_text(
        ["files.write", "aliases.write"]
    )
    await expect(row.locator("td.key-permissions .badge")).to_have_text("Upload only")
    await expect(row.locator("td.key-folders li")).to_have_text(["Inbox"])
    status, body = await dashboard.api("GET", "/keys", token=token)
    assert status == 200, body
    (listed,) = [key for key in body["data"]["keys"] if key["name"] == f"{kind} laptop"]
    lifetime = parse_iso(listed["expires_at"]) - parse_iso(listed["created_at"])
    assert lifetime == timedelta(days=365 if kind == "sharex" else 90)

    # It uploads into the folder and hands back a link; it may not list anything.
    made = await upload(dashboard, token, "shot.png", b"png", key=secret)
    assert made["folder_id"] == inbox
    status, _ = await dashboard.api("GET", "/files", key=secret)
    assert status == 403
    assert await violations(page) == []
