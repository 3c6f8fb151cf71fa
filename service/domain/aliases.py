"""Vanity aliases as plain values: the rules of a slug (its characters, length and the names it
may not take), how slugs compare (ignoring case), the unguessable slug the service picks, an
alias's id (which carries when it was made) and the bounds of its fields. Pure functions, no
I/O.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from service.domain.credentials import BASE62, is_valid_id
from service.domain.records import AliasRecord
from service.errors import CorruptRecord

SLUG_MIN, SLUG_MAX = 3, 64
SLUG_RULE = (
    f"must be {SLUG_MIN} to {SLUG_MAX} characters of A-Z, a-z, 0-9, '-' and '_', and not a name "
    "the service keeps for itself"
)
_SLUG = re.compile(rf"[A-Za-z0-9_-]{{{SLUG_MIN},{SLUG_MAX}}}")
# The length of a slug the service picks: base62, so even compared ignoring case (36 symbols)
# about 62 bits that nobody guesses.
GENERATED_SLUG_LENGTH = 12

# Slugs that would shadow a path of the service (every first segment it serves, and those the
# dashboard will) or pass for one of its pages (sign-in, account, administration). Compared
# ignoring case.
RESERVED_SLUGS = frozenset(
    {
        # the service's own paths
        "a",
        "activity",
        "aliases",
        "api",
        "dashboard",
        "files",
        "folders",
        "healthz",
        "keys",
        "livez",
        "metrics",
        "openapi",
        "readyz",
        "sessions",
        "settings",
        "static",
        "uploaders",
        # what would mislead
        "account",
        "accounts",
        "admin",
        "administrator",
        "auth",
        "billing",
        "filehost",
        "help",
        "login",
        "logout",
        "oauth",
        "password",
        "register",
        "reset",
        "root",
        "security",
        "signin",
        "signout",
        "signup",
        "support",
        "system",
        "user",
        "users",
        "verify",
        "well-known",
        "www",
    }
)

# How long an alias may live, from when it is made or changed: at least a minute (the account
# setting's bound), at most ten years. Views are bounded by what a client in any language holds.
MIN_EXPIRES_SECONDS = 60
MAX_EXPIRES_SECONDS = 3650 * 86_400
MAX_VIEWS = 2**53
PASSWORD_MIN, PASSWORD_MAX = 4, 1024

# An alias id: ``als_``, then when it was made (ms, base62, fixed width), then random: the
# account's index is ordered by that time, and an id leads back to its place in the index.
_TIME_CHARS = 8
_RANDOM_CHARS = 22 - _TIME_CHARS


def slug_problem(slug: object) -> str | None:
    """Why ``slug`` cannot be an alias's (``SLUG_RULE``), or None."""
    if not isinstance(slug, str) or not _SLUG.fullmatch(slug) or slug_key(slug) in RESERVED_SLUGS:
        return SLUG_RULE
    return None


def slug_key(slug: str) -> str:
    """How slugs compare across the whole service: ignoring case (they are ASCII)."""
    return slug.lower()


def generate_slug() -> str:
    """A slug nobody guesses (never a reserved one: those are short words)."""
    return "".join(secrets.choice(BASE62) for _ in range(GENERATED_SLUG_LENGTH))


def _base62(number: int, width: int) -> str:
    chars = []
    for _ in range(width):
        number, remainder = divmod(number, 62)
        chars.append(BASE62[remainder])
    return "".join(reversed(chars))


def new_alias_id(created_at: int) -> str:
    """A new alias id, carrying ``created_at`` (ms) ahead of its random part."""
    random = "".join(secrets.choice(BASE62) for _ in range(_RANDOM_CHARS))
    return f"als_{_base62(created_at, _TIME_CHARS)}{random}"


def alias_created_at(alias_id: str) -> int | None:
    """When the alias with this id was made (ms); None for a string that is not an alias id."""
    if not is_valid_id(alias_id, "als"):
        return None
    created = 0
    for char in alias_id[4 : 4 + _TIME_CHARS]:
        created = created * 62 + BASE62.index(char)
    return created


# An unusable alias, a usable one, one that needs its password.
UNUSABLE, USABLE, PASSWORD = 0, 1, 2


@dataclass(frozen=True, slots=True)
class View:
    """What ``view`` found: ``status``, and for a usable or protected alias its owner, id and
    target, its views after this one (usable) or its password's hash (protected), and whether
    it has a view limit (usable)."""

    status: int
    user_id: str = ""
    alias_id: str = ""
    target_id: str = ""
    views: int = 0
    password_hash: str | None = None
    limited: bool = False


@dataclass(frozen=True, slots=True)
class AliasEntry:
    """An entry as read: the alias with whose account it is, and its password's hash."""

    user_id: str
    record: AliasRecord
    password_hash: str | None
    switched_off: bool


# A member of the index under way (pending) for longer than this was left by a change cut short.
PENDING_MS = 60_000


ALIAS_MEMBER = re.compile(r"^(fil|fld)_[0-9A-Za-z]{22}:[A-Za-z0-9_-]{3,64}$")


def index_member(target_id: str, slug: str) -> str:
    return f"{target_id}:{slug}"


def member_parts(value: str) -> tuple[str, str]:
    """A member's target and slug; ``CorruptRecord`` for anything else."""
    if not ALIAS_MEMBER.match(value):
        raise CorruptRecord()
    return value[:26], value[27:]


@dataclass(frozen=True, slots=True)
class Listed:
    """A member of the index and what its entry holds (None: no entry of its own)."""

    value: str
    score: int
    entry: AliasEntry | None
