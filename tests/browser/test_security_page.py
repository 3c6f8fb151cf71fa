"""The security page and the login's second step, in headless Chromium, as a person uses them:
the authenticator app turned on by scanning (here: reading the key the page shows as text and
computing the app's code with pyotp), the recovery codes shown once, signing in with a code, a
recovery code or a passkey (Chromium's virtual authenticator), and the reauthentication dialog
a sensitive change opens when the last sign-in is too old, after which the change is made
without being asked for again."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Page, expect

from service.auth.mfa import _qr_svg
from tests.support.api import PASSWORD
from tests.support.browser import (
    SECRET_PATTERN,
    Dashboard,
    Tab,
    key_row,
    no_horizontal_scroll,
    screenshot,
    sign_in,
    violations,
)
from tests.support.browser_mfa import (
    app_code,
    log_out,
    open_security,
    password_step,
    serving_with_factors,
    virtual_authenticator,
)
from tests.support.redis import RedisServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

REAUTH_SECONDS = 600  # the default: the clock moves past it


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard(redis_server: RedisServer) -> AsyncIterator[Dashboard]:
    async with serving_with_factors(redis_server) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def tab(tab: Tab) -> Tab:
    """The suite's tab, recording every CSP violation from its first page on."""
    return tab


async def turn_on_totp(page: Page, dashboard: Dashboard) -> tuple[str, list[str]]:
    """On the security page: set up the app from the key shown as text, confirm with its code;
    (the key, the recovery codes shown)."""
    await page.get_by_role("button", name="Set up an authenticator app").click()
    qr = page.locator("#totp-qr svg")
    await expect(qr).to_be_visible()
    assert await qr.locator("path").count() == 1
    secret = (await page.locator("#totp-secret").text_content() or "").replace(" ", "")
    assert re.fullmatch(r"[A-Z2-7]{32}", secret), secret
    await page.get_by_label("Code from the app").fill(app_code(secret, dashboard.clock))
    await page.get_by_role("button", name="Turn on").click()
    codes = page.locator("#codes-list li")
    await expect(codes).to_have_count(10)
    await expect(page.locator("#totp-state")).to_have_text(re.compile("^On since"))
    dashboard.clock.advance(seconds=30)  # the code used to confirm is spent
    return secret, await codes.all_text_contents()


