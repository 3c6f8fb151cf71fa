"""The ten permission names of the interface and their compact stored form (a bit mask).

A session acts with every permission; an API key with exactly the set it was created with.
What each guards: ``files.*`` the files (``files.write`` their upload, rename, move and deletion),
``folders.*`` the folders (a recursive deletion, which deletes files too, needs ``files.write``
as well), ``settings.*`` the account's settings, ``keys.*`` nothing a key may use (the key
endpoints take a session only), ``aliases.*`` the vanity aliases (making one also needs read
permission on its target: ``files.read`` or ``folders.read``).
"""

from __future__ import annotations

from collections.abc import Iterable

# Order is the spec's order; a name's bit is its position. Never reorder: masks are stored.
PERMISSIONS: tuple[str, ...] = (
    "files.read",
    "files.write",
    "folders.read",
    "folders.write",
    "aliases.read",
    "aliases.write",
    "keys.read",
    "keys.write",
    "settings.read",
    "settings.write",
)

PERMISSION_DESCRIPTIONS: dict[str, str] = {
    "files.read": "List, read and download files",
    "files.write": "Upload, rename, move and delete files",
    "folders.read": "List and read folders",
    "folders.write": "Create, rename, move and delete folders",
    "aliases.read": "List vanity aliases and read their views",
    "aliases.write": "Create, change, disable and delete aliases",
    "keys.read": "List API keys",
    "keys.write": "Create and revoke API keys",
    "settings.read": "Read the account's settings",
    "settings.write": "Change the account's settings",
}

BIT: dict[str, int] = {name: 1 << position for position, name in enumerate(PERMISSIONS)}
ALL_PERMISSIONS_MASK: int = (1 << len(PERMISSIONS)) - 1


def to_mask(names: Iterable[str]) -> int:
    """The bit mask of known permission names (callers validate names first)."""
    mask = 0
    for name in names:
        mask |= BIT[name]
    return mask


def to_names(mask: int) -> list[str]:
    """The permission names in a mask, in the spec's order."""
    return [name for name in PERMISSIONS if mask & BIT[name]]


def unknown_names(names: Iterable[str]) -> list[str]:
    """The names that are not permissions, in the order given, without repeats."""
    seen: dict[str, None] = {}
    for name in names:
        if name not in BIT:
            seen.setdefault(name, None)
    return list(seen)
