"""The keys page shows what each key did over the last 30 days: a small chart of its requests per
day (its refusals over them), the totals in words, the address it was last used from, and a
mark on a key nobody used for 30 days; readable in both schemes and on a phone."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from playwright.async_api import expect

from service.api.context import KEY_USAGE
from tests.support.browser import (
    Dashboard,
    Tab,
    key_row,
    low_contrasts,
    no_horizontal_scroll,
    same_time_as,
    screenshot,
    sign_in,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_each_key_shows_its_last_30_days_and_idle_keys_are_marked(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    status, _ = await dashboard.api(
        "POST", "/keys", token=token, json={"name": "old", "permissions": ["files.read"]}
    )
    assert status == 201
    # A month on: the old key was never used; a new one is, and once refused.
    dashboard.clock.advance(days=31)
    await same_time_as(page, dashboard.clock)
    await sign_in(page, user)
    token = await tab.stored_token()
    status, created = await dashboard.api(
        "POST", "/keys", token=token, json={"name": "busy", "permissions": ["files.read"]}
    )
    secret = created["data"]["secret_key"]
    for path in ("/files", "/files", "/files", "/folders"):
        await dashboard.api("GET", path, key=secret)
    await dashboard.app[KEY_USAGE].flush()
    today = datetime.fromtimestamp(dashboard.clock.now_ms() / 1000, UTC).date().isoformat()

    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
        await page.goto("/keys")
        busy, old = key_row(page, "busy"), key_row(page, "old")
        await expect(busy.locator("td.key-last-used .usage-totals")).to_have_text(
            "30 days: 4 requests, 1 refused"
        )
        chart = busy.locator("svg.usage-chart")
        await expect(chart).to_have_attribute("role", "img")
        await expect(chart.locator("g.usage-day")).to_have_count(30)
        last = chart.locator("g.usage-day").last
        await expect(last).to_have_attribute("data-date", today)
        await expect(last.locator("title")).to_have_text(f"{today}: 4 requests, 1 refused")
        await expect(chart.locator("rect.usage-requests")).to_have_count(1)
        await expect(chart.locator("rect.usage-refused")).to_have_count(1)
        await expect(busy.locator("td.key-last-used .last-use")).to_contain_text(
            re.compile(r"^now .*from 127\.0\.0\.1$")
        )
        await expect(busy.locator(".badge.is-idle")).to_have_count(0)
        await expect(old.locator("td.key-last-used .usage-totals")).to_have_text(
            "30 days: 0 requests, 0 refused"
        )
        await expect(old.locator(".badge.is-idle")).to_have_text("Idle 30 days: safe to revoke")
        assert await low_contrasts(page) == [], scheme
        # The bars stand apart from the empty days' and from each other in either scheme.
        fills = await chart.evaluate(
            """(svg) => ['usage-slot', 'usage-requests', 'usage-refused'].map(
                (name) => getComputedStyle(svg.querySelector('.' + name)).fill)"""
        )
        assert len(set(fills)) == 3, fills
        await screenshot(page, f"keys-usage-{scheme}")

    await page.set_viewport_size({"width": 375, "height": 740})
    await page.reload()
    await expect(key_row(page, "busy").locator("svg.usage-chart")).to_be_visible()
    await no_horizontal_scroll(page)
    label = await page.evaluate(
        """() => getComputedStyle(
            document.querySelector('#keys-body td.key-last-used'), '::before').content"""
    )
    assert label == '"Last used"'
    await screenshot(page, "phone-keys-usage")
    assert not [line for line in tab.console if line.startswith("pageerror")], tab.console
