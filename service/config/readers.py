"""How a setting's value is read from its environment variable and bounded: one reader per
kind of value, each with the words the docs' table uses for its bounds."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_NUMBER = re.compile(r"[0-9]+")  # ASCII digits: str.isdigit takes "²", which int() refuses


class ConfigError(ValueError):
    """A setting has a value the service cannot run with; the message names the setting."""


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
        return f"{number(self.low)}–{number(self.high)}"


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
    """A Redis server's URL, checked as redis-py would read it, so that a mistake is a start-up
    line and not a failure at the first connection: a port 1–65535, a database that is a whole
    number (redis-py quietly takes database 0 for any other), no option but ``db=`` (the hot
    connection reads no other), a socket's path. Whether it must name a host depends on the
    topology (``load_settings``). Never echoes the URL, which may carry a password."""

    kind: str = "URL"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        try:
            parts = urlsplit(raw)
        except ValueError:  # an unclosed "[" of an IPv6 address
            raise ConfigError(
                f"{name} is not a URL: an IPv6 address goes in brackets, redis://[::1]:6379/0"
            ) from None
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ConfigError(
                f"{name} must start with redis://, rediss:// or unix://, got scheme "
                f"{parts.scheme!r}"
            )
        if parts.fragment or "#" in raw:
            raise ConfigError(f"{name} must not hold a #: write it as %23 in a password")
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0:
            raise ConfigError(
                f"{name} must give its port as a number 1–65535 (write /, ? or # in a "
                "password as %2F, %3F or %23)"
            )
        options = parse_qs(parts.query, keep_blank_values=True)
        if set(options) - {"db"}:
            raise ConfigError(
                f"{name} takes no option after ? but db= (FILEHOST_REDIS_TIMEOUT_SECONDS sets "
                "the timeouts; write ? in a password as %3F)"
            )
        path = parts.path
        if parts.scheme == "unix":
            if not path:
                raise ConfigError(f"{name} must name the socket: unix:///path/to/redis.sock")
            path = ""
        elif not re.fullmatch(r"/?|/[0-9]+/?", path):
            raise ConfigError(f"{name} must end with the database's number, like /0")
        given = options.get("db")
        if given and (path.strip("/") or len(given) > 1 or not _NUMBER.fullmatch(given[0])):
            raise ConfigError(f"{name} must give the database once, as a number (/0 or ?db=0)")
        return raw

    def bounds(self) -> str:
        return "scheme `redis://`, `rediss://` or `unix://`; port 1–65535; database a number"


def redis_database(url: str) -> int:
    """The database a URL that ``RedisUrl`` accepted names: its ``db=``, else its path's."""
    parts = urlsplit(url)
    given = parse_qs(parts.query).get("db")
    if given:
        return int(given[0])
    return 0 if parts.scheme == "unix" else int(parts.path.strip("/") or 0)


def _check_http_url(name: str, raw: str) -> None:
    """``raw`` is an absolute http(s) URL with a host, and no credentials, query, fragment or
    space (a public URL's and an issuer's rule)."""
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        raise ConfigError(f"{name} must be an http:// or https:// URL, got {raw!r}") from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.query
        or parts.fragment
        or any(char.isspace() for char in raw)
    ):
        raise ConfigError(
            f"{name} must be an http:// or https:// URL with a host and no query, got {raw!r}"
        )


