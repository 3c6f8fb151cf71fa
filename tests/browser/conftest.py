"""Browser tests of the dashboard: Debian's Chromium, headless, driven by Playwright's async API.

Each module gets one event loop (``pytestmark = pytest.mark.asyncio(loop_scope="module")``), one
browser and one running app: the real service (``create_app``) on a free loopback port over the
session's real Redis server, with a ``FakeClock`` the tests move to expire sessions. Each test gets
a fresh browser context (so its own sessionStorage) and a user of its own. Every wait is bounded.

Screenshots go to ``artifacts/`` (gitignored). The keys page also goes to
``docs/dashboard-keys.png``, the README's picture, only when ``UPDATE_DOCS_SCREENSHOT=1`` is set:
keys and dates differ on every run, and a test run must not change tracked files. The helpers the
tests share (the ``Dashboard``, a ``Tab``, signing in, ...) are in ``tests/support/browser.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, async_playwright

from tests.support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    LOCALE,
    RECORD_VIOLATIONS,
    TIMEOUT_MS,
    Dashboard,
    Tab,
    serving,
)
from tests.support.redis import RedisServer


def pytest_itemcollected(item: pytest.Item) -> None:
    # Every test here drives Chromium: marked ``browser``, so ``-m "not browser"`` (the quick
    # loop) leaves them out. Called through the item's hook proxy: only for items in this folder.
    item.add_marker(pytest.mark.browser)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test does)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=30_000
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard(redis_server: RedisServer) -> AsyncIterator[Dashboard]:
    async with serving(redis_server) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def tab(browser: Browser, dashboard: Dashboard) -> AsyncIterator[Tab]:
    context = await browser.new_context(base_url=dashboard.base, viewport=DESKTOP, locale=LOCALE)
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    await context.add_init_script(RECORD_VIOLATIONS)  # read by violations(page)
    page = await context.new_page()
    opened = Tab(page, context)
    page.on("console", lambda message: opened.console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: opened.console.append(f"pageerror: {error}"))
    page.on("request", lambda request: opened.request_urls.append(request.url))
    try:
        yield opened
    finally:
        await context.close()


@pytest_asyncio.fixture(loop_scope="module")
async def user(dashboard: Dashboard) -> str:
    """A new account for this test; its password is ``PASSWORD``."""
    return await dashboard.create_user()
