"""Signing in through the OpenID provider over HTTP, as a browser does: start, the provider's
login form, the callback, the one-time code traded for a session that works like a password
login's."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tests.support.api import Api
from tests.support.oidc_provider import CALLBACK, CLIENT_ID, Provider, SignIn


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
