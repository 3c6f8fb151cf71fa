"""Logging out of a session opened through the provider, with ``FILEHOST_OIDC_PROVIDER_LOGOUT``:
the answer names the provider's ``end_session_endpoint`` (OpenID RP-Initiated Logout) with this
client and the dashboard as where to come back, and the provider accepts it. Off (the default),
or for a session opened with the password, the logout answer is the service's own alone."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.api import Api
from tests.support.oidc_provider import CLIENT_ID, PUBLIC_URL, TEST_KEYS, Provider, SignIn


async def logout(api: Api, token: str) -> dict[str, Any]:
    response = await api.client.post(
        "/api/v1/auth/logout", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status == 200, await response.text()
    data: dict[str, Any] = (await response.json())["data"]
    response = await api.client.get(
        "/api/v1/auth/session", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status == 401  # ended either way
    return data


async def test_on_a_provider_session_logout_names_the_providers_end_session(
    make_api: Any, provider: Provider
) -> None:
    api: Api = await make_api(**provider.settings(secrets_key=TEST_KEYS, oidc_provider_logout=True))
    await api.create_user("alice@example.com")
    person = SignIn(api.client)
    try:
        signed_in = await person.login("alice")
        data = await logout(api, signed_in["token"])
        url = data["provider_logout_url"]
        async with person.browser.get(
            f"{provider.issuer}/.well-known/openid-configuration"
        ) as response:
            endpoint = (await response.json())["end_session_endpoint"]
        assert url.startswith(endpoint + "?")
        query = parse_qs(urlsplit(url).query)
        assert query == {"client_id": [CLIENT_ID], "post_logout_redirect_uri": [f"{PUBLIC_URL}/"]}
        # The provider knows the URI (registered for its client) and asks its user to confirm.
        async with person.browser.get(url, allow_redirects=False) as response:
            assert response.status == 200, await response.text()
            assert "sign-out" in await response.text()

        # A password session of the same service: its logout is the service's own.
        await api.create_user("pat@example.com")
        token = await api.login("pat@example.com")
        assert set(await logout(api, token)) == {"logged_out_at"}
    finally:
        await person.close()


async def test_off_by_default_a_provider_session_logout_stays_the_services_own(
    sso_api: Api, person: SignIn
) -> None:
    await sso_api.create_user("alice@example.com")
    signed_in = await person.login("alice")
    assert set(await logout(sso_api, signed_in["token"])) == {"logged_out_at"}
