"""The dashboard reports what the server answered: a logout or a revocation the server refused
(429, 503, the network) is shown as a failure, never as done. The refusals are injected with
Playwright's ``page.route``, so the real server never sees those requests."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.async_api import Route, expect

from tests.support.browser import Dashboard, Tab, create_key, key_row, screenshot, sign_in

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOGOUT = "**/api/v1/auth/logout"
REVOKE = "**/api/v1/keys/*"

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
    "network": {},  # the connection fails: no answer at all
}


def refuse_with(refusal: dict[str, Any]) -> Any:
    async def handler(route: Route) -> None:
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
async def test_a_refused_logout_says_so_and_keeps_the_session(
    tab: Tab, user: str, dashboard: Dashboard, refusal: dict[str, Any]
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    await page.route(LOGOUT, refuse_with(refusal))

    await page.get_by_role("button", name="Log out").click()

    alert = page.locator("#page-error")
    await expect(alert).to_be_visible()
    await expect(alert).to_have_attribute("role", "alert")
    await expect(alert).to_contain_text("Logging out failed")
    await expect(alert).to_contain_text("the session may still be valid")
    if refusal:
        await expect(alert).to_contain_text(refusal["message"])
        await expect(alert).to_contain_text(f"Try again in {refusal['retry_after']} s.")
    else:
        await expect(alert).to_contain_text("The service could not be reached.")
    await expect(page.get_by_text("You have logged out.")).to_have_count(0)
    assert page.url.endswith("/keys")
    assert await tab.stored_token() == token  # kept, for another try
    await expect(page.get_by_role("button", name="Log out")).to_be_enabled()
    status, _ = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 200  # and indeed the session still works
    await screenshot(page, f"keys-logout-failed-{refusal.get('status', 'network')}")

    # Once the server answers, logging out works and says so.
    await page.unroute(LOGOUT)
    await page.get_by_role("button", name="Log out").click()
    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.locator("#notice")).to_have_text("You have logged out.")
    assert "fhs_" not in await tab.session_storage()
    status, body = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 401 and body["error"]["code"] == "invalid_session"


async def test_a_logout_of_a_session_already_over_says_signed_out_with_the_reason(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/auth/logout", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 200

    await page.get_by_role("button", name="Log out").click()

    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.get_by_role("alert")).to_have_text(
        "You have been signed out: this session was ended (logged out in another tab, ended "
        "from another device, or by a new password). Sign in again."
    )
    assert "fhs_" not in await tab.session_storage()


@pytest.mark.parametrize("refusal", REFUSALS.values(), ids=REFUSALS.keys())
async def test_a_refused_revocation_says_so_and_the_key_still_works(
    tab: Tab, user: str, dashboard: Dashboard, refusal: dict[str, Any]
) -> None:
    page = tab.page
    await sign_in(page, user)
    secret = await create_key(page, "deploy bot", ["files.read"])
    await page.get_by_role("button", name="I've saved it, hide the secret").click()
    row = key_row(page, "deploy bot")
    await expect(row).to_have_count(1)
    await page.route(REVOKE, refuse_with(refusal))

    await row.get_by_role("button", name="Revoke key deploy bot").click()
    dialog = page.get_by_role("dialog")
    await dialog.get_by_role("button", name="Revoke key").click()

    error = page.locator("#revoke-error")
    await expect(error).to_be_visible()
    if refusal:
        await expect(error).to_have_text(refusal["message"])
    else:
        await expect(error).to_have_text("The service could not be reached. Try again.")
    await expect(dialog).to_be_visible()
    await expect(dialog.get_by_role("button", name="Revoke key")).to_be_enabled()
    await expect(page.locator("#page-status")).to_be_hidden()
    await expect(page.get_by_text(re.compile("Revoked the key"))).to_have_count(0)
    status, _ = await dashboard.api("GET", "/files", key=secret)
    assert status == 200  # not revoked, and the page did not claim it was

    await dialog.get_by_role("button", name="Cancel").click()
    await expect(row).to_have_count(1)
    await page.unroute(REVOKE)
    await row.get_by_role("button", name="Revoke key deploy bot").click()
    await dialog.get_by_role("button", name="Revoke key").click()
    await expect(page.locator("#page-status")).to_have_text(
        "Revoked the key deploy bot. It no longer works."
    )
    status, _ = await dashboard.api("GET", "/files", key=secret)
    assert status == 401