@dataclass(frozen=True)
class PublicUrl:
    """An absolute http(s) URL without query, fragment or credentials; kept without its
    trailing slash, so that a path is appended to it as it is."""

    kind: str = "URL"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        _check_http_url(name, raw)
        return raw.rstrip("/")

    def bounds(self) -> str:
        return "`http://` or `https://`, a host, no query"


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
        return tuple(self._address(name, item) for item in raw.replace(",", " ").split())

    def _address(self, name: str, item: str) -> tuple[str, int]:
        """``host``, ``host:port``, ``[IPv6]`` or ``[IPv6]:port``. An IPv6 address without
        brackets is refused: whether its last group is a port would be a guess."""
        refused = ConfigError(f"{name} must list host:port addresses, got {item!r}")
        port: str | None
        if item.startswith("["):
            host, bracket, rest = item[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")) or not _is_ipv6(host):
                raise refused
            port = rest[1:] if rest else None
        else:
            host, colon, port = item.rpartition(":")
            if not colon:
                host, port = item, None
            elif ":" in host:
                raise ConfigError(
                    f"{name} must write an IPv6 address in brackets, like "
                    f"[::1]:{self.default_port}, got {item!r}"
                )
        port = str(self.default_port) if port is None else port
        if not host or not _NUMBER.fullmatch(port) or not 0 < int(port) < 65536:
            raise refused
        return host, int(port)

    def bounds(self) -> str:
        return (
            f"port 1–65535, {self.default_port} when left out; an IPv6 address in brackets "
            f"(`[::1]:{self.default_port}`)"
        )


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def available_cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def number(value: float) -> str:
    """A bound as the docs show it: whole numbers without a decimal point."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class SecretKeys(tuple[bytes, ...]):
    """The operator's keys for secrets kept at rest (32 bytes each, the first encrypting, all
    decrypting). A tuple whose ``repr`` names how many, never what: ``Settings`` may be
    printed."""

    def __repr__(self) -> str:
        return f"SecretKeys({len(self)} key{'' if len(self) == 1 else 's'})"


def secret_keys(name: str, raw: str) -> SecretKeys:
    """Keys written as base64 (standard or URL-safe, padding optional) of 32 bytes each,
    separated by commas, spaces or lines; never echoed in an error."""
    keys = []
    for number_, item in enumerate(raw.replace(",", " ").split(), 1):
        padded = item + "=" * (-len(item) % 4)
        try:
            key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        except binascii.Error:
            key = b""
        if len(key) != 32:
            raise ConfigError(
                f"{name}: key {number_} is not 32 bytes in base64 (make one with "
                "`filehost-auth secrets new-key`)"
            )
        keys.append(key)
    if not keys:
        raise ConfigError(f"{name} holds no key")
    return SecretKeys(keys)


@dataclass(frozen=True)
class Keys:
    kind: str = "list of keys"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> SecretKeys:
        return secret_keys(name, raw)

    def bounds(self) -> str:
        return "32 bytes each in base64, separated by commas; the first encrypts"


@dataclass(frozen=True)
class KeyFile:
    kind: str = "path"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> SecretKeys:
        try:
            text = Path(raw).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"{name}: cannot read {raw!r} ({type(error).__name__})") from None
        return secret_keys(name, text)

    def bounds(self) -> str:
        return "a readable file holding keys as `FILEHOST_SECRETS_KEY` takes them, one a line"


class Secret(str):
    """A credential read from the environment (the object store's secret key, say): a string
    whose ``repr`` never shows it, since ``Settings`` may be printed."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secret(…)"


@dataclass(frozen=True)
class SecretText:
    kind: str = "secret"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> Secret:
        return Secret(raw)

    def bounds(self) -> str:
        return "never logged or echoed"


@dataclass(frozen=True)
class SecretFile:
    """A credential read from a file (a container's secret), its surrounding blanks dropped."""

    kind: str = "path"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> Secret:
        try:
            text = Path(raw).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"{name}: cannot read {raw!r} ({type(error).__name__})") from None
        if not text:
            raise ConfigError(f"{name}: {raw!r} is empty")
        return Secret(text)

    def bounds(self) -> str:
        return "a readable file holding the value"


@dataclass(frozen=True)
class S3Endpoint:
    """An object store's address: an absolute http(s) URL with a host and nothing after it."""

    kind: str = "URL"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        value = PublicUrl().parse(name, raw, env)
        if urlsplit(value).path not in ("", "/"):
            raise ConfigError(
                f"{name} must be the object store's address without a path, got {raw!r}"
            )
        return value

    def bounds(self) -> str:
        return "`http://` or `https://`, a host, no path"


@dataclass(frozen=True)
class IssuerUrl:
    """An OpenID provider's issuer: an absolute http(s) URL without query or fragment, kept
    exactly as written (its ID tokens' ``iss`` must equal it, trailing slash included)."""

    kind: str = "URL"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> str:
        _check_http_url(name, raw)
        return raw

    def bounds(self) -> str:
        return "`http://` or `https://`, a host, no query; kept exactly (the tokens' `iss`)"


@dataclass(frozen=True)
class Domains:
    """A comma-separated list of e-mail domains, lower-cased, without a leading ``@``."""

    kind: str = "list of domains"

    def parse(self, name: str, raw: str, env: Mapping[str, str]) -> tuple[str, ...]:
        found = []
        for part in raw.split(","):
            domain = part.strip().lower().removeprefix("@")
            if not domain:
                continue
            if not re.fullmatch(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?", domain):
                raise ConfigError(f"{name} must list e-mail domains, got {part.strip()!r}")
            found.append(domain)
        return tuple(found)

    def bounds(self) -> str:
        return "comma-separated, e.g. `example.com,example.org`"
