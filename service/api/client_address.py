"""Which address a request came from, for login throttling (and whether its peer is a trusted
proxy, whose forwarded headers are believed).

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
from multidict import CIMultiDictProxy

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, proxies: Sequence[Network]) -> bool:
    return any(ip in network for network in proxies)


def is_trusted_proxy(remote: str | None, trusted_proxies: Sequence[Network]) -> bool:
    """Whether the peer ``remote`` is one of the trusted proxies (whose forwarded headers are
    believed)."""
    if not trusted_proxies:
        return False
    try:
        return _trusted(ipaddress.ip_address(remote or ""), trusted_proxies)
    except ValueError:
        return False


def client_address(request: web.BaseRequest, trusted_proxies: Sequence[Network]) -> str | None:
    """The client's IP address as text, or None (e.g. a unix socket peer)."""
    return address_of(request.remote, request.headers, trusted_proxies)


def address_of(
    remote: str | None, headers: CIMultiDictProxy[str], trusted_proxies: Sequence[Network]
) -> str | None:
    """``client_address`` for a request from the peer ``remote`` with ``headers``."""
    try:
        address = ipaddress.ip_address(remote or "")
    except ValueError:
        return None
    if not trusted_proxies or not _trusted(address, trusted_proxies):
        return str(address)
    hops = [
        hop.strip() for value in headers.getall("X-Forwarded-For", ()) for hop in value.split(",")
    ]
    for hop in reversed(hops):
        try:
            address = ipaddress.ip_address(hop)
        except ValueError:
            break
        if not _trusted(address, trusted_proxies):
            break
    return str(address)


class ClientAddresses:
    """``client_address`` for every request's access line, without parsing the same peer
    address again on every request: a peer that is not a trusted proxy is looked up in a
    bounded memory of the ones seen; only a trusted proxy's requests read ``X-Forwarded-For``."""

    __slots__ = ("_direct", "_proxies")

    _MEMORY_LIMIT = 10_000

    def __init__(self, trusted_proxies: Sequence[Network]) -> None:
        self._proxies = trusted_proxies
        self._direct: dict[str | None, str | None] = {}

    def of(self, request: web.BaseRequest) -> str | None:
        return self.of_peer(request.remote, request.headers)

    def of_peer(self, remote: str | None, headers: CIMultiDictProxy[str]) -> str | None:
        """``of`` for a request from the peer ``remote`` with ``headers``."""
        try:
            return self._direct[remote]
        except KeyError:
            pass
        try:
            address = ipaddress.ip_address(remote or "")
        except ValueError:
            return None
        if self._proxies and _trusted(address, self._proxies):
            return address_of(remote, headers, self._proxies)
        if len(self._direct) >= self._MEMORY_LIMIT:
            self._direct.clear()
        text = self._direct[remote] = str(address)
        return text
