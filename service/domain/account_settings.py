"""An account's platform settings (``GET``/``PATCH /settings``): the one table of them, each with
its type, default and bounds, and how a value is checked and kept. Pure functions, no I/O.

Only a value other than its default is stored (``encode`` gives ``None`` for a default), so an
account that never changed a setting holds nothing, and a new setting needs no migration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

from service.domain.aliases import MAX_EXPIRES_SECONDS, MAX_VIEWS, MIN_EXPIRES_SECONDS
from service.domain.credentials import is_valid_id

# A key's lifetime when ``POST /keys`` names none and the account has no default, and the
# longest one a key may be given. Each default is bounded as the request field it stands in for
# (``expires_days`` here; an alias's ``expires_in_seconds`` and ``max_views`` in
# ``service.domain.aliases``): a default may not make what an explicit value could not.
KEY_EXPIRES_DAYS_DEFAULT = 90
KEY_EXPIRES_DAYS_MAX = 3650


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class AccountSetting:
    name: str
    default: Any
    rule: str  # what a value must be, as a validation error says it
    accepts: Callable[[Any], bool]  # a value other than null (null is accepted where nullable)
    nullable: bool = True
    bounds: tuple[int, int] | None = None  # a whole number's lowest and highest, both included


def _whole_number(name: str, low: int, high: int) -> AccountSetting:
    """A setting that is a whole number from ``low`` to ``high``, or null (its default)."""
    return AccountSetting(
        name,
        None,
        f"must be a whole number from {low} to {high}, or null",
        lambda value: _is_int(value) and low <= value <= high,
        bounds=(low, high),
    )


ACCOUNT_SETTINGS: tuple[AccountSetting, ...] = (
    _whole_number("default_key_expires_days", 1, KEY_EXPIRES_DAYS_MAX),
    AccountSetting(
        "default_folder_id",
        None,
        "must be the id of one of the account's folders, or null",
        lambda value: isinstance(value, str) and is_valid_id(value, "fld"),
    ),
    _whole_number("default_alias_expires_in_seconds", MIN_EXPIRES_SECONDS, MAX_EXPIRES_SECONDS),
    _whole_number("default_alias_max_views", 1, MAX_VIEWS),
    AccountSetting(
        "public_aliases_enabled",
        True,
        "must be true or false",
        lambda value: isinstance(value, bool),
        nullable=False,
    ),
)
BY_NAME = {setting.name: setting for setting in ACCOUNT_SETTINGS}
NAMES = tuple(BY_NAME)
DEFAULTS: dict[str, Any] = {setting.name: setting.default for setting in ACCOUNT_SETTINGS}


def problems_of(changes: dict[str, Any]) -> dict[str, str]:
    """Why each named setting cannot take its value: an unknown name, a wrong type, a value out
    of bounds. Empty when every change may be made."""
    problems = {}
    for name, value in changes.items():
        setting = BY_NAME.get(name)
        if setting is None:
            problems[name] = "is not a setting"
        elif value is None:
            if not setting.nullable:
                problems[name] = setting.rule
        elif not setting.accepts(value):
            problems[name] = setting.rule
    return problems


def encode(name: str, value: Any) -> str | None:
    """A checked value as stored; None for the setting's default (nothing is stored)."""
    if value is None or value is BY_NAME[name].default:  # the defaults are None and True
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def decode(stored: dict[str, str]) -> dict[str, Any]:
    """Every setting's value from what is stored (``None`` from the store: ``ValueError``).

    A whole number outside its setting's bounds (stored before the bounds were what they are
    now) reads as the nearer bound: what is shown is what applies, and a ``PATCH`` accepts it."""
    values = dict(DEFAULTS)
    for name, raw in stored.items():
        setting = BY_NAME.get(name)
        if setting is None:
            continue  # a field a later release wrote: not this release's to show
        if isinstance(setting.default, bool):
            if raw not in ("0", "1"):
                raise ValueError(name)
            values[name] = raw == "1"
        elif name == "default_folder_id":
            if not is_valid_id(raw, "fld"):
                raise ValueError(name)
            values[name] = raw
        else:
            if not raw.isascii() or not raw.isdigit() or setting.bounds is None:
                raise ValueError(name)
            low, high = setting.bounds
            values[name] = min(max(int(raw), low), high)
    return values


CHANGED = 0


ACCOUNT_GONE = -1


FOLDER_GONE = -2


DONE = 1
