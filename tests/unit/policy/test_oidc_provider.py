"""The OpenID provider as policy sees it, on a fake of its HTTP requests and keys this test
makes with joserfc: discovery cached and kept when the provider goes away, keys fetched again
for an unknown kid at most every bound, and every check of an ID token and a logout token, each
with its own code. And the pure rules of ``service.domain.oidc``."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey

from service.auth.oidc_provider import OidcProvider, ProviderUnreachable
from service.config import OidcSettings
from service.config.readers import Secret
from service.domain.oidc import (
    BACKCHANNEL_EVENT,
    code_challenge,
    domain_allowed,
    identity_digest,
    provider_did_mfa,
)
from service.errors import ApiError, Code
from tests.support.clock import FakeClock

ISSUER = "https://id.example.com"
CLIENT = "filehost"


class FakeProvider:
    """Discovery, a JWKS and a token endpoint, as dictionaries; counts what is fetched."""

    def __init__(self) -> None:
        self.keys = [RSAKey.generate_key(2048, parameters={"kid": "k1"})]
        self.down = False
        self.fetched: list[str] = []
        self.token_answer: tuple[int, dict[str, Any]] = (200, {"id_token": "x"})
        self.posted: list[tuple[Mapping[str, str], tuple[str, str] | None]] = []
        self.discovery: dict[str, Any] = {
            "issuer": ISSUER,
            "authorization_endpoint": f"{ISSUER}/auth",
            "token_endpoint": f"{ISSUER}/token",
            "jwks_uri": f"{ISSUER}/jwks",
            "id_token_signing_alg_values_supported": ["RS256", "HS256"],
        }

    async def get_json(self, url: str, within: float) -> dict[str, Any]:
        if self.down:
            raise ProviderUnreachable(url)
        self.fetched.append(url)
        if url.endswith("/jwks"):
            return KeySet(self.keys).as_dict(private=False)  # type: ignore[arg-type]
        return dict(self.discovery)

    async def post_form(
        self, url: str, form: Mapping[str, str], basic_auth: tuple[str, str] | None, within: float
    ) -> tuple[int, dict[str, Any]]:
        if self.down:
            raise ProviderUnreachable(url)
        self.posted.append((form, basic_auth))
        return self.token_answer

    def sign(self, key: Any = None, alg: str = "RS256", **claims: Any) -> str:
        key = key or self.keys[0]
        header = {"alg": alg, "kid": key.kid} if key.kid else {"alg": alg}
        return jwt.encode(header, claims, key, algorithms=[alg])


CLIENT_SECRET = Secret("s3cret")


def _settings() -> OidcSettings:
    return OidcSettings(
        issuer=ISSUER,
        client_id=CLIENT,
        client_secret=CLIENT_SECRET,
        scopes="openid email",
        label="SSO",
        redirect_uri="https://files.example.com/api/v1/auth/oidc/callback",
        dashboard_url="https://files.example.com/",
        secure_cookie=True,
        signup=False,
        allowed_domains=(),
        trust_provider_mfa=False,
        timeout_seconds=1.0,
    )


def _claims(**more: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": CLIENT, "sub": "alice", "iat": now, "exp": now + 300, **more}


@pytest.fixture
def fake() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def provider(fake: FakeProvider, clock: FakeClock) -> OidcProvider:
    return OidcProvider(_settings(), fake, clock)


async def _refused(call: Any) -> Code:
    with pytest.raises(ApiError) as caught:
        await call
    return caught.value.code


async def test_a_good_id_token_passes_and_discovery_and_keys_are_fetched_once(
    fake: FakeProvider, provider: OidcProvider
) -> None:
    for _ in range(3):
        claims = await provider.check_id_token(fake.sign(**_claims(nonce="n")), "n")
        assert claims["sub"] == "alice"
    assert fake.fetched == [f"{ISSUER}/.well-known/openid-configuration", f"{ISSUER}/jwks"]


@pytest.mark.parametrize(
    ("changed", "code"),
    [
        ({"aud": "another-client"}, Code.SSO_TOKEN_AUDIENCE_INVALID),
        ({"aud": [CLIENT, "another"]}, Code.SSO_TOKEN_AUDIENCE_INVALID),  # no azp
        ({"iss": "https://evil.example.com"}, Code.SSO_TOKEN_ISSUER_INVALID),
        ({"nonce": "another"}, Code.SSO_TOKEN_NONCE_INVALID),
        ({"exp": int(time.time()) - 600}, Code.SSO_TOKEN_EXPIRED),
        ({"iat": int(time.time()) + 3600}, Code.SSO_TOKEN_EXPIRED),
        ({"iat": int(time.time()) - 3600}, Code.SSO_TOKEN_EXPIRED),
        ({"sub": ""}, Code.SSO_TOKEN_MALFORMED),
    ],
)
async def test_each_failed_claim_has_its_own_code(
    fake: FakeProvider, provider: OidcProvider, changed: dict[str, Any], code: Code
) -> None:
    token = fake.sign(**{**_claims(nonce="n"), **changed})
    assert await _refused(provider.check_id_token(token, "n")) is code


async def test_alg_none_a_symmetric_key_and_a_foreign_key_are_refused(
    fake: FakeProvider, provider: OidcProvider
) -> None:
    part = lambda value: base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()  # noqa: E731
    unsigned = f"{part({'alg': 'none'})}.{part(_claims(nonce='n'))}."
    assert (
        await _refused(provider.check_id_token(unsigned, "n")) is Code.SSO_TOKEN_ALGORITHM_REFUSED
    )
    # HS256 with the client secret as the key: discovery offers it, the service never takes it.
    shared = OctKey.import_key("s3cret-s3cret-s3cret-s3cret-s3cret")
    hs = fake.sign(key=shared, alg="HS256", **_claims(nonce="n"))
    assert await _refused(provider.check_id_token(hs, "n")) is Code.SSO_TOKEN_ALGORITHM_REFUSED
    foreign = RSAKey.generate_key(2048, parameters={"kid": "k1"})  # the same kid, another key
    forged = fake.sign(key=foreign, **_claims(nonce="n"))
    assert await _refused(provider.check_id_token(forged, "n")) is Code.SSO_TOKEN_SIGNATURE_INVALID
    assert await _refused(provider.check_id_token("garbage", "n")) is Code.SSO_TOKEN_MALFORMED


async def test_an_unknown_kid_fetches_the_keys_again_at_most_once_per_bound(
    fake: FakeProvider, provider: OidcProvider, clock: FakeClock
) -> None:
    await provider.check_id_token(fake.sign(**_claims(nonce="n")), "n")
    fake.keys.insert(0, RSAKey.generate_key(2048, parameters={"kid": "k2"}))
    rotated = fake.sign(**_claims(nonce="n"))
    # Fetched moments ago: a new kid does not make the service ask again yet.
    code = await _refused(provider.check_id_token(rotated, "n"))
    assert code is Code.SSO_TOKEN_SIGNATURE_INVALID and fake.fetched.count(f"{ISSUER}/jwks") == 1
    clock.advance(seconds=11)
    assert (await provider.check_id_token(rotated, "n"))["sub"] == "alice"
    made_up = fake.sign(key=RSAKey.generate_key(2048, parameters={"kid": "k9"}), **_claims())
    for _ in range(5):
        await _refused(provider.check_id_token(made_up, "n"))
    assert fake.fetched.count(f"{ISSUER}/jwks") == 2


async def test_a_provider_that_goes_away_is_503_until_it_was_read_once_and_then_kept(
    fake: FakeProvider, provider: OidcProvider, clock: FakeClock
) -> None:
    fake.down = True
    assert await _refused(provider.authorization_url({})) is Code.SSO_UNAVAILABLE
    fake.down = False
    assert (await provider.authorization_url({"a": "b"})) == f"{ISSUER}/auth?a=b"
    fake.down = True
    clock.advance(hours=2)  # past the cache: the last good document still serves
    assert (await provider.authorization_url({})).startswith(f"{ISSUER}/auth")
    assert await _refused(provider.redeem("code", "verifier")) is Code.SSO_UNAVAILABLE


async def test_discovery_naming_another_issuer_is_unusable(
    fake: FakeProvider, provider: OidcProvider
) -> None:
    fake.discovery["issuer"] = "https://elsewhere.example.com"
    assert await _refused(provider.discovery()) is Code.SSO_UNAVAILABLE


async def test_the_token_endpoint_gets_the_secret_as_discovery_allows(
    fake: FakeProvider, clock: FakeClock
) -> None:
    basic = OidcProvider(_settings(), fake, clock)
    await basic.redeem("c", "v")
    form, auth = fake.posted[-1]
    assert auth == (CLIENT, "s3cret") and "client_secret" not in form
    assert form["code_verifier"] == "v" and form["grant_type"] == "authorization_code"
    fake.discovery["token_endpoint_auth_methods_supported"] = ["client_secret_post"]
    post = OidcProvider(_settings(), fake, clock)
    await post.redeem("c", "v")
    form, auth = fake.posted[-1]
    assert auth is None and form["client_secret"] == "s3cret"
    fake.token_answer = (400, {"error": "invalid_grant"})
    assert await _refused(post.redeem("c", "v")) is Code.SSO_CODE_REJECTED
    fake.token_answer = (502, {})
    assert await _refused(post.redeem("c", "v")) is Code.SSO_UNAVAILABLE


async def test_a_logout_token_needs_its_event_a_jti_sid_or_sub_and_no_nonce(
    fake: FakeProvider, provider: OidcProvider
) -> None:
    event = {BACKCHANNEL_EVENT: {}}
    good = fake.sign(**_claims(jti="j", events=event, sid="s"))
    assert (await provider.check_logout_token(good))["sid"] == "s"
    bad = [
        _claims(jti="j", sid="s"),
        _claims(jti="j", events=event, sid="s", nonce="n"),
        _claims(events=event, sid="s"),
        {**_claims(jti="j", events=event), "sub": ""},
        _claims(jti="j", events=event, sid="s", aud="another"),
    ]
    for claims in bad:
        code = await _refused(provider.check_logout_token(fake.sign(**claims)))
        assert code is Code.SSO_LOGOUT_TOKEN_INVALID, claims


def test_the_pure_rules() -> None:
    # RFC 7636, appendix B.
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert code_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert domain_allowed("a@Example.com", ("example.com",))
    assert not domain_allowed("a@other.org", ("example.com",))
    assert not domain_allowed(None, ("example.com",)) and domain_allowed(None, ())
    assert provider_did_mfa({"amr": ["pwd", "otp"]}) and provider_did_mfa({"acr": "mfa"})
    assert not provider_did_mfa({"amr": ["pwd"]}) and not provider_did_mfa({"acr": "1"})
    assert identity_digest("a", "b:c") != identity_digest("a:b", "c")
