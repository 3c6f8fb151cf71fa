"""The dashboard's second factors in headless Chromium: a service whose passkeys' relying party
is the address the browser opens (``http://localhost:<port>``: WebAuthn refuses an IP address as
a relying party id, and loopback is a secure context), the authenticator app's codes computed as
the app would (pyotp, at the service's clock), Chromium's virtual authenticator, and the login's
two steps as a person goes through them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pyotp
from playwright.async_api import BrowserContext, Page, expect

from service.config.readers import secret_keys
from tests.support.api import PASSWORD
from tests.support.browser import Dashboard, serving
from tests.support.clock import FakeClock
from tests.support.mfa import SECRETS_KEY
from tests.support.redis import RedisServer, free_port


@asynccontextmanager
async def serving_with_factors(redis_server: RedisServer) -> AsyncIterator[Dashboard]:
    """The service with TOTP (a secrets key) and passkeys (its public URL the browser's
    origin); ``base`` is that origin, ``http://localhost:<port>``."""
    port = free_port()
    origin = f"http://localhost:{port}"
    async with serving(
        redis_server,
        port,
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY),
        public_url=origin,
    ) as running:
        running.base = origin
        yield running


def app_code(secret: str, clock: FakeClock) -> str:
    """What an authenticator app shows for ``secret`` at the service's time."""
    return pyotp.TOTP(secret.replace(" ", "")).at(clock.now_ms() // 1000)


async def virtual_authenticator(context: BrowserContext, page: Page) -> str:
    """A platform authenticator that holds passkeys and verifies its user without asking, as
    Chromium's DevTools protocol makes one for ``page``; its id."""
    cdp = await context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    added = await cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
            }
        },
    )
    return str(added["authenticatorId"])


async def password_step(page: Page, email: str, password: str = PASSWORD) -> None:
    """The login's first step, for an account with a second factor: the second step shows."""
    await page.goto("/")
    await page.get_by_label("Email").fill(email)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Second step")).to_be_visible()


async def log_out(page: Page) -> None:
    await page.get_by_role("button", name="Log out").click()
    await page.wait_for_url("**/")
    await expect(page.locator("#login-form")).to_be_visible()


async def open_security(page: Page) -> None:
    await page.get_by_role("navigation", name="Pages").get_by_role("link", name="Security").click()
    await page.wait_for_url("**/security")
    await expect(page.locator("#mfa-loading")).to_be_hidden()
