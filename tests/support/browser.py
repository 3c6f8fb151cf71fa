"""The dashboard in headless Chromium: where the browser is and how it is started, the running
service the pages talk to, a tab with what it reported, and the steps and checks the page tests
share (signing in, creating a key, focus, sideways scrolling, the Content-Security-Policy).

Screenshots go to ``artifacts/`` (gitignored); ``publish_docs_screenshot`` copies one to
``docs/dashboard-keys.png`` only when ``UPDATE_DOCS_SCREENSHOT=1`` is set.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import redis as redis_sync
from aiohttp import web
from playwright.async_api import BrowserContext, Page, expect

from service.api._aiohttp import EnvelopeAppRunner
from service.api.context import POLICY
from service.app import create_app
from service.config import Settings
from service.domain.permissions import ENFORCED_BY
from tests.support.api import PASSWORD
from tests.support.clock import FakeClock, parse_iso
from tests.support.paths import REPO_ROOT
from tests.support.redis import STORE_TIMEOUT_SECONDS, RedisServer

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
# The bound on every wait for the page (an element to show, a navigation, a form's answer): it
# costs nothing while the page does what is expected. 10 s was too short for a form's answer on a
# busy machine (a load of 13 on 2 cores), where Chromium and the service share the cores.
TIMEOUT_MS = 45_000
DESKTOP = {"width": 1280, "height": 800}
# The browser's language: the pages write dates in its format ("27 Nov 2026, 07:24").
LOCALE = "en-GB"
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
        self,
        method: str,
        path: str,
        *,
        key: str | None = None,
        token: str | None = None,
        json: Any = None,
    ) -> tuple[int, dict[str, Any]]:
        """Call the API as a script would, outside the browser, with ``json`` as the body when
        given: (status, JSON body)."""
        headers = {}
        if key is not None:
            headers["X-API-Key"] = key
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with self.http.request(
            method, f"{self.base}/api/v1{path}", headers=headers, json=json
        ) as response:
            return response.status, await response.json()

    async def upload(
        self,
        token: str,
        name: str,
        data: bytes = b"hello",
        content_type: str = "text/plain",
        **fields: str,
    ) -> dict[str, Any]:
        """Upload a file as a script would (``POST /files``, ``fields`` before the file): the
        file's view."""
        form = aiohttp.FormData()
        for field_name, value in fields.items():
            form.add_field(field_name, value)
        form.add_field("file", data, filename=name, content_type=content_type)
        async with self.http.post(
            f"{self.base}/api/v1/files", data=form, headers={"Authorization": f"Bearer {token}"}
        ) as response:
            assert response.status == 201, await response.text()
            return dict((await response.json())["data"])


@asynccontextmanager
async def serving(
    redis_server: RedisServer, port: int = 0, **settings: Any
) -> AsyncIterator[Dashboard]:
    """The real service (``create_app``) on a loopback port (``port``, or a free one) over
    ``redis_server``, emptied first, with a ``FakeClock`` and ``settings`` beyond the tests' own
    (a cheap bcrypt cost)."""
    if redis_server.process is None:  # another test stopped it and failed before restarting
        redis_server.start()
    client = redis_sync.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    clock = FakeClock()
    # Files (and the generated secrets key) in a directory of the service's own, never ./data.
    home = tempfile.TemporaryDirectory(prefix="dashboard-")
    settings.setdefault("data_dir", Path(home.name) / "data")
    app = create_app(
        Settings(
            redis_url=redis_server.url,
            bcrypt_cost=4,
            redis_timeout_seconds=STORE_TIMEOUT_SECONDS,
            **settings,
        ),
        clock=clock,
    )
    runner = EnvelopeAppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    port = runner.addresses[0][1]
    http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
    try:
        yield Dashboard(app, clock, f"http://127.0.0.1:{port}", http)
    finally:
        await http.close()
        await runner.cleanup()
        home.cleanup()


@dataclass
class Tab:
    """One page in its own browser context, with everything it reported collected."""

    page: Page
    context: BrowserContext
    console: list[str] = field(default_factory=list)
    request_urls: list[str] = field(default_factory=list)

    async def allow_clipboard(self, origin: str) -> None:
        """Let ``origin``'s pages read and write the clipboard (a copy button, and the test
        reading what it copied)."""
        await self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)

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


def clean_console(tab: Tab) -> list[str]:
    """What the tab's pages wrote to the console, but their debug lines."""
    return [line for line in tab.console if not line.startswith("debug")]


