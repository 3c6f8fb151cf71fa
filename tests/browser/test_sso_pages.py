"""Single sign-on in the dashboard, in headless Chromium, through a real OpenID provider (npm's
oidc-provider, tests/support/oidc_provider.py) as a person goes through it: the login page's
"Sign in with TestID" to the provider's login form and back, the one-time code in the fragment
wiped from the address bar and good once, the account's second factor still asked, an identity
linked and unlinked on the Security page (never the last way in), step-up through the provider,
the provider down said plainly while the password still signs in, and password sign-in turned
off. The service is served at ``http://localhost:<port>``, the public URL the provider sends the
browser back to; the provider is at ``127.0.0.1``, so the two keep their cookies apart."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from urllib.parse import parse_qsl, urlsplit

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, expect

from service.api.context import POLICY
from service.config.readers import secret_keys
from tests.support.api import PASSWORD
from tests.support.browser import (
    Dashboard,
    Tab,
    low_contrasts,
    no_horizontal_scroll,
    screenshot,
    serving,
    violations,
)
from tests.support.browser_mfa import app_code, log_out
from tests.support.mfa import SECRETS_KEY
from tests.support.oidc_provider import Provider, running_provider
from tests.support.redis import RedisServer, free_port

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.system]

LABEL = "Sign in with TestID"
PROVIDER = "TestID"
REAUTH_SECONDS = 30  # the least the service allows: the clock moves just past it


@pytest.fixture(scope="module")
def port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def provider(port: int) -> Iterator[Provider]:
    # Its client's redirect URI at the address the browser opens the dashboard at.
    with running_provider(f"http://localhost:{port}") as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard(
    redis_server: RedisServer, port: int, provider: Provider
) -> AsyncIterator[Dashboard]:
    origin = f"http://localhost:{port}"
    settings = provider.settings(
        public_url=origin,
        oidc_label=LABEL,
        oidc_signup=True,
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY),
        reauth_seconds=REAUTH_SECONDS,
    )
    async with serving(redis_server, port, **settings) as running:
        running.base = origin
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def tab(tab: Tab, dashboard: Dashboard) -> Tab:
    """The suite's tab, recording every CSP violation; the service's clock set to the real
    time, which the provider dates its tokens by (back, too, from where an earlier test moved
    it: each test has accounts of its own)."""
    at_real_time(dashboard)
    return tab


def at_real_time(dashboard: Dashboard) -> None:
    dashboard.clock.ms = time.time_ns() // 1_000_000


def console_of(page: Page, origin: str) -> list[str]:
    """The errors and warnings the dashboard's pages in this tab write to the console from now
    on (the provider's own pages, in the same tab, have no favicon: their 404 is not the
    dashboard's; Chromium's verbose advice on password forms is no fault)."""
    said: list[str] = []
    page.on(
        "console",
        lambda message: (
            said.append(f"{message.type}: {message.text}")
            if message.type in ("error", "warning")
            and str(message.location.get("url", "")).startswith(origin)
            else None
        ),
    )
    return said


def navigations(page: Page) -> list[str]:
    """Every address the page's main frame shows from now on, history changes included."""
    seen: list[str] = []
    page.on(
        "framenavigated", lambda frame: seen.append(frame.url) if frame == page.main_frame else None
    )
    return seen


async def at_provider(page: Page, who: str) -> None:
    """On the provider's login form (this page, or a window it opened): sign in as ``who``."""
    await expect(page.locator('input[name="login"]')).to_be_visible()
    await page.locator('input[name="login"]').fill(who)
    await page.get_by_role("button", name="Sign in").click()


async def through_provider(page: Page, who: str) -> None:
    """From the login page: "Sign in with TestID", then sign in at the provider as ``who``."""
    await page.get_by_role("button", name=LABEL).click()
    await at_provider(page, who)


async def password_sign_in(page: Page, email: str) -> None:
    await page.goto("/")
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await page.wait_for_url("**/keys")
    await expect(page.locator("#account-email")).to_have_text(email)


async def both_themes_read_well(page: Page, texts: int = 6) -> None:
    """AA contrast in the light and the dark scheme, and no sideways scroll at 375 px."""
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
        assert await low_contrasts(page, texts) == [], scheme
    await page.emulate_media(color_scheme="light")
    await page.set_viewport_size({"width": 375, "height": 740})
    await no_horizontal_scroll(page)
    await page.set_viewport_size({"width": 1280, "height": 800})


async def open_page(page: Page, name: str, loading: str) -> None:
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name=name).click()
    await expect(page.locator(loading)).to_be_hidden()


