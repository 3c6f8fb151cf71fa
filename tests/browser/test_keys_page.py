"""The dashboard as a person uses it: sign in, create a key, use it, revoke it, log out; and the
ways a session ends (wrong password, expiry, a session gone from the server)."""

from __future__ import annotations

import asyncio
import re
import shlex
from datetime import datetime, timedelta

import pytest
from playwright.async_api import expect

from tests.support.browser import (
    TIMEOUT_MS,
    Dashboard,
    Tab,
    create_key,
    key_row,
    local_text,
    publish_docs_screenshot,
    same_time_as,
    screenshot,
    sign_in,
    utc_text,
)
from tests.support.files import multipart

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_wrong_password_shows_the_api_message_and_stays_signed_out(
    tab: Tab, user: str
) -> None:
    page = tab.page
    await page.goto("/")
    await expect(page).to_have_title(re.compile("Sign in"))
    await page.get_by_label("Email").fill(user)
    await page.get_by_label("Password").fill("not the password")
    await page.get_by_role("button", name="Sign in").click()

    alert = page.get_by_role("alert")
    await expect(alert).to_have_text("The email or password is incorrect.")
    assert page.url.endswith("/")
    await expect(page.get_by_label("Password")).to_have_value("")
    await expect(page.get_by_label("Password")).to_be_focused()
    assert "fhs_" not in await tab.session_storage()
    await screenshot(page, "login-wrong-password")


async def test_keys_page_without_a_session_sends_you_to_sign_in(tab: Tab) -> None:
    page = tab.page
    await page.goto("/keys")
    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.locator("#notice")).to_have_text("Sign in to manage your API keys.")


