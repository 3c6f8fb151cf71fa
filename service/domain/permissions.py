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

# What each permission lets an API key do, exactly as the service enforces it today: the one
# list the dashboard describes them from (its js/permissions.js is compared with this by a test).
PERMISSION_DESCRIPTIONS: dict[str, str] = {
    "files.read": "List files (all of them, or one folder's), read their details and download them",
    "files.write": "Upload files (into a folder), rename, move and delete them",
    "folders.read": "List a folder's folders and read a folder with its path",
    "folders.write": (
        "Create, rename, move and delete folders (deleting one with everything in it also "
        "needs files.write)"
    ),
    "aliases.read": "List vanity aliases and read one with its views",
    "aliases.write": (
        "Create, change, disable and delete vanity aliases of what the key may read, and ask "
        "for one with an upload"
    ),
    "keys.read": "Nothing: only a signed-in session may list keys",
    "keys.write": "Nothing: only a signed-in session may create, change or revoke keys",
    "settings.read": "Read the account's settings",
    "settings.write": "Change the account's settings",
}

# Who enforces each permission today: ``service``, this service's own endpoints; ``gateway``,
# only a gateway asking ``/auth/verify`` on behalf of another service, since no such resource is
# hosted here yet; ``nothing``, since the key endpoints take a session only, whatever a key
# holds (the spec's rule 1). tests/unit/test_permissions.py checks this against the routes.
ENFORCED_BY: dict[str, str] = {
    "files.read": "service",
    "files.write": "service",
    "folders.read": "service",
    "folders.write": "service",
    "aliases.read": "service",
    "aliases.write": "service",
    "keys.read": "nothing",
    "keys.write": "nothing",
    "settings.read": "service",
    "settings.write": "service",
}

BIT: dict[str, int] = {name: 1 << position for position, name in enumerate(PERMISSIONS)}
ALL_PERMISSIONS_MASK: int = (1 << len(PERMISSIONS)) - 1

# Never a permission: the mark, in a key's digest entry beside its permission bits, of a key
# bound to folders. The per-request lookup already reads and checks that mask, so an unbound key
# pays nothing for binding, and a worker that predates binding refuses a bound key's entry as
# damaged (its mask is out of range) rather than letting it reach the whole account.
BOUND_TO_FOLDERS: int = 1 << 15
# Never a permission either: the mark of an upload-only key (one an uploader configuration
# made). Whatever its permission names, such a key may upload and alias what it uploads, and
# nothing else: ``Principal.may`` refuses it every permission, ``may_upload`` the upload's. A
# worker that predates the mark refuses the key's entry as damaged, as for binding.
UPLOAD_ONLY: int = 1 << 14
# The largest mask a key's digest entry may hold: anything above it is a damaged entry.
ENTRY_MASK_LIMIT: int = ALL_PERMISSIONS_MASK | UPLOAD_ONLY | BOUND_TO_FOLDERS
# How many folders one key may be bound to (GitHub's fine-grained tokens take up to 50
# repositories): every binding check of a bound key reads the list whole.
MAX_KEY_FOLDERS = 50


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