async def own_session_id(dashboard: Dashboard, token: str) -> str:
    """The public id of the session ``token`` opened, as ``GET /auth/sessions`` lists it."""
    status, body = await dashboard.api("GET", "/auth/sessions", token=token)
    assert status == 200, body
    return str(next(item["id"] for item in body["data"]["sessions"] if item["current"]))


# -- times as the pages show them --------------------------------------------------------------


def local_text(iso: str, offset: timedelta = timedelta(0)) -> str:
    """The local date and time a page shows for the instant ``iso``, in ``LOCALE`` and a time
    zone ``offset`` from UTC: "27 Nov 2026, 07:24"."""
    instant = parse_iso(iso) + offset
    return f"{instant.day} {instant:%b %Y, %H:%M}"


def utc_text(iso: str) -> str:
    """The exact instant a page shows on hover: "2026-11-27 01:54:30 UTC"."""
    return f"{parse_iso(iso):%Y-%m-%d %H:%M:%S} UTC"


async def same_time_as(page: Page, clock: FakeClock) -> None:
    """Stop the browser's clock at the service's, so that "3 minutes ago" is as of the service's
    now (which moves only when a test says)."""
    await page.clock.set_fixed_time(clock.now_ms() / 1000)


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


def file_row(page: Page, name: str) -> Any:
    """The files page's row of the file named exactly ``name``."""
    return page.locator("#files-body tr").filter(
        has=page.locator("td.file-name", has_text=re.compile(f"^{re.escape(name)}$"))
    )


def folder_row(page: Page, name: str) -> Any:
    """The files page's row of the folder named exactly ``name``."""
    return page.locator("#folders-body tr").filter(
        has=page.locator("td.folder-name", has_text=re.compile(f"^{re.escape(name)}$"))
    )


async def until(condition: Callable[[], bool], failure: str) -> None:
    """Wait (bounded) for something no page shows (the service's own state, what the browser
    reports outside the page) to come true."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT_MS / 1000
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, failure
        await asyncio.sleep(0.02)


async def throttle(tab: Tab, page: Page, bytes_per_second: int) -> Any:
    """``page``'s uploads slowed to ``bytes_per_second``, through a DevTools session of its own
    (returned: ``upload_rate`` changes it, -1 lifts it)."""
    cdp = await tab.context.new_cdp_session(page)
    await cdp.send("Network.enable")
    await upload_rate(cdp, bytes_per_second)
    return cdp


async def upload_rate(cdp: Any, bytes_per_second: int) -> None:
    await cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": 0,
            "downloadThroughput": -1,
            "uploadThroughput": bytes_per_second,
        },
    )


async def sign_in(page: Page, email: str, password: str = PASSWORD) -> None:
    """Sign in through the login form and wait for the keys page to have loaded the list."""
    await page.goto("/")
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/keys")
    await expect(page.locator("#keys-loading")).to_be_hidden()
    await expect(page.locator("#account-email")).to_have_text(email)


async def open_files_page(page: Page, user: str, password: str = PASSWORD) -> None:
    """Sign in as ``user`` and go to the files page by its link, its list loaded."""
    await sign_in(page, user, password)
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Files").click()
    await page.wait_for_url("**/files")
    await expect(page.locator("#files-loading")).to_be_hidden()
    current = page.get_by_role("link", name="Files", exact=True)
    await expect(current).to_have_attribute("aria-current", "page")


def upload_item(page: Page, name: str) -> Any:
    """The upload tray's line of the file ``name``."""
    return page.locator("#uploads li").filter(
        has=page.locator(".upload-name", has_text=re.compile(f"^{re.escape(name)}$"))
    )


LATER_PERMISSIONS = "Also grant permissions for features not yet available"


async def create_key(page: Page, name: str, permissions: list[str], expires_days: int = 90) -> str:
    """Create a key through the "Create key" dialog; returns the secret the page shows. A
    permission for a feature not yet available is chosen behind its disclosure, as a person
    would."""
    await page.locator("#create-open").click()
    dialog = page.get_by_role("dialog", name="Create a key")
    await expect(dialog).to_be_visible()
    await dialog.get_by_label("Name", exact=True).fill(name)
    if any(ENFORCED_BY[permission] != "service" for permission in permissions):
        await dialog.get_by_text(LATER_PERMISSIONS).click()
    for permission in permissions:
        await dialog.locator(f'input[name="permissions"][value="{permission}"]').check()
    await dialog.get_by_label("Expires after").select_option(str(expires_days))
    await dialog.get_by_role("button", name="Create key").click()
    await expect(dialog).to_be_hidden()
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