async def test_turn_on_the_app_then_sign_in_with_a_code_and_with_a_recovery_code(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    await open_security(page)
    await expect(page.locator("#totp-state")).to_have_text("Off.")
    await expect(page.locator("#codes-regenerate")).to_be_hidden()
    secret, codes = await turn_on_totp(page, dashboard)
    assert all(re.fullmatch(r"[A-Z2-7]{4}(-[A-Z2-7]{4}){3}", code) for code in codes), codes
    await screenshot(page, "security-recovery-codes")

    # The codes leave as a text file (a Blob), then are hidden, and never shown again.
    async with page.expect_download() as downloading:
        await page.get_by_role("button", name="Download as a text file").click()
    download = await downloading.value
    assert download.suggested_filename == "filehost-recovery-codes.txt"
    text = Path(await download.path()).read_text("utf-8")
    assert all(code in text for code in codes)
    await page.get_by_role("button", name="I've saved them, hide the codes").click()
    await expect(page.locator("#codes-panel")).to_be_hidden()
    await expect(page.locator("#codes-left")).to_have_text("10 recovery codes left.")
    await page.reload()
    await expect(page.locator("#totp-state")).to_have_text(re.compile("^On since"))
    await expect(page.locator("#codes-panel")).to_be_hidden()
    await expect(page.locator("#codes-list li")).to_have_count(0)
    assert codes[0] not in await page.content()

    # Signing in asks for the app's code: a wrong one is said, with the tries left.
    await log_out(page)
    await password_step(page, user)
    await expect(page.locator("#login-form")).to_be_hidden()
    code_field = page.get_by_label("Code from your authenticator app")
    await expect(code_field).to_be_focused()
    wrong = "000000" if app_code(secret, dashboard.clock) != "000000" else "111111"
    await code_field.fill(wrong)
    await page.get_by_role("button", name="Verify").click()
    await expect(page.locator("#mfa-error")).to_contain_text("4 tries left")
    await code_field.fill(app_code(secret, dashboard.clock))
    await page.get_by_role("button", name="Verify").click()
    await page.wait_for_url("**/keys")
    await expect(page.locator("#account-email")).to_have_text(user)
    # The sessions page says this one was opened with the second factor.
    await page.get_by_role("link", name="Sessions").click()
    await page.wait_for_url("**/sessions")
    this_one = page.locator("#sessions-body tr.is-current")
    await expect(this_one.locator(".session-factors")).to_have_text("With a second factor")

    # A recovery code works once, and the page counts one fewer.
    await log_out(page)
    await password_step(page, user)
    await page.get_by_role("button", name="Use a recovery code instead").click()
    await page.get_by_label("Recovery code").fill(codes[0].lower())
    await page.get_by_role("button", name="Verify").click()
    await page.wait_for_url("**/keys")
    await open_security(page)
    await expect(page.locator("#codes-left")).to_have_text("9 recovery codes left.")

    # A second step left too long: back to the password, told why.
    await log_out(page)
    await password_step(page, user)
    dashboard.clock.advance(seconds=301)
    await page.get_by_role("button", name="Use a recovery code instead").click()
    await page.get_by_label("Recovery code").fill(codes[1])
    await page.get_by_role("button", name="Verify").click()
    await expect(page.locator("#login-form")).to_be_visible()
    await expect(page.locator("#login-error")).to_contain_text("Log in again")
    await expect(page.locator("#mfa-form")).to_be_hidden()
    assert await violations(page) == []


async def test_new_recovery_codes_after_confirming_password_and_code(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    await open_security(page)
    secret, old = await turn_on_totp(page, dashboard)
    await page.get_by_role("button", name="I've saved them, hide the codes").click()

    # Later than a recent sign-in: making new codes asks for the password and the app's code.
    dashboard.clock.advance(seconds=REAUTH_SECONDS + 1)
    await page.get_by_role("button", name="Make new recovery codes").click()
    await (
        page.get_by_role("dialog", name="Make new recovery codes?")
        .get_by_role("button", name="Make new codes")
        .click()
    )
    reauth = page.get_by_role("dialog", name="Confirm it's you")
    await expect(reauth).to_be_visible()
    await reauth.get_by_label("Your password").fill(PASSWORD)
    await reauth.get_by_label("Code from your authenticator app").fill("123")
    await reauth.get_by_role("button", name="Confirm").click()
    await expect(reauth.locator("#reauth-error")).to_be_visible()
    await reauth.get_by_label("Your password").fill(PASSWORD)
    await reauth.get_by_label("Code from your authenticator app").fill(
        app_code(secret, dashboard.clock)
    )
    await reauth.get_by_role("button", name="Confirm").click()
    await expect(reauth).to_be_hidden()
    new = page.locator("#codes-list li")
    await expect(new).to_have_count(10)
    assert set(await new.all_text_contents()).isdisjoint(old)
    await expect(page.locator("#page-status")).to_contain_text("New recovery codes made")

    # Turning the app off (the sign-in is recent again): a confirmation, then off.
    await page.get_by_role("button", name="Turn off the authenticator app").click()
    await (
        page.get_by_role("dialog", name="Turn off the authenticator app?")
        .get_by_role("button", name="Turn off")
        .click()
    )
    await expect(page.locator("#totp-state")).to_have_text("Off.")
    await expect(page.get_by_role("button", name="Set up an authenticator app")).to_be_visible()
    await expect(page.locator("#codes-left")).to_contain_text("set one up first")
    assert await violations(page) == []


async def test_add_a_passkey_sign_in_with_it_and_remove_it(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await virtual_authenticator(tab.context, page)
    await sign_in(page, user)
    await open_security(page)
    await expect(page.locator("#passkeys-empty")).to_be_visible()
    await page.get_by_label("Name for the new passkey").fill("Work laptop")
    await page.get_by_role("button", name="Add a passkey").click()
    row = page.locator("#passkeys-body tr")
    await expect(row).to_have_count(1)
    await expect(row.locator(".passkey-name")).to_have_text("Work laptop")
    await expect(row.locator(".passkey-last-used")).to_have_text("never")
    await expect(page.locator("#page-status")).to_contain_text("Added the passkey")

    # Signing in: the second step offers the passkey only.
    await log_out(page)
    await password_step(page, user)
    await expect(page.get_by_label("Code from your authenticator app")).to_be_hidden()
    await expect(page.get_by_role("button", name="Verify")).to_be_hidden()
    await page.get_by_role("button", name="Use a passkey").click()
    await page.wait_for_url("**/keys")
    await open_security(page)
    await expect(row.locator(".passkey-last-used")).not_to_have_text("never")

    # Removed behind a confirmation, from a sign-in too old: the dialog asks for the password
    # and the passkey (the account's only factor, so no code field).
    dashboard.clock.advance(seconds=REAUTH_SECONDS + 1)
    await row.get_by_role("button", name=re.compile("^Remove")).click()
    dialog = page.get_by_role("dialog", name="Remove the passkey “Work laptop”?")
    await dialog.get_by_role("button", name="Remove passkey").click()
    reauth = page.get_by_role("dialog", name="Confirm it's you")
    await expect(reauth).to_be_visible()
    await expect(reauth.get_by_label("Code from your authenticator app")).to_be_hidden()
    await reauth.get_by_label("Your password").fill(PASSWORD)
    await reauth.get_by_role("button", name="Use a passkey").click()
    await expect(reauth).to_be_hidden()
    await expect(dialog).to_be_hidden()
    await expect(row).to_have_count(0)
    await expect(page.locator("#passkeys-empty")).to_be_visible()
    await log_out(page)
    await page.get_by_label("Email").fill(user)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url("**/keys")  # one step again
    assert await violations(page) == []


async def start_creating(page: Page, name: str) -> None:
    await page.locator("#create-open").click()
    dialog = page.get_by_role("dialog", name="Create a key")
    await dialog.get_by_label("Name", exact=True).fill(name)
    await dialog.locator('input[name="permissions"][value="files.read"]').check()
    await dialog.get_by_role("button", name="Create key").click()


async def test_an_old_sign_in_is_confirmed_in_a_dialog_and_the_key_is_created(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    old_token = await tab.stored_token()
    dashboard.clock.advance(seconds=REAUTH_SECONDS + 1)

    # Cancelled: nothing is created, and the create dialog says why.
    await start_creating(page, "declined")
    reauth = page.get_by_role("dialog", name="Confirm it's you")
    await expect(reauth).to_be_visible()
    await expect(reauth.get_by_label("Your password")).to_be_focused()
    await expect(reauth.locator("#reauth-factor")).to_be_hidden()  # no second factor
    await reauth.get_by_role("button", name="Cancel").click()
    await expect(reauth).to_be_hidden()
    await expect(page.locator("#create-error")).to_contain_text("nothing was changed")
    await (
        page.get_by_role("dialog", name="Create a key").get_by_role("button", name="Cancel").click()
    )
    await expect(page.locator("#keys-empty")).to_be_visible()
    assert await tab.stored_token() == old_token

    # A wrong password is said in the dialog; the right one makes the key, with no second click.
    await start_creating(page, "after reauth")
    await expect(reauth).to_be_visible()
    await reauth.get_by_label("Your password").fill("not the password")
    await reauth.get_by_role("button", name="Confirm").click()
    await expect(reauth.locator("#reauth-error")).to_contain_text("incorrect")
    await reauth.get_by_label("Your password").fill(PASSWORD)
    await reauth.get_by_role("button", name="Confirm").click()
    await expect(reauth).to_be_hidden()
    await expect(page.locator("#new-secret-name")).to_have_text("after reauth")
    secret = await page.locator("#new-secret-value").input_value()
    assert SECRET_PATTERN.match(secret)
    await expect(key_row(page, "after reauth")).to_have_count(1)
    new_token = await tab.stored_token()
    assert new_token != old_token
    status, _ = await dashboard.api("GET", "/auth/session", token=old_token)
    assert status == 401
    # The next page keeps the new session.
    await page.reload()
    await expect(key_row(page, "after reauth")).to_have_count(1)
    assert await violations(page) == []


UNLABELED = """() => Array.from(document.querySelectorAll('input, select, textarea'))
    .filter((el) => el.offsetParent !== null || el.closest('dialog[open]'))
    .filter((el) => el.labels.length === 0 || !el.labels[0].textContent.trim())
    .map((el) => el.id || el.name)"""
NAMELESS = """() => Array.from(document.querySelectorAll('button, a[href]'))
    .filter((el) => !el.textContent.trim() && !el.getAttribute('aria-label'))
    .map((el) => el.outerHTML)"""


async def test_labelled_usable_by_keyboard_and_on_a_phone(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await page.set_viewport_size({"width": 375, "height": 740})
    await sign_in(page, user)
    await open_security(page)
    await page.get_by_role("button", name="Set up an authenticator app").click()
    await expect(page.locator("#totp-qr svg")).to_be_visible()
    # The QR code is an image with a name; the setup's field has the focus, the key is text.
    await expect(page.get_by_role("img", name=re.compile("QR code"))).to_be_visible()
    await expect(page.get_by_label("Code from the app")).to_be_focused()
    assert await page.evaluate(UNLABELED) == []
    assert await page.evaluate(NAMELESS) == []
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-security-setup")
    secret = (await page.locator("#totp-secret").text_content() or "").replace(" ", "")
    await page.keyboard.type(app_code(secret, dashboard.clock))
    await page.keyboard.press("Enter")
    await expect(page.locator("#codes-title")).to_be_focused()
    await no_horizontal_scroll(page)
    dashboard.clock.advance(seconds=30)

    # The second step, by keyboard: the code field has the focus, Enter sends it.
    await log_out(page)
    await password_step(page, user)
    assert await page.evaluate(UNLABELED) == []
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-login-second-step")
    await page.keyboard.type(app_code(secret, dashboard.clock))
    await page.keyboard.press("Enter")
    await page.wait_for_url("**/keys")

    # The reauthentication dialog: on the password, labelled, within the screen; Escape
    # cancels it.
    dashboard.clock.advance(seconds=REAUTH_SECONDS + 1)
    await open_security(page)
    await page.get_by_role("button", name="Make new recovery codes").click()
    await page.get_by_role("button", name="Make new codes").click()
    reauth = page.get_by_role("dialog", name="Confirm it's you")
    await expect(reauth.get_by_label("Your password")).to_be_focused()
    await expect(reauth.get_by_label("Code from your authenticator app")).to_be_visible()
    assert await page.evaluate(UNLABELED) == []
    box = await reauth.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
    await no_horizontal_scroll(page)
    await page.keyboard.press("Escape")
    await expect(reauth).to_be_hidden()
    await expect(page.locator("#security-dialog-error")).to_contain_text("nothing was changed")
    assert await violations(page) == []


async def test_the_qr_reader_builds_only_what_a_qr_code_is_drawn_with(tab: Tab) -> None:
    """``js/svg.js`` in the page: the service's QR code is rebuilt as SVG elements; markup with
    anything else in it (a script, a handler, a link, a url(), an unknown entity, a second
    document) is refused whole. And base64url goes both ways as WebAuthn needs it."""
    page = tab.page
    await page.goto("/")
    qr = _qr_svg("otpauth://totp/files.example.com:a%40b.c?secret=JBSWY3DPEHPK3PXP")
    results = await page.evaluate(
        """async ([qr, hostile]) => {
            const { svgFromMarkup } = await import('/static/js/svg.js');
            const { fromBase64url, toBase64url } = await import('/static/js/webauthn.js');
            const built = svgFromMarkup(qr);
            const refused = hostile.map((markup) => {
                try { svgFromMarkup(markup); return markup; } catch { return null; }
            }).filter((markup) => markup !== null);
            const bytes = new Uint8Array([0, 1, 250, 251, 252, 253, 254, 255]);
            return {
                tag: built.namespaceURI + ' ' + built.localName,
                paths: built.querySelectorAll('path').length,
                title: built.querySelector('title').textContent,
                d: built.querySelector('path').getAttribute('d').length,
                accepted: refused,
                roundTrip: toBase64url(fromBase64url(toBase64url(bytes))),
            };
        }""",
        [
            qr,
            [
                '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
                '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>',
                '<svg><image href="http://127.0.0.2/x.png"/></svg>',
                '<svg><a href="javascript:alert(1)"><path d="M0 0h1"/></a></svg>',
                '<svg><path fill="url(http://127.0.0.2/#x)" d="M0 0h1"/></svg>',
                '<svg><path style="fill:red" d="M0 0h1"/></svg>',
                "<svg><title>&ext;</title></svg>",
                "<svg></svg><svg></svg>",
                "<svg><path d='M0 0'/></svg>",
                '<svg><path d="M0 0"></svg>',
                "<div></div>",
            ],
        ],
    )
    assert results["tag"] == "http://www.w3.org/2000/svg svg"
    assert results["paths"] == 1 and results["d"] > 100
    assert results["title"] == "TOTP QR code"
    assert results["accepted"] == []
    assert results["roundTrip"] == "AAH6-_z9_v8"
