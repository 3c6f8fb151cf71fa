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
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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
