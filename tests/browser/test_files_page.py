"""The files page as a person uses it, in headless Chromium: upload by picker and by drag and
drop with a progress bar each, download byte for byte, delete behind a confirmation, and the
refusals (too large, quota) said plainly. No CSP violation and nothing on the console throughout.

The module runs its own service (like the ``dashboard`` fixture) with the blobs in a temporary
directory and small limits, so the refusals are quick to reach.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import redis as redis_sync
from aiohttp import web
from playwright.async_api import expect

from service.app import BLOBS, create_app
from service.config import Settings
from service.store.directory_blobs import DirectoryBlobs
from tests.support.browser import (
    Dashboard,
    Tab,
    file_row,
    no_horizontal_scroll,
    open_files_page,
    screenshot,
    throttle,
    until,
    upload_item,
    upload_rate,
    violations,
)
from tests.support.clock import FakeClock
from tests.support.pages import parse
from tests.support.redis import STORE_TIMEOUT_SECONDS, RedisServer

try:  # the runner production serves with, where the service has one
    from service.api._aiohttp import EnvelopeAppRunner as Runner  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    Runner = web.AppRunner  # type: ignore[assignment,misc]

pytestmark = pytest.mark.asyncio(loop_scope="module")

MAX_UPLOAD = 1024 * 1024
MAX_FILES = 3


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Dashboard]:
    if redis_server.process is None:
        redis_server.start()
    client = redis_sync.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    clock = FakeClock()
    settings = Settings(
        redis_url=redis_server.url,
        bcrypt_cost=4,
        redis_timeout_seconds=STORE_TIMEOUT_SECONDS,
        data_dir=tmp_path_factory.mktemp("files-page"),
        max_upload_bytes=MAX_UPLOAD,
        max_files_per_account=MAX_FILES,
    )
    app = create_app(settings, clock=clock)
    runner = Runner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
    try:
        yield Dashboard(app, clock, f"http://127.0.0.1:{port}", http)
    finally:
        await http.close()
        await runner.cleanup()


def blob_names(dashboard: Dashboard) -> list[str]:
    blobs = dashboard.app[BLOBS]
    assert isinstance(blobs, DirectoryBlobs)
    return sorted(p.name for p in blobs.root.iterdir()) if blobs.root.exists() else []


async def test_upload_with_progress_download_byte_for_byte_and_delete(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    await expect(page.locator("#files-empty")).to_be_visible()

    # Record every value the progress bar takes, to see it move and end full, and every line
    # the tray says on the way.
    await page.evaluate(
        """() => {
            window.__progress = [];
            window.__said = [];
            new MutationObserver((changes) => {
                for (const change of changes) {
                    const bar = change.target;
                    if (bar.tagName === 'PROGRESS') window.__progress.push(bar.value);
                }
                for (const line of document.querySelectorAll('#uploads .upload-status')) {
                    window.__said.push(line.textContent);
                }
            }).observe(document.getElementById('uploads'), {
                attributes: true, subtree: true, childList: true, characterData: true,
            });
        }"""
    )
    # Uploads slowed to about 1 MiB/s, so the bar has time to move.
    cdp = await throttle(tab, page, 1 << 20)
    name = "report 履歴書 (final).bin"
    data = os.urandom(900 * 1024)
    await page.set_input_files(
        "#file-picker",
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}],
    )
    item = upload_item(page, name)
    await expect(item).to_have_class(re.compile("is-done"))
    await expect(item.locator(".upload-status")).to_have_text(
        f"Uploaded {name} (900 KiB) into the top level."
    )
    assert await item.locator("progress").evaluate("bar => bar.value === bar.max") is True
    progress = await page.evaluate("() => window.__progress")
    assert progress[-1] == 100 and progress == sorted(progress), progress
    assert any(0 < value < 99 for value in progress), progress  # it moved on the way
    # On the way it said the bytes sent, the speed and the time left.
    said = await page.evaluate("() => window.__said")
    going = re.compile(r"^\d+(\.\d)? KiB of 900 KiB · \d+(\.\d)? (KiB|MiB)/s · about \d+ s left$")
    assert any(going.match(line) for line in said), said
    await cdp.detach()
    row = file_row(page, name)
    await expect(row).to_be_visible()
    await expect(row.locator("td.file-size")).to_have_text("900 KiB")
    await expect(row.locator("td.file-type")).to_have_text("application/octet-stream")
    await screenshot(page, "files-page")

    # The service holds exactly these bytes, listed for the account.
    token = await tab.stored_token()
    status, body = await dashboard.api("GET", "/files", token=token)
    assert status == 200
    [listed] = body["data"]["files"]
    assert listed["name"] == name and listed["sha256"] == hashlib.sha256(data).hexdigest()

    # Download: the same bytes, under the same name, saved by the browser itself (slowed to about
    # 300 KiB/s, it shows its own progress): a ticket posted in a form, with no credential header
    # and nothing in the address, and the page never fetches the bytes.
    cdp = await tab.context.new_cdp_session(page)
    await cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": 300 * 1024, "uploadThroughput": -1},
    )
    fetched_before = len(tab.request_urls)
    async with page.expect_request(lambda sent: sent.url.endswith("/api/v1/downloads")) as posted:
        async with page.expect_download() as info:
            await row.get_by_role("button", name=re.compile("^Download")).click()
    download = await info.value
    await expect(page.locator("#page-status")).to_have_text(
        f"Downloading {name}: your browser shows how far it has come."
    )
    assert download.suggested_filename == name
    saved = await download.path()
    await cdp.detach()
    assert Path(saved).read_bytes() == data
    form = await posted.value
    assert form.method == "POST" and "authorization" not in form.headers
    assert re.fullmatch(r"ticket=fhd_[0-9A-Za-z]{49}", form.post_data or ""), form.post_data
    assert not [url for url in tab.request_urls[fetched_before:] if "/content" in url]

    # Delete, behind a confirmation that can be cancelled.
    await row.get_by_role("button", name=re.compile("^Delete")).click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    await expect(dialog.locator("#delete-name")).to_have_text(name)
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_be_hidden()
    await expect(row).to_be_visible()
    await row.get_by_role("button", name=re.compile("^Delete")).click()
    await page.get_by_role("dialog").get_by_role("button", name="Delete file").click()
    await expect(page.locator("#page-status")).to_have_text(f"Deleted {name}.")
    await expect(page.locator("#files-empty")).to_be_visible()
    status, body = await dashboard.api("GET", "/files", token=token)
    assert body["data"]["files"] == []
    assert listed["id"] not in blob_names(dashboard)

    assert await violations(page) == []
    assert [line for line in tab.console if not line.startswith("debug")] == []


async def test_four_uploads_go_at_once_and_the_rest_wait_their_turn(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    """Six files chosen: four are sent, two wait ("Waiting to start…"), one of them cancelled
    before its turn, which then never comes; the other goes once the first ones end."""
    page = tab.page
    await open_files_page(page, user)
    held: list[Any] = []
    letting_through = False

    async def hold(route: Any) -> None:
        if route.request.method == "POST" and not letting_through:
            held.append(route)
        else:
            await route.continue_()

    await page.route("**/api/v1/files", hold)
    names = [f"turn{index}.txt" for index in range(6)]
    await page.set_input_files(
        "#file-picker",
        files=[{"name": name, "mimeType": "text/plain", "buffer": b"x"} for name in names],
    )
    await until(lambda: len(held) == 4, f"{len(held)} uploads were sent, not 4")
    waiting = page.locator("#uploads .upload-status", has_text="Waiting to start…")
    await expect(waiting).to_have_count(2)
    await upload_item(page, "turn5.txt").get_by_role("button", name=re.compile("^Cancel")).click()
    await expect(upload_item(page, "turn5.txt").locator(".upload-status")).to_have_text(
        "Cancelled: turn5.txt was not uploaded."
    )
    assert len(held) == 4  # nothing more was sent meanwhile

    letting_through = True
    for route in held:
        await route.continue_()
    # Every one sent in its turn and ended: the account holds at most 3 files here, so two of the
    # five sent are refused for that, which is the service's answer to a file that was sent.
    await expect(page.locator("#uploads li.is-active")).to_have_count(0)
    said = {
        name: await upload_item(page, name).locator(".upload-status").text_content()
        for name in names[:5]
    }
    assert all(
        line is not None and line.startswith((f"Uploaded {name} ", "Refused: your account holds"))
        for name, line in said.items()
    ), said
    token = await tab.stored_token()
    status, body = await dashboard.api("GET", "/files", token=token)
    assert status == 200, body
    assert len(body["data"]["files"]) == 3
    await page.unroute("**/api/v1/files", hold)
    for file in body["data"]["files"]:  # the module's data directory: later tests count its files
        status, _ = await dashboard.api("DELETE", f"/files/{file['id']}", token=token)
        assert status == 200


async def test_an_upload_cancelled_half_way_leaves_nothing_and_the_tray_clears(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    await page.set_input_files(
        "#file-picker",
        files=[{"name": "kept.txt", "mimeType": "text/plain", "buffer": b"kept"}],
    )
    await expect(upload_item(page, "kept.txt")).to_have_class(re.compile("is-done"))
    await expect(file_row(page, "kept.txt")).to_be_visible()
    kept = blob_names(dashboard)
    assert len(kept) == 1

    # A slow upload (64 KiB/s): it is on its way, the service writing it, when cancelled.
    cdp = await throttle(tab, page, 1 << 16)
    name = "half way.bin"
    data = os.urandom(900 << 10)
    await page.set_input_files(
        "#file-picker",
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}],
    )
    item = upload_item(page, name)
    await expect(item.locator(".upload-status")).to_have_text(
        re.compile(r"^\d+(\.\d)? KiB of 900 KiB · .+/s · about \d+ s left$")
    )
    await until(lambda: len(blob_names(dashboard)) == 2, "the upload never reached storage")
    await item.get_by_role("button", name=f"Cancel upload of {name}").click()
    await expect(item.locator(".upload-status")).to_have_text(
        f"Cancelled: {name} was not uploaded."
    )
    await expect(item).to_have_class(re.compile("is-cancelled"))
    await expect(item.get_by_role("button")).to_have_count(0)  # nothing left to cancel
    await cdp.detach()

    # Nothing of it is kept: not listed, and its bytes gone from storage.
    await expect(page.locator("#files-body tr")).to_have_count(1)
    await expect(file_row(page, "kept.txt")).to_be_visible()
    token = await tab.stored_token()
    _, body = await dashboard.api("GET", "/files", token=token)
    assert [listed["name"] for listed in body["data"]["files"]] == ["kept.txt"]
    await until(lambda: blob_names(dashboard) == kept, "the cancelled upload left bytes behind")
    await screenshot(page, "files-cancelled-upload")

    # "Clear finished" takes both lines away, and itself; the focus goes back to the picker.
    clear = page.get_by_role("button", name="Clear finished")
    await clear.click()
    await expect(page.locator("#uploads li")).to_have_count(0)
    await expect(clear).to_be_hidden()
    await expect(page.locator("#file-picker")).to_be_focused()
    assert await violations(page) == []


async def test_drag_and_drop_uploads_too(tab: Tab, user: str, dashboard: Dashboard) -> None:
    page = tab.page
    await open_files_page(page, user)
    dropped = await page.evaluate_handle(
        """() => {
            const transfer = new DataTransfer();
            transfer.items.add(new File(['dropped bytes'], 'dropped.txt', {type: 'text/plain'}));
            return transfer;
        }"""
    )
    await page.dispatch_event("#drop-zone", "drop", {"dataTransfer": dropped})
    await expect(upload_item(page, "dropped.txt")).to_have_class(re.compile("is-done"))
    row = file_row(page, "dropped.txt")
    await expect(row.locator("td.file-type")).to_have_text("text/plain")
    await expect(row.locator("td.file-size")).to_have_text("13 bytes")


async def test_refusals_are_said_plainly_and_leave_nothing(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    before = blob_names(dashboard)

    await page.set_input_files(
        "#file-picker",
        files=[
            {
                "name": "big.iso",
                "mimeType": "application/x-iso9660-image",
                "buffer": b"b" * (MAX_UPLOAD + 1),
            }
        ],
    )
    big = upload_item(page, "big.iso")
    await expect(big).to_have_class(re.compile("is-error"))
    await expect(big.locator(".upload-status")).to_have_text(
        "Refused: big.iso is larger than the limit of 1.0 MiB per file."
    )
    assert blob_names(dashboard) == before

    for index in range(MAX_FILES):
        await page.set_input_files(
            "#file-picker",
            files=[{"name": f"small-{index}.txt", "mimeType": "text/plain", "buffer": b"s"}],
        )
        await expect(upload_item(page, f"small-{index}.txt")).to_have_class(re.compile("is-done"))
    await page.set_input_files(
        "#file-picker",
        files=[{"name": "one-too-many.txt", "mimeType": "text/plain", "buffer": b"x"}],
    )
    extra = upload_item(page, "one-too-many.txt")
    await expect(extra).to_have_class(re.compile("is-error"))
    await expect(extra.locator(".upload-status")).to_have_text(
        f"Refused: your account holds the maximum of {MAX_FILES} files. "
        "Delete some before uploading more."
    )
    await expect(page.locator("#files-body tr")).to_have_count(MAX_FILES)


async def test_the_files_page_without_a_session_sends_you_to_sign_in(tab: Tab) -> None:
    await tab.page.goto("/files")
    await tab.page.wait_for_url(re.compile(r"/$"))
    await expect(tab.page.locator("#notice")).to_have_text("Sign in to manage your files.")


async def test_the_files_page_has_no_inline_code_and_loads_only_the_script() -> None:
    page = parse("files.html")
    assert page.problems == []
    assert page.scripts == [{"type": "module", "src": "/static/js/pages/files.js"}]


async def test_a_phone_width_screen_never_scrolls_sideways(tab: Tab, user: str) -> None:
    page = tab.page
    await page.set_viewport_size({"width": 375, "height": 740})
    await open_files_page(page, user)
    long_name = "quarterly report of the shared team folder " + "y" * 60 + ".pdf"
    await page.set_input_files(
        "#file-picker",
        files=[{"name": long_name, "mimeType": "application/pdf", "buffer": b"%PDF-1.7"}],
    )
    await expect(upload_item(page, long_name)).to_have_class(re.compile("is-done"))
    await expect(file_row(page, long_name)).to_be_visible()
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-files")


async def test_leaving_the_page_while_a_file_goes_up_asks_first(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_files_page(page, user)
    asked: list[str] = []

    async def stay(dialog: Any) -> None:
        asked.append(dialog.type)
        await dialog.dismiss()  # "stay on the page"

    page.on("dialog", stay)
    cdp = await throttle(tab, page, 1 << 16)
    name = "going up.bin"
    await page.set_input_files(
        "#file-picker",
        files=[
            {"name": name, "mimeType": "application/octet-stream", "buffer": os.urandom(600 << 10)}
        ],
    )
    item = upload_item(page, name)
    await expect(item).to_have_class(re.compile("is-active"))
    nav = page.get_by_role("navigation", name="Pages")
    await nav.get_by_role("link", name="Aliases").click()
    await until(lambda: asked == ["beforeunload"], "leaving was not asked about")
    assert page.url.endswith("/files")  # stayed, the upload still on its way
    await expect(item).to_have_class(re.compile("is-active"))
    await upload_rate(cdp, -1)
    await cdp.detach()
    await expect(item).to_have_class(re.compile("is-done"))
    # Nothing going up: the page is left without a question.
    await nav.get_by_role("link", name="Aliases").click()
    await expect(page).to_have_url(re.compile(r"/aliases$"))
    assert asked == ["beforeunload"]
