"""Browser tests of the dashboard: Debian's Chromium, headless, driven by Playwright's async API.

Each module gets one event loop (``pytestmark = pytest.mark.asyncio(loop_scope="module")``), one
browser and one running app: the real service (``create_app``) on a free loopback port over the
session's real Redis server, with a ``FakeClock`` the tests move to expire sessions. Each test gets
a fresh browser context (so its own sessionStorage) and a user of its own. Every wait is bounded.

Screenshots go to ``artifacts/`` (gitignored). The keys page also goes to
``docs/dashboard-keys.png``, the README's picture, only when ``UPDATE_DOCS_SCREENSHOT=1`` is set:
keys and dates differ on every run, and a test run must not change tracked files.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import redis as redis_sync
from aiohttp import web
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from service.api._aiohttp import EnvelopeAppRunner
from service.api.context import POLICY
from service.app import create_app
from service.config import Settings
from tests.conftest import PASSWORD, FakeClock, RedisServer

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "artifacts"
DOCS_SCREENSHOT = REPO_ROOT / "docs" / "dashboard-keys.png"

CHROMIUM = "/usr/bin/chromium"
# The network is closed: no first-run, update, sync or background fetches, no QUIC probing.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000
DESKTOP = {"width": 1280, "height": 800}
SECRET_PATTERN = re.compile(r"^fhk_[0-9A-Za-z]{49}$")

expect.set_options(timeout=TIMEOUT_MS)
_emails = itertools.count(1)


@dataclass
class Dashboard:
    """The running service and what the tests reach into: its app, clock and address."""

    app: web.Application
    clock: FakeClock
    base: str
    http: aiohttp.ClientSession

    async def create_user(self, email: str | None = None, password: str = PASSWORD) -> str:
        email = email or f"user{next(_emails)}@example.com"
        await self.app[POLICY].users.create_user(email, password)
        return email

    async def api(
        self, method: str, path: str, *, key: str | None = None, token: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Call the API as a script would, outside the browser: (status, JSON body)."""
        headers = {}
        if key is not None:
            headers["X-API-Key"] = key
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with self.http.request(
            method, f"{self.base}/api/v1{path}", headers=headers
        ) as response:
            return response.status, await response.json()


@dataclass
class Tab:
    """One page in its own browser context, with everything it reported collected."""

    page: Page
    context: BrowserContext
    console: list[str] = field(default_factory=list)
    request_urls: list[str] = field(default_factory=list)

    async def session_storage(self) -> str:
        """All of this tab's sessionStorage and localStorage, as one string to search."""
        return await self.page.evaluate(
            "() => JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)])"
        )

    async def stored_token(self) -> str:
        token = await self.page.evaluate(
            "() => JSON.parse(sessionStorage.getItem('filehost.session') || '{}').token || ''"
        )
        assert token.startswith("fhs_"), "no session token in sessionStorage"
        return token


def screenshot_path(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / f"{name}.png"


async def screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    path = screenshot_path(name)
    await page.screenshot(path=str(path), full_page=full_page, timeout=TIMEOUT_MS)
    return path


def publish_docs_screenshot(path: Path) -> None:
    if os.environ.get("UPDATE_DOCS_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, DOCS_SCREENSHOT)


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
    context = await browser.new_context(base_url=dashboard.base, viewport=DESKTOP)
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


async def sign_in(page: Page, email: str, password: str = PASSWORD) -> None:
    """Sign in through the login form and wait for the keys page to have loaded the list."""
    await page.goto("/")
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/keys")
    await expect(page.locator("#keys-loading")).to_be_hidden()
    await expect(page.locator("#account-email")).to_have_text(email)


async def create_key(page: Page, name: str, permissions: list[str], expires_days: int = 90) -> str:
    """Create a key through the form; returns the secret the page shows."""
    await page.get_by_label("Name", exact=True).fill(name)
    for permission in permissions:
        await page.locator(f'input[name="permissions"][value="{permission}"]').check()
    await page.get_by_label("Expires after").select_option(str(expires_days))
    await page.get_by_role("button", name="Create key").click()
    panel = page.locator("#new-secret")
    await expect(panel).to_be_visible()
    await expect(page.locator("#new-secret-name")).to_have_text(name)
    secret = await page.locator("#new-secret-value").input_value()
    assert SECRET_PATTERN.match(secret), "the page did not show a well-formed secret"
    return secret


def key_row(page: Page, name: str) -> Any:
    return page.locator("#keys-body tr").filter(
        has=page.locator("td.key-name", has_text=re.compile(f"^{re.escape(name)}$"))
    )
