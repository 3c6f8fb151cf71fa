"""The values the layers hand each other: plain records, no I/O, nothing of HTTP or Redis.

The per-request records (``RateVerdict``, ``ApiKeyEntry``, ``SessionEntry``) are NamedTuples:
immutable like the frozen dataclasses, and the cheapest record Python makes, which matters once
per request on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Unset:
    """A field a request did not give, where null means something (``UNSET``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A credential's request-rate limit: ``per_second`` sustained, bursts of up to ``burst``."""

    per_second: float
    burst: int

    @property
    def interval_us(self) -> int:
        return max(1, round(1_000_000 / self.per_second))

    @property
    def tolerance_us(self) -> int:
        return self.interval_us * self.burst


class RateVerdict(NamedTuple):
    """One request taken from (or refused by) a credential's bucket."""

    allowed: bool
    remaining: int  # requests left in the burst after this one (0 when refused)
    wait_us: int  # until the next request is allowed (0 when allowed)
    full_in_us: int  # until the bucket has refilled completely
    taken: int = 1  # requests taken from the bucket: this one and any the worker keeps for later
    # The RateLimit-Policy of a key with a rate of its own; None: the deployment's.
    policy: str | None = None


class KeyRules(NamedTuple):
    """What may refuse a key beyond its expiry and permissions, as its digest entry holds it."""

    disabled: bool
    allowed_networks: str | None  # the stored allow-list, "net,net,…" (auth.key_rules)
    refused_from: int | None  # ms: a rolled-out secret's grace ends here
    # An allow-list in an entry written before the lookup compared addresses itself (no ``a``):
    # its refused requests still take from the bucket until the entry is written again.
    ranges_missing: bool = False


class ApiKeyEntry(NamedTuple):
    """What one hot-path lookup of an API key digest returns. ``rules`` and ``own_rate`` are
    None for a key that has none of them (the common case: one comparison each)."""

    user_id: str
    key_id: str
    permissions: int
    expires_at: int
    rules: KeyRules | None
    own_rate: str | None  # the key's own rate, "<per second>:<burst>"
    rate: RateVerdict | None = None


class SessionEntry(NamedTuple):
    user_id: str
    created_at: int
    absolute_deadline: int
    idle_deadline: int
    rate: RateVerdict | None = None


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A key as its owner sees it in a list: never the secret, never the digest."""

    id: str
    name: str
    key_prefix: str
    permissions: int
    created_at: int
    expires_at: int
    last_used_at: int | None
    enabled: bool = True
    allowed_ips: tuple[str, ...] = ()  # canonical networks; empty: from anywhere
    rate_limit: tuple[int, int] | None = None  # (per second, burst); None: the deployment's
    previous_secret_expires_at: int | None = None  # a rolled-out secret's grace, while it lasts
    folder_ids: tuple[str, ...] | None = None  # the folders it is bound to; None: the account
    uploader: str | None = None  # the uploader it was made for: it may only upload


@dataclass(frozen=True, slots=True)
class KeyChanges:
    """What an edit sets; None leaves a field as it is (``rate_limit`` is set when
    ``sets_rate_limit``, to None for the deployment's; ``folder_ids`` when ``sets_folder_ids``,
    to None for the whole account)."""

    name: str | None = None
    permissions: int | None = None
    expires_at: int | None = None
    enabled: bool | None = None
    allowed_ips: tuple[str, ...] | None = None
    sets_rate_limit: bool = False
    rate_limit: tuple[int, int] | None = None
    sets_folder_ids: bool = False
    folder_ids: tuple[str, ...] | None = None  # set when ``sets_folder_ids``; None: the account
    uploader: str | None = None  # marks the key upload-only, for this kind; never unmarks


@dataclass(frozen=True, slots=True)
class SignInVia:
    """How a session was opened when not by the password: single sign-on (``method`` "oidc")
    at a provider (its issuer), within the provider's session ``sid`` when it named one (what
    a back-channel logout names)."""

    method: str
    provider: str
    provider_sid: str | None = None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session as its owner sees it in a list, plus the digest that identifies it to the
    service (never shown)."""

    id: str
    token_digest: str
    created_at: int
    last_seen_at: int
    idle_deadline: int
    absolute_deadline: int
    ip: str | None
    user_agent: str | None
    authenticated_at: int = 0  # when it last authenticated: its login or a reauthentication
    aal: int = 1  # 1: a password alone; 2: with a second factor
    via: SignInVia | None = None  # None: opened with the password


@dataclass(frozen=True, slots=True)
class SessionStanding:
    """What a sensitive operation asks of the acting session: who it is (public id, device) and
    how recently, and with what, it authenticated."""

    id: str
    user_agent: str | None
    created_at: int
    authenticated_at: int
    aal: int
    via: SignInVia | None = None


@dataclass(frozen=True, slots=True)
class AccountUsage:
    """What an account holds: its files (how many, their bytes, and both by type class, every
    class named), folders, vanity aliases and API keys."""

    files: int
    file_bytes: int
    by_type: tuple[tuple[str, int, int], ...]  # (type class, files, bytes)
    folders: int
    aliases: int
    keys: int


# What a download ticket downloads: one file, one folder's subtree as a ZIP archive, or a selection
# of files side by side as one.
TICKET_FILE = "file"
TICKET_FOLDER = "folder"
TICKET_SELECTION = "selection"


@dataclass(frozen=True, slots=True)
class DownloadTicket:
    """What a download ticket downloads (``kind``, one of the ``TICKET_`` kinds, and the ids it
    names: one file's, one folder's, or a selection's in order), of one account, until
    ``expires_at`` (ms), while the session that took it (by its token's digest) lasts."""

    user_id: str
    kind: str
    ids: tuple[str, ...]
    session_digest: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: str
    email: str
    password_hash: str
    created_at: int


@dataclass(frozen=True, slots=True)
class FileRecord:
    """A hosted file's metadata (its bytes are in the blob store, named by ``id``)."""

    id: str
    name: str  # for display only (``domain.files.display_name``); never a path
    size: int
    content_type: str
    sha256: str
    created_at: int  # ms
    folder_id: str | None = None  # None: at the top level


@dataclass(frozen=True, slots=True)
class FilePage:
    files: list[FileRecord]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class FolderRecord:
    """A folder: its display name (``domain.folders.given_name``), and where it is."""

    id: str
    name: str
    parent_id: str | None  # None: at the top level
    created_at: int  # ms
    updated_at: int  # ms: its last rename or move


@dataclass(frozen=True, slots=True)
class FolderPage:
    folders: list[FolderRecord]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class AliasRecord:
    """A vanity alias: a public address of one file or folder (``target_id``'s kind says which)
    under ``slug``, as its owner sees it (never its password, only whether it has one)."""

    id: str
    slug: str  # as its owner spelled it; unique across the service ignoring case
    target_id: str  # ``fil_…`` or ``fld_…``
    created_at: int  # ms
    expires_at: int | None = None  # ms; None: never
    max_views: int | None = None  # None: unlimited
    views: int = 0
    password_protected: bool = False
    enabled: bool = True

    @property
    def target_type(self) -> str:
        return "folder" if self.target_id.startswith("fld_") else "file"


@dataclass(frozen=True, slots=True)
class AliasPage:
    aliases: list[AliasRecord]
    next_cursor: str | None
