"""The ten permission names of the interface and their compact stored form (a bit mask).

A session acts with every permission; an API key with exactly the set it was created with.
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

# What each permission lets an API key do, exactly as the service enforces it today: the one
# list the dashboard describes them from (its js/permissions.js is compared with this by a test).
PERMISSION_DESCRIPTIONS: dict[str, str] = {
    "files.read": "List files, read their details and download them",
    "files.write": "Upload and delete files",
    "folders.read": "GET and HEAD of /api/v1/folders…, checked by a gateway",
    "folders.write": "POST, PUT, PATCH, DELETE of /api/v1/folders…, checked by a gateway",
    "aliases.read": "GET and HEAD of /api/v1/aliases…, checked by a gateway",
    "aliases.write": "POST, PUT, PATCH, DELETE of /api/v1/aliases…, checked by a gateway",
    "keys.read": "Nothing: only a signed-in session may list keys",
    "keys.write": "Nothing: only a signed-in session may create, change or revoke keys",
    "settings.read": "GET and HEAD of /api/v1/settings…, checked by a gateway",
    "settings.write": "POST, PUT, PATCH, DELETE of /api/v1/settings…, checked by a gateway",
}

# Who enforces each permission today: ``service``, this service's own endpoints; ``gateway``,
# only a gateway asking ``/auth/verify`` on behalf of another service, since no such resource is
# hosted here yet; ``nothing``, since the key endpoints take a session only, whatever a key
# holds (the spec's rule 1). tests/unit/test_permissions.py checks this against the routes.
ENFORCED_BY: dict[str, str] = {
    "files.read": "service",
    "files.write": "service",
    "folders.read": "gateway",
    "folders.write": "gateway",
    "aliases.read": "gateway",
    "aliases.write": "gateway",
    "keys.read": "nothing",
    "keys.write": "nothing",
    "settings.read": "gateway",
    "settings.write": "gateway",
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
