"""No page is wider than the window, whatever it lists: the keys table fits its card from a
phone to a wide screen (a key with allowed addresses and an old secret's grace included), and
the longest names the service accepts (a file's and a folder's 255 characters without a space,
a key's 100, a device's User-Agent) wrap inside their cells on every page that shows them,
without squeezing the other columns until their words break in the middle. Where a list's rows
are cards, every part of a field's value stays beside its label; on a phone, every checkbox is a
target a finger can hit."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.support.api import PASSWORD
from tests.support.browser import Dashboard, Tab, sign_in

pytestmark = pytest.mark.asyncio(loop_scope="module")

# From a small phone to a wide screen, with the widths where the keys table spilled out of its
# card (833 to 1365 px) and each side of where it turns into cards.
WIDTHS = [360, 390, 834, 900, 1024, 1100, 1200, 1280, 1281, 1366, 1440, 1920]
LONG_FILE = "x" * 255
LONG_FOLDER = "y" * 255
LONG_KEY = "k" * 100
# An unknown User-Agent is shown as it came, cut to 60 characters: one unbroken word.
LONG_AGENT = "Z" * 300
CSV = b"a,b\n1,2\n"
ADDRESSES = ["2001:db8:85a3:1234:5678:8a2e:370:7334/128", "203.0.113.0/24", "198.51.100.7/32"]

# How far the page and its widest card reach past the window, and the words of ordinary length
# (not the long names, which must break) drawn on more than one line: split in the middle.
MEASURE = """() => {
    const root = document.scrollingElement;
    const overflowing = [...document.querySelectorAll('.card')].filter(
        (card) => card.checkVisibility() && card.scrollWidth > card.clientWidth + 1,
    ).map((card) => card.id || card.className);
    // Shown, and not clipped away (a list's column names, kept for a screen reader on a phone).
    const shown = (element) => {
        for (let node = element; node; node = node.parentElement) {
            if (getComputedStyle(node).clip !== 'auto') return false;
        }
        return element.checkVisibility();
    };
    const split = [];
    const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        // A link's address breaks anywhere by design (its slug is no word).
        if (!shown(text.parentElement) || text.parentElement.closest('a[href^="http"]')) continue;
        for (const found of text.textContent.matchAll(/[A-Za-z]{2,}/g)) {
            if (found[0].length > 30) continue; // a long name, which must break
            const range = document.createRange();
            range.setStart(text, found.index);
            range.setEnd(text, found.index + found[0].length);
            const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
            if (lines.size > 1) split.push(found[0]);
        }
    }
    // A list's row as a card (each field a grid of its label and its value): any part of the
    // value that sits under the label, in its column, instead of beside it.
    const underLabel = [];
    for (const cell of document.querySelectorAll('td')) {
        const style = getComputedStyle(cell);
        const columns = style.gridTemplateColumns.split(' ');
        if (style.display !== 'grid' || columns.length !== 2 || !cell.checkVisibility()
            || getComputedStyle(cell, '::before').content === 'none') continue;
        const valueLeft = cell.getBoundingClientRect().left + parseFloat(style.paddingLeft)
            + parseFloat(columns[0]);
        for (const part of cell.childNodes) {
            let box;
            if (part.nodeType === Node.ELEMENT_NODE && part.checkVisibility()) {
                box = part.getBoundingClientRect();
            } else if (part.nodeType === Node.TEXT_NODE && part.textContent.trim()) {
                const range = document.createRange();
                range.selectNodeContents(part);
                box = range.getBoundingClientRect();
            }
            if (box && box.width && box.left < valueLeft - 1) {
                underLabel.push(`${cell.className}: ${part.className || part.textContent}`);
            }
        }
    }
    // On a phone, a checkbox smaller than a finger's target (24 px).
    const smallBoxes = root.clientWidth > 832 ? [] : [
        ...document.querySelectorAll('input[type="checkbox"]'),
    ].filter((box) => box.checkVisibility() && (box.offsetWidth < 24 || box.offsetHeight < 24))
        .map((box) => `${box.id || box.dataset.select || box.name}: ${box.offsetWidth} px`);
    return {scroll: root.scrollWidth, width: root.clientWidth, overflowing, split, underLabel,
        smallBoxes};
}"""


async def misfits(page: Page) -> dict[str, Any] | None:
    """What is wrong with the page's width (wider than the window, a card not holding its
    content, a word split, a card's value under its label, a checkbox too small for a finger
    on a phone), or None."""
    found: dict[str, Any] = await page.evaluate(MEASURE)
    if found["scroll"] <= found["width"] and not any(
        found[name] for name in ("overflowing", "split", "underLabel", "smallBoxes")
    ):
        return None
    return found


async def api(dashboard: Dashboard, method: str, path: str, token: str, body: Any = None) -> Any:
    status, answer = await dashboard.api(method, path, token=token, json=body)
    assert status in (200, 201), answer
    return answer["data"]


async def test_the_keys_table_fits_its_card_at_every_width(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    await api(dashboard, "POST", "/keys", token, {"name": "ci", "permissions": ["files.read"]})
    office = await api(
        dashboard,
        "POST",
        "/keys",
        token,
        {"name": "office", "permissions": ["files.read", "files.write", "settings.write"]},
    )
    await api(dashboard, "PATCH", f"/keys/{office['id']}", token, {"allowed_ips": ADDRESSES})
    await api(dashboard, "POST", f"/keys/{office['id']}/roll", token, {"grace_seconds": 3600})

    for width in WIDTHS:
        await page.set_viewport_size({"width": width, "height": 800})
        await page.goto("/keys")
        await expect(page.locator("#keys-body .usage-totals")).to_have_count(2)
        await expect(page.locator("#keys-body .grace")).to_have_count(1)
        assert await misfits(page) is None, width
        # On a phone each address is whole on its line, under its label; where a column is
        # narrower than an IPv6 network, it breaks after a colon only (js/keys/list.js).
        if width == 390:
            lines = await page.locator("#keys-body ul.ip-list code").evaluate_all(
                "(codes) => codes.map((code) => new Set([...code.getClientRects()].map("
                "(rect) => Math.round(rect.top))).size)"
            )
            assert lines == [1, 1, 1], (width, lines)


async def test_the_longest_names_wrap_inside_every_page(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    folder = await api(dashboard, "POST", "/folders", token, {"name": LONG_FOLDER})
    inner = await api(
        dashboard, "POST", "/folders", token, {"name": "Photos", "parent_id": folder["id"]}
    )
    data = await dashboard.upload(token, "data.csv", CSV, "text/csv")
    await api(dashboard, "PATCH", f"/files/{data['id']}", token, {"name": LONG_FILE})
    await dashboard.upload(token, "report.csv", CSV, "text/csv", folder_id=inner["id"])
    await api(dashboard, "POST", "/aliases", token, {"file_id": data["id"]})
    await api(dashboard, "POST", "/aliases", token, {"folder_id": inner["id"]})
    await api(dashboard, "POST", "/keys", token, {"name": LONG_KEY, "permissions": ["files.read"]})
    await api(dashboard, "PATCH", "/settings", token, {"default_folder_id": inner["id"]})
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/auth/login",
        json={"email": user, "password": PASSWORD},
        headers={"User-Agent": LONG_AGENT},
    ) as response:
        assert response.status == 200, await response.text()

    pages = {
        "/files": "#files-body tr",
        f"/files?folder={inner['id']}": "#files-body tr",
        "/files?view=gallery": "#files-gallery li",
        "/aliases": "#aliases-body tr",
        "/keys": "#keys-body tr",
        "/sessions": "#sessions-body tr",
        "/activity": "#activity-body tr",
        "/settings": "#setting-folder option",
    }
    wrong = {}
    for width in (360, 834, 1280, 1920):
        await page.set_viewport_size({"width": width, "height": 800})
        for path, listed in pages.items():
            await page.goto(path)
            await expect(page.locator(listed).first).to_be_attached()
            found = await misfits(page)
            if found:
                found["split"] = found["split"][:5]
                wrong[f"{path} at {width} px"] = found
    assert not wrong, "\n".join(f"{where}: {found}" for where, found in wrong.items())

    # Said in a dialog and in a sentence, a long name wraps there too.
    await page.set_viewport_size({"width": 390, "height": 800})
    await page.goto("/files")
    row = page.locator("#files-body tr").filter(has_text=LONG_FILE)
    await row.get_by_role("button", name="Rename").click()
    dialog = page.locator("#name-dialog")
    await expect(dialog).to_be_visible()
    assert await dialog.evaluate("(d) => d.scrollWidth <= d.clientWidth")
    await page.locator("#name-input").fill(LONG_FOLDER)
    await page.locator("#name-submit").click()
    await expect(page.locator("#page-status")).to_have_text(
        f"Renamed {LONG_FILE} to {LONG_FOLDER}."
    )
    assert await misfits(page) is None
