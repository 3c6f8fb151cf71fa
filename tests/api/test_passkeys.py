"""Passkeys (WebAuthn) as a second factor, through a software authenticator: registered against
this service's origin and relying party only, listed, removed, and answering a login's second
step and a reauthentication; an assertion for another origin or relying party, for another
challenge, or from a cloned authenticator (its sign count not grown) is refused."""

from __future__ import annotations

from typing import Any

import pytest

from service.config.readers import secret_keys
from tests.support.api import Api, assert_error, bearer
from tests.support.mfa import (
    PUBLIC_URL,
    SECRETS_KEY,
    SoftPasskey,
    add_passkey,
    b64url,
    first_step,
    reauthenticate,
    second_step,
)

EMAIL = "alice@example.com"
OPTIONS = "/api/v1/auth/mfa/webauthn/options"
LOGIN_OPTIONS = "/api/v1/auth/login/mfa/webauthn-options"


@pytest.fixture
async def mfa_api(make_api) -> Api:  # type: ignore[no-untyped-def]
    return await make_api(
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY), public_url=PUBLIC_URL
    )


async def creation_options(api: Api, token: str) -> dict[str, Any]:
    response = await api.client.post(OPTIONS, headers=bearer(token))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def register(api: Api, token: str, credential: dict[str, Any]) -> Any:
    return await api.client.post(
        "/api/v1/auth/mfa/webauthn",
        json={"name": "YubiKey", "credential": credential},
        headers=bearer(token),
    )


