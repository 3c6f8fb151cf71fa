"""The keys page's lifecycle of a key (issue 13): roll with a grace, edit, disable and enable,
each change checked through the API as a script would use the key, on the very next request;
every change that refuses requests that work now asks first, and Cancel changes nothing."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Locator, Page, Route, expect

from service.clock import iso
from tests.support.api import PASSWORD
from tests.support.browser import (
    SECRET_PATTERN,
    Dashboard,
    Tab,
    create_key,
    key_row,
    local_text,
    no_horizontal_scroll,
    same_time_as,
    screenshot,
    sign_in,
    utc_text,
    violations,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

HOUR = 3600
DAY = 24 * HOUR


async def dismiss_secret(page: Page) -> None:
    await page.get_by_role("button", name=re.compile("^I've saved it")).click()
    await expect(page.locator("#new-secret")).to_be_hidden()


async def listed(dashboard: Dashboard, token: str, key_id: str) -> dict:
    """The key as the API lists it to its owner."""
    status, body = await dashboard.api("GET", "/keys", token=token)
    assert status == 200
    (record,) = [key for key in body["data"]["keys"] if key["id"] == key_id]
    return record


async def files_status(dashboard: Dashboard, secret: str) -> tuple[int, str | None]:
    """GET /files with the key, as a script would: (status, error code or None)."""
    status, body = await dashboard.api("GET", "/files", key=secret)
    return status, None if body["success"] else body["error"]["code"]


async def roll(page: Page, name: str, grace: str) -> Locator:
    """Open the key's roll dialog, choose the grace by its label and press "Roll secret";
    returns the dialog."""
    await key_row(page, name).get_by_role("button", name=f"Roll key {name}").click()
    dialog = page.locator("#roll-dialog")
    await expect(dialog).to_be_visible()
    # The default grace (a day) is chosen, and has the focus.
    await expect(dialog.get_by_label("For 24 hours")).to_be_checked()
    await expect(dialog.get_by_label("For 24 hours")).to_be_focused()
    await dialog.get_by_label(grace).check()
    await dialog.get_by_role("button", name="Roll secret").click()
    return dialog


async def new_secret(page: Page, name: str) -> str:
    """The rolled secret the page shows once, in the panel a new key's secret uses."""
    await expect(page.locator("#new-secret")).to_be_visible()
    await expect(page.locator("#new-secret-title")).to_have_text(f"New secret for {name}")
    await expect(page.locator("#new-secret-title")).to_be_focused()
    await expect(page.locator("#new-secret .warning")).to_contain_text("won't be shown again")
    secret = await page.locator("#new-secret-value").input_value()
    assert SECRET_PATTERN.match(secret), "the page did not show a well-formed secret"
    return secret


async def open_edit(page: Page, name: str) -> Locator:
    await key_row(page, name).get_by_role("button", name=f"Edit key {name}").click()
    panel = page.locator("#edit-panel")
    await expect(panel).to_be_visible()
    await expect(page.locator("#edit-title")).to_have_text(f"Edit {name}")
    await expect(page.locator("#edit-title")).to_be_focused()
    return panel


def permission_box(page: Page, permission: str) -> Locator:
    return page.locator(f'#edit-form input[name="edit-permissions"][value="{permission}"]')