# -- focus and layout ----------------------------------------------------------------------------


async def focused(page: Page) -> str:
    """What has the focus: its id, or a description when it has none."""
    return await page.evaluate(
        """() => {
            const el = document.activeElement;
            if (!el || el === document.body) return "body";
            if (el.id) return "#" + el.id;
            if (el.dataset && el.dataset.keyId) return "revoke:" + el.dataset.keyId;
            return el.tagName.toLowerCase();
        }"""
    )


async def assert_focus_is_visible(page: Page) -> None:
    outline = await page.evaluate(
        """() => {
            const style = getComputedStyle(document.activeElement);
            return [style.outlineStyle, parseFloat(style.outlineWidth)];
        }"""
    )
    assert outline[0] != "none" and outline[1] >= 2, f"no visible focus on {await focused(page)}"


async def no_horizontal_scroll(page: Page) -> None:
    sizes = await page.evaluate(
        "() => [document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]"
    )
    assert sizes[0] <= sizes[1], f"the page scrolls sideways: {sizes[0]} > {sizes[1]}"


# -- the Content-Security-Policy ----------------------------------------------------------------


PAGE_CSP = {
    "default-src": ["'none'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "blob:"],
    "media-src": ["blob:"],
    "frame-src": ["'self'", "blob:"],
    "connect-src": ["'self'"],
    "base-uri": ["'none'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
    "require-trusted-types-for": ["'script'"],
    "trusted-types": ["'none'"],
}


def directives(header: str) -> dict[str, list[str]]:
    parsed: dict[str, list[str]] = {}
    for part in header.split(";"):
        name, *values = part.split()
        assert name not in parsed, f"{name} given twice"
        parsed[name] = values
    return parsed


# Runs before any page script of every tab (the ``tab`` fixture adds it): records every
# violation the browser reports, for ``violations``.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  window.__cspViolations.push(event.effectiveDirective + ' ' + (event.blockedURI || ''));
});
"""


async def violations(page: Page) -> list[str]:
    return await page.evaluate("() => window.__cspViolations")


# -- contrast ------------------------------------------------------------------------------------


# Luminance and contrast as WCAG 2 defines them; the colour of text over what is behind it
# (its own background, else its ancestors', blended where one is translucent).
CONTRASTS = """() => {
    const rgba = (text) => {
        const parts = text.match(/[\\d.]+/g).map(Number);
        return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    };
    const over = (top, bottom) => top.slice(0, 3).map(
        (channel, index) => channel * top[3] + bottom[index] * (1 - top[3])).concat([1]);
    const background = (element) => {
        const layers = [];
        for (let node = element; node; node = node.parentElement) {
            const colour = rgba(getComputedStyle(node).backgroundColor);
            if (colour[3] > 0) layers.push(colour);
            if (colour[3] === 1) break;
            if (node.tagName === 'DIALOG') break;
        }
        let result = [255, 255, 255, 1];
        if (layers.length && layers[layers.length - 1][3] === 1) result = layers.pop();
        while (layers.length) result = over(layers.pop(), result);
        return result;
    };
    const luminance = ([r, g, b]) => {
        const linear = (value) => {
            const c = value / 255;
            return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
        };
        return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
    };
    const found = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
        const element = text.parentElement;
        if (!text.textContent.trim() || !element.checkVisibility()) continue;
        if (element.closest(':disabled, .visually-hidden, .skip-link')) continue;
        const style = getComputedStyle(element);
        const back = background(element);
        const fore = over(rgba(style.color), back);
        const [light, dark] = [luminance(fore), luminance(back)].sort((a, b) => b - a);
        const size = parseFloat(style.fontSize);
        const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
        found.push({
            text: text.textContent.trim().slice(0, 40),
            ratio: Math.round(((light + 0.05) / (dark + 0.05)) * 100) / 100,
            needed: large ? 3 : 4.5,
        });
    }
    return found;
}"""


async def low_contrasts(page: Page, texts: int = 6) -> list[dict[str, Any]]:
    """Every text shown whose contrast is below AA's; the page shows at least ``texts``."""
    await page.mouse.move(0, 0)  # measured as shown, not as under the pointer
    found = await page.evaluate(CONTRASTS)
    assert len(found) >= texts  # the walk does find the page's text
    return [item for item in found if item["ratio"] < item["needed"]]