async def login_options(api: Api, mfa_token: str) -> dict[str, Any]:
    response = await api.client.post(LOGIN_OPTIONS, json={"mfa_token": mfa_token})
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def test_creation_options_name_this_service_and_exclude_the_accounts_passkeys(
    mfa_api: Api,
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    options = await creation_options(mfa_api, token)
    assert options["rp"]["id"] == "files.example.com"
    assert options["attestation"] == "none"
    assert options["authenticatorSelection"]["userVerification"] == "preferred"
    assert options["excludeCredentials"] == []
    passkey = SoftPasskey()
    await add_passkey(mfa_api, token, passkey)
    again = await creation_options(mfa_api, token)
    assert [c["id"] for c in again["excludeCredentials"]] == [passkey.register(again)["id"]]


async def test_a_registered_passkey_is_listed_and_answers_the_login(mfa_api: Api) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    passkey = SoftPasskey()
    added = await add_passkey(mfa_api, token, passkey, name="Laptop")
    assert added["name"] == "Laptop" and added["last_used_at"] is None
    step = await first_step(mfa_api, EMAIL)
    # Recovery codes come with TOTP, or when asked for: a passkey alone has none yet.
    assert step["methods"] == ["webauthn"]
    options = await login_options(mfa_api, step["mfa_token"])
    assert options["rpId"] == "files.example.com"
    assert [c["id"] for c in options["allowCredentials"]] == [b64url(passkey.credential_id)]
    response = await second_step(mfa_api, step["mfa_token"], webauthn=passkey.assert_(options))
    assert response.status == 200, await response.text()
    fresh = (await response.json())["data"]["token"]
    listed = await mfa_api.client.get("/api/v1/auth/mfa", headers=bearer(fresh))
    [shown] = (await listed.json())["data"]["webauthn"]
    assert shown["id"] == added["id"] and shown["last_used_at"] is not None


@pytest.mark.parametrize(
    ("origin", "rp_id"),
    [
        ("https://files.example.com.evil.test", None),  # a phisher's page, the right RP id
        ("https://evil.test", "evil.test"),  # another relying party altogether
        ("https://files.example.com", "evil.test"),  # the right origin, another RP id
        ("http://files.example.com", None),  # the origin without TLS
    ],
)
async def test_a_registration_for_another_origin_or_relying_party_is_refused(
    mfa_api: Api, origin: str, rp_id: str | None
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    options = await creation_options(mfa_api, token)
    credential = SoftPasskey().register(options, origin=origin, rp_id=rp_id)
    body = await assert_error(await register(mfa_api, token, credential), 400, "passkey_invalid")
    assert body["details"]["reason"]
    state = await mfa_api.client.get("/api/v1/auth/mfa", headers=bearer(token))
    assert (await state.json())["data"]["webauthn"] == []


@pytest.mark.parametrize(
    ("origin", "rp_id"),
    [
        ("https://files.example.com.evil.test", None),
        ("https://evil.test", "evil.test"),
        ("https://files.example.com", "evil.test"),
    ],
)
async def test_an_assertion_for_another_origin_or_relying_party_is_refused(
    mfa_api: Api, origin: str, rp_id: str | None
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    passkey = SoftPasskey()
    await add_passkey(mfa_api, token, passkey)
    step = await first_step(mfa_api, EMAIL)
    options = await login_options(mfa_api, step["mfa_token"])
    phished = passkey.assert_(options, origin=origin, rp_id=rp_id)
    response = await second_step(mfa_api, step["mfa_token"], webauthn=phished)
    await assert_error(response, 401, "mfa_code_invalid")


async def test_a_registration_challenge_serves_once_and_only_its_session(mfa_api: Api) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    other = await mfa_api.login(EMAIL)
    options = await creation_options(mfa_api, token)
    credential = SoftPasskey().register(options)
    # Another session of the same account has no such challenge.
    await assert_error(await register(mfa_api, other, credential), 400, "passkey_invalid")
    assert (await register(mfa_api, token, credential)).status == 201
    await assert_error(
        await register(mfa_api, token, SoftPasskey().register(options)), 400, "passkey_invalid"
    )


async def test_an_assertion_for_an_old_challenge_or_from_a_clone_is_refused(
    mfa_api: Api,
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    passkey = SoftPasskey()
    await add_passkey(mfa_api, token, passkey)
    step = await first_step(mfa_api, EMAIL)
    old = await login_options(mfa_api, step["mfa_token"])
    await login_options(mfa_api, step["mfa_token"])  # a new challenge replaces the old one
    response = await second_step(mfa_api, step["mfa_token"], webauthn=passkey.assert_(old))
    await assert_error(response, 401, "mfa_code_invalid")
    # A clone answers with the sign count the service saw last (or lower).
    current = await login_options(mfa_api, step["mfa_token"])
    assert (
        await second_step(mfa_api, step["mfa_token"], webauthn=passkey.assert_(current))
    ).status == 200
    step = await first_step(mfa_api, EMAIL)
    options = await login_options(mfa_api, step["mfa_token"])
    cloned = passkey.assert_(options, count_up=False)
    await assert_error(
        await second_step(mfa_api, step["mfa_token"], webauthn=cloned), 401, "mfa_code_invalid"
    )


async def test_a_passkey_of_another_account_is_refused(mfa_api: Api) -> None:
    alice = await mfa_api.user_with_session(EMAIL)
    bob = await mfa_api.user_with_session("bob@example.com")
    await add_passkey(mfa_api, alice, SoftPasskey())
    bobs = SoftPasskey()
    await add_passkey(mfa_api, bob, bobs)
    step = await first_step(mfa_api, EMAIL)
    options = await login_options(mfa_api, step["mfa_token"])
    response = await second_step(mfa_api, step["mfa_token"], webauthn=bobs.assert_(options))
    await assert_error(response, 401, "mfa_code_invalid")


async def test_a_passkey_reauthenticates_the_session(mfa_api: Api) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    passkey = SoftPasskey()
    await add_passkey(mfa_api, token, passkey)
    response = await mfa_api.client.post(
        "/api/v1/auth/reauthenticate/webauthn-options", headers=bearer(token)
    )
    assert response.status == 200, await response.text()
    options = (await response.json())["data"]
    answer = await reauthenticate(mfa_api, token, webauthn=passkey.assert_(options))
    assert answer.status == 200, await answer.text()
    assert (await answer.json())["data"]["aal"] == 2


async def test_a_removed_passkey_answers_nothing(mfa_api: Api) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    passkey = SoftPasskey()
    added = await add_passkey(mfa_api, token, passkey)
    response = await mfa_api.client.delete(
        f"/api/v1/auth/mfa/webauthn/{added['id']}", headers=bearer(token)
    )
    assert response.status == 200
    assert await mfa_api.login(EMAIL)  # no factor left: one step again
    again = await mfa_api.client.delete(
        f"/api/v1/auth/mfa/webauthn/{added['id']}", headers=bearer(token)
    )
    await assert_error(again, 404, "passkey_not_found")


async def test_without_a_public_url_passkeys_work_at_localhost_only(make_api) -> None:  # type: ignore[no-untyped-def]
    """Without FILEHOST_PUBLIC_URL the relying party is the page's own origin when that is a
    ``localhost`` page reached over loopback (as ``scripts/run`` serves); anywhere else is a
    4xx naming the setting, never a 5xx."""
    api = await make_api()
    token = await api.user_with_session(EMAIL)
    refused = await api.client.post(OPTIONS, headers=bearer(token))  # Host: 127.0.0.1:<port>
    error = await assert_error(refused, 409, "mfa_not_configured")
    assert error["details"] == {"setting": "FILEHOST_PUBLIC_URL"}
    state = await api.client.get("/api/v1/auth/mfa", headers=bearer(token))
    data = (await state.json())["data"]
    assert data["available"]["webauthn"] is False
    assert data["setup"]["public_url"] == "missing"

    port = api.client.port
    here = {**bearer(token), "Host": f"localhost:{port}"}
    options = await api.client.post(OPTIONS, headers=here)
    assert options.status == 200, await options.text()
    assert (await options.json())["data"]["rp"]["id"] == "localhost"
    state = await api.client.get("/api/v1/auth/mfa", headers=here)
    data = (await state.json())["data"]
    assert data["available"]["webauthn"] is True
    assert data["setup"]["public_url"] == "loopback"
    # A proxied name is the operator's to configure, even over loopback.
    proxied = {**bearer(token), "Host": "files.example.com"}
    await assert_error(await api.client.post(OPTIONS, headers=proxied), 409, "mfa_not_configured")
