"""The sessions page as a person uses it, in headless Chromium: the account's live sessions with
"this device" marked and each device named ("Chrome on Linux", the User-Agent on hover, an
unknown one as text), ending one and ending every other behind a confirmation (the ended tokens
refused by the API), a refusal reported as a failure, and the password change (the service's own
minimum checked before sending, a wrong current password kept for correcting, then the right
one: the new password logs in, the old one doesn't). By keyboard alone, on a 375 px screen, with
no CSP violation and a clean console.

The module's service asks for passwords of at least ``PASSWORD_MIN`` characters, not the default
8, so that the page is seen to say and check the service's own minimum."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio
from playwright.async_api import Page, Route, expect

from tests.support.api import PASSWORD
from tests.support.browser import (
    PAGE_CSP,
    Dashboard,
    Tab,
    assert_focus_is_visible,
    clean_console,
    directives,
    focused,
    no_horizontal_scroll,
    screenshot,
    serving,
    sign_in,
    violations,
)
from tests.support.pages import parse
from tests.support.redis import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

PASSWORD_MIN = 12


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard(redis_server: RedisServer) -> AsyncIterator[Dashboard]:
    async with serving(redis_server, password_min_length=PASSWORD_MIN) as running:
        yield running


NEW_PASSWORD = "a brand new long password"
# A User-Agent that would run script if it were ever treated as HTML.
HOSTILE_AGENT = '<img src=x onerror="window.__pwned=1">Evil/1.0 <b>bold</b>'


async def api_login(
    dashboard: Dashboard, email: str, password: str = PASSWORD, agent: str = "curl/8.5.0"
) -> tuple[int, dict[str, Any]]:
    """Log in outside the browser, as another device would."""
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/auth/login",
        json={"email": email, "password": password},
        headers={"User-Agent": agent},
    ) as response:
        return response.status, await response.json()


async def other_device(dashboard: Dashboard, email: str, agent: str = "curl/8.5.0") -> str:
    dashboard.clock.advance(seconds=60)  # newest first: a later login, a later row
    status, body = await api_login(dashboard, email, agent=agent)
    assert status == 200, body
    token: str = body["data"]["token"]
    return token


async def open_sessions_page(page: Page, user: str) -> None:
    await sign_in(page, user)
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Sessions").click()
    await page.wait_for_url("**/sessions")
    await expect(page.locator("#sessions-loading")).to_be_hidden()
    current = page.get_by_role("link", name="Sessions", exact=True)
    await expect(current).to_have_attribute("aria-current", "page")


async def test_the_list_marks_this_device_and_ending_another_refuses_its_token(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    other = await other_device(dashboard, user, HOSTILE_AGENT)
    await page.get_by_role("link", name="Sessions").click()
    await page.wait_for_url("**/sessions")
    await expect(page.locator("#sessions-loading")).to_be_hidden()

    # Both sessions, newest first, as the API lists them; only the browser's is "this device".
    status, body = await dashboard.api("GET", "/auth/sessions", token=token)
    assert status == 200
    listed = body["data"]["sessions"]
    assert [item["current"] for item in listed] == [False, True]
    rows = page.locator("#sessions-body tr")
    await expect(rows).to_have_count(2)
    assert [await row.get_attribute("data-session-id") for row in await rows.all()] == [
        item["id"] for item in listed
    ]
    mine, theirs = rows.nth(1), rows.nth(0)
    await expect(mine.locator(".this-device")).to_have_text("This device")
    await expect(theirs.locator(".this-device")).to_have_count(0)
    await expect(mine.get_by_role("button")).to_have_count(0)  # log out ends this one
    # This browser by name, its User-Agent on hover.
    agent = await page.evaluate("() => navigator.userAgent")
    assert "HeadlessChrome/" in agent and "Linux" in agent
    await expect(mine.locator(".device-name")).to_have_text("Headless Chrome on Linux")
    await expect(mine.locator(".device-name")).to_have_attribute("title", agent)

    # One no browser sent is shown as it came, as text: never parsed as HTML.
    await expect(theirs.locator(".device-name")).to_have_text(HOSTILE_AGENT)
    await expect(page.locator("#sessions-body img, #sessions-body b")).to_have_count(0)
    assert await page.evaluate("() => window.__pwned") is None
    # Signed in with a password alone (the account has no second factor).
    await expect(theirs.locator(".session-factors")).to_have_text("Password only")
    await expect(theirs.locator("td.session-ip")).to_have_text(listed[0]["ip"])
    await expect(theirs.locator("td.session-created time")).to_have_attribute(
        "datetime", listed[0]["created_at"]
    )
    await expect(theirs.locator("td.session-last-seen time")).to_have_attribute(
        "datetime", listed[0]["last_seen_at"]
    )
    await expect(theirs.locator("td.session-expires time")).to_have_attribute(
        "datetime", listed[0]["expires_at"]
    )
    await screenshot(page, "sessions-page")

    # End asks first; cancelling keeps the session.
    end = theirs.get_by_role("button", name=re.compile("^End session on"))
    await end.click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text("End this session?")
    await expect(dialog).to_contain_text(HOSTILE_AGENT)
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_be_hidden()
    status, _ = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 200

    await end.click()
    await dialog.get_by_role("button", name="End session").click()
    await expect(dialog).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text(
        f"Ended the session on {HOSTILE_AGENT}."
    )
    await expect(rows).to_have_count(1)
    await expect(page.locator("#sessions-title")).to_be_focused()
    await expect(page.locator("#end-others")).to_be_hidden()  # nothing else to end
    status, body = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 401 and body["error"]["code"] == "invalid_session"
    status, _ = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 200

    assert await violations(page) == []
    assert clean_console(tab) == []


# User-Agents as the common browsers send them, and what the page calls each.
DEVICES = [
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/120.0.0.0 Safari/537.36",
        "Chrome on Windows",
    ),
    (
        "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
        "Firefox on Linux",
    ),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, "
        "like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
        "Safari on iOS",
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.91",
        "Edge on macOS",
    ),
    (
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/120.0.6099.144 Mobile Safari/537.36",
        "Chrome on Android",
    ),
    ("curl/8.5.0", "curl/8.5.0"),  # no browser: as it came
    ("ExampleBot/1.0 (+https://example.com/" + "x" * 60 + ")", None),  # long: shortened
]


async def test_devices_are_named_by_browser_and_system_with_the_user_agent_on_hover(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    for agent, _ in DEVICES:
        await other_device(dashboard, user, agent)
    await open_sessions_page(page, user)
    rows = page.locator("#sessions-body tr:not(.is-current)")
    await expect(rows).to_have_count(len(DEVICES))
    for row, (agent, name) in zip(await rows.all(), reversed(DEVICES), strict=True):
        device = row.locator(".device-name")
        await expect(device).to_have_text(name or agent[:59] + "…")
        await expect(device).to_have_attribute("title", agent)
    # The confirmation and its outcome name the device the same way.
    await page.get_by_role("button", name="End session on Edge on macOS").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("The session on Edge on macOS (address 127.0.0.1)")
    await dialog.get_by_role("button", name="End session").click()
    await expect(page.locator("#page-status")).to_have_text("Ended the session on Edge on macOS.")


async def test_end_all_other_sessions_says_how_many(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    others = [await other_device(dashboard, user, f"device {n}") for n in range(3)]
    await page.get_by_role("link", name="Sessions").click()
    await expect(page.locator("#sessions-body tr")).to_have_count(4)

    await page.get_by_role("button", name="End all other sessions").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("End all other sessions?")
    await expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    await dialog.get_by_role("button", name="End other sessions").click()
    await expect(dialog).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text("Ended 3 other sessions.")
    await expect(page.locator("#sessions-body tr")).to_have_count(1)
    await expect(page.locator("#sessions-body tr .this-device")).to_have_count(1)
    for other in others:
        status, body = await dashboard.api("GET", "/auth/session", token=other)
        assert status == 401 and body["error"]["code"] == "invalid_session"
    status, _ = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 200
    assert await violations(page) == []
    assert clean_console(tab) == []


SESSIONS_API = re.compile(r"/api/v1/auth/sessions(/[^/?]+)?$")
REFUSALS: dict[str, dict[str, Any]] = {
    "rate-limited": {
        "status": 429,
        "code": "rate_limited",
        "message": "Too many requests. Retry after the time in the Retry-After header.",
        "retry_after": "30",
    },
    "store-unavailable": {
        "status": 503,
        "code": "store_unavailable",
        "message": "The credential store is unreachable. Retry shortly.",
        "retry_after": "1",
    },
    "network": {},
}


def refuse_with(refusal: dict[str, Any]) -> Any:
    async def handler(route: Route) -> None:
        if route.request.method == "GET":
            await route.continue_()
            return
        if not refusal:
            await route.abort("connectionreset")
            return
        await route.fulfill(
            status=refusal["status"],
            content_type="application/json",
            headers={"Retry-After": refusal["retry_after"], "Cache-Control": "no-store"},
            body=json.dumps(
                {
                    "success": False,
                    "error": {"code": refusal["code"], "message": refusal["message"]},
                }
            ),
        )

    return handler


@pytest.mark.parametrize("refusal", REFUSALS.values(), ids=REFUSALS.keys())
async def test_a_refused_ending_says_so_and_ends_nothing(
    tab: Tab, user: str, dashboard: Dashboard, refusal: dict[str, Any]
) -> None:
    page = tab.page
    await sign_in(page, user)
    other = await other_device(dashboard, user)
    await page.get_by_role("link", name="Sessions").click()
    await expect(page.locator("#sessions-body tr")).to_have_count(2)
    await page.route(SESSIONS_API, refuse_with(refusal))

    if refusal:
        expected = f"{refusal['message']} Try again in {refusal['retry_after']} s."
    else:
        expected = "The service could not be reached. Try again."
    for button, what in (
        (page.get_by_role("button", name=re.compile("^End session on")), "Ending the session"),
        (page.get_by_role("button", name="End all other sessions"), "Ending the other sessions"),
    ):
        await button.click()
        dialog = page.get_by_role("dialog")
        await dialog.locator("#end-confirm").click()
        await expect(dialog.get_by_role("alert")).to_have_text(f"{what} failed: {expected}")
        await expect(dialog).to_be_visible()  # not closed as if it had worked
        await expect(dialog.locator("#end-confirm")).to_be_enabled()  # and it can try again
        await expect(page.locator("#page-status")).to_be_hidden()
        await dialog.get_by_role("button", name="Cancel").click()
        await expect(page.locator("#sessions-body tr")).to_have_count(2)
    status, _ = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 200
    await page.unroute(SESSIONS_API)


async def test_change_password_checked_first_wrong_then_right(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await open_sessions_page(page, user)
    token = await tab.stored_token()
    other = await other_device(dashboard, user)
    current, new = page.get_by_label("Current password"), page.get_by_label("New password")
    submit = page.get_by_role("button", name="Change password")
    error = page.locator("#password-error")
    # The service's own minimum, as it enforces it: said in the hint, checked in the form.
    await expect(page.locator("#new-password-hint")).to_have_text(
        f"At least {PASSWORD_MIN} characters."
    )

    # Shorter than that: said before anything is sent, with what was typed kept.
    short = "eleven char"
    assert len(short) == PASSWORD_MIN - 1
    await current.fill(PASSWORD)
    await new.fill(short)
    await submit.click()
    await expect(error).to_have_text(
        f"The new password is too short: it has {PASSWORD_MIN - 1} characters, and the service "
        f"asks for at least {PASSWORD_MIN}."
    )
    await expect(new).to_be_focused()
    await expect(new).to_have_attribute("aria-invalid", "true")
    await expect(current).to_have_value(PASSWORD)
    await expect(new).to_have_value(short)
    # Counted as the service counts, in characters: 11 keys are 22 UTF-16 units, and too short.
    await new.fill("🔑" * (PASSWORD_MIN - 1))
    await submit.click()
    await expect(error).to_contain_text(f"it has {PASSWORD_MIN - 1} characters")
    assert not [url for url in tab.request_urls if url.endswith("/api/v1/auth/password")]

    # A wrong current password: said as what it is (the API's 401 names an email this form
    # does not have), and both fields as typed, to correct.
    await current.fill("not my password")
    await new.fill(NEW_PASSWORD)
    await submit.click()
    await expect(error).to_have_text(
        "Changing the password failed: the current password is wrong. Nothing was changed."
    )
    await expect(current).to_have_attribute("aria-invalid", "true")
    await expect(current).to_have_value("not my password")
    await expect(new).to_have_value(NEW_PASSWORD)
    await expect(current).to_be_focused()
    assert page.url.endswith("/sessions")
    status, _ = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 200

    # The right one: done, both fields emptied, and how many other sessions ended.
    await current.fill(PASSWORD)
    await submit.click()
    await expect(page.locator("#password-status")).to_have_text(
        "Your password was changed. Other sessions were ended: 1."
    )
    await expect(error).to_be_hidden()
    await expect(current).to_have_value("")
    await expect(new).to_have_value("")
    await expect(page.locator("#sessions-body tr")).to_have_count(1)
    await screenshot(page, "sessions-password-changed")

    status, body = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 401 and body["error"]["code"] == "invalid_session"
    status, _ = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 200
    status, body = await api_login(dashboard, user, PASSWORD)
    assert status == 401 and body["error"]["code"] == "invalid_credentials"
    status, _ = await api_login(dashboard, user, NEW_PASSWORD)
    assert status == 200

    # The passwords were never kept anywhere but the fields.
    stored = await tab.session_storage()
    assert PASSWORD not in stored and NEW_PASSWORD not in stored
    for url in tab.request_urls:
        for secret in (PASSWORD, NEW_PASSWORD, "not my password"):
            assert secret not in url and quote(secret) not in url
    assert await violations(page) == []
    # Only the browser's own note of the one refusal asked for above, nothing else.
    assert clean_console(tab) == [
        "error: Failed to load resource: the server responded with a status of 401 (Unauthorized)",
    ]


async def test_a_throttled_password_change_says_when_to_retry(tab: Tab, user: str) -> None:
    page = tab.page
    await open_sessions_page(page, user)

    async def throttled(route: Route) -> None:
        await route.fulfill(
            status=429,
            content_type="application/json",
            headers={"Retry-After": "120"},
            body=json.dumps(
                {
                    "success": False,
                    "error": {
                        "code": "login_throttled",
                        "message": "Too many failed logins. Retry later.",
                    },
                }
            ),
        )

    await page.route("**/api/v1/auth/password", throttled)
    await page.get_by_label("Current password").fill(PASSWORD)
    await page.get_by_label("New password").fill(NEW_PASSWORD)
    await page.get_by_role("button", name="Change password").click()
    await expect(page.locator("#password-error")).to_have_text(
        "Changing the password failed: Too many failed logins. Retry later. Try again in 120 s."
    )
    await expect(page.locator("#password-status")).to_be_hidden()
    # Kept as typed, to try again once the wait is over.
    await expect(page.get_by_label("Current password")).to_have_value(PASSWORD)
    await expect(page.get_by_label("New password")).to_have_value(NEW_PASSWORD)


async def test_the_sessions_page_by_keyboard_alone(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    other = await other_device(dashboard, user)
    await page.reload()
    await expect(page.locator("#keys-loading")).to_be_hidden()

    # From the keys page to Sessions through the nav.
    await page.keyboard.press("Tab")  # skip link
    await page.keyboard.press("Tab")
    assert await focused(page) == "#nav-keys"
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    assert await focused(page) == "#nav-sessions"
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/sessions")
    await expect(page.locator("#sessions-body tr")).to_have_count(2)

    # The order: skip link, the pages, log out, the other session's activity and End, this
    # session's activity, end all, the form.
    stops = []
    for _ in range(15):
        await page.keyboard.press("Tab")
        stops.append(await focused(page))
    assert stops == [
        "a",
        "#nav-keys",
        "#nav-files",
        "#nav-aliases",
        "#nav-sessions",
        "#nav-security",
        "#nav-activity",
        "#nav-settings",
        "#logout",
        "a",  # the other session's activity (the newest first)
        "button",  # its End
        "a",  # this session's activity
        "#end-others",
        "#current-password",
        "#new-password",
    ], stops

    # End the other session: open with Shift+Tab back to its End (past this session's activity),
    # Enter, Tab to confirm.
    for _ in range(4):
        await page.keyboard.press("Shift+Tab")
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    await expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    await page.keyboard.press("Enter")
    await expect(dialog).to_be_visible()
    await page.keyboard.press("Tab")
    assert await focused(page) == "#end-confirm"
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    await expect(page.locator("#page-status")).to_have_text("Ended the session on curl/8.5.0.")
    await expect(page.locator("#sessions-title")).to_be_focused()
    status, _ = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 401

    # Change the password with the keyboard: type, Tab, type, Enter.
    stops = []
    for _ in range(5):
        await page.keyboard.press("Tab")
        stops.append(await focused(page))
        if stops[-1] == "#current-password":
            break
    assert stops[-1] == "#current-password", stops
    await page.keyboard.type(PASSWORD)
    await page.keyboard.press("Tab")
    await assert_focus_is_visible(page)
    await page.keyboard.type(NEW_PASSWORD)
    await page.keyboard.press("Enter")
    await expect(page.locator("#password-status")).to_have_text(
        "Your password was changed. Other sessions were ended: 0."
    )
    status, _ = await api_login(dashboard, user, NEW_PASSWORD)
    assert status == 200


async def test_a_confirmation_closed_and_opened_again_at_once_still_ends_the_session(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    """A dialog's close event comes a task after it closed: one closed and opened again before
    it (a fast Escape then Enter) must not lose what the new confirmation is for."""
    page = tab.page
    await sign_in(page, user)
    other = await other_device(dashboard, user)
    await page.goto(f"{dashboard.base}/sessions")
    await expect(page.locator("#sessions-body tr")).to_have_count(2)
    end = page.get_by_role("button", name="End session on curl/8.5.0")
    await end.click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    # Cancel and open again in one task, before the close event of the cancel is dispatched.
    await page.evaluate(
        """() => {
            document.getElementById("end-cancel").click();
            document.querySelector("#sessions-body button").click();
        }"""
    )
    await expect(dialog).to_be_visible()
    await page.locator("#end-confirm").click()
    await expect(page.locator("#page-status")).to_have_text("Ended the session on curl/8.5.0.")
    status, _ = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 401


async def test_ending_another_session_after_a_while_asks_for_the_password_first(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    """Ending another session needs a recent sign-in, as ending all does: past
    ``FILEHOST_REAUTH_SECONDS`` the reauthentication dialog asks, then the ending is made."""
    page = tab.page
    await sign_in(page, user)
    other = await other_device(dashboard, user)
    await page.goto(f"{dashboard.base}/sessions")
    await expect(page.locator("#sessions-body tr")).to_have_count(2)
    dashboard.clock.advance(hours=1)
    await page.get_by_role("button", name="End session on curl/8.5.0").click()
    await page.get_by_role("dialog").get_by_role("button", name="End session").click()
    reauth = page.get_by_role("dialog", name="Confirm it's you")
    await reauth.get_by_label("Your password").fill(PASSWORD)
    await reauth.get_by_role("button", name="Confirm").click()
    await expect(page.locator("#page-status")).to_have_text("Ended the session on curl/8.5.0.")
    await expect(page.locator("#sessions-body tr")).to_have_count(1)
    status, _ = await dashboard.api("GET", "/auth/session", token=other)
    assert status == 401
    status, _ = await dashboard.api("GET", "/auth/session", token=await tab.stored_token())
    assert status == 200
    # The one error is the browser's note of the ending refused for the old sign-in.
    assert [line for line in tab.console if line.startswith(("error", "pageerror"))] == [
        "error: Failed to load resource: the server responded with a status of 403 (Forbidden)"
    ]


async def test_a_phone_width_screen_never_scrolls_sideways(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await page.set_viewport_size({"width": 375, "height": 740})
    await sign_in(page, user)
    await other_device(dashboard, user, "Mozilla/5.0 " + "VeryLongUnbrokenDeviceName" * 8)
    await page.get_by_role("link", name="Sessions").click()
    await expect(page.locator("#sessions-body tr")).to_have_count(2)
    await no_horizontal_scroll(page)
    label = await page.evaluate(
        """() => getComputedStyle(
            document.querySelector('#sessions-body td.session-ip'), '::before').content"""
    )
    assert label == '"Address"'
    await screenshot(page, "phone-sessions")
    await page.get_by_role("button", name="End all other sessions").click()
    box = await page.get_by_role("dialog").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
    await no_horizontal_scroll(page)
    await page.keyboard.press("Escape")


async def test_the_sessions_page_without_a_session_sends_you_to_sign_in(tab: Tab) -> None:
    await tab.page.goto("/sessions")
    await tab.page.wait_for_url(re.compile(r"/$"))
    await expect(tab.page.locator("#notice")).to_have_text("Sign in to manage your sessions.")


async def test_the_sessions_page_is_served_with_the_strict_policy(dashboard: Dashboard) -> None:
    page = parse("sessions.html")
    assert page.problems == []
    assert page.scripts == [{"type": "module", "src": "/static/js/pages/sessions.js"}]
    async with dashboard.http.get(dashboard.base + "/sessions") as response:
        assert response.status == 200 and response.content_type == "text/html"
        assert directives(response.headers["Content-Security-Policy"]) == PAGE_CSP