async def test_signing_in_through_the_provider_lands_on_the_dashboard_with_a_code_good_once(
    tab: Tab, dashboard: Dashboard
) -> None:
    page = tab.page
    email = await dashboard.create_user("alice@example.com")
    await page.goto("/")
    button = page.get_by_role("button", name=LABEL)
    await expect(button).to_be_visible()
    await expect(page.locator("#login-form")).to_be_visible()  # the password too
    await both_themes_read_well(page)
    await screenshot(page, "sso-login")

    seen = navigations(page)
    said = console_of(page, dashboard.base)
    await through_provider(page, "alice")
    await page.wait_for_url("**/keys")
    await expect(page.locator("#account-email")).to_have_text(email)

    # The provider sent the browser to /#oidc_code=…; the page wiped it from the address bar
    # (and its history entry) before trading it, once.
    landed = [url for url in seen if "oidc_code=" in url]
    assert len(landed) == 1, seen
    after = seen[seen.index(landed[0]) + 1]
    assert after == f"{dashboard.base}/", seen
    code = dict(parse_qsl(urlsplit(landed[0]).fragment))["oidc_code"]
    exchanges = [url for url in tab.request_urls if url.endswith("/api/v1/auth/oidc/exchange")]
    assert len(exchanges) == 1
    assert all(code not in url for url in tab.request_urls)
    assert code not in await tab.session_storage()
    before = len(seen)
    await page.go_back()
    await page.wait_for_url("**/keys")  # back is the login page without the code: signed in
    assert f"{dashboard.base}/" in seen[before:], seen
    assert not any("oidc_code" in url for url in seen[before:]), seen
    status, body = await dashboard.api("POST", "/auth/oidc/exchange", json={"code": code})
    assert (status, body["error"]["code"]) == (401, "sso_login_code_invalid")

    # The session and its login event say how it was opened.
    await open_page(page, "Sessions", "#sessions-loading")
    this_one = page.locator("#sessions-body tr.is-current")
    await expect(this_one.locator(".session-factors")).to_have_text(f"With {PROVIDER}")
    await open_page(page, "Activity", "#activity-loading")
    login = page.locator('#activity-body tr[data-event-type="login.succeeded"]').first
    await expect(login.locator(".event-method")).to_have_text(f"With {PROVIDER}")
    await expect(login.locator(".event-changes")).to_contain_text("signed in with: single sign-on")
    assert await violations(page) == []
    assert said == []


async def test_the_account_second_factor_is_still_asked_after_the_provider(
    tab: Tab, dashboard: Dashboard
) -> None:
    page = tab.page
    email = await dashboard.create_user("dave@example.com")
    status, body = await dashboard.api(
        "POST", "/auth/login", json={"email": email, "password": PASSWORD}
    )
    token = body["data"]["token"]
    status, body = await dashboard.api("POST", "/auth/mfa/totp", token=token)
    assert status == 201, body
    secret = body["data"]["secret"]
    confirm = {"code": app_code(secret, dashboard.clock)}
    status, body = await dashboard.api("POST", "/auth/mfa/totp/confirm", token=token, json=confirm)
    assert status == 200, body
    dashboard.clock.advance(seconds=30)  # the confirming code is spent

    said = console_of(page, dashboard.base)
    await page.goto("/")
    await through_provider(page, "dave")
    await expect(page.get_by_role("heading", name="Second step")).to_be_visible()
    await expect(page.locator("#login-form")).to_be_hidden()
    assert "oidc_code" not in page.url
    assert await tab.session_storage() == "[[],[]]"  # no session before the second factor
    await page.get_by_label("Code from your authenticator app").fill(
        app_code(secret, dashboard.clock)
    )
    await page.get_by_role("button", name="Verify").click()
    await page.wait_for_url("**/keys")
    await expect(page.locator("#account-email")).to_have_text(email)
    await open_page(page, "Sessions", "#sessions-loading")
    this_one = page.locator("#sessions-body tr.is-current")
    await expect(this_one.locator(".session-factors")).to_have_text(
        f"With {PROVIDER} and a second factor"
    )
    assert said == []


async def link_through_provider(page: Page, who: str) -> None:
    """The Security page's "Link TestID", and sign in as ``who`` in the window it opens."""
    async with page.expect_popup() as opening:
        await page.get_by_role("button", name=f"Link {PROVIDER}").click()
    window = await opening.value
    await at_provider(window, who)
    await window.wait_for_event("close")


