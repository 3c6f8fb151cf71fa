"""Whether a change to an API key widens what it may do: the edits that need a recent
authentication (``FILEHOST_REAUTH_SECONDS``), like creating or rolling a key. Narrowing a key,
renaming it, disabling it, shortening its life or lowering its rate never does.

A key widens when it gains a permission, when it may be used from an address it could not be
used from before (its allow-list lifted, or a network added that none of its networks held),
when it reaches a folder it did not (``widens_folders``), when it is enabled again, when it
lives longer, or when it may send more requests (``raises_rate``): each lets a key that was
held back (perhaps as a precaution) do more. Plain functions over ``KeyRecord``s.
"""

from __future__ import annotations

import ipaddress

from service.domain.records import KeyRecord


def widens(before: KeyRecord, after: KeyRecord, deployment_rate: tuple[float, int] | None) -> bool:
    """``deployment_rate``: (per second, burst) of a key without a rate of its own; None when
    the deployment limits no rate, a key's own included."""
    return (
        adds_permissions(before, after)
        or widens_addresses(before, after)
        or widens_folders(before, after)
        or (after.enabled and not before.enabled)
        or after.expires_at > before.expires_at
        or raises_rate(before, after, deployment_rate)
    )


def raises_rate(
    before: KeyRecord, after: KeyRecord, deployment_rate: tuple[float, int] | None
) -> bool:
    """Whether the key may now send requests faster or in larger bursts: its own rate raised,
    or dropped for a deployment's that is higher in either."""
    if deployment_rate is None:
        return False  # no rate is enforced, a key's own included
    was = before.rate_limit or deployment_rate
    now = after.rate_limit or deployment_rate
    return now[0] > was[0] or now[1] > was[1]


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
            # subnet_of takes a network of its own version, which the first test checks
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