async def test_sign_in_create_use_revoke_and_log_out(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await same_time_as(page, dashboard.clock)  # "now" is the service's, which moves on command
    await page.goto("/")
    await screenshot(page, "login")
    await sign_in(page, user)
    token = await tab.stored_token()
    await expect(page.get_by_role("heading", name="API keys", level=1)).to_be_visible()
    await page.goto("/")  # signed in already: the login page goes straight to the keys
    await page.wait_for_url("**/keys")
    await expect(page.locator("#keys-loading")).to_be_hidden()
    await expect(page.locator("#keys-empty")).to_be_visible()

    # Create: the secret is shown once, with a warning and a working copy button.
    await tab.allow_clipboard(dashboard.base)
    secret = await create_key(page, "backup script", ["files.read", "folders.read"], 30)
    await expect(page.locator("#new-secret .warning")).to_contain_text("won't be shown again")
    await expect(page.locator("#new-secret-title")).to_be_focused()
    await page.get_by_role("button", name="Copy", exact=True).click()
    await expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
    assert await page.evaluate("() => navigator.clipboard.readText()") == secret
    await screenshot(page, "keys-new-secret")

    # Listed with every column, and never with the secret.
    row = key_row(page, "backup script")
    await expect(row).to_have_count(1)
    await expect(row.locator("td.key-prefix")).to_have_text(secret[:12] + "...")
    await expect(row.locator("td.key-permissions li")).to_have_text(["files.read", "folders.read"])
    status, listed = await dashboard.api("GET", "/keys", token=token)
    assert status == 200
    (record,) = listed["data"]["keys"]
    created = datetime.fromisoformat(record["created_at"])
    assert datetime.fromisoformat(record["expires_at"]) - created == timedelta(days=30)
    await expect(row.locator("td.key-created time")).to_have_attribute(
        "datetime", record["created_at"]
    )
    # How long ago, then the browser's local date and time; the exact UTC instant on hover.
    await expect(row.locator("td.key-created")).to_have_text(
        f"now {local_text(record['created_at'])}"
    )
    await expect(row.locator("td.key-created time")).to_have_attribute(
        "title", utc_text(record["created_at"])
    )
    await expect(row.locator("td.key-expires time")).to_have_attribute(
        "datetime", record["expires_at"]
    )
    await expect(row.locator("td.key-expires")).to_have_text(
        f"in 30 days {local_text(record['expires_at'])}"
    )
    await expect(row.locator("td.key-last-used .last-use")).to_have_text("Never")

    # The secret works against the API, as a script would send it.
    status, body = await dashboard.api("GET", "/files", key=secret)
    assert (status, body) == (200, {"success": True, "data": {"files": [], "next_cursor": None}})
    await wait_for_last_use(dashboard, token)

    # Gone after a reload: not in the page, not in storage; the list now shows its last use.
    await page.reload()
    await expect(page.locator("#keys-loading")).to_be_hidden()
    await expect(page.locator("#new-secret")).to_be_hidden()
    assert secret not in await page.content()
    assert await page.locator("#new-secret-value").input_value() == ""
    assert secret not in await tab.session_storage()
    await expect(row.locator("td.key-last-used time")).to_have_text(
        re.compile(r"^now \d{1,2} \w{3} \d{4}, \d\d:\d\d$")
    )

    # A second key, a minute later (the test's clock stands still otherwise, and the list is
    # newest first), then the keys page as the README shows it.
    dashboard.clock.advance(seconds=60)
    await same_time_as(page, dashboard.clock)
    await create_key(page, "CI deploys", ["files.read", "files.write", "aliases.read"], 365)
    await page.get_by_role("button", name="I've saved it, hide the secret").click()
    await expect(page.locator("#new-secret")).to_be_hidden()
    await expect(page.get_by_role("button", name="Create key")).to_be_focused()
    await expect(page.locator("#keys-body tr")).to_have_count(2)
    await expect(page.locator("#keys-body tr td.key-name")).to_have_text(
        ["CI deploys", "backup script"]
    )
    await page.evaluate("() => document.activeElement.blur()")
    publish_docs_screenshot(await screenshot(page, "keys", full_page=False))

    # Revoke asks first, in a modal dialog; cancelling keeps the key.
    await row.get_by_role("button", name="Revoke key backup script").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    await expect(dialog).to_contain_text("Revoke backup script?")
    await expect(dialog).to_contain_text(secret[:12] + "...")
    assert await page.evaluate("() => document.getElementById('revoke-dialog').matches(':modal')")
    await screenshot(page, "keys-revoke-dialog", full_page=False)
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_be_hidden()
    status, _ = await dashboard.api("GET", "/files", key=secret)
    assert status == 200

    await row.get_by_role("button", name="Revoke key backup script").click()
    await dialog.get_by_role("button", name="Revoke key").click()
    await expect(dialog).to_be_hidden()
    await expect(page.locator("#page-status")).to_have_text(
        "Revoked the key backup script. It no longer works."
    )
    await expect(row).to_have_count(0)
    await expect(page.locator("#keys-body tr")).to_have_count(1)
    status, body = await dashboard.api("GET", "/files", key=secret)
    assert status == 401 and body["error"]["code"] == "api_key_revoked"

    # Log out: back to sign in, the token cleared here and refused by the server.
    await page.get_by_role("button", name="Log out").click()
    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.locator("#notice")).to_have_text("You have logged out.")
    assert "fhs_" not in await tab.session_storage()
    status, body = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 401 and body["error"]["code"] == "invalid_session"
    await page.goto("/keys")
    await page.wait_for_url(re.compile(r"/$"))

    # Neither the token nor the secret ever went into a URL or the console.
    for url in tab.request_urls:
        assert token not in url and secret not in url and "fhs_" not in url and "fhk_" not in url
    for line in tab.console:
        assert token not in line and secret not in line
    assert not [line for line in tab.console if line.startswith(("error", "pageerror"))], (
        tab.console
    )


