"""The files page with many files, in headless Chromium: finding them (a search the service runs,
past the first page; an order; a type; all kept in the address), previewing them (an image, a
text's first 256 KiB, a sound; SVG and HTML never rendered, only offered as a download), the
gallery's thumbnails fetched as they come into sight, and choosing hundreds at once (Shift+click,
select all in view) to move, delete or download as one ZIP, and a folder as a ZIP. Each change
is checked through the API; light and dark, 375 px, no CSP violation and nothing on the console.
"""

from __future__ import annotations

import asyncio
import io
import re
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from PIL import Image
from playwright.async_api import Page, expect

from tests.support.browser import (
    Dashboard,
    Tab,
    file_row,
    low_contrasts,
    no_horizontal_scroll,
    open_files_page,
    screenshot,
    serving,
    until,
    violations,
)
from tests.support.images import wav
from tests.support.redis import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT_PREVIEW_BYTES = 256 * 1024  # js/files/kinds.js
# A one-page PDF, blank.
PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard(redis_server: RedisServer) -> AsyncIterator[Dashboard]:
    # Hundreds of files are made through the API in a few seconds: no request-rate limit.
    async with serving(redis_server, rate_limit_per_second=0) as running:
        yield running


def png(width: int, height: int, colour: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


async def put_files(
    dashboard: Dashboard,
    token: str,
    files: list[tuple[str, str, bytes]],
    folder_id: str = "root",
    at_once: int = 8,
) -> list[dict[str, Any]]:
    """Upload ``files`` (name, type, bytes) through the API as a script would, ``at_once`` at a
    time; the created files' views, in the order given."""
    gate = asyncio.Semaphore(at_once)

    async def one(name: str, content_type: str, data: bytes) -> dict[str, Any]:
        form = aiohttp.FormData()
        form.add_field("folder_id", folder_id)
        form.add_field("file", data, filename=name, content_type=content_type)
        async with gate:
            async with dashboard.http.post(
                f"{dashboard.base}/api/v1/files",
                data=form,
                headers={"Authorization": f"Bearer {token}"},
            ) as response:
                body = await response.json()
                assert response.status == 201, body
                return body["data"]

    return list(await asyncio.gather(*(one(*file) for file in files)))


def console_problems(tab: Tab) -> list[str]:
    """The console beyond Chromium's debug lines and its line for each refused request (a
    thumbnail the service has none of is a 404 the page expects)."""
    return [
        line
        for line in tab.console
        if not line.startswith("debug") and "Failed to load resource" not in line
    ]


async def both_schemes_readable(page: Page, where: str) -> None:
    """Every text shown keeps its AA contrast in the light and the dark scheme."""
    for scheme in ("dark", "light"):
        await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
        assert await low_contrasts(page) == [], (where, scheme)
        await screenshot(page, f"{where}-{scheme}", full_page=False)


async def test_preview_shows_images_text_and_sound_and_never_renders_svg_or_html(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    long_text = ("line of text 履歴\n" * 20000).encode()  # over 256 KiB
    assert len(long_text) > TEXT_PREVIEW_BYTES
    hostile_svg = (
        b'<svg xmlns="http://www.w3.org/2000/svg"><script>window.__ran = "svg"</script>'
        b'<rect width="10" height="10"/></svg>'
    )
    photo = png(64, 48, "red")
    hostile_html = b"<html><body><script>window.__ran = 'html'</script><p>page</p></body></html>"
    # Uploaded one after the other: the list is newest first, the last one at the top.
    for name, content_type, data in [
        ("data.bin", "application/octet-stream", b"\x00\x01 a blob of bytes"),
        ("page.html", "text/html", hostile_html),
        ("drawing.svg", "image/svg+xml", hostile_svg),
        ("paper.pdf", "application/pdf", PDF),
        ("tone.wav", "audio/wav", wav(0.5)),
        ("notes.txt", "text/plain", long_text),
        ("photo.png", "image/png", photo),
    ]:
        await put_files(dashboard, token, [(name, content_type, data)])
        dashboard.clock.advance(seconds=1)
    await page.reload()
    await expect(page.locator("#files-body tr")).to_have_count(7)
    ranges: list[str | None] = []
    page.on(
        "request",
        lambda request: (
            ranges.append(request.headers.get("range"))
            if request.url.endswith("/content")
            else None
        ),
    )

    # The name is a link: it previews the image, in a dialog, as a blob: picture it decoded.
    link = file_row(page, "photo.png").get_by_role("link", name="photo.png")
    await expect(link).to_have_attribute("href", re.compile(r"^/files\?preview=fil_"))
    await link.click()
    await expect(page.get_by_role("dialog", name="photo.png")).to_be_visible()
    dialog = page.locator("#preview-dialog")
    await expect(dialog.locator("#preview-meta")).to_have_text(
        f"{len(photo)} bytes · image/png · 1 of 7"
    )
    image = dialog.locator("img.preview-image")
    await expect(image).to_have_attribute("src", re.compile("^blob:"))
    await expect(image).to_have_js_property("naturalWidth", 64)
    await expect(page.locator("#preview-close")).to_be_focused()
    await expect(page).to_have_url(re.compile(r"/files\?preview=fil_\w+$"))
    await both_schemes_readable(page, "files-preview-image")

    # The arrow keys go to the next file: the text, only its first 256 KiB fetched (a Range).
    await page.keyboard.press("ArrowRight")
    await expect(page.locator("#preview-title")).to_have_text("notes.txt")
    text = dialog.locator("pre.preview-text")
    await expect(text).to_contain_text("line of text 履歴")
    shown = await text.text_content()
    assert shown is not None and len(shown.encode()) <= TEXT_PREVIEW_BYTES
    assert long_text.decode().startswith(shown)
    await expect(dialog.locator("#preview-note")).to_have_text(
        re.compile(r"^The first 256 KiB of 3\d\d(\.\d)? KiB: download it for the rest\.$")
    )
    assert ranges[-1] == f"bytes=0-{TEXT_PREVIEW_BYTES - 1}"

    # Then the sound, playable from its blob: address.
    await page.keyboard.press("ArrowRight")
    audio = dialog.locator("audio.preview-audio")
    await expect(audio).to_have_attribute("src", re.compile("^blob:"))
    await expect(audio).to_have_js_property("readyState", 4)
    assert await audio.evaluate("sound => Math.round(sound.duration * 10)") == 5

    # Then the PDF, which the service serves as an attachment: the page types its Blob as a PDF
    # for the browser's own viewer, in a frame.
    await page.keyboard.press("ArrowRight")
    frame = dialog.locator("iframe.preview-pdf")
    await expect(frame).to_have_attribute("src", re.compile("^blob:"))
    await expect(frame).to_have_attribute("title", "The PDF paper.pdf")
    # The frame's document is the browser's PDF viewer (a frame of its own inside it).
    source = await frame.get_attribute("src")
    await until(
        lambda: any(
            child.parent_frame is not None
            and child.parent_frame.url == source
            and child.url.startswith("chrome-extension://")
            for child in page.frames
        ),
        "the PDF viewer never opened in the preview's frame",
    )

    # SVG and HTML are never rendered, only offered as a download, whose bytes are the file's.
    for name, data in [("drawing.svg", hostile_svg), ("page.html", hostile_html)]:
        await page.keyboard.press("ArrowRight")
        await expect(page.locator("#preview-title")).to_have_text(name)
        await expect(dialog.locator("#preview-note")).to_contain_text(
            "not shown here (a picture like SVG, or a page, could run code in the dashboard)"
        )
        await expect(dialog.locator("#preview-body > *")).to_have_count(0)
        async with page.expect_download() as info:
            await dialog.get_by_role("button", name="Download").click()
        download = await info.value
        assert download.suggested_filename == name
        assert Path(await download.path()).read_bytes() == data
    # A type without a preview is only that: nothing of running code.
    await page.keyboard.press("ArrowRight")
    await expect(page.locator("#preview-title")).to_have_text("data.bin")
    await expect(dialog.locator("#preview-note")).to_have_text(
        "There is no preview for this type of file (application/octet-stream): download it to "
        "open it."
    )
    await expect(dialog.locator("#preview-body > *")).to_have_count(0)
    await expect(dialog.get_by_role("button", name="Next")).to_be_disabled()
    # No frame but the hidden ones the downloads went through (save.js).
    nothing_ran = (
        "() => window.__ran === undefined && [...document.querySelectorAll('iframe')]"
        ".every((frame) => frame.hidden && frame.name.startsWith('download-'))"
    )
    assert await page.evaluate(nothing_ran)

    # Escape closes it, the focus back on the file's link and the address without the preview;
    # Left goes back, and a reload with the preview in the address opens it again.
    for name in ("page.html", "drawing.svg"):
        await page.keyboard.press("ArrowLeft")
        await expect(page.locator("#preview-title")).to_have_text(name)
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await expect(file_row(page, "drawing.svg").get_by_role("link")).to_be_focused()
    # The dialog's close event, which takes the preview out of the address, comes a task later.
    await expect(page).to_have_url(re.compile(r"/files$"))
    await file_row(page, "photo.png").get_by_role("link").click()
    await expect(page.get_by_role("dialog", name="photo.png")).to_be_visible()
    await page.reload()
    await expect(page.get_by_role("dialog", name="photo.png")).to_be_visible()
    await expect(page.locator("img.preview-image")).to_have_js_property("naturalWidth", 64)

    # On a phone the dialog fits the screen.
    await page.set_viewport_size({"width": 375, "height": 740})
    await no_horizontal_scroll(page)
    await both_schemes_readable(page, "phone-files-preview")
    assert await violations(page) == []
    assert console_problems(tab) == []


async def test_the_gallery_shows_thumbnails_fetched_as_they_come_into_sight(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    colours = ["red", "green", "blue", "orange", "purple"]
    images = [
        (f"image-{index:02}.png", "image/png", png(400, 300, colours[index % 5]))
        for index in range(60)
    ]
    await put_files(dashboard, token, [*images, ("readme.txt", "text/plain", b"words")])
    thumbnails: list[str] = []
    page.on(
        "request",
        lambda request: thumbnails.append(request.url) if "/thumbnail" in request.url else None,
    )

    # The switch is kept in the address; the tiles load only the thumbnails near the screen.
    await page.reload()
    await page.get_by_role("button", name="Gallery").click()
    await expect(page.get_by_role("button", name="Gallery")).to_have_attribute(
        "aria-pressed", "true"
    )
    await expect(page).to_have_url(re.compile(r"/files\?view=gallery$"))
    tiles = page.locator("#files-gallery li.tile")
    await expect(tiles).to_have_count(61)
    await expect(page.locator("#files-table")).to_be_hidden()
    first = tiles.filter(has_text="image-").first.locator("img.tile-image")
    await expect(first).to_be_visible()
    await expect(first).to_have_attribute("src", re.compile("^blob:"))
    assert await first.evaluate("image => [image.naturalWidth, image.naturalHeight]") == [320, 240]
    await page.wait_for_timeout(500)  # time for more to be asked for, were it eager
    early = len(thumbnails)
    assert 0 < early < 40, early
    # The text file has none: its extension instead, never asked for a thumbnail.
    readme = tiles.filter(has_text="readme.txt")
    await expect(readme.locator(".tile-ext")).to_have_text("TXT")
    assert not any("readme" in url for url in thumbnails)

    # Scrolled to the end, the last ones come, not those skipped over; scrolled through, all.
    last = tiles.filter(has_text="image-").last
    await last.scroll_into_view_if_needed()
    await expect(last.locator("img.tile-image")).to_have_attribute("src", re.compile("^blob:"))
    loaded = "() => document.querySelectorAll('#files-gallery img.tile-image[src]').length"
    await page.wait_for_timeout(500)
    assert early < len(thumbnails) < 60 and await page.evaluate(loaded) == len(thumbnails)
    await page.evaluate(
        """async () => {
            for (let y = 0; y < document.body.scrollHeight; y += 300) {
                window.scrollTo(0, y);
                await new Promise((resolve) => setTimeout(resolve, 50));
            }
        }"""
    )
    await page.wait_for_function(f"() => ({loaded})() === 60")
    assert len(thumbnails) == 60
    await last.get_by_role("link").click()
    await expect(page.locator("#preview-dialog img.preview-image")).to_have_js_property(
        "naturalWidth", 400
    )
    await page.keyboard.press("Escape")
    await expect(page.locator("#preview-dialog")).to_be_hidden()
    await expect(last.get_by_role("link")).to_be_focused()
    await expect(page).to_have_url(re.compile(r"/files\?view=gallery$"))

    # A reload keeps the gallery; both schemes readable, and on a phone no sideways scroll.
    await page.reload()
    await expect(tiles).to_have_count(61)
    await page.evaluate("() => window.scrollTo(0, 0)")
    await both_schemes_readable(page, "files-gallery")
    await page.set_viewport_size({"width": 375, "height": 740})
    await no_horizontal_scroll(page)
    await both_schemes_readable(page, "phone-files-gallery")

    await page.get_by_role("button", name="List").click()
    await expect(page.locator("#files-body tr")).to_have_count(61)
    await expect(page).to_have_url(re.compile(r"/files$"))
    assert await violations(page) == []
    assert console_problems(tab) == []


async def test_search_order_and_type_are_the_services_and_kept_in_the_address(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    # 130 files: more than a page of 100. The one report is uploaded first, so newest first it
    # is on the second page, where only a search by the service finds it.
    await put_files(dashboard, token, [("Quarterly-REPORT.txt", "text/plain", b"r" * 3000)])
    dashboard.clock.advance(seconds=1)
    await put_files(
        dashboard,
        token,
        [(f"note-{index:03}.txt", "text/plain", b"n" * (index + 1)) for index in range(125)]
        + [(f"picture-{index}.png", "image/png", png(8, 8, "blue")) for index in range(3)]
        + [("movie.webm", "video/webm", b"\x1a\x45\xdf\xa3")],
    )
    await page.reload()
    await expect(page.locator("#files-body tr")).to_have_count(100)
    await expect(file_row(page, "Quarterly-REPORT.txt")).to_have_count(0)
    searches: list[str] = []
    page.on(
        "request",
        lambda request: searches.append(request.url) if "q=" in request.url else None,
    )

    # Typed, the search goes once the typing pauses, and finds it past the first page.
    await page.get_by_label("Search by name").press_sequentially("report", delay=30)
    await expect(page.locator("#files-body td.file-name")).to_have_text(["Quarterly-REPORT.txt"])
    assert len(searches) == 1 and "q=report" in searches[0], searches
    await expect(page.locator("#files-more")).to_be_hidden()
    await expect(page).to_have_url(re.compile(r"/files\?q=report$"))
    await page.get_by_label("Search by name").fill("no such name")
    await expect(page.locator("#files-no-match")).to_be_visible()
    await expect(page.locator("#files-table")).to_be_hidden()

    # The type and the order: the pictures, largest first; then every file, by name, a page at a
    # time in the service's order.
    await page.get_by_label("Search by name").fill("")
    await expect(page.locator("#files-body tr")).to_have_count(100)
    await page.get_by_label("Type").select_option(label="Images")
    await expect(page.locator("#files-body tr")).to_have_count(3)
    await expect(page.locator("#files-body td.file-type")).to_have_text(["image/png"] * 3)
    await expect(page).to_have_url(re.compile(r"/files\?type=image$"))
    await page.get_by_label("Type").select_option(label="Videos")
    await expect(page.locator("#files-body td.file-name")).to_have_text(["movie.webm"])
    await page.get_by_label("Type").select_option(label="All types")
    await page.get_by_label("Order").select_option(label="Name, A to Z")
    names = page.locator("#files-body td.file-name")
    await expect(names.first).to_have_text("movie.webm")
    await page.get_by_role("button", name="Show more files").click()
    await expect(page.locator("#files-body tr")).to_have_count(130)
    listed = await names.all_text_contents()
    assert listed == sorted(listed, key=str.casefold), listed
    await expect(page).to_have_url(re.compile(r"/files\?sort=name$"))
    await page.get_by_label("Order").select_option(label="Largest first")
    await expect(names.first).to_have_text("Quarterly-REPORT.txt")

    # Back returns to each choice before; a reload keeps the one shown.
    await page.go_back()
    await expect(page.get_by_label("Order")).to_have_value("name")
    await expect(names.first).to_have_text("movie.webm")
    await page.go_back()
    await expect(page.get_by_label("Type")).to_have_value("")
    await expect(page.get_by_label("Order")).to_have_value("-created_at")
    await page.go_back()
    await expect(page.get_by_label("Type")).to_have_value("video")
    await expect(names).to_have_text(["movie.webm"])
    await page.goto("/files?q=REPORT&sort=-size&type=text")
    await expect(page.get_by_label("Search by name")).to_have_value("REPORT")
    await expect(page.get_by_label("Type")).to_have_value("text")
    await expect(names).to_have_text(["Quarterly-REPORT.txt"])
    await page.reload()
    await expect(names).to_have_text(["Quarterly-REPORT.txt"])
    await expect(page.get_by_label("Order")).to_have_value("-size")

    # Both schemes readable, and on a phone the controls wrap rather than widen the page.
    await both_schemes_readable(page, "files-find")
    await page.set_viewport_size({"width": 375, "height": 740})
    await no_horizontal_scroll(page)
    await both_schemes_readable(page, "phone-files-find")
    assert await violations(page) == []
    assert console_problems(tab) == []


async def test_a_search_in_every_folder_finds_and_places_each_file(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()

    async def made(name: str, parent: str | None = None) -> str:
        asked = {"name": name} if parent is None else {"name": name, "parent_id": parent}
        status, body = await dashboard.api("POST", "/folders", token=token, json=asked)
        assert status == 201, body
        return str(body["data"]["id"])

    work = await made("Work")
    year = await made("2024", work)
    await put_files(dashboard, token, [("invoice-april.pdf", "application/pdf", PDF)])
    dashboard.clock.advance(seconds=1)  # newest first: March, then April
    await put_files(dashboard, token, [("invoice-march.pdf", "application/pdf", PDF)], year)
    await put_files(dashboard, token, [("notes.txt", "text/plain", b"n")], await made("Home"))
    await made("Invoices ÉTÉ")
    await made("Straße")
    await page.reload()
    names = page.locator("#files-body td.file-name a[data-preview]")
    folders = page.locator("#folders-body td.folder-name")

    # In the folder open here, the search finds only what is there: its files by the service,
    # its folders by the page, both ignoring case and accents.
    await page.get_by_label("Search by name").fill("invoice")
    await expect(page).to_have_url(re.compile(r"/files\?q=invoice$"))
    await expect(names).to_have_text(["invoice-april.pdf"])
    await expect(folders).to_have_text(["Invoices ÉTÉ"])
    await expect(page.get_by_label("Search by name")).to_have_accessible_description(
        "Every word, in the folder open here, ignoring case and accents."
    )
    await page.get_by_label("Search by name").fill("été invoices")
    await expect(folders).to_have_text(["Invoices ÉTÉ"])
    await expect(names).to_have_count(0)
    await page.get_by_label("Search by name").fill("april invoice")
    await expect(names).to_have_text(["invoice-april.pdf"])
    await expect(folders).to_have_count(0)
    await page.get_by_label("Search by name").fill("ete")
    await expect(folders).to_have_text(["Invoices ÉTÉ"])
    await page.get_by_label("Search by name").fill("STRASSE")
    await expect(folders).to_have_text(["Straße"])
    await page.get_by_label("Search by name").fill("invoice")
    await expect(names).to_have_text(["invoice-april.pdf"])
    # In every folder: both, each saying where it is, the folders' own rows left out.
    await page.get_by_label("In every folder", exact=True).check()
    await expect(names).to_have_text(["invoice-march.pdf", "invoice-april.pdf"])
    await expect(page.locator("#files-body .file-where")).to_have_text(
        ["in Work / 2024", "in the top level"]
    )
    await expect(page.locator("#folders-body tr")).to_have_count(0)
    await expect(page.locator("#files-title")).to_have_text("Files in every folder")
    await expect(page).to_have_url(re.compile(r"/files\?q=invoice&in=all$"))
    await page.reload()
    await expect(page.get_by_label("In every folder", exact=True)).to_be_checked()
    await expect(names).to_have_text(["invoice-march.pdf", "invoice-april.pdf"])

    # Where a file is opens that folder, as a folder's link does: the search left behind.
    await page.locator("#files-body .file-where").get_by_role("link", name="Work / 2024").click()
    await expect(page).to_have_url(re.compile(rf"/files\?folder={year}$"))
    await expect(page.get_by_label("In every folder", exact=True)).not_to_be_checked()
    await expect(page.get_by_label("Search by name")).to_have_value("")
    await expect(names).to_have_text(["invoice-march.pdf"])
    await expect(page.locator("#files-body .file-where")).to_have_count(0)
    await page.go_back()
    await expect(names).to_have_text(["invoice-march.pdf", "invoice-april.pdf"])
    assert await violations(page) == []
    assert console_problems(tab) == []


def zip_contents(path: str) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        return {info.filename: archive.read(info) for info in archive.infolist()}


async def test_hundreds_of_files_chosen_moved_deleted_and_downloaded_as_a_zip(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    status, body = await dashboard.api("POST", "/folders", token=token, json={"name": "Archive"})
    assert status == 201, body
    archive_id = body["data"]["id"]
    count = 320  # more than a request line's ids (about 290): the ZIP's ids are posted
    made = await put_files(
        dashboard,
        token,
        [
            (f"file-{index:03}.txt", "text/plain", f"bytes of {index}".encode())
            for index in range(count)
        ],
    )
    content = {file["name"]: f"bytes of {int(file['name'][5:8])}".encode() for file in made}
    await page.reload()
    rows = page.locator("#files-body tr")
    await expect(rows).to_have_count(100)
    bar = page.get_by_role("region", name="Selected files")
    await expect(bar).to_be_hidden()

    # A click, then a Shift+click four rows below: the five between, no others.
    boxes = page.locator("#files-body input[type=checkbox]")
    await boxes.nth(2).click()
    await boxes.nth(6).click(modifiers=["Shift"])
    await expect(page.locator("#bulk-count")).to_have_text("5 files selected")
    checked = await boxes.evaluate_all("(all) => all.map((box) => box.checked)")
    assert [index for index, on in enumerate(checked) if on] == [2, 3, 4, 5, 6]
    await expect(page.get_by_label("Select all in view")).to_have_js_property("indeterminate", True)
    chosen = [await rows.nth(index).locator("td.file-name").inner_text() for index in range(2, 7)]

    # The five as one ZIP: their names and bytes, in the list's order.
    async with page.expect_download() as info:
        await bar.get_by_role("button", name="Download as ZIP").click()
    download = await info.value
    assert download.suggested_filename == "files.zip"
    zipped = zip_contents(await download.path())
    assert list(zipped) == chosen
    assert all(zipped[name] == content[name] for name in chosen)
    await expect(page.locator("#page-status")).to_have_text(
        "Downloading files.zip: your browser shows how far it has come."
    )
    await both_schemes_readable(page, "files-selected")
    await page.set_viewport_size({"width": 375, "height": 740})
    await no_horizontal_scroll(page)
    await both_schemes_readable(page, "phone-files-selected")
    await page.set_viewport_size({"width": 1280, "height": 800})

    # Every file, in view page by page, chosen at once and moved in one request.
    bulk_requests: list[str] = []
    page.on(
        "request",
        lambda request: (
            bulk_requests.append(request.post_data or "")
            if request.url.endswith("/files/bulk")
            else None
        ),
    )
    more = page.get_by_role("button", name="Show more files")
    for shown in (200, 300, count):
        await more.click()
        await expect(rows).to_have_count(shown)
    await page.get_by_label("Select all in view").check()
    await expect(page.locator("#bulk-count")).to_have_text(f"{count} files selected")
    async with page.expect_download() as info:
        await bar.get_by_role("button", name="Download as ZIP").click()
    assert zip_contents(await (await info.value).path()) == content
    await bar.get_by_role("button", name="Move").click()
    dialog = page.get_by_role("dialog", name=f"Move {count} files")
    await dialog.get_by_label("Move to").select_option(label="Archive")
    await dialog.get_by_role("button", name="Move here").click()
    await expect(page.locator("#page-status")).to_have_text(f"Moved {count} files.")
    await expect(rows).to_have_count(0)
    await expect(bar).to_be_hidden()
    assert len(bulk_requests) == 1
    status, body = await dashboard.api(
        "GET", f"/files?folder_id={archive_id}&limit=1000", token=token
    )
    assert status == 200 and len(body["data"]["files"]) == count

    # The folder as a ZIP: every file in it, with its bytes.
    folder = page.locator("#folders-body tr").filter(has_text="Archive")
    async with page.expect_download() as info:
        await folder.get_by_role("button", name="Download as ZIP folder Archive").click()
    download = await info.value
    assert download.suggested_filename == "Archive.zip"
    assert zip_contents(await download.path()) == content
    await expect(page.locator("#page-status")).to_have_text(
        "Downloading Archive.zip: your browser shows how far it has come."
    )

    # In the folder, all chosen and deleted after one confirmation naming how many; a file
    # deleted elsewhere meanwhile is named with the service's reason, the rest go.
    await folder.get_by_role("link", name="Archive").click()
    await expect(rows).to_have_count(100)
    for shown in (200, 300, count):
        await more.click()
        await expect(rows).to_have_count(shown)
    await page.get_by_label("Select all in view").check()
    gone = made[0]
    status, body = await dashboard.api("DELETE", f"/files/{gone['id']}", token=token)
    assert status == 200, body
    await bar.get_by_role("button", name="Delete").click()
    confirm = page.get_by_role("dialog", name=f"Delete {count} files?")
    await expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    await confirm.get_by_role("button", name="Delete files").click()
    await expect(page.locator("#page-status")).to_have_text(f"Deleted {count - 1} files.")
    await expect(page.locator("#page-error")).to_have_text(
        re.compile(rf"^1 file was not deleted: {gone['name']} \(.+\)\.$")
    )
    await expect(page.locator("#files-empty")).to_be_visible()
    assert len(bulk_requests) == 2
    status, body = await dashboard.api("GET", f"/files?folder_id={archive_id}", token=token)
    assert status == 200 and body["data"]["files"] == []
    assert await violations(page) == []
    assert console_problems(tab) == []


async def test_a_change_deep_in_a_long_list_keeps_the_place_it_was_made_at(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    token = await tab.stored_token()
    await put_files(
        dashboard,
        token,
        [(f"log-{index:03}.txt", "text/plain", b"x") for index in range(160)],
    )
    await page.reload()
    rows = page.locator("#files-body tr")
    await expect(rows).to_have_count(100)
    dialog = page.get_by_role("dialog")

    async def name_of(index: int) -> str:
        return await rows.nth(index).locator("td.file-name").inner_text()

    # The preview of the last file shown knows there are more, and goes on into them.
    last = await name_of(99)
    await file_row(page, last).get_by_role("link", name=last).click()
    meta = page.locator("#preview-meta")
    await expect(meta).to_have_text("1 byte · text/plain · 100 of 100+")
    await page.keyboard.press("ArrowRight")
    await expect(meta).to_have_text("1 byte · text/plain · 101 of 160")
    await expect(rows).to_have_count(160)
    await expect(page.locator("#preview-title")).to_have_text(await name_of(100))
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()

    deep = await name_of(150)
    row = file_row(page, deep)
    await row.scroll_into_view_if_needed()
    before = await page.evaluate("() => window.scrollY")
    assert before > 2000
    await row.get_by_role("button", name="Rename").click()
    await dialog.get_by_label("Name").fill("renamed.txt")
    await dialog.get_by_role("button", name="Rename file").click()
    await expect(file_row(page, "renamed.txt")).to_be_in_viewport()
    await expect(rows).to_have_count(160)  # as far down as it was read
    assert abs(await page.evaluate("() => window.scrollY") - before) < 200

    doomed, after = await name_of(149), await name_of(151)
    await file_row(page, doomed).get_by_role("button", name=re.compile("^Delete")).click()
    await dialog.get_by_role("button", name="Delete file").click()
    await expect(file_row(page, doomed)).to_have_count(0)
    await expect(rows).to_have_count(159)
    await expect(file_row(page, after)).to_be_in_viewport()
    assert abs(await page.evaluate("() => window.scrollY") - before) < 200
