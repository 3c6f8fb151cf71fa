"""The security headers of the dashboard and the API, and that the browser enforces them: a
strict Content-Security-Policy that the pages never violate, and no framing."""

from __future__ import annotations

import re
from importlib.resources import files
from importlib.resources.abc import Traversable

import pytest
from aiohttp import web
from playwright.async_api import expect

from service.api.context import SETTINGS
from service.dashboard.routes import ASSETS, PAGES, render
from tests.support.browser import (
    PAGE_CSP,
    TIMEOUT_MS,
    Dashboard,
    Tab,
    create_key,
    directives,
    key_row,
    sign_in,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

# What the browser's own view of an image, a sound or a video needs, nothing more.
RESOURCE_CSP = {
    "default-src": ["'none'"],
    "style-src": ["'unsafe-inline'"],
    "media-src": ["'self'"],
    "frame-ancestors": ["'none'"],
}


def assert_common_headers(headers: object, csp: dict[str, list[str]]) -> None:
    assert directives(headers["Content-Security-Policy"]) == csp  # type: ignore[index]
    assert headers["X-Frame-Options"] == "DENY"  # type: ignore[index]
    assert headers["Referrer-Policy"] == "no-referrer"  # type: ignore[index]
    assert headers["Cache-Control"] == "no-store"  # type: ignore[index]
    assert headers["X-Content-Type-Options"] == "nosniff"  # type: ignore[index]


def javascript_modules(folder: Traversable, prefix: str) -> dict[str, tuple[str, str]]:
    """Every file under ``static/js/``, by the path it is served at: each is a module."""
    found: dict[str, tuple[str, str]] = {}
    for entry in folder.iterdir():
        if entry.is_dir():
            found.update(javascript_modules(entry, f"{prefix}{entry.name}/"))
        else:
            found[f"/static/{prefix}{entry.name}"] = ("text/javascript", prefix + entry.name)
    return found


async def test_pages_assets_and_api_carry_the_security_headers(dashboard: Dashboard) -> None:
    static = files("service.dashboard").joinpath("static")
    modules = javascript_modules(static.joinpath("js"), "js/")
    assert "/static/js/pages/keys.js" in modules and "/static/js/api.js" in modules
    served = {
        **{path: ("text/html", name) for path, name in PAGES.items()},  # every page
        **modules,
        "/static/base.css": ("text/css", "base.css"),  # every page's colours and basics
        "/static/style.css": ("text/css", "style.css"),
        "/static/alias.css": ("text/css", "alias.css"),  # a vanity alias's public pages
        "/static/favicon.svg": ("image/svg+xml", "favicon.svg"),
    }
    # Nothing else is an asset: no page under /static/, nothing the list above does not name.
    assert {f"/static/{name}" for name in ASSETS} == set(served) - set(PAGES)
    for path, (content_type, name) in served.items():
        async with dashboard.http.get(dashboard.base + path) as response:
            assert response.status == 200, path
            assert response.content_type == content_type, path
            # A page as the service renders it (its settings written in), an asset as it is.
            expected = (
                render(name, dashboard.app[SETTINGS])
                if content_type == "text/html"
                else static.joinpath(*name.split("/")).read_bytes()
            )
            assert await response.read() == expected, path
            csp = PAGE_CSP if content_type == "text/html" else RESOURCE_CSP
            assert_common_headers(response.headers, csp)

    # The API's answers, successes and refusals alike.
    async with dashboard.http.get(dashboard.base + "/api/v1/files") as response:
        assert response.status == 401
        assert_common_headers(response.headers, RESOURCE_CSP)

    # Only the dashboard's own paths are served; the rest keep the API's JSON 404.
    for path in (
        "/nope",
        "/keys/",
        "/static/",
        "/static/nope.js",
        "/static/../app.py",
        "/static/app.js",
        "/static/js/",
        "/static/js/nope.js",
        "/static/keys.html",
    ):
        async with dashboard.http.get(dashboard.base + path) as response:
            assert response.status == 404, path
            assert response.content_type == "application/json", path
            body = await response.json()
            assert body["success"] is False and body["error"]["code"] == "route_not_found"
            assert_common_headers(response.headers, RESOURCE_CSP)
    async with dashboard.http.post(dashboard.base + "/") as response:
        assert response.status == 405
        assert (await response.json())["error"]["code"] == "method_not_allowed"


async def test_the_browser_reports_no_csp_violation_across_the_dashboard(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    response = await page.goto("/")
    assert response is not None
    assert directives(await response.header_value("content-security-policy") or "") == PAGE_CSP
    assert await violations(page) == []

    await sign_in(page, user)
    await create_key(page, "csp check", ["files.read", "settings.write"])
    await page.get_by_role("button", name="Copy", exact=True).click()
    await expect(page.locator("#copy-status")).not_to_have_text("")
    await key_row(page, "csp check").get_by_role("button", name=re.compile("^Revoke")).click()
    await page.get_by_role("dialog").get_by_role("button", name="Revoke key").click()
    await expect(page.locator("#keys-empty")).to_be_visible()
    assert await violations(page) == []
    # The activity page: the trail of what was just done, filtered, then log out from there.
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Activity").click()
    await expect(page.locator("#activity-body tr")).to_have_count(3)
    await page.get_by_label("Event type").select_option("key.revoked")
    await expect(page.locator("#activity-body tr")).to_have_count(1)
    assert await violations(page) == []
    # The files page with a folder opened and its dialogs, and the settings page saving.
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Files").click()
    await page.get_by_role("button", name="New folder").click()
    await page.get_by_role("dialog").get_by_label("Name").fill("csp folder")
    await page.get_by_role("dialog").get_by_role("button", name="Create folder").click()
    await page.get_by_role("link", name="csp folder").click()
    await expect(page.locator("#files-title")).to_have_text("csp folder")
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Aliases").click()
    await page.get_by_role("button", name="Create alias").click()
    await page.get_by_role("dialog").get_by_label("A folder").check()
    await page.get_by_role("dialog").get_by_role("button", name="Create alias").click()
    await expect(page.locator("#aliases-body tr")).to_have_count(1)
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Settings").click()
    await page.get_by_label("Default alias view limit").fill("3")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.locator("#settings-status")).to_be_visible()
    assert await violations(page) == []
    # The security page (its QR code and passkeys: tests/browser/test_security_page.py).
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Security").click()
    await expect(page.locator("#mfa-loading")).to_be_hidden()
    assert await violations(page) == []
    await page.get_by_role("button", name="Log out").click()
    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.locator("#notice")).to_be_visible()
    assert await violations(page) == []

    csp_messages = [
        line
        for line in tab.console
        if re.search(r"Content Security Policy|Refused to|Trusted Type", line, re.IGNORECASE)
    ]
    assert csp_messages == []

    # The recorder does see violations: an inline style, an HTML string and a foreign image are
    # each refused (so the empty lists above mean something).
    refused = await page.evaluate(
        """async () => {
            document.body.setAttribute('style', 'background: red');
            let htmlRefused = false;
            try { document.body.insertAdjacentHTML('beforeend', '<b>x</b>'); }
            catch (error) { htmlRefused = error instanceof TypeError; }
            const image = new Image();
            image.src = 'http://127.0.0.2:9/pixel.png';
            await new Promise((resolve) => setTimeout(resolve, 200));
            return htmlRefused;
        }"""
    )
    assert refused is True
    await page.wait_for_function("() => window.__cspViolations.length >= 3", timeout=TIMEOUT_MS)
    seen = " | ".join(await violations(page))
    for directive in ("style-src-attr", "require-trusted-types-for", "img-src"):
        assert directive in seen, seen
    background = await page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(255, 0, 0)"