async def wait_for_last_use(dashboard: Dashboard, token: str) -> None:
    """The last use is written in the background; wait (bounded) until the API reports it."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT_MS / 1000
    while True:
        status, listed = await dashboard.api("GET", "/keys", token=token)
        assert status == 200
        if all(key["last_used_at"] for key in listed["data"]["keys"]):
            return
        assert asyncio.get_running_loop().time() < deadline, "last use was never recorded"
        await asyncio.sleep(0.05)


async def test_an_expired_session_returns_to_sign_in_with_a_message(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()

    # The session idles out (24 h by default) while the page is open; the next action notices.
    dashboard.clock.advance(hours=25)
    await page.get_by_role("button", name="Create key").click()
    dialog = page.get_by_role("dialog", name="Create a key")
    await dialog.get_by_label("Name", exact=True).fill("too late")
    await dialog.locator('input[value="files.read"]').check()
    await dialog.get_by_role("button", name="Create key").click()

    await page.wait_for_url(re.compile(r"/$"))
    notice = page.get_by_role("alert")
    await expect(notice).to_have_text(
        "You have been signed out: the session expired. Sign in again."
    )
    assert "fhs_" not in await tab.session_storage()
    status, body = await dashboard.api("GET", "/auth/session", token=token)
    assert status == 401 and body["error"]["code"] == "session_expired"
    await screenshot(page, "login-session-expired")

    # Signing in again works and leads back to the keys page, with no key created meanwhile.
    await sign_in(page, user)
    await expect(page.locator("#keys-empty")).to_be_visible()


async def test_a_session_ended_elsewhere_returns_to_sign_in_on_reload(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    # The same session logged out by another client (e.g. a second tab or a script).
    async with dashboard.http.post(
        f"{dashboard.base}/api/v1/auth/logout", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 200

    await page.reload()
    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.get_by_role("alert")).to_have_text(
        "You have been signed out: this session was ended (logged out in another tab, ended "
        "from another device, or by a new password). Sign in again."
    )
    # The message is shown once, not again on the next visit.
    await page.reload()
    await expect(page.locator("#notice")).to_be_hidden()


async def run_as_curl(dashboard: Dashboard, command: str) -> tuple[int, dict[str, str]]:
    """Send the request a ``curl`` command line of the page's says, as curl would: its
    headers, its one multipart file (read as empty, the name as given), to its URL. Anything
    else in the line fails the test. Returns the status and the answer's headers."""
    words = shlex.split(command)
    assert words[0] == "curl", command
    headers: dict[str, str] = {}
    upload = None
    rest = iter(words[1:])
    url = None
    for word in rest:
        if word == "-H":
            name, _, value = next(rest).partition(": ")
            headers[name] = value
        elif word == "-F":
            field, _, source = next(rest).partition("=@")
            assert field == "file", command
            upload = source.rsplit("/", 1)[-1]
        elif word == "-i":
            continue
        else:
            assert url is None and word.startswith(dashboard.base + "/api/v1/"), command
            url = word
    assert url is not None, command
    if upload is None:
        async with dashboard.http.get(url, headers=headers) as response:
            return response.status, dict(response.headers)
    body, form = multipart(b"", filename=upload)
    async with dashboard.http.post(url, data=body, headers={**headers, **form}) as response:
        return response.status, dict(response.headers)


async def test_a_new_keys_panel_shows_a_command_that_works_as_pasted(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await tab.allow_clipboard(dashboard.base)
    await sign_in(page, user)
    usage = page.locator("#new-secret-usage")

    # A key that may list files: the command lists them, at this page's own origin.
    secret = await create_key(page, "reader", ["files.read"])
    command = f"curl -H 'X-API-Key: {secret}' '{dashboard.base}/api/v1/files'"
    await expect(usage).to_have_text(command)
    await expect(page.locator("#new-secret-usage-what")).to_have_text(
        "list your files with this key."
    )
    assert (await run_as_curl(dashboard, command))[0] == 200
    await page.get_by_role("button", name="Copy command").click()
    await expect(page.locator("#copy-status")).to_have_text("Copied the command to the clipboard.")
    assert await page.evaluate("() => navigator.clipboard.readText()") == command

    # One that may only upload: the command uploads a file.
    secret = await create_key(page, "writer", ["files.write"])
    await expect(page.locator("#new-secret-usage-what")).to_have_text(
        "upload a file with this key."
    )
    status, _ = await run_as_curl(dashboard, await usage.text_content() or "")
    assert status == 201
    assert secret in (await usage.text_content() or "")

    # One for a service behind a gateway: the check the gateway makes, which it passes.
    await create_key(page, "folders", ["folders.read"])
    status, headers = await run_as_curl(dashboard, await usage.text_content() or "")
    assert (status, headers["X-Auth-Permissions"]) == (200, "folders.read")

    # Gone with the secret once it is saved.
    await page.get_by_role("button", name="I've saved it, hide the secret").click()
    await expect(usage).to_have_text("")
    assert secret not in await page.content()
