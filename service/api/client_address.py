"""Which address a request came from, for login throttling.

The peer address, unless the peer is one of the configured trusted proxies
(``FILEHOST_TRUSTED_PROXIES``): then ``X-Forwarded-For`` is read from the right, past every
trusted proxy, and the first address that is not one is the client. Addresses left of it were
written by the client and are never believed. An entry that is not an address stops the walk at
the last proxy seen, so a forged header can at worst count its requests against that proxy.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from aiohttp import web

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, proxies: Sequence[Network]) -> bool:
    return any(ip in network for network in proxies)


def client_address(request: web.BaseRequest, trusted_proxies: Sequence[Network]) -> str | None:
    """The client's IP address as text, or None (e.g. a unix socket peer)."""
    try:
        address = ipaddress.ip_address(request.remote or "")
    except ValueError:
        return None
    if not trusted_proxies or not _trusted(address, trusted_proxies):
        return str(address)
    hops = [
        hop.strip()
        for value in request.headers.getall("X-Forwarded-For", ())
        for hop in value.split(",")
    ]
    for hop in reversed(hops):
        try:
            address = ipaddress.ip_address(hop)
        except ValueError:
            break
        if not _trusted(address, trusted_proxies):
            break
    return str(address)
