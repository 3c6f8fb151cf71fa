"""Whether a change to an API key widens what it may do: the edits that need a recent
authentication (``FILEHOST_REAUTH_SECONDS``), like creating or rolling a key. Narrowing a key,
renaming it, disabling it or changing its rate never does.

A key widens when it gains a permission, when it may be used from an address it could not be
used from before (its allow-list lifted, or a network added that none of its networks held), or
when it reaches a folder it did not (``widens_folders``). Plain functions over ``KeyRecord``s.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from service.domain.records import KeyRecord


def widens(before: KeyRecord, after: KeyRecord) -> bool:
    return (
        adds_permissions(before, after)
        or widens_addresses(before, after)
        or widens_folders(before, after)
    )


def adds_permissions(before: KeyRecord, after: KeyRecord) -> bool:
    return bool(after.permissions & ~before.permissions)


def widens_addresses(before: KeyRecord, after: KeyRecord) -> bool:
    """An empty allow-list is "from anywhere"."""
    if not before.allowed_ips:
        return False
    if not after.allowed_ips:
        return True
    held = [ipaddress.ip_network(network) for network in before.allowed_ips]
    return any(
        not any(
            network.version == outer.version and network.subnet_of(outer)  # type: ignore[arg-type]
            for outer in held
        )
        for network in map(ipaddress.ip_network, after.allowed_ips)
    )


def widens_folders(before: Any, after: Any) -> bool:
    """A key bound to folders (``folder_ids``: a tuple of folder ids, None for the whole
    account) widens when it is unbound or bound to a folder it was not bound to.

    Keys are bound to folders by a change that is not merged yet: until ``KeyRecord`` has
    ``folder_ids``, no key is bound and this never widens. Read through ``getattr`` so that it
    holds from the moment the field exists, with nothing else to change here."""
    old = getattr(before, "folder_ids", None)
    new = getattr(after, "folder_ids", None)
    if old is None:
        return False
    return new is None or not set(new) <= set(old)