async def test_no_page_can_frame_the_dashboard(tab: Tab, dashboard: Dashboard) -> None:
    """Another origin on this machine (a second server here) frames a page of its own, which
    loads, and the dashboard, which the browser refuses."""
    page = tab.page

    async def host(request: web.Request) -> web.Response:
        return web.Response(
            text=f'<iframe id="own" src="/child"></iframe>'
            f'<iframe id="dashboard" src="{dashboard.base}/"></iframe>',
            content_type="text/html",
        )

    async def child(request: web.Request) -> web.Response:
        return web.Response(text="<p id=child>framed</p>", content_type="text/html")

    other = web.Application()
    other.router.add_get("/host", host)
    other.router.add_get("/child", child)
    runner = web.AppRunner(other, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        await page.goto(f"http://127.0.0.1:{runner.addresses[0][1]}/host")
        await expect(page.frame_locator("#own").locator("#child")).to_have_text("framed")
        await page.wait_for_timeout(500)  # give the refused frame time to (not) load
        await expect(page.frame_locator("#dashboard").locator("#login-form")).to_have_count(0)
        refused = page.frame("dashboard")
        assert refused is not None and not refused.url.startswith(dashboard.base), refused
        assert any(
            "violates" in line and "frame-ancestors 'none'" in line for line in tab.console
        ), tab.console
    finally:
        await runner.cleanup()
