"""Which account a sign-in through the provider opens, and what it asks for: a linked identity
first, else a verified e-mail, else a sign-up when it is on; allowed domains; password login
turned off; an account's second factor, unless the provider's own is trusted."""

from __future__ import annotations

from typing import Any

from service.api.context import POLICY
from tests.support.api import PASSWORD, Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.mfa import code_for, enable_totp, second_step
from tests.support.oidc_provider import TEST_KEYS, Provider, SignIn, browser


async def _events(api: Api, token: str) -> list[dict[str, Any]]:
    response = await api.client.get("/api/v1/audit-events", headers=bearer(token))
    assert response.status == 200, await response.text()
    return list((await response.json())["data"]["events"])


async def test_an_unverified_email_links_nothing_and_is_recorded_on_its_account(
    sso_api: Api, person: SignIn
) -> None:
    await sso_api.create_user("bob@example.com")
    assert (await person.trip("bob"))["oidc_error"] == "sso_email_unverified"
    token = await sso_api.login("bob@example.com")
    failed = [e for e in await _events(sso_api, token) if e["type"] == "login.failed"]
    assert failed and failed[0]["changes"] == {"via": "oidc", "reason": "email_unverified"}
    response = await sso_api.client.get("/api/v1/auth/identities", headers=bearer(token))
    assert (await response.json())["data"]["identities"] == []


async def test_once_linked_the_account_follows_the_subject_not_the_email(
    sso_api: Api, person: SignIn, provider: Provider
) -> None:
    alice = await sso_api.create_user("alice@example.com")
    await sso_api.create_user("dave@example.com")
    await person.login("alice")
    # The identity's e-mail at the provider changes to another account's: it still signs in to
    # the account it is linked to.
    await provider.tamper(claims={"email": "dave@example.com"})
    data = await person.login("alice")
    assert data["user"]["id"] == alice.id
    token = data["token"]
    events = await _events(sso_api, token)
    kinds = [e["type"] for e in events]
    assert kinds.count("identity.linked") == 1
    logins = [e for e in events if e["type"] == "login.succeeded"]
    assert len(logins) == 2 and all(e["changes"]["via"] == "oidc" for e in logins)
    assert logins[0]["changes"]["provider"].startswith("http://127.0.0.1:")


async def test_a_domain_not_allowed_is_refused(make_api: Any, provider: Provider) -> None:
    api = await make_api(**provider.settings(oidc_allowed_domains=("example.com",)))
    await api.create_user("carol@other.org")
    async with browser(api.client) as person:
        assert (await person.trip("carol"))["oidc_error"] == "sso_domain_not_allowed"
    await api.create_user("alice@example.com")
    async with browser(api.client) as person:
        assert "oidc_code" in await person.trip("alice")


async def test_signup_off_refuses_an_unknown_identity_and_on_creates_an_account(
    make_api: Any, provider: Provider
) -> None:
    off = await make_api(**provider.settings())
    async with browser(off.client) as person:
        assert (await person.trip("dave"))["oidc_error"] == "sso_account_not_found"
    on = await make_api(**provider.settings(oidc_signup=True))
    async with browser(on.client) as person:
        data = await person.login("dave")
        assert data["user"]["email"] == "dave@example.com"
    async with browser(on.client) as person:
        # An unverified e-mail makes no account.
        assert (await person.trip("bob"))["oidc_error"] == "sso_email_unverified"
    # The account has no password: none opens it.
    response = await on.client.post(
        "/api/v1/auth/login", json={"email": "dave@example.com", "password": PASSWORD}
    )
    await assert_error(response, 401, "invalid_credentials")
    response = await on.client.post(
        "/api/v1/auth/login", json={"email": "dave@example.com", "password": ""}
    )
    assert response.status in (400, 401)


async def test_password_login_off_leaves_single_sign_on_and_the_cli(
    make_api: Any, provider: Provider
) -> None:
    api = await make_api(**provider.settings(password_login=False, oidc_label="Sign in with Test"))
    response = await api.client.get("/api/v1/auth/methods")
    assert (await response.json())["data"] == {
        "password": False,
        "oidc": {"label": "Sign in with Test"},
    }
    await api.create_user("alice@example.com")  # what the CLI's users create does
    response = await api.client.post(
        "/api/v1/auth/login", json={"email": "alice@example.com", "password": PASSWORD}
    )
    await assert_error(response, 403, "password_login_disabled")
    async with browser(api.client) as person:
        assert (await person.login("alice"))["token"].startswith("fhs_")


async def test_without_an_issuer_the_methods_say_password_alone(api: Api) -> None:
    response = await api.client.get("/api/v1/auth/methods")
    assert (await response.json())["data"] == {"password": True, "oidc": None}
    response = await api.client.get("/api/v1/auth/oidc/start", allow_redirects=False)
    await assert_error(response, 404, "route_not_found")


async def test_an_account_with_a_second_factor_takes_the_second_step(
    sso_api: Api, person: SignIn, clock: FakeClock, provider: Provider
) -> None:
    await sso_api.create_user("alice@example.com")
    secret, _ = await enable_totp(sso_api, await sso_api.login("alice@example.com"), clock)
    # Even when the provider did a second factor: the operator does not trust it here.
    data = await person.login("alice", mfa=True)
    assert data["mfa_required"] is True and "token" not in data and data["methods"][0] == "totp"
    response = await second_step(sso_api, data["mfa_token"], code=code_for(secret, clock))
    assert response.status == 200, await response.text()
    token = (await response.json())["data"]["token"]
    response = await sso_api.client.get("/api/v1/auth/sessions", headers=bearer(token))
    mine = [s for s in (await response.json())["data"]["sessions"] if s["current"]]
    assert mine[0]["method"] == "oidc" and mine[0]["provider"] == provider.issuer
    assert mine[0]["aal"] == 2


async def test_a_trusted_provider_second_factor_stands_for_the_accounts(
    make_api: Any, provider: Provider, clock: FakeClock
) -> None:
    api = await make_api(**provider.settings(secrets_key=TEST_KEYS, oidc_trust_provider_mfa=True))
    await api.create_user("alice@example.com")
    await enable_totp(api, await api.login("alice@example.com"), clock)
    async with browser(api.client) as person:
        # The provider said only "pwd": the account's factor is still asked.
        assert (await person.login("alice"))["mfa_required"] is True
    async with browser(api.client) as person:
        data = await person.login("alice", mfa=True)
    assert data["token"].startswith("fhs_")
    response = await api.client.get("/api/v1/auth/session", headers=bearer(data["token"]))
    assert (await response.json())["data"]["aal"] == 2
    assert api.app[POLICY].sso.settings.trust_provider_mfa
