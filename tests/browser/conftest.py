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

import aiohttp
import pytest
import pytest_asyncio
import redis as redis_sync
from aiohttp import web
from playwright.async_api import Browser, async_playwright

from service.api._aiohttp import EnvelopeAppRunner
from service.app import create_app
from service.config import Settings
from tests.support.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    LOCALE,
    TIMEOUT_MS,
    Dashboard,
    Tab,
)
from tests.support.clock import FakeClock
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
    if redis_server.process is None:  # another test stopped it and failed before restarting
        redis_server.start()
    client = redis_sync.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    clock = FakeClock()
    settings = Settings(redis_url=redis_server.url, bcrypt_cost=4, redis_timeout_seconds=2)
    app = create_app(settings, clock=clock)
    runner = EnvelopeAppRunner(app, access_log=None)
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


@pytest_asyncio.fixture(loop_scope="module")
async def tab(browser: Browser, dashboard: Dashboard) -> AsyncIterator[Tab]:
    context = await browser.new_context(base_url=dashboard.base, viewport=DESKTOP, locale=LOCALE)
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
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
