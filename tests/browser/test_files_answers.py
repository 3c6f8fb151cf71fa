"""What the files page does with what the service answers: a file deleted elsewhere (another
tab, a script) leaves the list as soon as an action on it is answered "No such file.", and a
later success clears the earlier failure; a download the service refuses once its ticket is
taken is said, and leaves the page where it was; a name is counted in characters as the service
counts them, never cut short by the field; and a preview link to a file that does not exist
says so without asking to try again."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import expect

from tests.support.browser import Dashboard, Tab, create_key, file_row, key_row, open_files_page

pytestmark = pytest.mark.asyncio(loop_scope="module")

# 130 characters, each two UTF-16 units: a field counting units (maxlength) keeps 127 of them.
EMOJI_NAME = "📄" * 130


async def delete_elsewhere(dashboard: Dashboard, token: str, file: dict[str, Any]) -> None:
    status, body = await dashboard.api("DELETE", f"/files/{file['id']}", token=token)
    assert status == 200, body


async def test_a_download_refused_after_its_ticket_is_said_and_the_page_stays(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await dashboard.upload(token, "notes.txt")
    await page.reload()
    await expect(page.locator("#files-body tr")).to_have_count(1)
    address = page.url

    # The storage gone between the ticket and the download: the service's 503, as it answers it
    # (never framed), in the hidden frame the form was posted into.
    async def unavailable(route: Any) -> None:
        await route.fulfill(
            status=503,
            content_type="application/json",
            headers={"X-Frame-Options": "DENY", "Retry-After": "5"},
            body='{"success":false,"error":{"code":"storage_unavailable","message":"…"}}',
        )

    await page.route("**/api/v1/downloads", unavailable)
    await file_row(page, "notes.txt").get_by_role("button", name="Download").click()

    await expect(page.locator("#page-error")).to_have_text(
        "Downloading notes.txt failed: the service refused it. Try again."
    )
    await expect(page.locator("#page-status")).to_be_hidden()
    assert page.url == address
    await expect(page.locator("#files-body tr")).to_have_count(1)
    await page.unroute("**/api/v1/downloads", unavailable)


async def test_a_file_deleted_elsewhere_leaves_the_list_and_a_later_success_clears_the_error(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    files = {
        name: await dashboard.upload(token, name)
        for name in ("page.html", "notes.txt", "plan.txt", "todo.txt", "forest.txt")
    }
    await page.reload()
    await expect(page.locator("#files-body tr")).to_have_count(5)
    error, status = page.locator("#page-error"), page.locator("#page-status")

    # Download: the service's 404, said, and the row gone without a reload.
    await delete_elsewhere(dashboard, token, files["page.html"])
    await file_row(page, "page.html").get_by_role("button", name="Download").click()
    await expect(error).to_have_text(
        "Downloading page.html failed: it no longer exists (deleted meanwhile), so it has left "
        "the list."
    )
    await expect(file_row(page, "page.html")).to_have_count(0)
    await expect(page.locator("#files-body tr")).to_have_count(4)

    # A later success: its word, and the earlier failure gone.
    await file_row(page, "forest.txt").get_by_role("button", name="Rename").click()
    await page.locator("#name-input").fill("forest2.txt")
    await page.locator("#name-submit").click()
    await expect(status).to_have_text("Renamed forest.txt to forest2.txt.")
    await expect(error).to_be_hidden()

    # Rename: the dialog closes, the failure is said on the page, the row is gone.
    await delete_elsewhere(dashboard, token, files["notes.txt"])
    await file_row(page, "notes.txt").get_by_role("button", name="Rename").click()
    await page.locator("#name-input").fill("renamed.txt")
    await page.locator("#name-submit").click()
    await expect(page.locator("#name-dialog")).to_be_hidden()
    await expect(error).to_have_text(
        "Renaming notes.txt failed: it no longer exists (deleted meanwhile), so it has left the "
        "list."
    )
    await expect(status).to_be_hidden()
    await expect(file_row(page, "notes.txt")).to_have_count(0)

    # Preview: said in the dialog, and the row gone behind it.
    await delete_elsewhere(dashboard, token, files["plan.txt"])
    await page.get_by_role("link", name="plan.txt").click()
    await expect(page.locator("#preview-note")).to_have_text(
        "Loading the preview failed: plan.txt no longer exists (deleted meanwhile), so it has "
        "left the list."
    )
    await expect(file_row(page, "plan.txt")).to_have_count(0)
    await page.keyboard.press("Escape")
    await expect(page.locator("#preview-dialog")).to_be_hidden()

    # Delete: already done, which is said plainly, and the earlier failure gone.
    await delete_elsewhere(dashboard, token, files["todo.txt"])
    await file_row(page, "todo.txt").get_by_role("button", name="Delete").click()
    await page.locator("#delete-confirm").click()
    await expect(status).to_have_text("todo.txt was deleted already (elsewhere, meanwhile).")
    await expect(error).to_be_hidden()
    await expect(page.locator("#files-body tr")).to_have_count(1)


async def test_names_are_counted_in_characters_as_the_service_counts_them(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await dashboard.upload(token, "report.txt")
    await page.reload()
    name_input = page.locator("#name-input")

    # Rename: 130 emoji are 130 characters, kept whole and saved as typed.
    await file_row(page, "report.txt").get_by_role("button", name="Rename").click()
    await name_input.fill(EMOJI_NAME)
    assert await name_input.input_value() == EMOJI_NAME
    await page.locator("#name-submit").click()
    await expect(page.locator("#page-status")).to_have_text(f"Renamed report.txt to {EMOJI_NAME}.")
    status, body = await dashboard.api("GET", "/files", token=token)
    assert status == 200, body
    assert [file["name"] for file in body["data"]["files"]] == [EMOJI_NAME]

    # New folder: one character past the service's 255 is said, and nothing is sent.
    await page.locator("#folder-create").click()
    await name_input.fill("📁" * 256)
    await page.locator("#name-submit").click()
    await expect(page.locator("#name-error")).to_have_text(
        "The name must be at most 255 characters."
    )
    await expect(name_input).to_have_attribute("aria-invalid", "true")
    await name_input.fill("📁" * 255)
    await page.locator("#name-submit").click()
    await expect(page.locator("#page-status")).to_have_text(f"Created the folder {'📁' * 255}.")

    # A key's name: 100 characters, each two units, kept whole.
    await page.goto("/keys")
    await create_key(page, "🔑" * 100, ["files.read"])
    await expect(key_row(page, "🔑" * 100)).to_have_count(1)


async def test_a_preview_link_to_a_missing_file_says_so_without_asking_to_try_again(
    tab: Tab, user: str
) -> None:
    page = tab.page
    await open_files_page(page, user)
    await page.goto("/files?preview=fil_0000000000000000000000")
    await expect(page.locator("#page-error")).to_have_text(
        "Opening the preview failed: No such file."
    )
    await expect(page).to_have_url(re.compile(r"/files$"))
