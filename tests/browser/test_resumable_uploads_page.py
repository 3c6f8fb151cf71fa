"""Large files on the files page go up resumably (tus, ``js/files/tus.js``), in headless
Chromium: a connection dropped under an upload is retried by itself; a page reloaded half-way
lists the upload as unfinished, with how far the service has it, and the same file chosen again
sends only the rest, one progress bar spanning the whole file; an unfinished upload can be
discarded, and its bytes go. No CSP violation and nothing on the console throughout."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Route, expect

from tests.support.browser import (
    Dashboard,
    Tab,
    open_files_page,
    screenshot,
    throttle,
    upload_item,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

MIB = 1024 * 1024


def big_file(tmp_path: Path, name: str, size: int) -> tuple[Path, bytes]:
    """A file on disk: chosen twice, it is the same file to the page (a buffer Playwright
    passes gets a new modification time each time)."""
    data = os.urandom(size)
    path = tmp_path / name
    path.write_bytes(data)
    return path, data


async def listed(dashboard: Dashboard, tab: Tab) -> list[dict[str, Any]]:
    status, body = await dashboard.api("GET", "/files", token=await tab.stored_token())
    assert status == 200
    return list(body["data"]["files"])


def patches(tab: Tab) -> list[dict[str, str]]:
    """The headers of every PATCH the page sent, in order."""
    found: list[dict[str, str]] = []
    tab.page.on(
        "request",
        lambda request: found.append(request.headers) if request.method == "PATCH" else None,
    )
    return found


async def once_counted(dashboard: Dashboard, route: Route) -> None:
    """Let a ``HEAD`` of an upload through once the service holds some of its bytes (for at
    most 30 s)."""
    request = route.request
    if request.method == "HEAD":
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            async with dashboard.http.head(request.url, headers=request.headers) as response:
                if int(response.headers.get("Upload-Offset", "0")) > 0:
                    break
            await asyncio.sleep(0.05)
    await route.continue_()


async def test_a_dropped_connection_is_retried_by_itself(
    tab: Tab, user: str, dashboard: Dashboard, tmp_path: Path
) -> None:
    page = tab.page
    await open_files_page(page, user)
    dropped: list[str] = []

    async def drop_the_first(route: Route) -> None:
        if route.request.method == "PATCH" and not dropped:
            dropped.append(route.request.url)
            await route.abort("connectionreset")
        else:
            await route.continue_()

    await page.route("**/api/v1/uploads/**", drop_the_first)
    await page.evaluate(
        """() => {
            window.__said = [];
            new MutationObserver(() => {
                for (const line of document.querySelectorAll('#uploads .upload-status')) {
                    window.__said.push(line.textContent);
                }
            }).observe(document.getElementById('uploads'), {
                subtree: true, childList: true, characterData: true,
            });
        }"""
    )
    chosen, data = big_file(tmp_path, "holiday.mp4", 12 * MIB)
    await page.set_input_files("#file-picker", files=[chosen])
    item = upload_item(page, "holiday.mp4")
    await expect(item).to_have_class(re.compile("is-done"))
    await expect(item.locator(".upload-status")).to_have_text(
        "Uploaded holiday.mp4 (12 MiB) into the top level."
    )
    assert len(dropped) == 1
    # While it waited, it said so, not the speed it had before the drop.
    said = await page.evaluate("() => window.__said")
    assert "The connection dropped: trying again in 1 s…" in said, said
    [made] = [f for f in await listed(dashboard, tab) if f["name"] == "holiday.mp4"]
    assert made["sha256"] == hashlib.sha256(data).hexdigest()
    assert made["content_type"] == "video/mp4"  # the browser's type for the name
    await page.unroute("**/api/v1/uploads/**")
    assert await violations(page) == []
    assert [line for line in tab.console if not line.startswith(("debug", "error: Failed"))] == []


async def test_a_reloaded_page_continues_the_upload_from_where_the_service_has_it(
    tab: Tab, user: str, dashboard: Dashboard, tmp_path: Path
) -> None:
    page = tab.page
    await open_files_page(page, user)
    sent = patches(tab)
    chosen, data = big_file(tmp_path, "lecture.mp4", 24 * MIB)
    cdp = await throttle(tab, page, 4 * MIB)
    await page.set_input_files("#file-picker", files=[chosen])
    item = upload_item(page, "lecture.mp4")
    bar = item.locator("progress")
    await expect(bar).to_have_attribute("value", re.compile(r"^([3-9]\d)$"))
    # The service counts a cut-off body's bytes once it has seen the cut, which the new page's
    # first question may come before on a busy machine: that question waits for them.
    await page.route("**/api/v1/uploads/**", lambda route: once_counted(dashboard, route))
    await page.reload()  # the tab goes away under the upload
    await cdp.detach()
    await expect(page.locator("#files-loading")).to_be_hidden()

    waiting = page.locator("#unfinished-list li")
    await expect(waiting).to_have_count(1)
    line = await waiting.inner_text()
    found = re.search(r"(\d+)% of 24 MiB uploaded into the top level", line)
    assert found and 0 < int(found.group(1)) < 100, line
    await page.unroute("**/api/v1/uploads/**")
    await screenshot(page, "files-unfinished-upload")

    # Chosen again: only the rest goes, and the bar spans the whole file.
    await page.set_input_files("#file-picker", files=[chosen])
    item = upload_item(page, "lecture.mp4")
    await expect(item).to_have_class(re.compile("is-done"))
    await expect(page.locator("#unfinished-uploads")).to_be_hidden()
    resumed_at = int(sent[-1]["upload-offset"])
    assert resumed_at > 0
    assert resumed_at >= int(found.group(1)) * 24 * MIB // 100
    [made] = [f for f in await listed(dashboard, tab) if f["name"] == "lecture.mp4"]
    assert made["size"] == len(data)
    assert made["sha256"] == hashlib.sha256(data).hexdigest()
    # Listed no more after another reload: it is finished.
    await page.reload()
    await expect(page.locator("#files-loading")).to_be_hidden()
    await expect(page.locator("#unfinished-uploads")).to_be_hidden()
    assert await violations(page) == []


async def test_an_unfinished_upload_can_be_discarded(
    tab: Tab, user: str, dashboard: Dashboard, tmp_path: Path
) -> None:
    page = tab.page
    await open_files_page(page, user)
    chosen, _ = big_file(tmp_path, "draft.mov", 16 * MIB)
    cdp = await throttle(tab, page, 4 * MIB)
    await page.set_input_files("#file-picker", files=[chosen])
    bar = upload_item(page, "draft.mov").locator("progress")
    await expect(bar).to_have_attribute("value", re.compile(r"^([2-9]\d)$"))
    url = await page.evaluate(
        "() => Object.values(JSON.parse(sessionStorage.getItem("
        "Object.keys(sessionStorage).find((k) => k.startsWith('filehost.uploads:')))))[0].url"
    )
    await page.reload()
    await cdp.detach()
    line = page.locator("#unfinished-list li")
    await expect(line).to_have_count(1)
    await line.get_by_role("button", name="Discard the unfinished upload of draft.mov").click()
    await expect(page.locator("#unfinished-uploads")).to_be_hidden()
    token = await tab.stored_token()
    assert url.startswith("/api/v1/uploads/upl_")  # a path: the page's own origin
    # The page takes the line away at once and sends the DELETE after: the upload is gone once
    # that request is answered, which a HEAD may come before.
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        async with dashboard.http.head(
            dashboard.base + url,
            headers={"Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0"},
        ) as response:
            status = response.status
        if status == 404 or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert status == 404
    await page.reload()
    await expect(page.locator("#files-loading")).to_be_hidden()
    await expect(page.locator("#unfinished-uploads")).to_be_hidden()
