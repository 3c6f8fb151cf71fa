"""Whether a change to an API key widens what it may do: the edits that need a recent
authentication (``FILEHOST_REAUTH_SECONDS``), like creating or rolling a key. Narrowing a key,
renaming it, disabling it or changing its rate never does.

A key widens when it gains a permission, when it may be used from an address it could not be
used from before (its allow-list lifted, or a network added that none of its networks held), or
when it reaches a folder it did not (``widens_folders``). Plain functions over ``KeyRecord``s.
"""

from __future__ import annotations

import ipaddress

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


def widens_folders(before: KeyRecord, after: KeyRecord) -> bool:
    """A key bound to folders (``folder_ids``; None for the whole account) widens when it is
    unbound, or bound to a folder it was not bound to. (A folder inside one it holds is within
    its reach already, so naming it is no widening; that is ``service.auth.reach``'s to tell,
    and it is counted as one here: the step-up errs on asking.)"""
    if before.folder_ids is None:
        return False
    return after.folder_ids is None or not set(after.folder_ids) <= set(before.folder_ids)
