"""Folders on the files page as a person uses them, in headless Chromium: create a folder, open it
(the address, the breadcrumbs, reload and back), upload into it, rename and move files and
folders, the service's refusals kept in the dialog, and deleting a folder after a confirmation
that names what goes with it. The server's state is checked through the API after each change.
No CSP violation and nothing on the console throughout."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page, Route, expect

from tests.support.browser import (
    Dashboard,
    Tab,
    file_row,
    folder_row,
    no_horizontal_scroll,
    open_files_page,
    screenshot,
    upload_item,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def console_beyond_refusals(tab: Tab) -> list[str]:
    """What the console said besides the browser's own line for each refused request (the
    refusals the test asked for)."""
    return [
        line
        for line in tab.console
        if not line.startswith("debug") and "Failed to load resource" not in line
    ]


def crumbs(page: Page) -> Any:
    return page.get_by_role("navigation", name="Folder path").locator("li")


async def create_folder(page: Page, name: str) -> None:
    await page.get_by_role("button", name="New folder").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog.get_by_label("Name")).to_be_focused()
    await dialog.get_by_label("Name").fill(name)
    await dialog.get_by_role("button", name="Create folder").click()
    await expect(dialog).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text(f"Created the folder {name}.")


async def upload(page: Page, name: str, data: bytes = b"hello") -> None:
    await page.set_input_files(
        "#file-picker", files=[{"name": name, "mimeType": "text/plain", "buffer": data}]
    )
    await expect(file_row(page, name)).to_have_count(1)


async def children(dashboard: Dashboard, token: str, parent: str | None) -> list[dict[str, Any]]:
    query = f"?parent_id={parent}" if parent else ""
    status, body = await dashboard.api("GET", f"/folders{query}", token=token)
    assert status == 200, body
    return body["data"]["folders"]


async def folders_in(dashboard: Dashboard, token: str, parent: str | None) -> list[str]:
    return [folder["name"] for folder in await children(dashboard, token, parent)]


async def files_in(dashboard: Dashboard, token: str, folder: str) -> list[str]:
    status, body = await dashboard.api("GET", f"/files?folder_id={folder}", token=token)
    assert status == 200, body
    return sorted(file["name"] for file in body["data"]["files"])


async def open_with_its_read_held(page: Page, name: str) -> list[Route]:
    """Click the folder ``name`` open, holding the page's read of it (``GET /folders/{id}``):
    the address names the folder, the page still shows the one before. The held request is
    the one item of the list, to be continued."""
    held: list[Route] = []

    async def hold_the_first(route: Route) -> None:
        if held:
            await route.continue_()
        else:
            held.append(route)

    await page.route(re.compile(r"/api/v1/folders/fld_[^/?]+$"), hold_the_first)
    await folder_row(page, name).locator("a").click()
    await expect(page).to_have_url(re.compile(r"folder=fld_"))
    return held


async def test_folders_open_by_address_and_breadcrumbs_and_uploads_go_into_the_open_one(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await expect(crumbs(page)).to_have_text(["All files"])
    await expect(page.locator("#files-empty")).to_be_visible()

    # A folder at the top level, listed before the files.
    await upload(page, "top.txt")
    await create_folder(page, "Projects")
    await expect(page.locator("#files-table tbody tr").first).to_contain_text("Projects")
    assert await folders_in(dashboard, token, None) == ["Projects"]

    # Opened: the address names it, the breadcrumbs lead back, it is empty.
    await folder_row(page, "Projects").get_by_role("link", name="Projects").click()
    await page.wait_for_url(re.compile(r"/files\?folder=fld_"))
    projects = page.url.split("folder=")[1]
    await expect(crumbs(page)).to_have_text(["All files", "Projects"])
    await expect(page.locator("#files-title")).to_have_text("Projects")
    await expect(page.locator("#files-title")).to_be_focused()
    await expect(page.locator("#files-empty")).to_be_visible()
    await expect(page).to_have_title("Projects · Files · filehost")

    # A folder in it, opened; an upload there goes there, and says so.
    await create_folder(page, "2025")
    await folder_row(page, "2025").get_by_role("link", name="2025").click()
    await expect(crumbs(page)).to_have_text(["All files", "Projects", "2025"])
    inner = page.url.split("folder=")[1]
    await expect(page.locator("#upload-folder")).to_have_text("2025")
    await upload(page, "inside.txt")
    await expect(page.locator("#uploads li .upload-status").first).to_have_text(
        "Uploaded inside.txt (5 bytes) into 2025."
    )
    assert await files_in(dashboard, token, inner) == ["inside.txt"]
    assert await files_in(dashboard, token, "root") == ["top.txt"]

    # Reload keeps the folder; back goes to the one before; the breadcrumb goes to the top.
    await page.reload()
    await expect(crumbs(page)).to_have_text(["All files", "Projects", "2025"])
    await expect(file_row(page, "inside.txt")).to_have_count(1)
    await page.go_back()
    await expect(crumbs(page)).to_have_text(["All files", "Projects"])
    await expect(folder_row(page, "2025")).to_have_count(1)
    assert page.url.endswith(f"folder={projects}")
    await crumbs(page).get_by_role("link", name="All files").click()
    await expect(crumbs(page)).to_have_text(["All files"])
    await expect(file_row(page, "top.txt")).to_have_count(1)
    assert page.url.endswith("/files")

    # An address naming no folder says so, with the way back.
    await page.goto("/files?folder=fld_doesnotexist0000000000")
    await expect(page.locator("#files-error")).to_contain_text("does not exist")
    await expect(crumbs(page)).to_have_text(["All files"])

    # On a phone, the breadcrumbs and the rows wrap rather than widen the page.
    await page.set_viewport_size({"width": 375, "height": 740})
    await page.goto(f"/files?folder={inner}")
    await expect(file_row(page, "inside.txt")).to_have_count(1)
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-folder")
    await page.goto("/files")
    await expect(folder_row(page, "Projects")).to_have_count(1)
    await no_horizontal_scroll(page)

    # The open folder deleted elsewhere: an upload into it is refused, saying so.
    await page.goto(f"/files?folder={inner}")
    await expect(file_row(page, "inside.txt")).to_have_count(1)
    status, body = await dashboard.api("DELETE", f"/folders/{inner}?recursive=true", token=token)
    assert status == 200, body
    await page.set_input_files(
        "#file-picker", files=[{"name": "late.txt", "mimeType": "text/plain", "buffer": b"x"}]
    )
    await expect(page.locator("#uploads li.is-error .upload-status")).to_have_text(
        "Refused: the folder 2025 no longer exists (deleted or moved away meanwhile)."
    )
    assert await violations(page) == []
    assert console_beyond_refusals(tab) == []


async def test_rename_and_move_files_and_folders_with_refusals_kept_in_the_dialog(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await create_folder(page, "Alpha")
    await create_folder(page, "Beta")
    await upload(page, "notes.txt")
    dialog = page.get_by_role("dialog")

    # A name the service's rules refuse is said in the dialog, before anything is sent.
    await create_folder(page, "Gamma")
    await page.get_by_role("button", name="New folder").click()
    await dialog.get_by_label("Name").fill("a/b")
    await dialog.get_by_role("button", name="Create folder").click()
    await expect(dialog.locator("#name-error")).to_have_text("The name must not contain / or \\.")
    # A name taken (ignoring case): the service's refusal, kept with what was typed.
    await dialog.get_by_label("Name").fill("alpha")
    await dialog.get_by_role("button", name="Create folder").click()
    await expect(dialog.locator("#name-error")).to_have_text(
        "A folder with this name, ignoring case, is already there."
    )
    await expect(dialog.get_by_label("Name")).to_have_value("alpha")
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_be_hidden()
    assert await folders_in(dashboard, token, None) == ["Alpha", "Beta", "Gamma"]

    # Rename a file.
    await file_row(page, "notes.txt").get_by_role("button", name="Rename").click()
    await expect(dialog.get_by_label("Name")).to_have_value("notes.txt")
    await dialog.get_by_label("Name").fill("minutes.txt")
    await dialog.get_by_role("button", name="Rename file").click()
    await expect(page.locator("#page-status")).to_have_text("Renamed notes.txt to minutes.txt.")
    await expect(file_row(page, "minutes.txt")).to_have_count(1)

    # Move it into Beta: it leaves the top level and is there.
    await file_row(page, "minutes.txt").get_by_role("button", name="Move").click()
    await expect(dialog.get_by_label("Move to")).to_be_focused()
    await dialog.get_by_label("Move to").select_option(label="Beta")
    await dialog.get_by_role("button", name="Move here").click()
    await expect(page.locator("#page-status")).to_have_text("Moved minutes.txt.")
    await expect(file_row(page, "minutes.txt")).to_have_count(0)
    beta = await folder_row(page, "Beta").get_attribute("data-folder-id")
    assert await files_in(dashboard, token, beta) == ["minutes.txt"]

    # Rename a folder, then move Alpha into Beta: a folder is never offered itself or below.
    await folder_row(page, "Gamma").get_by_role("button", name="Rename").click()
    await dialog.get_by_label("Name").fill("Delta")
    await dialog.get_by_role("button", name="Rename folder").click()
    await expect(page.locator("#page-status")).to_have_text("Renamed the folder Gamma to Delta.")
    await folder_row(page, "Alpha").get_by_role("button", name="Move").click()
    await expect(dialog.get_by_label("Move to").locator("option")).to_have_text(
        ["All files (the top level)", "Beta", "Delta"]
    )
    await dialog.get_by_label("Move to").select_option(label="Beta")
    await dialog.get_by_role("button", name="Move here").click()
    await expect(page.locator("#page-status")).to_have_text("Moved the folder Alpha.")
    await expect(folder_row(page, "Alpha")).to_have_count(0)
    assert await folders_in(dashboard, token, beta) == ["Alpha"]

    # Moving Beta into its own Alpha is not offered; a name taken where it lands is refused
    # by the service, said in the dialog.
    await folder_row(page, "Beta").get_by_role("button", name="Move").click()
    await expect(dialog.get_by_label("Move to").locator("option")).to_have_text(
        ["All files (the top level)", "Delta"]
    )
    await dialog.get_by_role("button", name="Cancel").click()
    status, body = await dashboard.api(
        "POST", "/folders", token=token, json={"name": "Alpha", "parent_id": None}
    )
    assert status == 201, body
    await page.reload()
    await folder_row(page, "Beta").locator("a").click()
    await folder_row(page, "Alpha").get_by_role("button", name="Move").click()
    await dialog.get_by_label("Move to").select_option(label="All files (the top level)")
    await dialog.get_by_role("button", name="Move here").click()
    await expect(dialog.locator("#move-error")).to_be_visible()
    await expect(dialog).to_be_visible()
    assert await folders_in(dashboard, token, beta) == ["Alpha"]
    await screenshot(page, "folders-move-refused")
    await dialog.get_by_role("button", name="Cancel").click()
    assert await violations(page) == []
    assert console_beyond_refusals(tab) == []


async def test_a_folder_made_while_its_parent_opens_goes_into_the_parent(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    """A "New folder" clicked before the folder just opened has loaded: the new folder still goes
    where the address already says (the folder's read is held until the click)."""
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await create_folder(page, "Old")
    held = await open_with_its_read_held(page, "Old")
    await page.get_by_role("button", name="New folder").click()
    assert len(held) == 1
    await held[0].continue_()
    dialog = page.get_by_role("dialog")
    await expect(dialog.get_by_role("heading")).to_have_text("New folder in Old")
    await dialog.get_by_label("Name").fill("Inner")
    await dialog.get_by_role("button", name="Create folder").click()
    await expect(page.locator("#page-status")).to_have_text("Created the folder Inner.")
    status, body = await dashboard.api("GET", "/folders", token=token)
    assert status == 200, body
    (old,) = body["data"]["folders"]
    assert await folders_in(dashboard, token, old["id"]) == ["Inner"]
    assert await violations(page) == []
    assert console_beyond_refusals(tab) == []


async def test_files_chosen_while_a_folder_opens_go_into_that_folder(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    """Files chosen before the folder just opened has loaded go where the address already says,
    not into the folder the page showed a moment before (the folder's read is held meanwhile)."""
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await create_folder(page, "Old")
    held = await open_with_its_read_held(page, "Old")
    await page.set_input_files(
        "#file-picker", files=[{"name": "early.txt", "mimeType": "text/plain", "buffer": b"hi"}]
    )
    assert len(held) == 1
    await held[0].continue_()
    await expect(page.locator("#upload-folder")).to_have_text("Old")
    await expect(file_row(page, "early.txt")).to_have_count(1)
    status, body = await dashboard.api("GET", "/folders", token=token)
    assert status == 200, body
    (old,) = body["data"]["folders"]
    assert await files_in(dashboard, token, old["id"]) == ["early.txt"]
    status, body = await dashboard.api("GET", "/files", token=token)
    assert status == 200, body
    assert [file["name"] for file in body["data"]["files"]] == ["early.txt"]  # one copy only
    status, body = await dashboard.api("GET", "/files?folder_id=root", token=token)
    assert (status, body["data"]["files"]) == (200, []), body
    assert await violations(page) == []
    assert console_beyond_refusals(tab) == []


async def test_a_folder_goes_up_whole_and_again_into_the_same_folders(
    tab: Tab, user: str, dashboard: Dashboard, tmp_path: Path
) -> None:
    """A folder chosen with the folder button goes up with its folders, made below the open one;
    chosen again, its files go into the folders already there, and no second folder is made.
    The files an operating system keeps in folders for itself stay out, saying so; one chosen
    by itself goes up."""
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await create_folder(page, "Projects")
    await folder_row(page, "Projects").get_by_role("link", name="Projects").click()
    await expect(page.locator("#upload-folder")).to_have_text("Projects")
    chosen = tmp_path / "Photos"
    (chosen / "2024").mkdir(parents=True)
    (chosen / "a.txt").write_bytes(b"first")
    (chosen / "2024" / "b.txt").write_bytes(b"second")
    for system_file in (".DS_Store", "._a.txt", "2024/Thumbs.db", "2024/desktop.ini", "Icon\r"):
        (chosen / system_file).write_bytes(b"kept by the system")
    left_out = re.compile(
        r"^Left out 5 files the operating system keeps in folders for itself: (.+)\.$"
    )

    for done in (2, 4):
        await page.set_input_files("#folder-picker", chosen)
        await expect(page.locator("#uploads li.is-done")).to_have_count(done)
        await expect(page.locator("#page-status")).to_have_text(left_out)
        said = await page.locator("#page-status").text_content()
        names = left_out.match(said or "")
        assert names is not None and sorted(names[1].split(", ")) == [
            ".DS_Store",
            "._a.txt",
            "Icon",
            "Thumbs.db",
            "desktop.ini",
        ], said
    # In the order the uploads ended, which is theirs.
    said = sorted(await page.locator("#uploads .upload-status").all_text_contents())
    assert (
        said
        == ["Uploaded a.txt (5 bytes) into Projects / Photos."] * 2
        + ["Uploaded b.txt (6 bytes) into Projects / Photos / 2024."] * 2
    )
    await expect(folder_row(page, "Photos")).to_have_count(1)

    (projects,) = await children(dashboard, token, None)
    (photos,) = await children(dashboard, token, projects["id"])
    assert photos["name"] == "Photos"
    (year,) = await children(dashboard, token, photos["id"])
    assert year["name"] == "2024"
    assert await children(dashboard, token, year["id"]) == []
    assert await files_in(dashboard, token, projects["id"]) == []
    assert await files_in(dashboard, token, photos["id"]) == ["a.txt", "a.txt"]
    assert await files_in(dashboard, token, year["id"]) == ["b.txt", "b.txt"]
    await screenshot(page, "files-folder-uploaded")
    await page.set_input_files("#file-picker", chosen / "2024" / "Thumbs.db")
    await expect(page.locator("#uploads li.is-done")).to_have_count(5)
    await expect(page.locator("#page-status")).to_be_hidden()
    assert await files_in(dashboard, token, projects["id"]) == ["Thumbs.db"]
    assert await violations(page) == []
    assert console_beyond_refusals(tab) == []


async def test_a_folder_of_the_same_name_as_the_service_compares_them_is_used(
    tab: Tab, user: str, dashboard: Dashboard, tmp_path: Path
) -> None:
    """ "Straße" uploaded beside "STRASSE": the service holds them for one name (full case
    folding), so the files go into the folder already there."""
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    status, body = await dashboard.api("POST", "/folders", token=token, json={"name": "STRASSE"})
    assert status == 201, body
    chosen = tmp_path / "Straße"
    chosen.mkdir()
    (chosen / "map.txt").write_bytes(b"map")

    await page.set_input_files("#folder-picker", chosen)

    await expect(upload_item(page, "map.txt").locator(".upload-status")).to_have_text(
        "Uploaded map.txt (3 bytes) into STRASSE."
    )
    (street,) = await children(dashboard, token, None)
    assert street["name"] == "STRASSE"
    assert await files_in(dashboard, token, street["id"]) == ["map.txt"]
    assert console_beyond_refusals(tab) == []


async def test_a_folder_name_the_service_refuses_is_said_on_its_files_lines(
    tab: Tab, user: str, dashboard: Dashboard, tmp_path: Path
) -> None:
    """A folder name the service refuses (a control character, which a Linux folder may hold):
    its files say so and are not sent; the rest of the folder goes up."""
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    chosen = tmp_path / "Mixed"
    (chosen / "tab\there").mkdir(parents=True)
    (chosen / "kept.txt").write_bytes(b"kept")
    (chosen / "tab\there" / "lost.txt").write_bytes(b"lost")

    await page.set_input_files("#folder-picker", chosen)

    await expect(upload_item(page, "kept.txt").locator(".upload-status")).to_have_text(
        "Uploaded kept.txt (4 bytes) into Mixed."
    )
    await expect(upload_item(page, "lost.txt").locator(".upload-status")).to_have_text(
        re.compile(r"^Not uploaded: the folder Mixed / tab\there could not be made \(.+\)\.$")
    )
    (mixed,) = [
        folder for folder in await children(dashboard, token, None) if folder["name"] == "Mixed"
    ]
    assert await children(dashboard, token, mixed["id"]) == []
    assert await files_in(dashboard, token, mixed["id"]) == ["kept.txt"]
    assert console_beyond_refusals(tab) == []


async def test_a_folder_dropped_on_the_zone_goes_up_whole(
    tab: Tab, user: str, dashboard: Dashboard, tmp_path: Path
) -> None:
    """A folder dragged from the desktop onto the drop zone (Chromium's own drag of a path, so
    the page reads it through its entries) goes up as the folder picker's does."""
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    dropped = tmp_path / "Scans"
    (dropped / "old").mkdir(parents=True)
    (dropped / "old" / "c.txt").write_bytes(b"third")
    box = await page.locator("#drop-zone").bounding_box()
    assert box is not None
    where = {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}
    drag = {"items": [], "files": [str(dropped)], "dragOperationsMask": 1}
    cdp = await tab.context.new_cdp_session(page)
    for kind in ("dragEnter", "dragOver", "drop"):
        await cdp.send("Input.dispatchDragEvent", {"type": kind, **where, "data": drag})
    await cdp.detach()

    await expect(page.locator("#uploads .upload-status")).to_have_text(
        ["Uploaded c.txt (5 bytes) into Scans / old."]
    )
    (scans,) = await children(dashboard, token, None)
    assert scans["name"] == "Scans"
    (old,) = await children(dashboard, token, scans["id"])
    assert await files_in(dashboard, token, old["id"]) == ["c.txt"]
    assert console_beyond_refusals(tab) == []


async def test_deleting_a_folder_names_what_goes_with_it(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await create_folder(page, "Old")
    await create_folder(page, "Empty")
    await create_folder(page, "Loose")
    await folder_row(page, "Loose").locator("a").click()
    await upload(page, "c.txt")
    await crumbs(page).get_by_role("link", name="All files").click()
    await folder_row(page, "Old").locator("a").click()
    await create_folder(page, "Inner")
    await upload(page, "a.txt")
    await upload(page, "b.txt")
    await crumbs(page).get_by_role("link", name="All files").click()
    await expect(folder_row(page, "Old")).to_have_count(1)

    dialog = page.get_by_role("dialog")
    await folder_row(page, "Old").get_by_role("button", name="Delete").click()
    await expect(dialog.locator("#folder-delete-title")).to_have_text("Delete the folder Old?")
    await expect(dialog.locator("#folder-delete-description")).to_contain_text(
        "everything in it: 1 folder and 2 files"
    )
    await expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    await dialog.get_by_role("button", name="Cancel").click()
    # What it does not hold goes unsaid.
    await folder_row(page, "Loose").get_by_role("button", name="Delete").click()
    await expect(dialog.locator("#folder-delete-description")).to_contain_text(
        "everything in it: 1 file, for good"
    )
    await dialog.get_by_role("button", name="Delete folder").click()
    await expect(folder_row(page, "Loose")).to_have_count(0)
    assert await folders_in(dashboard, token, None) == ["Empty", "Old"]

    await folder_row(page, "Old").get_by_role("button", name="Delete").click()
    await dialog.get_by_role("button", name="Delete folder").click()
    await expect(page.locator("#page-status")).to_have_text(
        "Deleted the folder Old and everything in it."
    )
    await expect(folder_row(page, "Old")).to_have_count(0)
    status, body = await dashboard.api("GET", "/files", token=token)
    assert status == 200 and body["data"]["files"] == []

    await folder_row(page, "Empty").get_by_role("button", name="Delete").click()
    await expect(dialog.locator("#folder-delete-description")).to_contain_text("is empty")
    await dialog.get_by_role("button", name="Delete folder").click()
    await expect(page.locator("#page-status")).to_have_text("Deleted the folder Empty.")
    assert await folders_in(dashboard, token, None) == []
    await expect(page.locator("#files-empty")).to_be_visible()