async def test_roll_with_a_grace_then_with_none(tab: Tab, user: str, dashboard: Dashboard) -> None:
    page = tab.page
    await tab.allow_clipboard(dashboard.base)
    await sign_in(page, user)
    token = await tab.stored_token()
    first = await create_key(page, "deploy bot", ["files.read"])
    await dismiss_secret(page)
    row = key_row(page, "deploy bot")
    key_id = await row.get_attribute("data-key-id")
    assert key_id
    await expect(row.locator("td.key-prefix p.grace")).to_have_count(0)

    # Roll with an hour's grace: no confirmation (nothing stops working), the new secret shown
    # once as at creation, copyable, with when the old one stops.
    rolled_at = dashboard.clock.now_ms()
    await same_time_as(page, dashboard.clock)
    await roll(page, "deploy bot", "For 1 hour")
    second = await new_secret(page, "deploy bot")
    assert second != first
    grace_end = iso(rolled_at + HOUR * 1000)
    assert grace_end is not None
    await expect(page.locator("#new-secret-grace")).to_have_text(
        f"The old secret keeps working until {local_text(grace_end)} (in 1 hour); "
        "then only this one works."
    )
    await page.get_by_role("button", name="Copy", exact=True).click()
    await expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
    assert await page.evaluate("() => navigator.clipboard.readText()") == second
    await screenshot(page, "keys-rolled-secret")

    # Same key, new prefix, and the list says until when the old secret works.
    record = await listed(dashboard, token, key_id)
    assert record["previous_secret_expires_at"] == grace_end
    assert record["key_prefix"] == second[:12] + "..."
    await expect(row.locator("td.key-prefix code")).to_have_text(second[:12] + "...")
    grace = row.locator("td.key-prefix p.grace")
    await expect(grace).to_have_text(f"Old secret ends in 1 hour {local_text(grace_end)}")
    await expect(grace.locator("time")).to_have_attribute("datetime", grace_end)
    await expect(grace.locator("time")).to_have_attribute("title", utc_text(grace_end))

    # Both secrets work through the API until the grace's last second; then only the new one.
    assert await files_status(dashboard, first) == (200, None)
    assert await files_status(dashboard, second) == (200, None)
    dashboard.clock.advance(seconds=HOUR - 1)
    assert await files_status(dashboard, first) == (200, None)
    dashboard.clock.advance(seconds=1)
    assert await files_status(dashboard, first) == (401, "api_key_replaced")
    assert await files_status(dashboard, second) == (200, None)

    # Shown once: after a reload it is nowhere, and the grace has ended in the list too.
    await page.reload()
    await expect(page.locator("#keys-loading")).to_be_hidden()
    await expect(page.locator("#new-secret")).to_be_hidden()
    assert second not in await page.content()
    assert second not in await tab.session_storage()
    await expect(row.locator("td.key-prefix p.grace")).to_have_count(0)

    # No grace cuts the current secret at once: asked first, and Cancel rolls nothing.
    dialog = await roll(page, "deploy bot", "Not at all: refused from now on")
    await expect(dialog).to_be_hidden()
    confirm = page.get_by_role("dialog")
    await expect(confirm).to_have_attribute("id", "confirm-dialog")
    await expect(confirm.locator("#confirm-title")).to_have_text(
        "Roll deploy bot and cut off its old secret?"
    )
    await expect(confirm.locator("#confirm-list li")).to_have_text(
        [f"The current secret, {second[:12]}..., is refused from its next request."]
    )
    await expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    assert await page.evaluate("() => document.getElementById('confirm-dialog').matches(':modal')")
    await screenshot(page, "keys-roll-confirm", full_page=False)
    await confirm.get_by_role("button", name="Cancel").click()
    await expect(confirm).to_be_hidden()
    await expect(page.locator("#new-secret")).to_be_hidden()
    assert (await listed(dashboard, token, key_id))["key_prefix"] == second[:12] + "..."
    assert await files_status(dashboard, second) == (200, None)

    # Confirmed: the new secret works and the old one is refused on its very next request.
    await roll(page, "deploy bot", "Not at all: refused from now on")
    await page.get_by_role("dialog").get_by_role("button", name="Roll and cut off").click()
    # An hour on, the sign-in is no longer recent: the password is asked for again, then the
    # roll is made without another click, and the tab's session has a new token.
    reauth = page.get_by_role("dialog", name="Confirm it's you")
    await reauth.get_by_label("Your password").fill(PASSWORD)
    await reauth.get_by_role("button", name="Confirm").click()
    third = await new_secret(page, "deploy bot")
    token = await tab.stored_token()
    await expect(page.locator("#new-secret-grace")).to_have_text(
        "The old secret no longer works: only this one does."
    )
    assert await files_status(dashboard, second) == (401, "api_key_replaced")
    assert await files_status(dashboard, third) == (200, None)
    assert (await listed(dashboard, token, key_id))["previous_secret_expires_at"] is None
    await expect(row.locator("td.key-prefix code")).to_have_text(third[:12] + "...")
    await expect(row.locator("td.key-prefix p.grace")).to_have_count(0)

    assert await violations(page) == []
    for secret in (first, second, third):
        assert not [url for url in tab.request_urls if secret in url or token in url]
        assert not [line for line in tab.console if secret in line or token in line]
    # The one error is the browser's note of the roll refused for the old sign-in (403), which
    # the dialog then had made.
    assert [line for line in tab.console if line.startswith(("error", "pageerror"))] == [
        "error: Failed to load resource: the server responded with a status of 403 (Forbidden)"
    ]


