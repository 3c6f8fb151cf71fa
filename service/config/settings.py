"""The ``Settings`` object, its groups, and ``load_settings``, which reads the environment
through ``SETTINGS`` once at start-up and checks what spans several settings."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from service.config.readers import ConfigError, Network, Secret, SecretKeys, redis_database
from service.config.table import SENTINEL_REPLICA_WAIT_MS, SETTINGS

_DEFAULTS = {setting.field: setting.default for setting in SETTINGS}


@dataclass(frozen=True, slots=True)
class SessionSettings:
    idle_seconds: int
    max_seconds: int
    # How stale a session's idle deadline may get before a request renews it: renewing on every
    # request would put a Redis write on the hot path; once a minute (or sooner for short idle
    # timeouts) keeps the deadline accurate to that margin.
    renew_seconds: int


@dataclass(frozen=True, slots=True)
class LoginSettings:
    failures_per_email: int
    failures_per_address: int
    failure_window_seconds: int
    password_min_length: int


@dataclass(frozen=True, slots=True)
class MfaSettings:
    # The service's public origin (passkeys' relying party); None: passkeys are unavailable.
    public_url: str | None
    # Keys for TOTP secrets at rest, the first encrypting; empty: TOTP is unavailable.
    secrets_keys: SecretKeys
    reauth_seconds: int


@dataclass(frozen=True, slots=True)
class ObjectStoreSettings:
    """The object store the files' bytes go to with ``FILEHOST_BLOB_STORE=s3``: its address
    (None: AWS) and the one clients reach it at, bucket, signing region, key prefix (empty, or
    ending with ``/``), whether the bucket is named in the path, downloads proxied or
    redirected, the longest wait on it, and the credentials (None each: the AWS SDK's own
    chain)."""

    endpoint: str | None
    public_endpoint: str | None  # the address clients reach it at, when not ``endpoint``
    bucket: str
    region: str
    prefix: str
    path_addressing: bool
    redirect_downloads: bool
    timeout_seconds: float
    access_key_id: Secret | None
    secret_access_key: Secret | None
    session_token: Secret | None


@dataclass(frozen=True, slots=True)
class UploadSettings:
    """Resumable uploads' bounds: the largest file, how long one may stay unfinished, and per
    account how many may be in progress and the bytes they may hold."""

    max_bytes: int
    expiry_seconds: int
    max_in_progress: int
    max_bytes_in_progress: int


@dataclass(frozen=True, slots=True)
class AuditSettings:
    retention_days: int
    max_events: int


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """Single sign-on with one OpenID provider (``service.auth.oidc``): who it is, this
    service's client there, where the provider sends people back, and who may sign in."""

    issuer: str
    client_id: str
    client_secret: Secret | None
    scopes: str
    label: str
    redirect_uri: str  # FILEHOST_PUBLIC_URL + /api/v1/auth/oidc/callback
    dashboard_url: str  # where a sign-in ends, with its outcome in the fragment
    secure_cookie: bool  # the public URL is https: the state's cookie is Secure
    signup: bool
    allowed_domains: tuple[str, ...]
    trust_provider_mfa: bool
    timeout_seconds: float
    provider_logout: bool = False  # a logout ends the provider's session too


