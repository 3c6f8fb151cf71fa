"""Small things people noticed, in headless Chromium at 375 px in either scheme: a key's allowed
addresses each whole on its line (the list wrapping between them, never inside one), and a
select as wide as its longest choice (the key's expiry, the alias dialog's files with a long
name), without sideways scroll and with AA contrast."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from playwright.async_api import Page, expect

from tests.support.browser import (
    Dashboard,
    Tab,
    low_contrasts,
    no_horizontal_scroll,
    screenshot,
    sign_in,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

ADDRESSES = ["2001:db8:85a3:1234:5678:8a2e:370:7334/128", "203.0.113.0/24", "198.51.100.7/32"]
LONG_NAME = "quarterly-report-for-the-board-final-version-2.pdf"

# How wide the select's longest choice is drawn in its own font, and the room its text has.
SELECT_WIDTHS = """(select) => {
    const style = getComputedStyle(select);
    const context = document.createElement('canvas').getContext('2d');
    context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const widest = Math.max(...[...select.options].map((o) => context.measureText(o.text).width));
    const inner = select.clientWidth - parseFloat(style.paddingLeft)
        - parseFloat(style.paddingRight);
    return {widest, inner, room: select.parentElement.clientWidth, width: select.offsetWidth};
}"""


async def fits_its_choices(page: Page, selector: str) -> None:
    widths: dict[str, Any] = await page.locator(selector).evaluate(SELECT_WIDTHS)
    # Its longest choice shows whole, unless the select already takes its whole line.
    assert widths["inner"] >= widths["widest"] or widths["width"] >= widths["room"] - 1, widths


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_addresses_stay_whole_and_selects_fit_their_choices(
    tab: Tab, user: str, dashboard: Dashboard, scheme: str
) -> None:
    page = tab.page
    await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
    await page.set_viewport_size({"width": 375, "height": 740})
    await sign_in(page, user)
    token = await tab.stored_token()
    status, body = await dashboard.api(
        "POST",
        "/keys",
        token=token,
        json={"name": "office", "permissions": ["files.read"]},
    )
    assert status == 201, body
    status, body = await dashboard.api(
        "PATCH", f"/keys/{body['data']['id']}", token=token, json={"allowed_ips": ADDRESSES}
    )
    assert status == 200, body
    await page.reload()
    await expect(page.locator("#keys-loading")).to_be_hidden()

    addresses = page.locator("#keys-body ul.ip-list code")
    await expect(addresses).to_have_text(ADDRESSES)
    # No address is cut anywhere but after a colon, however narrow the card: each piece
    # between colons is on one line (an IPv6 network wider than the card goes on, indented, on
    # the next), and the IPv4 networks are whole.
    pieces = await addresses.evaluate_all(
        """(codes) => codes.map((code) => [...code.childNodes]
            .filter((node) => node.nodeType === Node.TEXT_NODE)
            .map((node) => {
                const range = document.createRange();
                range.selectNodeContents(node);
                return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
            }))"""
    )
    assert all(lines == 1 for address in pieces for lines in address), pieces
    assert pieces[1:] == [[1], [1]]
    await no_horizontal_scroll(page)
    assert await low_contrasts(page) == [], "/keys"

    await page.locator("#create-open").click()
    dialog = page.get_by_role("dialog", name="Create a key")
    await expect(dialog).to_be_visible()
    await fits_its_choices(page, "dialog[open] select")
    await page.keyboard.press("Escape")

    form = aiohttp.FormData()
    form.add_field("file", b"x", filename=LONG_NAME, content_type="application/pdf")
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/files", data=form, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 201
    await page.goto("/aliases")
    await expect(page.locator("#aliases-loading")).to_be_hidden()
    await page.get_by_role("button", name="Create alias").click()
    alias_dialog = page.get_by_role("dialog", name="Create an alias")
    await expect(alias_dialog.get_by_label("Which one").locator("option")).to_have_text([LONG_NAME])
    await fits_its_choices(page, "#alias-target")
    await fits_its_choices(page, "#alias-expiry")
    await no_horizontal_scroll(page)
    assert await low_contrasts(page) == [], "/aliases, creating"


async def api(dashboard: Dashboard, method: str, path: str, token: str, body: Any) -> Any:
    status, answer = await dashboard.api(method, path, token=token, json=body)
    assert status in (200, 201), answer
    return answer["data"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_activity_says_what_changed_in_words(
    tab: Tab, user: str, dashboard: Dashboard, scheme: str
) -> None:
    page = tab.page
    await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
    await sign_in(page, user)
    token = await tab.stored_token()
    key = await api(
        dashboard, "POST", "/keys", token, {"name": "backup", "permissions": ["files.read"]}
    )
    edit = {
        "name": "nightly",
        "permissions": ["files.write", "folders.read"],
        "allowed_ips": ["192.0.2.1"],
        "rate_limit": {"per_second": 3, "burst": 4},
    }
    await api(dashboard, "PATCH", f"/keys/{key['id']}", token, edit)
    projects = await api(dashboard, "POST", "/folders", token, {"name": "Projects"})
    year = await api(
        dashboard, "POST", "/folders", token, {"name": "2025", "parent_id": projects["id"]}
    )
    form = aiohttp.FormData()
    form.add_field("file", b"x", filename="a.txt", content_type="text/plain")
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/files", data=form, headers={"Authorization": f"Bearer {token}"}
    ) as response:
        file = (await response.json())["data"]
    await api(dashboard, "PATCH", f"/files/{file['id']}", token, {"folder_id": year["id"]})
    await api(dashboard, "PATCH", f"/files/{file['id']}", token, {"name": "b.txt"})
    await api(dashboard, "PATCH", "/settings", token, {"default_folder_id": projects["id"]})
    await page.goto("/activity")
    await expect(page.locator("#activity-loading")).to_be_hidden()
    await fits_its_choices(page, "#activity-type")

    def changes(kind: str) -> Any:
        row = page.locator(f"#activity-body tr[data-event-type='{kind}']")
        return row.locator("td.event-changes ul.changes li")

    await expect(changes("key.edited")).to_have_text(
        [
            "name: backup → nightly",
            "permissions: +\u00a0files.write, +\u00a0folders.read, −\u00a0files.read",
            "allowed from: 192.0.2.1/32",
            "rate limit: 3 a second, bursts of 4",
        ]
    )
    await expect(changes("file.moved")).to_have_text(["moved to: Projects / 2025"])
    await expect(changes("file.renamed")).to_have_text(["name: a.txt → b.txt"])
    await expect(changes("settings.changed")).to_have_text(["uploads go to: Projects"])
    await expect(changes("folder.created")).to_have_text(["in: Projects", "in: the top level"])
    # Words, never a field's own name or JSON.
    for shown in await page.locator("td.event-changes").all_text_contents():
        assert "_" not in shown and "{" not in shown and "[" not in shown, shown

    # Beside the other columns a line of changes reads as a line, not a word a line.
    edited = changes("key.edited").nth(1)
    lines = await edited.evaluate(
        "(item) => Math.round(item.getBoundingClientRect().height"
        " / parseFloat(getComputedStyle(item).lineHeight))"
    )
    assert lines <= 2, lines
    assert await low_contrasts(page) == [], "/activity"
    await screenshot(page, f"activity-changes-{scheme}")

    await page.set_viewport_size({"width": 375, "height": 740})
    await no_horizontal_scroll(page)
    assert await low_contrasts(page) == [], "/activity at 375 px"