async def test_rolling_during_a_grace_asks_first_since_it_ends_the_older_grace(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    first = await create_key(page, "mirror", ["files.read"])
    await dismiss_secret(page)
    await same_time_as(page, dashboard.clock)
    await roll(page, "mirror", "For 1 hour")
    second = await new_secret(page, "mirror")
    grace_end = iso(dashboard.clock.now_ms() + HOUR * 1000)
    assert grace_end is not None
    await dismiss_secret(page)

    # A week's grace for the second secret would end the first one's hour now: asked first.
    await roll(page, "mirror", "For 7 days")
    confirm = page.get_by_role("dialog")
    await expect(confirm.locator("#confirm-list li")).to_have_text(
        [
            "The secret it replaced when it was last rolled, still working until "
            f"{local_text(grace_end)} (in 1 hour), is refused from now on."
        ]
    )
    await confirm.get_by_role("button", name="Cancel").click()
    await expect(confirm).to_be_hidden()
    assert await files_status(dashboard, first) == (200, None)

    await roll(page, "mirror", "For 7 days")
    await page.get_by_role("dialog").get_by_role("button", name="Roll and cut off").click()
    third = await new_secret(page, "mirror")
    assert await files_status(dashboard, first) == (401, "api_key_replaced")
    assert await files_status(dashboard, second) == (200, None)
    assert await files_status(dashboard, third) == (200, None)
    week_end = iso(dashboard.clock.now_ms() + 7 * DAY * 1000)
    assert week_end is not None
    await expect(key_row(page, "mirror").locator("td.key-prefix p.grace time")).to_have_attribute(
        "datetime", week_end
    )


async def test_edit_permissions_name_expiry_and_rate_take_effect_on_the_next_request(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    secret = await create_key(page, "sync", ["files.read", "folders.read"], 90)
    await dismiss_secret(page)
    row = key_row(page, "sync")
    key_id = await row.get_attribute("data-key-id")
    assert key_id
    await expect(row.locator("td.key-status")).to_have_text("Enabled")
    await expect(row.locator("td.key-allowed")).to_have_text("Anywhere")
    await expect(row.locator("td.key-rate")).to_have_text("Default")
    assert await files_status(dashboard, secret) == (200, None)

    # The form starts from the key as it is: the ten permissions as checkboxes, its own ticked.
    await open_edit(page, "sync")
    await expect(page.get_by_label("Key name")).to_have_value("sync")
    boxes = page.locator('#edit-form input[name="edit-permissions"]')
    await expect(boxes).to_have_count(10)
    create_boxes = page.locator('#create-form input[name="permissions"]')
    assert [await box.get_attribute("value") for box in await boxes.all()] == [
        await box.get_attribute("value") for box in await create_boxes.all()
    ]
    checked = page.locator('#edit-form input[name="edit-permissions"]:checked')
    assert [await box.get_attribute("value") for box in await checked.all()] == [
        "files.read",
        "folders.read",
    ]
    await expect(page.get_by_label("Allowed addresses")).to_have_value("")
    await expect(page.get_by_label("The service's default rate")).to_be_checked()
    await expect(page.get_by_label("Requests per second")).to_be_disabled()
    await screenshot(page, "keys-edit")

    # Taking files.read away asks first; Cancel leaves the key as it was.
    await permission_box(page, "files.read").uncheck()
    await page.get_by_role("button", name="Save changes").click()
    confirm = page.get_by_role("dialog")
    await expect(confirm.locator("#confirm-title")).to_have_text("Save the changes to sync?")
    await expect(confirm.locator("#confirm-list li")).to_have_text(
        ["It loses the permission files.read: requests that need it are refused."]
    )
    await confirm.get_by_role("button", name="Cancel").click()
    await expect(confirm).to_be_hidden()
    await expect(page.get_by_role("button", name="Save changes")).to_be_focused()
    assert (await listed(dashboard, token, key_id))["permissions"] == [
        "files.read",
        "folders.read",
    ]
    assert await files_status(dashboard, secret) == (200, None)

    # Confirmed: the very next request with the key is refused.
    await page.get_by_role("button", name="Save changes").click()
    await confirm.get_by_role("button", name="Save changes").click()
    await expect(confirm).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text("Saved the changes to the key sync.")
    await expect(page.locator("#edit-panel")).to_be_hidden()
    await expect(row.locator("td.key-permissions li")).to_have_text(["folders.read"])
    assert await files_status(dashboard, secret) == (403, "insufficient_permission")

    # Giving it back and renaming cut nothing: saved without a question, in force at once.
    await open_edit(page, "sync")
    await page.get_by_label("Key name").fill("sync (prod)")
    await permission_box(page, "files.read").check()
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#page-status")).to_have_text(
        "Saved the changes to the key sync (prod)."
    )
    await expect(page.get_by_role("dialog")).to_have_count(0)
    row = key_row(page, "sync (prod)")
    await expect(row.locator("td.key-permissions li")).to_have_text(["files.read", "folders.read"])
    assert await files_status(dashboard, secret) == (200, None)

    # A new expiry, in days from now, is asked first (it may be sooner), then listed.
    await open_edit(page, "sync (prod)")
    await page.get_by_label("New expiry, in days from now").fill("7")
    await page.get_by_role("button", name="Save changes").click()
    await expect(confirm.locator("#confirm-list li")).to_have_text(
        [
            re.compile(
                r"^It expires 7 days from now, instead of \d{1,2} \w{3} \d{4}, \d\d:\d\d "
                r"\(in \d+ days\); it is refused after that\.$"
            )
        ]
    )
    await confirm.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#edit-panel")).to_be_hidden()
    expires_at = iso(dashboard.clock.now_ms() + 7 * DAY * 1000)
    assert (await listed(dashboard, token, key_id))["expires_at"] == expires_at
    await expect(row.locator("td.key-expires time")).to_have_attribute("datetime", expires_at)

    # A rate of its own: asked first (the default's rate isn't known here), listed, enforced.
    await open_edit(page, "sync (prod)")
    await page.get_by_label("A rate of its own").check()
    await page.get_by_label("Requests per second").fill("1")
    await page.get_by_label("Burst (requests at once)").fill("2")
    await page.get_by_role("button", name="Save changes").click()
    await expect(confirm.locator("#confirm-list li")).to_have_text(
        [
            "Its rate limit becomes 1 per second, burst 2 (until now the service's default): "
            "requests over it are refused."
        ]
    )
    await confirm.get_by_role("button", name="Save changes").click()
    await expect(row.locator("td.key-rate")).to_have_text("1 per second, burst 2")
    assert (await listed(dashboard, token, key_id))["rate_limit"] == {"per_second": 1, "burst": 2}
    # The clock stands still, so the bucket doesn't refill: two requests, then refused.
    assert await files_status(dashboard, secret) == (200, None)
    assert await files_status(dashboard, secret) == (200, None)
    assert await files_status(dashboard, secret) == (429, "rate_limited")

    # Back to the default: listed so, and the key works again.
    await open_edit(page, "sync (prod)")
    await expect(page.get_by_label("A rate of its own")).to_be_checked()
    await expect(page.get_by_label("Requests per second")).to_have_value("1")
    await page.get_by_label("The service's default rate").check()
    await expect(page.get_by_label("Requests per second")).to_be_disabled()
    await page.get_by_role("button", name="Save changes").click()
    await confirm.get_by_role("button", name="Save changes").click()
    await expect(row.locator("td.key-rate")).to_have_text("Default")
    assert (await listed(dashboard, token, key_id))["rate_limit"] is None
    # The bucket was left empty; a second refills its own rate by one request, the default's
    # by more than that.
    dashboard.clock.advance(seconds=1)
    for _ in range(3):
        assert await files_status(dashboard, secret) == (200, None)

    # Nothing changed: nothing is sent.
    await open_edit(page, "sync (prod)")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#edit-status")).to_have_text(
        "Nothing to save: the form is as the key is."
    )
    await page.get_by_role("button", name="Cancel editing").click()
    await expect(page.locator("#edit-panel")).to_be_hidden()
    await expect(row.get_by_role("button", name="Edit key sync (prod)")).to_be_focused()
    assert await violations(page) == []