async def test_identities_are_linked_and_unlinked_and_step_up_goes_through_the_provider(
    tab: Tab, dashboard: Dashboard
) -> None:
    page = tab.page
    email = await dashboard.create_user("linker@example.com")
    said = console_of(page, dashboard.base)
    await password_sign_in(page, email)
    await open_page(page, "Security", "#mfa-loading")
    section = page.locator("#identities")
    await expect(section.get_by_text("No identity linked yet.")).to_be_visible()

    # Link: the provider in a window of its own; the page stays and lists the identity. The
    # sign-in is too old at first: the trade asks for the password, then to link again.
    dashboard.clock.advance(seconds=REAUTH_SECONDS + 1)
    await link_through_provider(page, "erin")
    confirm = page.get_by_role("dialog", name="Confirm it's you")
    await expect(confirm).to_be_visible()
    await expect(confirm.get_by_role("button", name=f"Confirm with {PROVIDER}")).to_be_hidden()
    await confirm.get_by_label("Your password").fill(PASSWORD)
    await confirm.get_by_role("button", name="Confirm", exact=True).click()
    await expect(page.locator("#identities-error")).to_have_text(
        f"Confirmed it's you. Press “Link {PROVIDER}” again to link it."
    )
    await expect(section.get_by_text("No identity linked yet.")).to_be_visible()
    await link_through_provider(page, "erin")
    await expect(page.locator("#page-status")).to_contain_text(
        f"Linked {PROVIDER} (erin@example.com)"
    )
    row = page.locator("#identities-body tr")
    await expect(row).to_have_count(1)
    await expect(row.locator(".identity-provider")).to_have_text(PROVIDER)
    await expect(row.locator(".identity-account")).to_contain_text("erin@example.com")
    await expect(row.locator(".identity-account")).to_contain_text("Subject erin")
    await expect(row.locator(".identity-linked time")).to_be_visible()
    await both_themes_read_well(page)
    await screenshot(page, "sso-security-identities")

    # Unlink, behind a confirmation: this account keeps its password.
    await row.get_by_role("button", name=re.compile("^Unlink")).click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("Unlink TestID (erin@example.com)?")
    await dialog.get_by_role("button", name="Unlink").click()
    await expect(page.locator("#page-status")).to_have_text(
        f"Unlinked {PROVIDER} (erin@example.com)."
    )
    await expect(section.get_by_text("No identity linked yet.")).to_be_visible()
    await open_page(page, "Activity", "#activity-loading")
    for kind, label in (("identity.linked", "linked"), ("identity.unlinked", "unlinked")):
        event = page.locator(f'#activity-body tr[data-event-type="{kind}"]')
        await expect(event.locator(".event-label")).to_have_text(f"Sign-in identity {label}")
        await expect(event.locator(".event-target")).to_have_text(
            f"Identity at {PROVIDER} erin@example.com"
        )

    # An account made by the provider (sign-up on) has no password: its identity is its last
    # way in, which the service refuses to unlink, and the page says its words.
    await log_out(page)
    at_real_time(dashboard)
    await tab.context.clear_cookies()  # the provider would remember erin
    await through_provider(page, "carol")
    await page.wait_for_url("**/keys")
    await expect(page.locator("#account-email")).to_have_text("carol@other.org")
    await open_page(page, "Security", "#mfa-loading")
    row = page.locator("#identities-body tr")
    await expect(row.locator(".identity-account")).to_contain_text("carol@other.org")
    await row.get_by_role("button", name=re.compile("^Unlink")).click()
    await dialog.get_by_role("button", name="Unlink").click()
    await expect(dialog.locator(".error")).to_contain_text("last way in")
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(row).to_have_count(1)

    # Step-up: the sign-in is too old for a new key; the dialog offers the provider, whose
    # window asks to sign in again, and the key is made without pressing "Create key" again.
    dashboard.clock.advance(seconds=REAUTH_SECONDS + 1)
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="API keys").click()
    await expect(page.locator("#keys-loading")).to_be_hidden()
    token_before = await tab.stored_token()
    await page.locator("#create-open").click()
    create = page.get_by_role("dialog", name="Create a key")
    await create.get_by_label("Name", exact=True).fill("after step-up")
    await create.locator('input[name="permissions"][value="files.read"]').check()
    await create.get_by_role("button", name="Create key").click()
    confirm = page.get_by_role("dialog", name="Confirm it's you")
    await expect(confirm).to_be_visible()
    # The account has no password (the provider made it): only the provider is offered.
    await expect(confirm).to_contain_text(f"Sign in again with {PROVIDER}")
    await expect(confirm.get_by_label("Your password")).to_be_hidden()
    # The step-up begins on the provider's clock, the real one: left 31 s ahead, past the 30 s
    # the service allows between the two, it takes the fresh sign-in for one from before.
    at_real_time(dashboard)
    async with page.expect_popup() as opening:
        await confirm.get_by_role("button", name=f"Confirm with {PROVIDER}").click()
    window = await opening.value
    await at_provider(window, "carol")
    await window.wait_for_event("close")
    await expect(confirm.locator("#reauth-error")).to_be_hidden()
    await expect(confirm).to_be_hidden()
    await expect(page.locator("#new-secret-name")).to_have_text("after step-up")
    assert await tab.stored_token() != token_before
    assert await violations(page) == []
    # The refusals the page handled: the last way in (409), the step-ups asked for (403).
    assert [line for line in said if not re.search(r"status of (403|409) ", line)] == []


