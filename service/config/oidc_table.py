"""Single sign-on's rows of ``SETTINGS`` (``service.config.table``): the OpenID Connect provider
people sign in with, who may sign in through it, and whether the password still works
([sso.md](../../docs/sso.md))."""

from __future__ import annotations

from service.config.readers import (
    Domains,
    Float,
    IssuerUrl,
    SecretFile,
    SecretText,
    Switch,
    Text,
)
from service.config.setting import Setting

OIDC_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "oidc_issuer",
        "FILEHOST_OIDC_ISSUER",
        IssuerUrl(),
        None,
        "Turns single sign-on on: the OpenID provider's issuer, whose "
        "`/.well-known/openid-configuration` says where its endpoints and keys are "
        "([sso.md](sso.md)); the redirect URI to register there is `FILEHOST_PUBLIC_URL` + "
        "`/api/v1/auth/oidc/callback`",
        "unset: no single sign-on",
        "; needs `FILEHOST_OIDC_CLIENT_ID` and `FILEHOST_PUBLIC_URL`",
    ),
    Setting(
        "oidc_client_id",
        "FILEHOST_OIDC_CLIENT_ID",
        Text(r"[\x21-\x7e]{1,255}", "1–255 printable characters, no blank"),
        None,
        "The client id the provider gave this service",
        "unset",
        "; only with `FILEHOST_OIDC_ISSUER`",
    ),
    Setting(
        "oidc_client_secret",
        "FILEHOST_OIDC_CLIENT_SECRET",
        SecretText(),
        None,
        "The client's secret (a confidential client); sent as the provider's discovery allows "
        "(`client_secret_basic`, else `client_secret_post`)",
        "unset: a public client (PKCE alone)",
        "; not with `FILEHOST_OIDC_CLIENT_SECRET_FILE`",
    ),
    Setting(
        "oidc_client_secret_file",
        "FILEHOST_OIDC_CLIENT_SECRET_FILE",
        SecretFile(),
        None,
        "The same secret read from a file (a container's secret), read once at start-up",
        "unset",
        "; not with `FILEHOST_OIDC_CLIENT_SECRET`",
    ),
    Setting(
        "oidc_scopes",
        "FILEHOST_OIDC_SCOPES",
        Text(r"openid( [\x21-\x7e]{1,64}){0,20}", "`openid` then scopes separated by spaces"),
        "openid email profile",
        "The scopes asked for; `email` is needed to match existing accounts by e-mail",
    ),
    Setting(
        "oidc_label",
        "FILEHOST_OIDC_LABEL",
        Text(r"[^\x00-\x1f\x7f]{1,60}", "1–60 characters, no control character"),
        "Sign in with SSO",
        "The login page's button (`GET /api/v1/auth/methods`), e.g. `Sign in with Authentik`",
    ),
    Setting(
        "oidc_signup",
        "FILEHOST_OIDC_SIGNUP",
        Switch(),
        False,
        "`on`: the first sign-in of an identity matching no account creates one (without a "
        "password); `off`: only accounts that exist, matched by a linked identity or by a "
        "verified e-mail, may sign in",
    ),
    Setting(
        "oidc_allowed_domains",
        "FILEHOST_OIDC_ALLOWED_DOMAINS",
        Domains(),
        (),
        "E-mail domains whose identities may sign in (the provider's `email`); others are "
        "refused with `sso_domain_not_allowed`",
        "empty: every domain",
    ),
    Setting(
        "oidc_trust_provider_mfa",
        "FILEHOST_OIDC_TRUST_PROVIDER_MFA",
        Switch(),
        False,
        "`on`: an account's second factor is not asked again when the ID token's `amr` (`mfa`, "
        "`otp`, `hwk`, `swk`, …) or `acr` says the provider checked one",
    ),
    Setting(
        "oidc_provider_logout",
        "FILEHOST_OIDC_PROVIDER_LOGOUT",
        Switch(),
        False,
        "`on`: logging out of a session opened through the provider also ends the person's "
        "session at the provider, where its discovery names an `end_session_endpoint` (the "
        "dashboard goes there, then back to `FILEHOST_PUBLIC_URL/`, which must be registered at "
        "the provider as a post-logout redirect URI); `off`: the provider's session is kept, "
        "so its next sign-in may need no password",
    ),
    Setting(
        "oidc_timeout_seconds",
        "FILEHOST_OIDC_TIMEOUT_SECONDS",
        Float(0.5, 30.0),
        5.0,
        "The longest wait on the provider (discovery, keys, the token endpoint); past it, "
        "503 `sso_unavailable`",
    ),
    Setting(
        "password_login",
        "FILEHOST_PASSWORD_LOGIN",
        Switch(),
        True,
        "`off`: `POST /auth/login` is refused (`password_login_disabled`) and the login page "
        "offers single sign-on alone; the command line still works",
        None,
        "; `off` needs `FILEHOST_OIDC_ISSUER`",
    ),
)
