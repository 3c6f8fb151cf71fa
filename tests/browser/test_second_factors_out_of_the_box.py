"""Second factors on a fresh install, as the README's ``scripts/run`` starts it: ``serve`` with
nothing configured (no secrets key, no public URL, the embedded store in a new data directory),
the dashboard opened at the address its start-up line gives. The authenticator app and a passkey
(Chromium's virtual authenticator) both work, the generated key is the owner's alone, and the
start-up and the Security page say what a deployment must still set."""

from __future__ import annotations

import re
from pathlib import Path

import pyotp
import pytest
from playwright.async_api import Browser, expect

from tests.support.browser import DESKTOP, LOCALE, TIMEOUT_MS, sign_in
from tests.support.browser_mfa import open_security, virtual_authenticator
from tests.support.processes import PASSWORD, create_user, env_for, running
from tests.support.redis import free_port

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.system]

EMAIL = "fresh@example.com"


async def test_totp_and_a_passkey_work_with_nothing_configured(
    browser: Browser, tmp_path: Path
) -> None:
    port = free_port()
    data = tmp_path / "data"
    env = env_for(None, port, FILEHOST_DATA_DIR=str(data))
    with running(env, port, tmp_path) as server:
        key = data / "secrets.key"
        assert key.stat().st_mode & 0o777 == 0o600
        banner = server.banner()
        assert banner["dashboard"] == f"http://localhost:{port}/"
        told = server.stderr()
        assert f"sealed with the key generated in {key}" in told
        assert "FILEHOST_PUBLIC_URL is not set" in told
        create_user(env, EMAIL)

        context = await browser.new_context(
            base_url=banner["dashboard"], viewport=DESKTOP, locale=LOCALE
        )
        context.set_default_timeout(TIMEOUT_MS)
        try:
            page = await context.new_page()
            await virtual_authenticator(context, page)
            await sign_in(page, EMAIL, PASSWORD)
            await open_security(page)
            notes = page.locator("#mfa-setup-notes li")
            await expect(notes).to_have_count(2)
            await expect(notes.nth(0)).to_contain_text("FILEHOST_PUBLIC_URL")
            await expect(notes.nth(1)).to_contain_text("FILEHOST_SECRETS_KEY")

            await page.get_by_role("button", name="Set up an authenticator app").click()
            await expect(page.locator("#totp-qr svg")).to_be_visible()
            secret = (await page.locator("#totp-secret").text_content() or "").replace(" ", "")
            await page.get_by_label("Code from the app").fill(pyotp.TOTP(secret).now())
            await page.get_by_role("button", name="Turn on").click()
            await expect(page.locator("#codes-list li")).to_have_count(10)
            await expect(page.locator("#totp-state")).to_have_text(re.compile("^On since"))
            await page.get_by_role("button", name="I've saved them, hide the codes").click()

            await page.get_by_label("Name for the new passkey").fill("This laptop")
            await page.get_by_role("button", name="Add a passkey").click()
            row = page.locator("#passkeys-body tr")
            await expect(row).to_have_count(1)
            await expect(row.locator(".passkey-name")).to_have_text("This laptop")
        finally:
            await context.close()
    assert key.read_text().strip(), "the key stays for the next start"
