"""The OpenID provider as the service talks to it: its discovery document (cached, refreshed),
its keys (cached; fetched again when a token names a key the cache lacks, at most once per
``KEYS_REFETCH_MS``: key rotation works, a stream of made-up key ids costs the provider
nothing), the token endpoint (the code and PKCE verifier for an ID token, the client's secret
sent as discovery allows), and the checks of an ID token and of a back-channel logout token
(joserfc's signature check, then every claim, each failure its own code).

The HTTP requests themselves are an outside dependency behind ``ProviderHttp`` (the HTTP layer
makes them with aiohttp's client, ``service.api.provider_http``), each bounded by
``FILEHOST_OIDC_TIMEOUT_SECONDS``: a provider that is down or slow is 503 ``sso_unavailable``
within that, and nothing else waits on it (password login never asks the provider anything)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode

from service.clock import Clock
from service.config import OidcSettings
from service.domain.oidc import BACKCHANNEL_EVENT
from service.errors import ApiError, Code

if TYPE_CHECKING:
    from joserfc.jwk import KeySet

log = logging.getLogger("service.auth.oidc_provider")

DISCOVERY_MS = 60 * 60_000  # discovery and keys are read again after an hour
KEYS_REFETCH_MS = 10_000  # at most one fetch for an unknown key id this often
LEEWAY_MS = 120_000  # clocks of the provider and the service may differ this much
MAX_TOKEN_AGE_MS = 10 * 60_000  # an ID or logout token issued longer ago is refused
# What the service accepts, whatever the provider offers: asymmetric signatures only (a
# symmetric one would make the client secret a signing key), never ``none``.
ACCEPTED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class ProviderUnreachable(Exception):
    """The provider did not answer within the bound, or not with JSON."""


class ProviderHttp(Protocol):
    async def get_json(self, url: str, within: float) -> dict[str, Any]:
        """The JSON object at ``url``, answered ``within`` seconds; ``ProviderUnreachable``
        for anything else."""
        ...

    async def post_form(
        self,
        url: str,
        form: Mapping[str, str],
        basic_auth: tuple[str, str] | None,
        within: float,
    ) -> tuple[int, dict[str, Any]]:
        """POST a form: the status and the JSON object answered; ``ProviderUnreachable``
        when there is no such answer."""
        ...


@dataclass(frozen=True, slots=True)
class Discovery:
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None
    algorithms: frozenset[str]
    secret_in_body: bool  # client_secret_post, when the provider does not take basic


def unavailable() -> ApiError:
    return ApiError(Code.SSO_UNAVAILABLE)


def _with_query(endpoint: str, params: Mapping[str, str]) -> str:
    """``endpoint`` with ``params`` added to its query (a provider's endpoint may have one)."""
    return endpoint + ("&" if "?" in endpoint else "?") + urlencode(params)


def _segment(part: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error):
        raise ApiError(Code.SSO_TOKEN_MALFORMED) from None
    if not isinstance(value, dict):
        raise ApiError(Code.SSO_TOKEN_MALFORMED)
    return value


def token_header(token: str) -> dict[str, Any]:
    """A compact JWS's protected header, unverified (what picks its key and algorithm)."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts[:2]):
        raise ApiError(Code.SSO_TOKEN_MALFORMED)
    return _segment(parts[0])


class OidcProvider:
    def __init__(
        self,
        settings: OidcSettings,
        http: ProviderHttp,
        clock: Clock,
        keys_refetch_ms: int = KEYS_REFETCH_MS,
    ) -> None:
        self.settings = settings
        self._http = http
        self._clock = clock
        self._keys_refetch_ms = keys_refetch_ms
        self._discovery: Discovery | None = None
        self._discovered_at = 0
        self._keys: KeySet | None = None
        self._keys_at = 0

    # -- discovery and keys -------------------------------------------------------------------

    async def discovery(self) -> Discovery:
        """The provider's endpoints, read at most once an hour; a provider that cannot be read
        then is 503 ``sso_unavailable`` only while nothing was read before (the last good
        document serves until it answers again)."""
        now = self._clock.now_ms()
        if self._discovery is not None and now - self._discovered_at < DISCOVERY_MS:
            return self._discovery
        url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            document = await self._http.get_json(url, self.settings.timeout_seconds)
            found = self._read_discovery(document)
        except (ProviderUnreachable, ValueError) as failure:
            log.warning("the OpenID provider's discovery could not be read: %s", failure)
            if self._discovery is None:
                raise unavailable() from None
            self._discovered_at = now - DISCOVERY_MS + 60_000  # try again in a minute
            return self._discovery
        self._discovery, self._discovered_at = found, now
        return found

    def _read_discovery(self, document: dict[str, Any]) -> Discovery:
        if document.get("issuer") != self.settings.issuer:
            raise ValueError(
                f"its issuer is {document.get('issuer')!r}, not FILEHOST_OIDC_ISSUER's "
                f"{self.settings.issuer!r}"
            )
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(document.get(name), str):
                raise ValueError(f"it names no {name}")
        offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = frozenset(a for a in offered if isinstance(a, str)) & ACCEPTED_ALGORITHMS
        if not algorithms:
            raise ValueError(f"it signs with none of {sorted(ACCEPTED_ALGORITHMS)}")
        methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        end_session = document.get("end_session_endpoint")
        return Discovery(
            document["authorization_endpoint"],
            document["token_endpoint"],
            document["jwks_uri"],
            end_session if isinstance(end_session, str) else None,
            algorithms,
            "client_secret_basic" not in methods and "client_secret_post" in methods,
        )

    async def _key_set(self, kid: str | None) -> KeySet:
        """The provider's keys, holding ``kid`` if the provider still publishes it."""
        now = self._clock.now_ms()
        known = self._keys is not None and now - self._keys_at < DISCOVERY_MS
        if known and self._keys is not None:
            if kid is None or any(key.kid == kid for key in self._keys.keys):
                return self._keys
            if now - self._keys_at < self._keys_refetch_ms:
                return self._keys  # a key id made up, or one fetched moments ago: no new fetch
        # joserfc is imported by the first token's check, not at start-up: it is among the
        # slowest imports, which every worker and command would pay (docs/development.md).
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        discovery = await self.discovery()
        try:
            document = await self._http.get_json(discovery.jwks_uri, self.settings.timeout_seconds)
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except ProviderUnreachable:
            if self._keys is None:
                raise unavailable() from None
            return self._keys
        except (JoseError, ValueError, TypeError, KeyError):
            log.warning("the OpenID provider's keys could not be read")
            raise unavailable() from None
        self._keys, self._keys_at = keys, now
        return keys

    # -- the authorization request and the token endpoint -------------------------------------

    async def authorization_url(self, params: Mapping[str, str]) -> str:
        return _with_query((await self.discovery()).authorization_endpoint, params)

    async def end_session_url(self, params: Mapping[str, str]) -> str | None:
        """Where a browser ends its session at the provider (OpenID RP-Initiated Logout 1.0),
        or None when the provider publishes no ``end_session_endpoint``."""
        endpoint = (await self.discovery()).end_session_endpoint
        if endpoint is None:
            return None
        return _with_query(endpoint, params)

    async def redeem(self, code: str, verifier: str) -> str:
        """The ID token for an authorization code: 400 ``sso_code_rejected`` when the provider
        refuses the code (used already, expired, another client's), 503 ``sso_unavailable``
        when it does not answer."""
        discovery = await self.discovery()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.settings.redirect_uri,
            "code_verifier": verifier,
            "client_id": self.settings.client_id,
        }
        basic = None
        secret = self.settings.client_secret
        if secret is not None:
            if discovery.secret_in_body:
                form["client_secret"] = str(secret)
            else:
                basic = (self.settings.client_id, str(secret))
        try:
            status, answer = await self._http.post_form(
                discovery.token_endpoint, form, basic, self.settings.timeout_seconds
            )
        except ProviderUnreachable:
            raise unavailable() from None
        if status >= 500:
            raise unavailable()
        if status != 200:
            log.info("the token endpoint refused a code: %s", answer.get("error"))
            raise ApiError(Code.SSO_CODE_REJECTED)
        token = answer.get("id_token")
        if not isinstance(token, str):
            raise ApiError(Code.SSO_TOKEN_MALFORMED, "The provider answered no ID token.")
        return token

    # -- checking tokens ----------------------------------------------------------------------

    async def _verified_claims(self, token: str) -> dict[str, Any]:
        """The claims of a token whose signature checks out with one of the provider's keys,
        by an algorithm both sides accept."""
        header = token_header(token)
        discovery = await self.discovery()
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in discovery.algorithms:
            raise ApiError(Code.SSO_TOKEN_ALGORITHM_REFUSED)
        kid = header.get("kid")
        keys = await self._key_set(kid if isinstance(kid, str) else None)
        if isinstance(kid, str) and not any(key.kid == kid for key in keys.keys):
            raise ApiError(Code.SSO_TOKEN_SIGNATURE_INVALID)
        from joserfc import jwt  # see _key_set
        from joserfc.errors import JoseError

        try:
            decoded = jwt.decode(token, keys, algorithms=[algorithm])
        except JoseError:
            raise ApiError(Code.SSO_TOKEN_SIGNATURE_INVALID) from None
        except ValueError:
            raise ApiError(Code.SSO_TOKEN_MALFORMED) from None
        return dict(decoded.claims)

    def _check_common(self, claims: Mapping[str, Any]) -> None:
        """``iss``, ``aud`` (and ``azp`` when several audiences) and ``iat``."""
        if claims.get("iss") != self.settings.issuer:
            raise ApiError(Code.SSO_TOKEN_ISSUER_INVALID)
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.settings.client_id not in audiences:
            raise ApiError(Code.SSO_TOKEN_AUDIENCE_INVALID)
        if len(audiences) > 1 and claims.get("azp") != self.settings.client_id:
            raise ApiError(Code.SSO_TOKEN_AUDIENCE_INVALID)
        now = self._clock.now_ms()
        issued = claims.get("iat")
        if not isinstance(issued, int | float) or isinstance(issued, bool):
            raise ApiError(Code.SSO_TOKEN_MALFORMED, "The token has no iat.")
        if issued * 1000 > now + LEEWAY_MS or issued * 1000 < now - MAX_TOKEN_AGE_MS - LEEWAY_MS:
            raise ApiError(Code.SSO_TOKEN_EXPIRED)

    async def check_id_token(self, token: str, nonce: str) -> dict[str, Any]:
        """An ID token's claims once its signature, ``iss``, ``aud``, ``exp``, ``iat``,
        ``nonce`` and ``sub`` check out; each failure its own 400."""
        claims = await self._verified_claims(token)
        self._check_common(claims)
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or isinstance(expires, bool):
            raise ApiError(Code.SSO_TOKEN_MALFORMED, "The ID token has no exp.")
        if expires * 1000 <= self._clock.now_ms() - LEEWAY_MS:
            raise ApiError(Code.SSO_TOKEN_EXPIRED)
        if claims.get("nonce") != nonce:
            raise ApiError(Code.SSO_TOKEN_NONCE_INVALID)
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject or len(subject) > 255:
            raise ApiError(Code.SSO_TOKEN_MALFORMED, "The ID token has no sub.")
        return claims

    async def check_logout_token(self, token: str) -> dict[str, Any]:
        """A back-channel logout token's claims (OpenID Back-Channel Logout 1.0, 2.6): checked
        like an ID token's (signature, ``iss``, ``aud``, ``iat``), with the logout event, a
        ``sid`` or a ``sub``, a ``jti``, and no ``nonce``; else 400
        ``sso_logout_token_invalid``."""
        try:
            claims = await self._verified_claims(token)
            self._check_common(claims)
        except ApiError as refused:
            if refused.code is Code.SSO_UNAVAILABLE:
                raise
            raise ApiError(Code.SSO_LOGOUT_TOKEN_INVALID, refused.message) from None
        events = claims.get("events")
        if not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_EVENT), dict):
            raise ApiError(Code.SSO_LOGOUT_TOKEN_INVALID, "The token carries no logout event.")
        if "nonce" in claims:
            raise ApiError(Code.SSO_LOGOUT_TOKEN_INVALID, "A logout token carries no nonce.")
        if not isinstance(claims.get("jti"), str) or not claims["jti"]:
            raise ApiError(Code.SSO_LOGOUT_TOKEN_INVALID, "The token has no jti.")
        sid, sub = claims.get("sid"), claims.get("sub")
        if not (isinstance(sid, str) and sid) and not (isinstance(sub, str) and sub):
            raise ApiError(Code.SSO_LOGOUT_TOKEN_INVALID, "The token names no sid and no sub.")
        return claims
