"""Identities and sessions after a sign-in through the provider: listing, linking (after a
step-up) and unlinking (never the last way in), a step-up through the provider for an account
without a password, back-channel logout, and a provider that is down."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from service.api.context import POLICY
from tests.support.api import PASSWORD, Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.oidc_provider import Provider, browser
from tests.support.redis import free_port


async def _identities(api: Api, token: str) -> list[dict[str, Any]]:
    response = await api.client.get("/api/v1/auth/identities", headers=bearer(token))
    assert response.status == 200, await response.text()
    return list((await response.json())["data"]["identities"])


async def _signed_up(make_api: Any, provider: Provider, user: str) -> tuple[Api, str]:
    api = await make_api(**provider.settings(oidc_signup=True))
    async with browser(api.client) as person:
        return api, (await person.login(user))["token"]


async def test_linking_from_the_security_page_needs_a_step_up_and_ends_linked(
    sso_api: Api, clock: FakeClock, provider: Provider
) -> None:
    await sso_api.create_user("alice@example.com")
    token = await sso_api.login("alice@example.com")
    async with browser(sso_api.client) as person:
        found = await person.trip("erin", purpose="link")
        assert found["purpose"] == "link"
        # Without the caller's session the code is no link.
        status, body = await person.exchange(found["oidc_code"])
        assert status == 403 and body["error"]["code"] == "session_required"
    clock.advance(seconds=601)  # the login is no longer recent
    async with browser(sso_api.client) as person:
        found = await person.trip("erin", purpose="link")
        status, body = await person.exchange(found["oidc_code"], token)
        assert status == 403 and body["error"]["code"] == "reauthentication_required"
        # Refused before it was spent: after a step-up, the same code links.
        response = await sso_api.client.post(
            "/api/v1/auth/reauthenticate", json={"password": PASSWORD}, headers=bearer(token)
        )
        assert response.status == 200, await response.text()
        stepped_up = (await response.json())["data"]["token"]
        status, body = await person.exchange(found["oidc_code"], stepped_up)
        assert status == 200 and body["data"]["identity"]["subject"] == "erin", body
    unlinked = await sso_api.client.delete(
        f"/api/v1/auth/identities/{body['data']['identity']['id']}", headers=bearer(stepped_up)
    )
    assert unlinked.status == 200, await unlinked.text()
    token = await sso_api.login("alice@example.com")
    async with browser(sso_api.client) as person:
        url = await person.start("link")
        assert parse_qs(urlsplit(url).query)["prompt"] == ["login"]
        found = await person.trip("erin", purpose="link")
        status, body = await person.exchange(found["oidc_code"], token)
    assert status == 200, body
    linked = body["data"]["identity"]
    assert linked["subject"] == "erin" and linked["email"] == "erin@example.com"
    assert await _identities(sso_api, token) == [linked]
    # Erin's identity now signs in to alice's account, whatever its e-mail says.
    async with browser(sso_api.client) as person:
        data = await person.login("erin")
    assert data["user"]["email"] == "alice@example.com"
    # And it is no other account's to link.
    await sso_api.create_user("dave@example.com")
    other = await sso_api.login("dave@example.com")
    async with browser(sso_api.client) as person:
        found = await person.trip("erin", purpose="link")
        status, body = await person.exchange(found["oidc_code"], other)
    assert status == 409 and body["error"]["code"] == "identity_taken"


async def test_unlinking_needs_a_step_up_and_never_removes_the_last_way_in(
    make_api: Any, provider: Provider, clock: FakeClock
) -> None:
    api, token = await _signed_up(make_api, provider, "dave")
    (identity,) = await _identities(api, token)
    listed = await api.client.get("/api/v1/auth/identities", headers=bearer(token))
    assert (await listed.json())["data"]["password"] is False  # signed up: no password
    response = await api.client.delete(
        f"/api/v1/auth/identities/{identity['id']}", headers=bearer(token)
    )
    await assert_error(response, 409, "last_way_in")
    response = await api.client.delete("/api/v1/auth/identities/idn_nope", headers=bearer(token))
    await assert_error(response, 404, "identity_not_found")
    # With a password set (the CLI), the identity may go, after a step-up.
    await api.app[POLICY].users.set_password("dave@example.com", "a brand new password")
    async with browser(api.client) as person:
        token = (await person.login("dave"))["token"]
    clock.advance(seconds=601)
    response = await api.client.delete(
        f"/api/v1/auth/identities/{identity['id']}", headers=bearer(token)
    )
    await assert_error(response, 403, "reauthentication_required")
    response = await api.client.post(
        "/api/v1/auth/reauthenticate",
        json={"password": "a brand new password"},
        headers=bearer(token),
    )
    token = (await response.json())["data"]["token"]
    response = await api.client.delete(
        f"/api/v1/auth/identities/{identity['id']}", headers=bearer(token)
    )
    assert response.status == 200, await response.text()
    assert await _identities(api, token) == []
    response = await api.client.get("/api/v1/audit-events", headers=bearer(token))
    kinds = [event["type"] for event in (await response.json())["data"]["events"]]
    assert "identity.unlinked" in kinds and "identity.linked" in kinds


async def test_an_account_without_a_password_steps_up_through_the_provider(
    make_api: Any, provider: Provider, clock: FakeClock
) -> None:
    api, token = await _signed_up(make_api, provider, "dave")
    async with browser(api.client) as person:
        url = await person.start("reauthenticate")
        query = parse_qs(urlsplit(url).query)
        assert query["prompt"] == ["login"] and query["max_age"] == ["0"]
        found = await person.trip("dave", purpose="reauthenticate")
        assert found["purpose"] == "reauthenticate"
        status, body = await person.exchange(found["oidc_code"], token)
    assert status == 200, body
    fresh = body["data"]["token"]
    assert fresh != token and body["data"]["aal"] == 1 and body["data"]["authenticated_at"]
    response = await api.client.get("/api/v1/auth/session", headers=bearer(token))
    assert response.status == 401  # the old token was replaced
    response = await api.client.get("/api/v1/auth/session", headers=bearer(fresh))
    current = (await response.json())["data"]
    assert current["authenticated_recently"] is True and current["has_password"] is False
    assert current["method"] == "oidc" and current["provider"] == provider.issuer
    # Another identity than the account's steps up nothing.
    await api.create_user("alice@example.com")
    async with browser(api.client) as person:
        found = await person.trip("alice", purpose="reauthenticate")
        status, body = await person.exchange(found["oidc_code"], fresh)
    assert status == 403 and body["error"]["code"] == "sso_identity_mismatch"


async def test_a_step_up_the_provider_did_not_ask_again_for_is_refused(
    make_api: Any, provider: Provider
) -> None:
    api, _ = await _signed_up(make_api, provider, "dave")
    await provider.tamper(claims={"auth_time": int(time.time()) - 3600})
    async with browser(api.client) as person:
        found = await person.trip("dave", purpose="reauthenticate")
    assert found == {"oidc_error": "reauthentication_required", "purpose": "reauthenticate"}


async def test_back_channel_logout_ends_the_provider_sessions_sessions(
    sso_api: Api, provider: Provider
) -> None:
    await sso_api.create_user("alice@example.com")
    password_token = await sso_api.login("alice@example.com")
    await provider.tamper(claims={"sid": "provider-session-1"})
    async with browser(sso_api.client) as person:
        first = (await person.login("alice"))["token"]
    async with browser(sso_api.client) as person:
        second = (await person.login("alice"))["token"]

    async def logout(token: str) -> Any:
        return await sso_api.client.post(
            "/api/v1/auth/oidc/backchannel-logout", data={"logout_token": token}
        )

    logout_token = await provider.logout_token(sid="provider-session-1", jti="j1")
    response = await logout(logout_token)
    assert response.status == 200, await response.text()
    assert (await response.json())["data"]["sessions_ended"] == 1
    for token, status in ((first, 401), (second, 200), (password_token, 200)):
        response = await sso_api.client.get("/api/v1/auth/session", headers=bearer(token))
        assert response.status == status
    # The same token again, one with a nonce, and one naming neither sid nor sub: refused.
    await assert_error(await logout(logout_token), 400, "sso_logout_token_invalid")
    with_nonce = await provider.logout_token(sub="alice", nonce="n")
    await assert_error(await logout(with_nonce), 400, "sso_logout_token_invalid")
    await assert_error(await logout(await provider.logout_token()), 400, "sso_logout_token_invalid")
    await assert_error(await logout("not.a.token"), 400, "sso_logout_token_invalid")
    # By subject: every session the identity opened through the provider, not the password's.
    response = await logout(await provider.logout_token(sub="alice"))
    assert (await response.json())["data"]["sessions_ended"] == 1
    for token, status in ((second, 401), (password_token, 200)):
        response = await sso_api.client.get("/api/v1/auth/session", headers=bearer(token))
        assert response.status == status


async def test_a_provider_down_is_503_quickly_and_password_login_still_works(
    make_api: Any,
) -> None:
    nothing_there = f"http://127.0.0.1:{free_port()}"
    api = await make_api(
        public_url="http://filehost.test",
        oidc_issuer=nothing_there,
        oidc_client_id="filehost",
        oidc_timeout_seconds=1.0,
    )
    await api.create_user("alice@example.com")
    started = time.monotonic()
    response = await api.client.get("/api/v1/auth/oidc/start", allow_redirects=False)
    await assert_error(response, 503, "sso_unavailable")
    assert time.monotonic() - started < 2
    assert (await api.login("alice@example.com")).startswith("fhs_")


async def test_a_provider_that_never_answers_is_503_within_the_bound(make_api: Any) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        api = await make_api(
            public_url="http://filehost.test",
            oidc_issuer=f"http://127.0.0.1:{port}",
            oidc_client_id="filehost",
            oidc_timeout_seconds=0.5,
        )
        await api.create_user("alice@example.com")
        started = time.monotonic()
        login = asyncio.create_task(api.login("alice@example.com"))
        response = await api.client.get("/api/v1/auth/oidc/start", allow_redirects=False)
        await assert_error(response, 503, "sso_unavailable")
        assert time.monotonic() - started < 1.5
        assert (await login).startswith("fhs_")
    finally:
        server.close()


async def test_deleting_an_account_frees_its_identities(make_api: Any, provider: Provider) -> None:
    api, token = await _signed_up(make_api, provider, "dave")
    old = (await _identities(api, token))[0]
    await api.app[POLICY].users.delete_user("dave@example.com")
    keys = api.app[POLICY].identities
    assert await keys.linked_account(old["provider"], "dave") is None
    async with browser(api.client) as person:
        data = await person.login("dave")  # sign-up again: a new account
    assert data["user"]["email"] == "dave@example.com"
    (again,) = await _identities(api, data["token"])
    assert again["id"] != old["id"]