async def test_disable_refuses_the_key_and_enable_lets_it_work_again(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    secret = await create_key(page, "nightly", ["files.read"])
    await dismiss_secret(page)
    row = key_row(page, "nightly")
    key_id = await row.get_attribute("data-key-id")
    assert key_id

    # Disabling asks first; Cancel keeps it working.
    await row.get_by_role("button", name="Disable key nightly").click()
    confirm = page.get_by_role("dialog")
    await expect(confirm.locator("#confirm-title")).to_have_text("Disable nightly?")
    await expect(confirm).to_contain_text(secret[:12] + "...")
    await confirm.get_by_role("button", name="Cancel").click()
    await expect(confirm).to_be_hidden()
    await expect(row.get_by_role("button", name="Disable key nightly")).to_be_focused()
    assert (await listed(dashboard, token, key_id))["enabled"] is True
    assert await files_status(dashboard, secret) == (200, None)

    await row.get_by_role("button", name="Disable key nightly").click()
    await confirm.get_by_role("button", name="Disable key").click()
    await expect(confirm).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text(
        "Disabled the key nightly. It is refused from its next request until you enable it."
    )
    assert await files_status(dashboard, secret) == (401, "api_key_disabled")
    # Still listed, marked in words and muted.
    await expect(row.locator("td.key-status")).to_have_text("Disabled")
    await expect(row).to_have_class("is-disabled")
    assert (await listed(dashboard, token, key_id))["enabled"] is False
    await screenshot(page, "keys-disabled")

    # Enabling cuts nothing: no question, and the key works from its next request.
    await row.get_by_role("button", name="Enable key nightly").click()
    await expect(page.locator("#page-status")).to_have_text(
        "Enabled the key nightly. It works again from its next request."
    )
    await expect(page.get_by_role("dialog")).to_have_count(0)
    await expect(row.locator("td.key-status")).to_have_text("Enabled")
    await expect(row).not_to_have_class("is-disabled")
    assert await files_status(dashboard, secret) == (200, None)


async def test_allowed_addresses_and_rates_the_server_would_refuse_are_refused_in_the_form(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    secret = await create_key(page, "office", ["files.read"])
    await dismiss_secret(page)
    row = key_row(page, "office")
    key_id = await row.get_attribute("data-key-id")
    assert key_id

    # Bad entries: said by the field, line by line counting from 1, before anything is asked
    # or sent (the server refuses the same entries, see tests/api/test_key_edit.py).
    await open_edit(page, "office")
    ips = page.get_by_label("Allowed addresses")
    await ips.fill("203.0.113.7\nnot-an-ip, 10.0.0.0/8\n010.0.0.1 2001:db8::/129")
    await page.get_by_role("button", name="Save changes").click()
    problem = page.locator("#edit-ips-problem")
    await expect(problem).to_have_text(
        "Line 2: “not-an-ip” is not an IPv4 or IPv6 address or CIDR network. "
        "Line 3: “010.0.0.1” is not an IPv4 or IPv6 address or CIDR network. "
        "Line 3: “2001:db8::/129” is not an IPv4 or IPv6 address or CIDR network."
    )
    await expect(page.get_by_role("dialog")).to_have_count(0)  # nothing to confirm
    await expect(ips).to_have_attribute("aria-invalid", "true")
    await expect(ips).to_be_focused()
    assert "edit-ips-problem" in (await ips.get_attribute("aria-describedby") or "").split()
    await expect(page.locator("#edit-error")).to_have_text(
        "Nothing was saved: one field needs correcting."
    )
    await screenshot(page, "keys-edit-bad-address")

    # A rate of 0 at once, likewise: by its own field, which gets the focus.
    await ips.fill("")
    await page.get_by_label("A rate of its own").check()
    await page.get_by_label("Requests per second").fill("5")
    await page.get_by_label("Burst (requests at once)").fill("0")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#edit-rate-problem")).to_have_text(
        "Burst must be a whole number from 1 to 10000."
    )
    await expect(page.get_by_label("Burst (requests at once)")).to_be_focused()
    await expect(problem).to_be_hidden()
    await expect(ips).not_to_have_attribute("aria-invalid", "true")
    await expect(page.get_by_role("dialog")).to_have_count(0)
    # Nothing of it reached the server: no request about the key was made.
    assert not [url for url in tab.request_urls if url.endswith(f"/keys/{key_id}")]
    record = await listed(dashboard, token, key_id)
    assert (record["allowed_ips"], record["rate_limit"]) == ([], None)
    assert await files_status(dashboard, secret) == (200, None)

    # Should the server still refuse a field (a newer service's rules, say), its reason is
    # shown by that field all the same.
    refusal = {
        "code": "validation_failed",
        "message": "The request has invalid fields.",
        "details": {"rate_limit": {"burst": "must be at most 40 for this account"}},
    }

    async def refused(route: Route) -> None:
        await route.fulfill(status=400, json={"success": False, "error": refusal})

    await page.route(f"**/api/v1/keys/{key_id}", refused)
    await page.get_by_label("Burst (requests at once)").fill("50")
    await page.get_by_role("button", name="Save changes").click()
    confirm = page.get_by_role("dialog")
    await confirm.get_by_role("button", name="Save changes").click()  # it may lower the rate
    await expect(page.locator("#edit-rate-problem")).to_have_text(
        "Burst must be at most 40 for this account."
    )
    await expect(page.locator("#edit-error")).to_have_text(
        "Saving the changes failed: The request has invalid fields."
    )
    await page.unroute(f"**/api/v1/keys/{key_id}")
    assert (await listed(dashboard, token, key_id))["rate_limit"] is None

    # Only a network the tests' client is outside of: refused from the next request.
    await page.get_by_label("The service's default rate").check()
    await ips.fill("203.0.113.0/24")
    await page.get_by_role("button", name="Save changes").click()
    await confirm.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#edit-panel")).to_be_hidden()
    await expect(row.locator("td.key-allowed li")).to_have_text(["203.0.113.0/24"])
    assert await files_status(dashboard, secret) == (403, "ip_not_allowed")

    # Adding this machine keeps every network it had: no question, and it works again.
    await open_edit(page, "office")
    await expect(ips).to_have_value("203.0.113.0/24")
    await ips.fill("203.0.113.0/24, 127.0.0.1")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#page-status")).to_have_text("Saved the changes to the key office.")
    await expect(page.get_by_role("dialog")).to_have_count(0)
    await expect(row.locator("td.key-allowed li")).to_have_text(["203.0.113.0/24", "127.0.0.1/32"])
    assert await files_status(dashboard, secret) == (200, None)

    # Dropping one of them asks first.
    await open_edit(page, "office")
    await ips.fill("127.0.0.1")
    await page.get_by_role("button", name="Save changes").click()
    await expect(confirm.locator("#confirm-list li")).to_have_text(
        ["It may no longer be used from 203.0.113.0/24: requests from there are refused."]
    )
    await confirm.get_by_role("button", name="Save changes").click()
    await expect(row.locator("td.key-allowed li")).to_have_text(["127.0.0.1/32"])

    # Emptied: from anywhere again, without a question.
    await open_edit(page, "office")
    await ips.fill("")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#edit-panel")).to_be_hidden()
    await expect(page.get_by_role("dialog")).to_have_count(0)
    await expect(row.locator("td.key-allowed")).to_have_text("Anywhere")
    assert (await listed(dashboard, token, key_id))["allowed_ips"] == []


async def test_a_name_that_looks_like_markup_is_shown_as_text(tab: Tab, user: str) -> None:
    page = tab.page
    await sign_in(page, user)
    name = '<img src="/nope" id="injected"> & <b>bold</b>'
    await create_key(page, name, ["files.read"])
    await dismiss_secret(page)
    await open_edit(page, name)
    await expect(page.get_by_label("Key name")).to_have_value(name)
    await page.get_by_label("Allowed addresses").fill("203.0.113.9")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#confirm-title")).to_have_text(f"Save the changes to {name}?")
    await page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
    await page.get_by_role("button", name="Cancel editing").click()
    await key_row(page, name).get_by_role("button", name=f"Roll key {name}").click()
    await expect(page.locator("#roll-name")).to_have_text(name)
    await page.keyboard.press("Escape")
    await key_row(page, name).get_by_role("button", name=f"Disable key {name}").click()
    await expect(page.locator("#confirm-title")).to_have_text(f"Disable {name}?")
    assert await page.locator("#injected, b").count() == 0


async def test_a_key_revoked_elsewhere_is_reported_with_the_servers_message(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    await create_key(page, "gone soon", ["files.read"])
    await create_key(page, "gone too", ["files.read"])
    await dismiss_secret(page)
    for name in ("gone soon", "gone too"):
        key_id = await key_row(page, name).get_attribute("data-key-id")
        status, _ = await dashboard.api("DELETE", f"/keys/{key_id}", token=token)
        assert status == 200
    status, body = await dashboard.api("DELETE", f"/keys/{key_id}", token=token)
    message = body["error"]["message"]
    assert status == 404 and body["error"]["code"] == "key_not_found"

    # The page still lists them: a roll says what the server said, and the list catches up.
    await roll(page, "gone soon", "For 1 hour")
    await expect(page.locator("#page-status")).to_have_text(message)
    await expect(page.get_by_role("dialog")).to_have_count(0)
    await expect(page.locator("#new-secret")).to_be_hidden()
    await expect(page.locator("#keys-empty")).to_be_visible()
    await expect(page.locator("#keys-title")).to_be_focused()

    # An edit of a key gone meanwhile too.
    await page.reload()
    await create_key(page, "third", ["files.read"])
    await dismiss_secret(page)
    await open_edit(page, "third")
    key_id = await key_row(page, "third").get_attribute("data-key-id")
    status, _ = await dashboard.api("DELETE", f"/keys/{key_id}", token=token)
    assert status == 200
    await page.get_by_label("Key name").fill("renamed")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#page-status")).to_have_text(message)
    await expect(page.locator("#edit-panel")).to_be_hidden()
    await expect(page.locator("#keys-empty")).to_be_visible()


async def test_roll_edit_and_disable_by_keyboard_alone(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    secret = await create_key(page, "keys only", ["files.read"])
    await dismiss_secret(page)
    row = key_row(page, "keys only")

    # Roll: the dialog opens on the chosen grace; arrows choose, Enter rolls.
    await row.get_by_role("button", name="Roll key keys only").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#roll-dialog")).to_be_visible()
    await expect(page.get_by_label("For 24 hours")).to_be_focused()
    await page.keyboard.press("ArrowUp")
    await expect(page.get_by_label("For 1 hour")).to_be_checked()
    await page.keyboard.press("Enter")
    rolled = await new_secret(page, "keys only")
    # The list is drawn again after the secret is shown: wait for its row with the old secret's
    # grace, so that the buttons below are the ones that stay.
    await expect(row.locator("td.key-prefix p.grace")).to_have_count(1)
    assert await files_status(dashboard, secret) == (200, None)
    assert await files_status(dashboard, rolled) == (200, None)

    # Escape closes a confirmation as Cancel does, and the focus is back on its button.
    await row.get_by_role("button", name="Disable key keys only").focus()
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("dialog").get_by_role("button", name="Cancel")).to_be_focused()
    await page.keyboard.press("Escape")
    await expect(page.get_by_role("dialog")).to_have_count(0)
    await expect(row.get_by_role("button", name="Disable key keys only")).to_be_focused()
    assert await files_status(dashboard, rolled) == (200, None)
    await page.keyboard.press("Space")
    await page.keyboard.press("Tab")
    await expect(page.locator("#confirm-ok")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(row.locator("td.key-status")).to_have_text("Disabled")
    assert await files_status(dashboard, rolled) == (401, "api_key_disabled")

    # Edit: from its button to the form, typed and submitted from the keyboard.
    await row.get_by_role("button", name="Edit key keys only").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#edit-title")).to_be_focused()
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("Key name")).to_be_focused()
    await page.keyboard.press("End")
    await page.keyboard.type(" (renamed)")
    await page.keyboard.press("Enter")
    await expect(page.locator("#page-status")).to_have_text(
        "Saved the changes to the key keys only (renamed)."
    )
    await expect(key_row(page, "keys only (renamed)")).to_have_count(1)


async def test_the_lifecycle_controls_fit_a_phone(tab: Tab, user: str) -> None:
    page = tab.page
    await page.set_viewport_size({"width": 375, "height": 740})
    await sign_in(page, user)
    await create_key(page, "phone key", ["files.read"])
    await dismiss_secret(page)
    await open_edit(page, "phone key")
    await page.get_by_label("Allowed addresses").fill(
        "2001:db8:85a3:1234:5678:8a2e:370:7334/128\n203.0.113.0/24"
    )
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-keys-edit")
    await page.get_by_role("button", name="Save changes").click()
    await page.get_by_role("dialog").get_by_role("button", name="Save changes").click()
    await expect(key_row(page, "phone key").locator("td.key-allowed li")).to_have_count(2)
    await no_horizontal_scroll(page)
    await key_row(page, "phone key").get_by_role("button", name="Roll key phone key").click()
    box = await page.get_by_role("dialog").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
    await no_horizontal_scroll(page)
    await screenshot(page, "phone-keys-roll", full_page=False)
    await page.keyboard.press("Escape")
    await screenshot(page, "phone-keys-lifecycle")
