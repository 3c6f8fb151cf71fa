"""The activity page as a person uses it, in headless Chromium: the account's audit trail after
real actions through the API (logins, a failed one, a key created and revoked, a session ended,
the password changed, a logout), newest first, each row's time in the browser's own time zone,
actor, address, User-Agent (a hostile one shown as text), target and changes; the type filter
(which restarts from the first page, and is kept in the address); paging with a small page size
through the server's cursors, "Load more" gone on the last page; the empty state; refusals with
the server's message; a session that is over goes to sign in. By keyboard alone, on a 375 px
screen, with no CSP violation and a clean console."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.async_api import Page, Route, expect

from service.api.context import POLICY
from service.app import STORE
from service.domain.audit_events import (
    EVENT_TYPES,
    FILE_DELETED,
    FOLDER_CREATED,
    KEY_EDITED,
    KEY_REVOKED,
    SESSION_ENDED,
    SETTINGS_CHANGED,
    Origin,
    api_key_actor,
    event,
)
from service.domain.credentials import new_id
from tests.support.api import PASSWORD
from tests.support.browser import (
    PAGE_CSP,
    Dashboard,
    Tab,
    assert_focus_is_visible,
    clean_console,
    directives,
    focused,
    local_text,
    no_horizontal_scroll,
    own_session_id,
    same_time_as,
    screenshot,
    sign_in,
    utc_text,
    violations,
)
from tests.support.clock import parse_iso
from tests.support.files import FILES_URL, multipart
from tests.support.pages import parse

pytestmark = pytest.mark.asyncio(loop_scope="module")

# Not the machine's zone (UTC in CI), and with a half-hour offset, so a time shown in UTC, or
# with the offset's minutes dropped, fails.
TIMEZONE = "Asia/Kolkata"
OFFSET = timedelta(hours=5, minutes=30)
NEW_PASSWORD = "a brand new long password"
SCRIPT_AGENT = "curl/8.5.0"
# A User-Agent and a key name that would run script if they were ever treated as HTML.
HOSTILE_AGENT = '<img src=x onerror="window.__pwned=1">Evil/1.0 <b>bold</b>'
HOSTILE_NAME = '<img src=x onerror="window.__pwned=2">nightly backup'
AUDIT_API = re.compile(r"/api/v1/audit-events(\?.*)?$")


async def call(
    dashboard: Dashboard,
    method: str,
    path: str,
    *,
    token: str | None = None,
    body: dict[str, Any] | None = None,
    agent: str = SCRIPT_AGENT,
) -> tuple[int, dict[str, Any]]:
    """Call the API outside the browser, as another device or a script would."""
    headers = {"User-Agent": agent}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with dashboard.http.request(
        method, f"{dashboard.base}/api/v1{path}", json=body, headers=headers
    ) as response:
        return response.status, await response.json()


async def login(
    dashboard: Dashboard, email: str, password: str = PASSWORD, agent: str = SCRIPT_AGENT
) -> str:
    dashboard.clock.advance(seconds=61)  # every event a minute after the last: distinct times
    status, body = await call(
        dashboard,
        "POST",
        "/auth/login",
        body={"email": email, "password": password},
        agent=agent,
    )
    assert status == 200, body
    token: str = body["data"]["token"]
    return token


async def create_key(
    dashboard: Dashboard, token: str, name: str, agent: str = SCRIPT_AGENT
) -> dict[str, Any]:
    dashboard.clock.advance(seconds=61)
    status, body = await call(
        dashboard,
        "POST",
        "/keys",
        token=token,
        body={"name": name, "permissions": ["files.read", "files.write"], "expires_days": 30},
        agent=agent,
    )
    assert status == 201, body
    key: dict[str, Any] = body["data"]
    return key


async def revoke_key(dashboard: Dashboard, token: str, key_id: str, agent: str) -> None:
    dashboard.clock.advance(seconds=61)
    status, body = await call(dashboard, "DELETE", f"/keys/{key_id}", token=token, agent=agent)
    assert status == 200, body


async def trail(dashboard: Dashboard, token: str, query: str = "limit=1000") -> dict[str, Any]:
    """A page of the audit trail as the API answers it."""
    status, body = await call(dashboard, "GET", f"/audit-events?{query}", token=token)
    assert status == 200, body
    data: dict[str, Any] = body["data"]
    return data


def local(iso: str) -> str:
    """The local date and time the page shows for an instant, in TIMEZONE."""
    return local_text(iso, OFFSET)


def minutes_ago(iso: str, now_ms: int) -> str:
    """How long ago the page says ``iso`` was, as of ``now_ms``, for times minutes apart."""
    minutes = round((now_ms - parse_iso(iso).timestamp() * 1000) / 60_000)
    return "now" if minutes == 0 else f"{minutes} minute{'s' if minutes > 1 else ''} ago"


async def in_timezone(page: Page) -> None:
    """Run the page in TIMEZONE (Chromium's own emulation, as a person abroad would have it)."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Emulation.setTimezoneOverride", {"timezoneId": TIMEZONE})


async def open_activity(page: Page, query: str = "") -> None:
    """Go to the activity page (through the nav when no query is needed) and wait for its list."""
    if query:
        await page.goto(f"/activity?{query}")
    else:
        nav = page.get_by_role("navigation", name="Pages")
        await nav.get_by_role("link", name="Activity").click()
        await page.wait_for_url("**/activity")
    await expect(page.locator("#activity-loading")).to_be_hidden()
    current = page.get_by_role("link", name="Activity", exact=True)
    await expect(current).to_have_attribute("aria-current", "page")


def rows_of(page: Page) -> Any:
    return page.locator("#activity-body tr")


async def shown_ids(page: Page) -> list[str | None]:
    return [await row.get_attribute("data-event-id") for row in await rows_of(page).all()]


def audit_requests(tab: Tab) -> list[dict[str, list[str]]]:
    """The query of every audit-trail request the page made, in order."""
    return [parse_qs(urlsplit(url).query) for url in tab.request_urls if AUDIT_API.search(url)]


async def test_real_actions_are_shown_newest_first_with_who_where_and_what(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await in_timezone(page)
    await sign_in(page, user)
    mine = await tab.stored_token()
    my_session = await own_session_id(dashboard, mine)

    # A day of this account, each step through the API as a person or a script would do it.
    dashboard.clock.advance(seconds=61)
    status, _ = await call(
        dashboard, "POST", "/auth/login", body={"email": user, "password": "not my password"}
    )
    assert status == 401
    laptop = await login(dashboard, user, agent=HOSTILE_AGENT)
    laptop_session = await own_session_id(dashboard, laptop)
    key = await create_key(dashboard, laptop, HOSTILE_NAME, agent=HOSTILE_AGENT)
    await revoke_key(dashboard, laptop, key["id"], HOSTILE_AGENT)
    phone = await login(dashboard, user, agent="phone/1.0")
    phone_session = await own_session_id(dashboard, phone)
    dashboard.clock.advance(seconds=61)
    status, _ = await call(
        dashboard,
        "DELETE",
        f"/auth/sessions/{phone_session}",
        token=laptop,
        agent=HOSTILE_AGENT,
    )
    assert status == 200
    dashboard.clock.advance(seconds=61)
    status, body = await call(
        dashboard,
        "POST",
        "/auth/password",
        token=mine,
        body={"current_password": PASSWORD, "new_password": NEW_PASSWORD},
    )
    assert status == 200, body
    tablet = await login(dashboard, user, NEW_PASSWORD, agent="tablet/2.0")
    tablet_session = await own_session_id(dashboard, tablet)
    dashboard.clock.advance(seconds=61)
    status, _ = await call(dashboard, "POST", "/auth/logout", token=tablet, agent="tablet/2.0")
    assert status == 200

    await same_time_as(page, dashboard.clock)
    await open_activity(page)
    listed = (await trail(dashboard, mine))["events"]
    browser = await page.evaluate("() => navigator.userAgent")
    # Sessions by the device they signed in from, keys by name and prefix: no bare ids.
    tablet, phone = "Session from tablet/2.0", "Session from phone/1.0"
    laptop, this_browser = f"Session from {HOSTILE_AGENT}", "Session from Headless Chrome on Linux"
    named_key = f"Key “{HOSTILE_NAME}” {key['key_prefix']}"
    # type, actor, device, target, in the order the page must show them: newest first.
    expected = [
        ("logout", tablet, "tablet/2.0", tablet),
        ("login.succeeded", tablet, "tablet/2.0", tablet),
        ("password.changed", this_browser, SCRIPT_AGENT, "—"),
        ("session.ended", laptop, HOSTILE_AGENT, phone),
        ("login.succeeded", phone, "phone/1.0", phone),
        ("key.revoked", laptop, HOSTILE_AGENT, named_key),  # named though it is gone
        ("key.created", laptop, HOSTILE_AGENT, named_key),
        ("login.succeeded", laptop, HOSTILE_AGENT, laptop),
        ("login.failed", "Not signed in", SCRIPT_AGENT, "—"),
        ("login.succeeded", this_browser, "Headless Chrome on Linux", this_browser),
    ]
    ids = {tablet_session, phone_session, laptop_session, my_session, key["id"]}
    assert [event["type"] for event in listed] == [row[0] for row in expected]
    rows = rows_of(page)
    await expect(rows).to_have_count(len(expected))
    assert await shown_ids(page) == [event["id"] for event in listed]
    labels = {
        "logout": "Logged out",
        "login.succeeded": "Signed in",
        "login.failed": "Sign-in failed",
        "password.changed": "Password changed",
        "session.ended": "Session ended",
        "key.created": "Key created",
        "key.revoked": "Key revoked",
    }
    for index, (kind, actor, agent, target) in enumerate(expected):
        row, event = rows.nth(index), listed[index]
        when = row.locator("td.event-when time")
        await expect(when).to_have_attribute("datetime", event["at"])
        await expect(when).to_have_attribute("title", utc_text(event["at"]))
        await expect(row.locator("td.event-when")).to_have_text(
            f"{minutes_ago(event['at'], dashboard.clock.now_ms())} {local(event['at'])}"
        )
        await expect(row.locator(".event-label")).to_have_text(labels[kind])
        await expect(row.locator("td.event-type code")).to_have_text(kind)
        await expect(row.locator("td.event-actor")).to_have_text(actor)
        await expect(row.locator("td.event-ip")).to_have_text("127.0.0.1")
        await expect(row.locator("td.event-target")).to_have_text(target)
        await expect(row.locator("td.event-agent")).to_have_text(agent)
        await expect(row.locator("td.event-agent .device-name")).to_have_attribute(
            "title", browser if agent.startswith("Headless") else agent
        )
        for shown in await row.locator("td.event-actor, td.event-target").all_text_contents():
            assert not any(name in shown for name in ids), shown
    # Minutes apart, in the order of recording.
    times = [event["at"] for event in listed]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)

    # What a key's creation set, field by field; its expiry in local time too.
    created = rows.nth(6).locator("ul.changes li")
    await expect(created).to_have_text(
        [
            f"name: {HOSTILE_NAME}",
            "permissions: files.read, files.write",
            f"expires: in 30 days {local(key['expires_at'])}",
        ]
    )
    await expect(rows.nth(0).locator("td.event-changes")).to_have_text("—")

    # Every value is text: the hostile User-Agent and key name are shown character for
    # character and never parsed as HTML.
    await expect(page.locator("#activity-body img, #activity-body b")).to_have_count(0)
    assert await page.evaluate("() => window.__pwned") is None
    await expect(page.locator("#activity-more")).to_be_hidden()  # one page holds them all
    await screenshot(page, "activity-page")
    assert await violations(page) == []
    assert clean_console(tab) == []


async def test_files_are_named_and_events_recorded_before_names_fall_back_to_ids(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    # A key that uploads a file and deletes it, as a script would.
    key = await create_key(dashboard, token, "deploy bot")
    body, headers = multipart(b"twelve bytes", filename="notes.txt")
    as_key = {**headers, "X-API-Key": key["secret_key"], "User-Agent": SCRIPT_AGENT}
    async with dashboard.http.post(dashboard.base + FILES_URL, data=body, headers=as_key) as sent:
        assert sent.status == 201
        uploaded = (await sent.json())["data"]
    async with dashboard.http.delete(
        f"{dashboard.base}{FILES_URL}/{uploaded['id']}", headers=as_key
    ) as deleted:
        assert deleted.status == 200

    # Events as they were recorded before keys and sessions were named (ids alone), an actor
    # key revoked before its event was written, and shapes this page does not know.
    user_id = await dashboard.app[STORE].users.find_id(user)
    assert user_id is not None
    old_session, old_key, other = new_id("ses"), new_id("key"), new_id("ses")
    now = dashboard.clock.now_ms()
    origin = Origin(None, "198.51.100.7", SCRIPT_AGENT)
    old = [
        event(
            KEY_REVOKED,
            now,
            origin,
            actor={"type": "session", "session_id": old_session},
            target={"key_id": old_key},
        ),
        event(
            SESSION_ENDED,
            now,
            origin,
            actor={"type": "session", "session_id": old_session},
            target={"session_id": other},
        ),
        event(
            FILE_DELETED,
            now,
            origin,
            actor=api_key_actor(old_key, None, None),
            target={"type": "file", "file_id": uploaded["id"], "name": "gone.txt", "size": 3},
        ),
        event(
            KEY_EDITED,
            now,
            origin,
            actor={"type": "robot", "serial": 7},
            target={"type": "shelf", "shelf_id": "shf_1"},
        ),
        event(
            FOLDER_CREATED,
            now,
            origin,
            actor={"type": "session", "session_id": old_session},
            target={"type": "folder", "folder_id": new_id("fld"), "name": "reports"},
        ),
        event(SETTINGS_CHANGED, now, origin, target={"type": "settings"}),
    ]
    await dashboard.app[POLICY].audit.record(user_id, now, *old)

    await open_activity(page)
    shown = {await row.get_attribute("data-event-id"): row for row in await rows_of(page).all()}
    named_key = f"Key “deploy bot” {key['key_prefix']}"
    uploads = page.locator("#activity-body tr[data-event-type='file.uploaded']")
    await expect(uploads).to_have_count(1)
    await expect(uploads.locator("td.event-actor")).to_have_text(named_key)
    await expect(uploads.locator("td.event-target")).to_have_text("File “notes.txt” (12 bytes)")
    await expect(uploads.locator(".event-label")).to_have_text("File uploaded")
    expectations = [
        (old[0], f"Session {old_session}", f"Key {old_key}"),
        (old[1], f"Session {old_session}", f"Session {other}"),
        (old[2], f"Key {old_key}", "File “gone.txt” (3 bytes)"),
        (old[3], "robot", "type shelf, shelf_id shf_1"),
        (old[4], f"Session {old_session}", "Folder “reports”"),
        (old[5], "Not signed in", "The account's settings"),
    ]
    for recorded, actor, target in expectations:
        row = shown[recorded["id"]]
        await expect(row.locator("td.event-actor")).to_have_text(actor)
        await expect(row.locator("td.event-target")).to_have_text(target)
    # The real deletion, named like the upload.
    deletions = [
        row
        for event_id, row in shown.items()
        if event_id not in {recorded["id"] for recorded in old}
        and await row.get_attribute("data-event-type") == "file.deleted"
    ]
    assert len(deletions) == 1
    await expect(deletions[0].locator("td.event-actor")).to_have_text(named_key)
    await expect(deletions[0].locator("td.event-target")).to_have_text(
        "File “notes.txt” (12 bytes)"
    )


async def test_the_type_filter_shows_only_that_type_and_restarts_from_the_first_page(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    keys = [await create_key(dashboard, token, f"key {n}") for n in range(3)]
    for key in keys[:2]:
        await revoke_key(dashboard, token, key["id"], SCRIPT_AGENT)
    await open_activity(page, "limit=2")  # 6 events, 2 a page
    await expect(rows_of(page)).to_have_count(2)
    await page.get_by_role("button", name="Load more").click()
    await expect(rows_of(page)).to_have_count(4)

    # The filter's choices are the API's types, and one of them lists that type only, from its
    # newest event again (not after the 4 already shown).
    select = page.get_by_label("Event type")
    await select.select_option("key.created")
    await expect(page.locator("#activity-body tr[data-event-type='key.created']")).to_have_count(2)
    await expect(rows_of(page)).to_have_count(2)
    first = await trail(dashboard, token, "limit=2&type=key.created")
    assert await shown_ids(page) == [event["id"] for event in first["events"]]
    assert audit_requests(tab)[-1] == {"limit": ["2"], "type": ["key.created"]}
    await page.get_by_role("button", name="Load more").click()
    await expect(rows_of(page)).to_have_count(3)
    await expect(page.locator("#activity-more")).to_be_hidden()
    every_created = await trail(dashboard, token, "type=key.created")
    assert [event["target"]["key_id"] for event in every_created["events"]] == [
        key["id"] for key in reversed(keys)
    ]
    assert await shown_ids(page) == [event["id"] for event in every_created["events"]]

    # The address keeps the filter: a reload shows the same list.
    await select.select_option("key.revoked")
    await expect(rows_of(page)).to_have_count(2)
    assert parse_qs(urlsplit(page.url).query) == {"limit": ["2"], "type": ["key.revoked"]}
    await page.reload()
    await expect(page.locator("#activity-loading")).to_be_hidden()
    await expect(select).to_have_value("key.revoked")
    revoked = await trail(dashboard, token, "type=key.revoked")
    assert await shown_ids(page) == [event["id"] for event in revoked["events"]]
    await expect(rows_of(page).locator(".event-label")).to_have_text(["Key revoked"] * 2)

    # A type with no event yet: said plainly, no table, no "Load more".
    await select.select_option("password.changed")
    await expect(page.locator("#activity-empty")).to_have_text(
        "No “Password changed” activity yet."
    )
    await expect(page.locator("#activity-table")).to_be_hidden()
    await expect(page.locator("#activity-more")).to_be_hidden()

    # Back to everything: the first page of all of it.
    await select.select_option(label="All activity")
    await expect(rows_of(page)).to_have_count(2)
    await expect(page.locator("#activity-empty")).to_be_hidden()
    everything = await trail(dashboard, token, "limit=2")
    assert await shown_ids(page) == [event["id"] for event in everything["events"]]
    assert parse_qs(urlsplit(page.url).query) == {"limit": ["2"]}
    assert await violations(page) == []
    assert clean_console(tab) == []


async def test_paging_follows_the_servers_cursor_to_the_last_page(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    for n in range(7):
        await create_key(dashboard, token, f"paged {n}")
    await open_activity(page, "limit=3")  # 8 events: 3, 3, 2
    everything = (await trail(dashboard, token))["events"]
    assert len(everything) == 8

    # The server's pages, cursor to cursor, as the page must ask for them.
    cursors: list[str] = []
    data = await trail(dashboard, token, "limit=3")
    while data["next_cursor"] is not None:
        cursors.append(data["next_cursor"])
        data = await trail(dashboard, token, f"limit=3&cursor={data['next_cursor']}")
    assert len(cursors) == 2

    rows = rows_of(page)
    more = page.get_by_role("button", name="Load more")
    await expect(rows).to_have_count(3)
    for before, after, cursor in zip((3, 6), (6, 8), cursors, strict=True):
        await more.click()
        await expect(rows).to_have_count(after)
        assert audit_requests(tab)[-1] == {"limit": ["3"], "cursor": [cursor]}
        # The focus moves to the first new row, so a keyboard user reads on from there.
        await expect(rows.nth(before)).to_be_focused()
    await expect(more).to_be_hidden()
    assert await shown_ids(page) == [event["id"] for event in everything]
    assert len(audit_requests(tab)) == 3

    # An out-of-range page size in the address falls back to the default (one page here).
    await page.goto("/activity?limit=5000")
    await expect(rows).to_have_count(8)
    assert audit_requests(tab)[-1] == {"limit": ["50"]}


async def test_an_empty_trail_says_no_activity_yet(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    """A trail emptied as retention empties it (its Redis key gone): the page says so."""
    page = tab.page
    await sign_in(page, user)
    store = dashboard.app[STORE]
    user_id = await store.users.find_id(user)
    assert user_id is not None
    assert await store.redis.delete(store.keys.account_audit(user_id)) == 1
    await open_activity(page)
    await expect(page.locator("#activity-empty")).to_have_text("No activity yet.")
    await expect(page.locator("#activity-table")).to_be_hidden()
    await expect(page.locator("#activity-more")).to_be_hidden()
    await expect(page.locator("#activity-error")).to_be_hidden()


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
async def test_a_refused_page_says_so_with_the_servers_message_and_can_be_tried_again(
    tab: Tab, user: str, dashboard: Dashboard, refusal: dict[str, Any]
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    await create_key(dashboard, token, "one more event")
    await open_activity(page, "limit=1")
    rows = rows_of(page)
    await expect(rows).to_have_count(1)

    if refusal:
        expected = f"{refusal['message']} Try again in {refusal['retry_after']} s."
    else:
        expected = "The service could not be reached. Try again."
    # "Load more" refused: the rows shown stay, and the button is there to try again.
    await page.route(AUDIT_API, refuse_with(refusal))
    more = page.get_by_role("button", name="Load more")
    await more.click()
    await expect(page.locator("#activity-error")).to_have_text(
        f"Loading the activity failed: {expected}"
    )
    await expect(rows).to_have_count(1)
    await expect(more).to_be_enabled()
    await page.unroute(AUDIT_API)
    await more.click()
    await expect(rows).to_have_count(2)
    await expect(page.locator("#activity-error")).to_be_hidden()
    await expect(more).to_be_hidden()

    # The first page refused (a filter change): nothing of the previous list is left as if it
    # were the filtered one.
    await page.route(AUDIT_API, refuse_with(refusal))
    await page.get_by_label("Event type").select_option("key.created")
    await expect(page.locator("#activity-error")).to_have_text(
        f"Loading the activity failed: {expected}"
    )
    await expect(page.locator("#activity-table")).to_be_hidden()
    await expect(page.locator("#activity-empty")).to_be_hidden()
    assert page.url.endswith("type=key.created")  # still here, not signed out
    await page.unroute(AUDIT_API)


async def test_without_a_session_the_page_sends_you_to_sign_in(tab: Tab) -> None:
    await tab.page.goto("/activity")
    await tab.page.wait_for_url(re.compile(r"/$"))
    await expect(tab.page.locator("#notice")).to_have_text(
        "Sign in to see your account's activity."
    )


async def test_a_session_that_is_over_goes_to_sign_in_with_the_reason(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()

    # Ended from another device: the next load of the page says so and forgets the token.
    other = await login(dashboard, user)
    status, _ = await call(
        dashboard, "DELETE", f"/auth/sessions/{await own_session_id(dashboard, token)}", token=other
    )
    assert status == 200
    await page.goto("/activity")
    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.get_by_role("alert")).to_have_text(
        re.compile(r"^You have been signed out: .+ Sign in again\.$")
    )
    assert "fhs_" not in await tab.session_storage()

    # Expired while the page is open: changing the filter notices.
    await sign_in(page, user)
    await open_activity(page)
    dashboard.clock.advance(hours=25)
    await page.get_by_label("Event type").select_option("logout")
    await page.wait_for_url(re.compile(r"/$"))
    await expect(page.get_by_role("alert")).to_have_text(
        "You have been signed out: the session expired. Sign in again."
    )
    assert "fhs_" not in await tab.session_storage()


async def test_the_activity_page_by_keyboard_alone(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await sign_in(page, user)
    token = await tab.stored_token()
    for n in range(2):
        await create_key(dashboard, token, f"keyboard {n}")
    await page.goto("/activity?limit=2")
    await expect(page.locator("#activity-loading")).to_be_hidden()

    # The order: skip link, the pages, log out, the filter, in each row the session that acted and
    # the key it made (links to their activity), then "Load more" after the rows.
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
        "#activity-type",
        "a",
        "a",
        "a",
        "a",
        "#activity-more",
    ], stops
    await assert_focus_is_visible(page)
    await page.keyboard.press("Enter")
    await expect(rows_of(page)).to_have_count(3)
    await expect(rows_of(page).nth(2)).to_be_focused()
    await assert_focus_is_visible(page)
    await expect(page.locator("#activity-more")).to_be_hidden()

    # The filter by keyboard: back to it past the four links, and the arrow keys choose a type.
    for _ in range(5):
        await page.keyboard.press("Shift+Tab")
    assert await focused(page) == "#activity-type"
    await page.keyboard.press("ArrowDown")  # All activity -> Signed in
    await expect(page.get_by_label("Event type")).to_have_value("login.succeeded")
    await expect(rows_of(page)).to_have_count(1)
    await expect(rows_of(page).locator(".event-label")).to_have_text("Signed in")


async def test_a_phone_width_screen_never_scrolls_sideways(
    tab: Tab, user: str, dashboard: Dashboard
) -> None:
    page = tab.page
    await page.set_viewport_size({"width": 375, "height": 740})
    await sign_in(page, user)
    other = await login(dashboard, user, agent="Mozilla/5.0 " + "VeryLongUnbrokenDeviceName" * 8)
    await create_key(dashboard, other, "backup of the shared folder " + "z" * 60)
    await open_activity(page)
    await expect(rows_of(page)).to_have_count(3)
    await no_horizontal_scroll(page)
    label = await page.evaluate(
        """() => getComputedStyle(
            document.querySelector('#activity-body td.event-ip'), '::before').content"""
    )
    assert label == '"Address"'
    await screenshot(page, "phone-activity")


async def test_every_control_has_a_label(tab: Tab, user: str) -> None:
    page = tab.page
    await sign_in(page, user)
    await open_activity(page)
    unlabeled = await page.evaluate(
        """() => Array.from(document.querySelectorAll('input, select, textarea'))
            .filter((el) => el.labels.length === 0 || !el.labels[0].textContent.trim())
            .map((el) => el.id || el.name)"""
    )
    assert unlabeled == []


async def test_the_filter_offers_exactly_the_types_the_api_accepts(dashboard: Dashboard) -> None:
    source = parse("activity.html")
    assert source.problems == []
    assert source.scripts == [{"type": "module", "src": "/static/js/pages/activity.js"}]
    assert source.options == ["", *EVENT_TYPES]
    async with dashboard.http.get(dashboard.base + "/activity") as response:
        assert response.status == 200 and response.content_type == "text/html"
        assert directives(response.headers["Content-Security-Policy"]) == PAGE_CSP
