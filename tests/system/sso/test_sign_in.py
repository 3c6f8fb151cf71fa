"""Signing in through the OpenID provider over HTTP, as a browser does: start, the provider's
login form, the callback, the one-time code traded for a session that works like a password
login's."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from service.api.context import POLICY
from service.auth.oidc import LOGIN_CODE_MS, STARTS_PER_ADDRESS, STATE_MS
from tests.support.api import Api, assert_error
from tests.support.clock import FakeClock
from tests.support.oidc_provider import (
    CALLBACK,
    CLIENT_ID,
    Provider,
    SignIn,
    at_provider,
    fragment,
)


async def test_a_person_signs_in_through_the_provider_and_gets_a_working_session(
    sso_api: Api, person: SignIn, provider: Provider
) -> None:
    user = await sso_api.create_user("alice@example.com")
    url = await person.start()
    query = parse_qs(urlsplit(url).query)
    assert url.startswith(provider.issuer + "/auth?")
    assert query["client_id"] == [CLIENT_ID] and query["redirect_uri"] == [CALLBACK]
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["nonce"] and query["state"] and "prompt" not in query

    data = await person.login("alice")
    assert data["user"] == {"id": user.id, "email": "alice@example.com"}
    assert data["token"].startswith("fhs_") and data["expires_at"] and data["absolute_expires_at"]
    headers = {"Authorization": f"Bearer {data['token']}"}
    response = await sso_api.client.get("/api/v1/auth/sessions", headers=headers)
    assert response.status == 200
    (session,) = (await response.json())["data"]["sessions"]
    assert session["method"] == "oidc" and session["provider"] == provider.issuer
    response = await sso_api.client.get("/api/v1/auth/identities", headers=headers)
    (identity,) = (await response.json())["data"]["identities"]
    assert identity["provider"] == provider.issuer and identity["subject"] == "alice"
    assert identity["email"] == "alice@example.com" and identity["id"].startswith("idn_")


async def test_a_state_works_once_and_only_in_the_browser_that_started_it(
    sso_api: Api, person: SignIn, provider: Provider
) -> None:
    await sso_api.create_user("alice@example.com")
    url = await person.start()
    came_back = await at_provider(person.browser, url, "alice")
    path = urlsplit(came_back)
    # Another browser (no cookie, or another one) is refused, and the state is spent by it.
    stranger = SignIn(sso_api.client)
    sso_api.client.session.cookie_jar.clear()
    assert (await stranger.back(came_back))["oidc_error"] == "sso_browser_mismatch"
    await stranger.close()
    assert (await person.back(came_back))["oidc_error"] == "sso_state_invalid"
    # An unknown state, and none at all.
    response = await sso_api.client.get(f"{path.path}?code=x&state=made-up", allow_redirects=False)
    assert fragment(response.headers["Location"])["oidc_error"] == "sso_state_invalid"
    response = await sso_api.client.get(path.path, allow_redirects=False)
    assert fragment(response.headers["Location"])["oidc_error"] == "sso_state_invalid"


async def test_a_state_expires_after_ten_minutes(
    sso_api: Api, person: SignIn, clock: FakeClock
) -> None:
    await sso_api.create_user("alice@example.com")
    url = await person.start()
    came_back = await at_provider(person.browser, url, "alice")
    clock.advance(seconds=STATE_MS / 1000 + 1)
    assert (await person.back(came_back))["oidc_error"] == "sso_state_invalid"


async def test_the_state_cookie_is_http_only_lax_and_scoped_to_the_callback(
    sso_api: Api,
) -> None:
    response = await sso_api.client.get("/api/v1/auth/oidc/start", allow_redirects=False)
    cookie = response.cookies["filehost_oidc"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert cookie["path"] == "/api/v1/auth/oidc/callback" and not cookie["secure"]
    assert 0 < int(cookie["max-age"]) <= 600
    assert "token" not in response.headers["Location"]


async def test_an_address_may_begin_only_so_many_trips_a_minute(
    sso_api: Api, clock: FakeClock
) -> None:
    start = "/api/v1/auth/oidc/start"
    for _ in range(STARTS_PER_ADDRESS):
        response = await sso_api.client.get(start, allow_redirects=False)
        assert response.status == 302
    refused = await sso_api.client.get(start, allow_redirects=False)
    body = await assert_error(refused, 429, "rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert body["details"]["retry_after_seconds"] == int(refused.headers["Retry-After"])
    assert "Location" not in refused.headers and "filehost_oidc" not in refused.cookies


async def test_a_replayed_code_or_login_code_is_refused(sso_api: Api, person: SignIn) -> None:
    await sso_api.create_user("alice@example.com")
    came_back = await at_provider(person.browser, await person.start(), "alice")
    found = await person.back(came_back)
    status, _ = await person.exchange(found["oidc_code"])
    assert status == 200
    status, body = await person.exchange(found["oidc_code"])
    assert status == 401 and body["error"]["code"] == "sso_login_code_invalid"
    # The provider's code again, under a fresh state: the provider refuses it.
    fresh = parse_qs(urlsplit(await person.start()).query)["state"][0]
    old = parse_qs(urlsplit(came_back).query)
    response = await sso_api.client.get(
        f"/api/v1/auth/oidc/callback?code={old['code'][0]}&state={fresh}", allow_redirects=False
    )
    assert fragment(response.headers["Location"])["oidc_error"] == "sso_code_rejected"


async def test_a_login_code_lasts_sixty_seconds(
    sso_api: Api, person: SignIn, clock: FakeClock
) -> None:
    await sso_api.create_user("alice@example.com")
    found = await person.trip("alice")
    clock.advance(seconds=LOGIN_CODE_MS / 1000 + 1)
    status, body = await person.exchange(found["oidc_code"])
    assert status == 401 and body["error"]["code"] == "sso_login_code_invalid"


async def test_the_provider_saying_no_is_its_own_refusal(sso_api: Api, person: SignIn) -> None:
    url = await person.start()
    state = parse_qs(urlsplit(url).query)["state"][0]
    response = await sso_api.client.get(
        f"/api/v1/auth/oidc/callback?error=access_denied&state={state}", allow_redirects=False
    )
    assert fragment(response.headers["Location"])["oidc_error"] == "sso_provider_refused"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"claims": {"aud": "someone-else"}}, "sso_token_audience_invalid"),
        ({"claims": {"iss": "http://127.0.0.1:1"}}, "sso_token_issuer_invalid"),
        ({"claims": {"nonce": "another-sign-in"}}, "sso_token_nonce_invalid"),
        ({"claims": {"exp": 1_000_000_000}}, "sso_token_expired"),
        ({"claims": {"iat": 4_000_000_000}}, "sso_token_expired"),
        ({"key": "foreign"}, "sso_token_signature_invalid"),
        ({"alg": "none"}, "sso_token_algorithm_refused"),
    ],
)
async def test_an_id_token_failing_a_check_makes_no_session(
    sso_api: Api, person: SignIn, provider: Provider, change: dict[str, Any], code: str
) -> None:
    await sso_api.create_user("alice@example.com")
    await provider.tamper(**change)
    found = await person.trip("alice")
    assert found == {"oidc_error": code, "purpose": "login"}
    records = await sso_api.app[POLICY].sessions.list_sessions(
        (await sso_api.app[POLICY].users.find_user("alice@example.com")).id
    )
    assert records == []


async def test_a_rotated_signing_key_is_fetched_and_accepted(
    sso_api: Api, person: SignIn, provider: Provider, clock: FakeClock
) -> None:
    await sso_api.create_user("alice@example.com")
    await person.login("alice")
    await provider.rotate()
    clock.advance(seconds=11)  # past the bound on fetching keys again
    data = await person.login("alice")
    assert data["token"].startswith("fhs_")
