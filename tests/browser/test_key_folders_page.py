"""Binding a key to folders on the keys page, as a person does it, in headless Chromium: the
create form's choice of all folders or chosen ones (listed by path, as a tree), a choice of none
refused before anything is sent, the key list naming the folders, and the edit form widening
and narrowing a key, a narrowing confirmed first. Each step is checked against the API, and the
key itself is seen refused outside its folders."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.support.browser import (
    SECRET_PATTERN,
    Dashboard,
    Tab,
    key_row,
    screenshot,
    sign_in,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def make_folder(
    dashboard: Dashboard, token: str, name: str, parent: str | None = None
) -> str:
    status, body = await dashboard.api(
        "POST", "/folders", token=token, json={"name": name, "parent_id": parent}
    )
    assert status == 201, body
    folder_id: str = body["data"]["id"]
    return folder_id


async def listed(dashboard: Dashboard, token: str, name: str) -> dict[str, Any]:
    status, body = await dashboard.api("GET", "/keys", token=token)
    assert status == 200, body
    (key,) = [key for key in body["data"]["keys"] if key["name"] == name]
    return key  # type: ignore[no-any-return]


def folder_box(page: Page, form: str, path: str) -> Any:
    return page.locator(f"#{form}-folders-list").get_by_label(path, exact=True)


async def test_a_key_bound_to_chosen_folders_then_changed_and_unbound(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    projects = await make_folder(dashboard, token, "Projects")
    year = await make_folder(dashboard, token, "2025", projects)
    other = await make_folder(dashboard, token, "Other")

    # Create: all folders by default; "only the folders chosen" lists them by path, as a tree.
    await page.get_by_role("button", name="Create key").click()
    dialog = page.get_by_role("dialog", name="Create a key")
    await dialog.get_by_label("Name", exact=True).fill("uploader")
    await dialog.locator('input[value="files.read"]').check()
    await dialog.locator('input[value="files.write"]').check()
    await expect(dialog.get_by_label("All files and folders of the account")).to_be_checked()
    await expect(page.locator("#create-folders-list")).to_be_hidden()
    await dialog.get_by_label("Only the folders chosen").check()
    await expect(page.locator("#create-folders-list label")).to_have_text(
        ["Other", "Projects", "Projects / 2025"]
    )
    await expect(page.locator("#create-folders-list label").nth(2)).to_have_class(
        re.compile("depth-1")
    )
    # None chosen: refused here, nothing created.
    await dialog.get_by_role("button", name="Create key").click()
    await expect(page.locator("#create-folders-problem")).to_have_text(
        "Choose at least one folder, or all files and folders."
    )
    await expect(page.locator("#create-error")).to_contain_text("Choose at least one folder")
    status, body = await dashboard.api("GET", "/keys", token=token)
    assert body["data"]["keys"] == []
    await folder_box(page, "create", "Projects / 2025").check()
    await screenshot(page, "key-folders-create")
    await dialog.get_by_role("button", name="Create key").click()
    await expect(dialog).to_be_hidden()
    secret = await page.locator("#new-secret-value").input_value()
    assert SECRET_PATTERN.match(secret)
    assert (await listed(dashboard, token, "uploader"))["folder_ids"] == [year]

    # The list names the folder by its path; the key is refused outside it.
    row = key_row(page, "uploader")
    await expect(row.locator("td.key-folders li")).to_have_text(["Projects / 2025"])
    status, _ = await dashboard.api("GET", f"/files?folder_id={year}", key=secret)
    assert status == 200
    status, _ = await dashboard.api("GET", f"/files?folder_id={other}", key=secret)
    assert status == 404

    # Edit: the key's folder is checked; swapping it for another narrows: confirmed first.
    await page.locator("#dismiss-secret").click()
    await row.get_by_role("button", name="Edit key uploader").click()
    await expect(page.locator("#edit-panel")).to_be_visible()
    await expect(page.get_by_label("Only the folders chosen").last).to_be_checked()
    await expect(folder_box(page, "edit", "Projects / 2025")).to_be_checked()
    await folder_box(page, "edit", "Projects / 2025").uncheck()
    await folder_box(page, "edit", "Other").check()
    await page.get_by_role("button", name="Save changes").click()
    confirm = page.get_by_role("dialog")
    await expect(confirm.locator("#confirm-list li")).to_have_text(
        [re.compile("It no longer reaches Projects / 2025")]
    )
    await confirm.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#page-status")).to_have_text(
        "Saved the changes to the key uploader."
    )
    assert (await listed(dashboard, token, "uploader"))["folder_ids"] == [other]
    await expect(row.locator("td.key-folders li")).to_have_text(["Other"])
    status, _ = await dashboard.api("GET", f"/files?folder_id={other}", key=secret)
    assert status == 200

    # Back to the whole account: widening asks nothing.
    await row.get_by_role("button", name="Edit key uploader").click()
    await expect(folder_box(page, "edit", "Other")).to_be_checked()
    await page.locator("#edit-folders").get_by_label("All files and folders of the account").check()
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#page-status")).to_have_text(
        "Saved the changes to the key uploader."
    )
    assert (await listed(dashboard, token, "uploader"))["folder_ids"] is None
    await expect(row.locator("td.key-folders")).to_have_text("All")
    status, _ = await dashboard.api("GET", "/files?folder_id=root", key=secret)
    assert status == 200
    assert await violations(page) == []


async def test_a_folder_deleted_meanwhile_is_the_services_refusal_in_the_form(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    doomed = await make_folder(dashboard, token, "Doomed")
    await page.get_by_role("button", name="Create key").click()
    dialog = page.get_by_role("dialog", name="Create a key")
    await dialog.get_by_label("Name", exact=True).fill("late")
    await dialog.locator('input[value="files.read"]').check()
    await dialog.get_by_label("Only the folders chosen").check()
    await folder_box(page, "create", "Doomed").check()
    status, _ = await dashboard.api("DELETE", f"/folders/{doomed}", token=token)
    assert status == 200
    await dialog.get_by_role("button", name="Create key").click()
    await expect(page.locator("#create-error")).to_have_text(
        "Creating the key failed: No such folder. A folder chosen was deleted meanwhile."
    )
    await expect(page.locator("#create-folders-problem")).to_contain_text("no longer exists")
    await expect(dialog).to_be_visible()
    # The list is as it now is: the deleted folder is gone from it.
    await expect(page.locator("#create-folders-list")).to_contain_text("No folders yet")
    status, body = await dashboard.api("GET", "/keys", token=token)
    assert body["data"]["keys"] == []