async def test_with_provider_logout_on_log_out_ends_the_providers_session_too(
    tab: Tab, dashboard: Dashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FILEHOST_OIDC_PROVIDER_LOGOUT=on: Log out of a session opened through the provider goes
    by the provider's logout page and back to the login page; the next "Sign in with TestID"
    asks at the provider again. A password session's logout stays the service's own."""
    sso = dashboard.app[POLICY].sso
    monkeypatch.setattr(sso, "settings", replace(sso.settings, provider_logout=True))
    page = tab.page
    await page.goto("/")
    await through_provider(page, "frank")  # signed up by the provider: no password, no factor
    await page.wait_for_url("**/keys")
    await expect(page.locator("#account-email")).to_have_text("frank@example.com")

    token = await tab.stored_token()
    said = console_of(page, dashboard.base)
    await page.get_by_role("button", name="Log out").click()
    await expect(page.get_by_role("heading", name=re.compile("sign-out"))).to_be_visible()
    assert page.url.startswith(sso.settings.issuer), page.url
    await page.get_by_role("button", name="Yes, sign me out").click()
    await page.wait_for_url(f"{dashboard.base}/")
    await expect(page.locator("#notice")).to_have_text("You have logged out.")
    assert "filehost.session" not in await tab.session_storage()
    status, body = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 401, body

    await page.get_by_role("button", name=LABEL).click()
    await expect(page.locator('input[name="login"]')).to_be_visible()  # asked again

    email = await dashboard.create_user()
    status, body = await dashboard.api(
        "POST", "/auth/login", json={"email": email, "password": PASSWORD}
    )
    assert status == 200, body
    status, body = await dashboard.api("POST", "/auth/logout", token=body["data"]["token"])
    assert status == 200 and set(body["data"]) == {"logged_out_at"}, body
    assert said == []


async def test_a_provider_that_is_down_is_said_and_the_password_still_signs_in_and_can_be_off(
    tab: Tab, browser: Browser, redis_server: RedisServer, provider: Provider
) -> None:
    """Last in this module: it serves other instances of the service over the same Redis,
    which each empties first."""
    page = tab.page
    nobody = free_port()  # a provider nobody answers at
    down_port = free_port()
    origin = f"http://localhost:{down_port}"
    settings = provider.settings(
        oidc_label=LABEL, oidc_issuer=f"http://127.0.0.1:{nobody}", public_url=origin
    )
    async with serving(redis_server, down_port, **settings) as down:
        email = await down.create_user("someone@example.com")
        await page.goto(f"{origin}/")
        await page.get_by_role("button", name=LABEL).click()
        error = page.locator("#sso-error")
        await expect(error).to_have_text(
            f"{PROVIDER} can't be reached right now, so signing in with it is not possible. "
            "Try again later."
        )
        assert page.url == f"{origin}/"
        await both_themes_read_well(page)
        await screenshot(page, "sso-provider-down")
        await page.get_by_label("Email").fill(email)
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Sign in", exact=True).click()
        await page.wait_for_url("**/keys")
        await expect(page.locator("#account-email")).to_have_text(email)

    # Password sign-in off: the form is not offered, the provider's button is.
    off_port = free_port()
    origin = f"http://localhost:{off_port}"
    settings = provider.settings(oidc_label=LABEL, public_url=origin, password_login=False)
    async with serving(redis_server, off_port, **settings):
        context = await browser.new_context(base_url=origin)
        try:
            fresh = await context.new_page()
            await fresh.goto("/")
            await expect(fresh.get_by_role("button", name=LABEL)).to_be_visible()
            await expect(fresh.locator("#login-form")).to_be_hidden()
            await expect(fresh.get_by_label("Password")).to_be_hidden()
            await expect(fresh.locator("#sso-or")).to_be_hidden()
            await both_themes_read_well(fresh, texts=3)
        finally:
            await context.close()