@dataclass(frozen=True, slots=True)
class Settings:
    """Every tunable of the service (``SETTINGS`` says what each does); defaults are the
    documented production defaults."""

    redis_url: str | None = _DEFAULTS["redis_url"]
    redis_mode: str = _DEFAULTS["redis_mode"]
    sentinels: tuple[tuple[str, int], ...] = _DEFAULTS["sentinels"]
    sentinel_master: str | None = _DEFAULTS["sentinel_master"]
    cluster_seeds: tuple[tuple[str, int], ...] = _DEFAULTS["cluster_seeds"]
    replica_wait_ms: int = _DEFAULTS["replica_wait_ms"]
    redis_prefix: str = _DEFAULTS["redis_prefix"]
    redis_timeout_seconds: float = _DEFAULTS["redis_timeout_seconds"]
    data_dir: Path = field(default_factory=lambda: _DEFAULTS["data_dir"])
    embedded_server: str | None = _DEFAULTS["embedded_server"]
    blob_store: str = _DEFAULTS["blob_store"]
    s3_endpoint: str | None = _DEFAULTS["s3_endpoint"]
    s3_public_endpoint: str | None = _DEFAULTS["s3_public_endpoint"]
    s3_bucket: str | None = _DEFAULTS["s3_bucket"]
    s3_region: str = _DEFAULTS["s3_region"]
    s3_prefix: str = _DEFAULTS["s3_prefix"]
    s3_addressing: str | None = _DEFAULTS["s3_addressing"]
    s3_downloads: str = _DEFAULTS["s3_downloads"]
    s3_timeout_seconds: float = _DEFAULTS["s3_timeout_seconds"]
    s3_access_key_id: Secret | None = _DEFAULTS["s3_access_key_id"]
    s3_access_key_id_file: Secret | None = _DEFAULTS["s3_access_key_id_file"]
    s3_secret_access_key: Secret | None = _DEFAULTS["s3_secret_access_key"]
    s3_secret_access_key_file: Secret | None = _DEFAULTS["s3_secret_access_key_file"]
    s3_session_token: Secret | None = _DEFAULTS["s3_session_token"]
    s3_session_token_file: Secret | None = _DEFAULTS["s3_session_token_file"]
    host: str = _DEFAULTS["host"]
    port: int = _DEFAULTS["port"]
    workers: int = _DEFAULTS["workers"]
    bcrypt_cost: int = _DEFAULTS["bcrypt_cost"]
    password_min_length: int = _DEFAULTS["password_min_length"]
    session_idle_seconds: int = _DEFAULTS["session_idle_seconds"]
    session_max_seconds: int = _DEFAULTS["session_max_seconds"]
    max_body_bytes: int = _DEFAULTS["max_body_bytes"]
    max_keys_per_account: int = _DEFAULTS["max_keys_per_account"]
    max_upload_bytes: int = _DEFAULTS["max_upload_bytes"]
    upload_expiry_seconds: int = _DEFAULTS["upload_expiry_seconds"]
    max_uploads_in_progress: int = _DEFAULTS["max_uploads_in_progress"]
    max_upload_bytes_in_progress: int = _DEFAULTS["max_upload_bytes_in_progress"]
    max_files_per_account: int = _DEFAULTS["max_files_per_account"]
    max_folders_per_account: int = _DEFAULTS["max_folders_per_account"]
    max_folder_depth: int = _DEFAULTS["max_folder_depth"]
    max_aliases_per_account: int = _DEFAULTS["max_aliases_per_account"]
    public_url: str | None = _DEFAULTS["public_url"]
    alias_rate_per_second: float = _DEFAULTS["alias_rate_per_second"]
    alias_rate_burst: int = _DEFAULTS["alias_rate_burst"]
    alias_password_failures_per_alias_address: int = _DEFAULTS[
        "alias_password_failures_per_alias_address"
    ]
    alias_password_failures_per_alias: int = _DEFAULTS["alias_password_failures_per_alias"]
    alias_password_failures_per_address: int = _DEFAULTS["alias_password_failures_per_address"]
    alias_password_window_seconds: int = _DEFAULTS["alias_password_window_seconds"]
    login_concurrency: int = _DEFAULTS["login_concurrency"]
    login_queue_max: int = _DEFAULTS["login_queue_max"]
    log_level: str = _DEFAULTS["log_level"]
    shutdown_grace_seconds: float = _DEFAULTS["shutdown_grace_seconds"]
    key_usage_flush_seconds: float = _DEFAULTS["key_usage_flush_seconds"]
    rate_limit_per_second: float = _DEFAULTS["rate_limit_per_second"]
    rate_limit_burst: int = _DEFAULTS["rate_limit_burst"]
    login_failures_per_email: int = _DEFAULTS["login_failures_per_email"]
    login_failures_per_address: int = _DEFAULTS["login_failures_per_address"]
    login_failure_window_seconds: int = _DEFAULTS["login_failure_window_seconds"]
    trusted_proxies: tuple[Network, ...] = _DEFAULTS["trusted_proxies"]
    metrics_enabled: bool = _DEFAULTS["metrics_enabled"]
    gateway_lane: bool = _DEFAULTS["gateway_lane"]
    header_timeout_seconds: float = _DEFAULTS["header_timeout_seconds"]
    body_timeout_seconds: float = _DEFAULTS["body_timeout_seconds"]
    audit_retention_days: int = _DEFAULTS["audit_retention_days"]
    audit_max_events: int = _DEFAULTS["audit_max_events"]
    secrets_key: SecretKeys | None = _DEFAULTS["secrets_key"]
    secrets_key_file: SecretKeys | None = _DEFAULTS["secrets_key_file"]
    reauth_seconds: int = _DEFAULTS["reauth_seconds"]
    oidc_issuer: str | None = _DEFAULTS["oidc_issuer"]
    oidc_client_id: str | None = _DEFAULTS["oidc_client_id"]
    oidc_client_secret: Secret | None = _DEFAULTS["oidc_client_secret"]
    oidc_client_secret_file: Secret | None = _DEFAULTS["oidc_client_secret_file"]
    oidc_scopes: str = _DEFAULTS["oidc_scopes"]
    oidc_label: str = _DEFAULTS["oidc_label"]
    oidc_signup: bool = _DEFAULTS["oidc_signup"]
    oidc_allowed_domains: tuple[str, ...] = _DEFAULTS["oidc_allowed_domains"]
    oidc_trust_provider_mfa: bool = _DEFAULTS["oidc_trust_provider_mfa"]
    oidc_provider_logout: bool = _DEFAULTS["oidc_provider_logout"]
    oidc_timeout_seconds: float = _DEFAULTS["oidc_timeout_seconds"]
    password_login: bool = _DEFAULTS["password_login"]

    @property
    def sessions(self) -> SessionSettings:
        idle = self.session_idle_seconds
        return SessionSettings(idle, self.session_max_seconds, max(1, min(60, idle // 10)))

    @property
    def login(self) -> LoginSettings:
        return LoginSettings(
            self.login_failures_per_email,
            self.login_failures_per_address,
            self.login_failure_window_seconds,
            self.password_min_length,
        )

    @property
    def audit(self) -> AuditSettings:
        return AuditSettings(self.audit_retention_days, self.audit_max_events)

    @property
    def uploads(self) -> UploadSettings:
        return UploadSettings(
            self.max_upload_bytes,
            self.upload_expiry_seconds,
            self.max_uploads_in_progress,
            self.max_upload_bytes_in_progress,
        )

    @property
    def object_store(self) -> ObjectStoreSettings | None:
        """The object store, with ``FILEHOST_BLOB_STORE=s3``; None with ``directory``."""
        if self.blob_store != "s3" or self.s3_bucket is None:
            return None
        prefix = self.s3_prefix
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        addressing = self.s3_addressing or ("path" if self.s3_endpoint else "virtual")
        return ObjectStoreSettings(
            endpoint=self.s3_endpoint,
            public_endpoint=self.s3_public_endpoint,
            bucket=self.s3_bucket,
            region=self.s3_region,
            prefix=prefix,
            path_addressing=addressing == "path",
            redirect_downloads=self.s3_downloads == "redirect",
            timeout_seconds=self.s3_timeout_seconds,
            access_key_id=self.s3_access_key_id or self.s3_access_key_id_file,
            secret_access_key=self.s3_secret_access_key or self.s3_secret_access_key_file,
            session_token=self.s3_session_token or self.s3_session_token_file,
        )

    @property
    def oidc(self) -> OidcSettings | None:
        """Single sign-on's settings; None when ``FILEHOST_OIDC_ISSUER`` is unset."""
        if self.oidc_issuer is None or self.oidc_client_id is None or self.public_url is None:
            return None
        return OidcSettings(
            issuer=self.oidc_issuer,
            client_id=self.oidc_client_id,
            client_secret=self.oidc_client_secret or self.oidc_client_secret_file,
            scopes=self.oidc_scopes,
            label=self.oidc_label,
            redirect_uri=f"{self.public_url}/api/v1/auth/oidc/callback",
            dashboard_url=f"{self.public_url}/",
            secure_cookie=self.public_url.startswith("https://"),
            signup=self.oidc_signup,
            allowed_domains=self.oidc_allowed_domains,
            trust_provider_mfa=self.oidc_trust_provider_mfa,
            timeout_seconds=self.oidc_timeout_seconds,
            provider_logout=self.oidc_provider_logout,
        )

    @property
    def mfa(self) -> MfaSettings:
        keys = self.secrets_key or self.secrets_key_file or SecretKeys()
        return MfaSettings(self.public_url, keys, self.reauth_seconds)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from environment variables (``os.environ`` by default): each through its
    row of ``SETTINGS`` (unset or blank: its default), then the checks that span settings."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = env.get(setting.variable, "").strip()
        if raw:
            values[setting.field] = setting.reader.parse(setting.variable, raw, env)
    if values.get("redis_mode") == "sentinel" and "replica_wait_ms" not in values:
        values["replica_wait_ms"] = SENTINEL_REPLICA_WAIT_MS
    settings = Settings(**values)
    _check_topology(settings, "replica_wait_ms" in values)
    if settings.session_max_seconds < settings.session_idle_seconds:
        raise ConfigError(
            "FILEHOST_SESSION_MAX_SECONDS must be at least FILEHOST_SESSION_IDLE_SECONDS "
            f"({settings.session_max_seconds} < {settings.session_idle_seconds})"
        )
    if settings.secrets_key is not None and settings.secrets_key_file is not None:
        raise ConfigError(
            "set FILEHOST_SECRETS_KEY or FILEHOST_SECRETS_KEY_FILE, not both: which keys count "
            "would be a guess"
        )
    _check_object_store(settings)
    _check_oidc(settings)
    if settings.redis_mode == "sentinel" and settings.redis_url is None:
        # No password, db 0: the sentinels say where the master is.
        host, port = settings.sentinels[0]
        host = f"[{host}]" if ":" in host else host  # an IPv6 address
        settings = replace(settings, redis_url=f"redis://{host}:{port}/0")
    return settings


def _check_object_store(settings: Settings) -> None:
    """The object store's settings, checked together: each one a start-up line naming it."""
    if settings.blob_store == "s3" and settings.s3_bucket is None:
        raise ConfigError("FILEHOST_BLOB_STORE=s3 needs FILEHOST_S3_BUCKET, the bucket to use")
    for name in ("ACCESS_KEY_ID", "SECRET_ACCESS_KEY", "SESSION_TOKEN"):
        field_name = f"s3_{name.lower()}"
        if getattr(settings, field_name) is not None and getattr(settings, f"{field_name}_file"):
            raise ConfigError(f"set AWS_{name} or AWS_{name}_FILE, not both")
    has_key = (settings.s3_access_key_id or settings.s3_access_key_id_file) is not None
    has_secret = (settings.s3_secret_access_key or settings.s3_secret_access_key_file) is not None
    if has_key != has_secret:
        raise ConfigError(
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together: set both (or their _FILE "
            "variants), or neither for the AWS SDK's own credentials"
        )


def _check_oidc(settings: Settings) -> None:
    """Single sign-on's settings, checked together: each missing piece a start-up line."""
    if settings.oidc_issuer is None:
        for variable, value in (
            ("FILEHOST_OIDC_CLIENT_ID", settings.oidc_client_id),
            ("FILEHOST_OIDC_CLIENT_SECRET", settings.oidc_client_secret),
            ("FILEHOST_OIDC_CLIENT_SECRET_FILE", settings.oidc_client_secret_file),
        ):
            if value is not None:
                raise ConfigError(f"{variable} needs FILEHOST_OIDC_ISSUER, the provider to use")
        if not settings.password_login:
            raise ConfigError(
                "FILEHOST_PASSWORD_LOGIN=off needs FILEHOST_OIDC_ISSUER: without single sign-on "
                "nobody could sign in to the dashboard"
            )
        return
    if settings.oidc_client_id is None:
        raise ConfigError(
            "FILEHOST_OIDC_ISSUER needs FILEHOST_OIDC_CLIENT_ID, the client id the provider gave "
            "this service"
        )
    if settings.public_url is None:
        raise ConfigError(
            "FILEHOST_OIDC_ISSUER needs FILEHOST_PUBLIC_URL: the provider sends people back to "
            "FILEHOST_PUBLIC_URL/api/v1/auth/oidc/callback"
        )
    if settings.oidc_client_secret is not None and settings.oidc_client_secret_file is not None:
        raise ConfigError(
            "set FILEHOST_OIDC_CLIENT_SECRET or FILEHOST_OIDC_CLIENT_SECRET_FILE, not both"
        )


def _check_topology(settings: Settings, replica_wait_set: bool) -> None:
    """The Redis topology's settings, checked together."""
    mode = settings.redis_mode
    if mode != "sentinel" and (settings.sentinels or settings.sentinel_master):
        raise ConfigError(
            "FILEHOST_SENTINELS and FILEHOST_SENTINEL_MASTER need FILEHOST_REDIS_MODE=sentinel"
        )
    if mode != "cluster" and settings.cluster_seeds:
        raise ConfigError("FILEHOST_CLUSTER_SEEDS needs FILEHOST_REDIS_MODE=cluster")
    if mode == "cluster" and replica_wait_set and settings.replica_wait_ms:
        raise ConfigError("FILEHOST_REPLICA_WAIT_MS is for single and sentinel modes, not cluster")
    url = settings.redis_url
    scheme = urlsplit(url).scheme if url else None
    if scheme in ("redis", "rediss") and mode != "sentinel" and not urlsplit(url).hostname:
        # The sentinels name the master; elsewhere redis-py would quietly take localhost.
        raise ConfigError(f"REDIS_URL must name the server's host: {scheme}://HOST:PORT/DB")
    if mode == "sentinel":
        if not settings.sentinels or settings.sentinel_master is None:
            raise ConfigError(
                "FILEHOST_REDIS_MODE=sentinel needs FILEHOST_SENTINELS (host:port, ...) and "
                "FILEHOST_SENTINEL_MASTER (the name the sentinels monitor)"
            )
        if scheme == "unix":
            raise ConfigError(
                "FILEHOST_REDIS_MODE=sentinel needs a redis:// or rediss:// REDIS_URL"
            )
    if mode == "cluster":
        if url is None or scheme == "unix":
            raise ConfigError(
                "FILEHOST_REDIS_MODE=cluster needs REDIS_URL=redis://HOST:PORT naming a node"
            )
        if redis_database(url) != 0:
            raise ConfigError("FILEHOST_REDIS_MODE=cluster needs database 0 in REDIS_URL")
