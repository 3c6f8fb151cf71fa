"""Where an API key may be used from: its allow-list of IPv4/IPv6 addresses and networks.

The API hands over what a client wrote (``canonical_network`` turns each item into the one form
that is stored); the per-request check (``AllowLists``) reads the stored list from the key's
digest entry, the same HMGET that reads the key, so it costs no round trip. Parsing a list of up
to 100 networks on every request would cost more than the rest of the check, so each worker
remembers the parsed networks by the stored string, and per list the verdict for each client
address it has seen (both bounded). A changed list is a different string: nothing remembered
can outlive a change.
"""

from __future__ import annotations

import ipaddress

from service.errors import CorruptRecord

MAX_ALLOWED_IPS = 100
# Longer than any address or network written out (an IPv6 with a /128 is 43 characters).
MAX_NETWORK_TEXT = 64

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def canonical_network(text: str) -> str | None:
    """The stored form of an address or a CIDR network: the network with its prefix length,
    host bits cleared (``203.0.113.7`` -> ``203.0.113.7/32``, ``10.1.2.3/8`` -> ``10.0.0.0/8``,
    IPv6 compressed, an IPv4-mapped IPv6 network as the IPv4 one); None when the text is not
    one (zone ids, surrounding spaces and leading zeros included)."""
    if not text or len(text) > MAX_NETWORK_TEXT or "%" in text or text != text.strip():
        return None
    try:
        network: Network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            network = ipaddress.IPv4Network((mapped, network.prefixlen - 96))
    return network.with_prefixlen


def address_form(client: str | None) -> str:
    """A client address as the store's lookup compares it with a key's allowed ranges
    (``address_ranges``): ``4`` and 8 hex digits for IPv4 (an IPv4-mapped IPv6 address
    included, as ``AllowLists`` reads it), ``6`` and 32 for IPv6; '' when it is not an address,
    which no range holds."""
    address = _address(client) if client is not None else None
    if address is None:
        return ""
    return f"{address.version}{address.packed.hex()}"


def address_ranges(networks: list[str] | tuple[str, ...]) -> str:
    """A key's allowed networks as ``low-high`` ranges of ``address_form``s, comma-separated:
    what the store's lookup script compares a client's address with (as strings of one length,
    so an IPv4 address is only ever in an IPv4 network, as ``AllowLists`` decides)."""
    ranges = []
    for network in _parse(",".join(networks)):
        version = network.version
        low = network.network_address.packed.hex()
        high = network.broadcast_address.packed.hex()
        ranges.append(f"{version}{low}-{version}{high}")
    return ",".join(ranges)


class AddressForms:
    """``address_form`` per client address, remembered (bounded): a gateway's requests come
    from a few addresses, and the form is worked out on every API key request."""

    __slots__ = ("_known",)

    _LIMIT = 4096

    def __init__(self) -> None:
        self._known: dict[str | None, bytes] = {}

    def of(self, client: str | None) -> bytes:
        form = self._known.get(client)
        if form is None:
            if len(self._known) >= self._LIMIT:
                self._known.clear()
            form = self._known[client] = address_form(client).encode()
        return form


def _parse(stored: str) -> tuple[Network, ...]:
    """The networks of a stored allow-list; a damaged one refuses (fail closed)."""
    try:
        networks = tuple(ipaddress.ip_network(item) for item in stored.split(","))
    except ValueError:
        raise CorruptRecord() from None
    if not networks or len(networks) > MAX_ALLOWED_IPS:
        raise CorruptRecord()
    return networks


def _address(client: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # an IPv4 client on a dual-stack socket
    return address


class AllowLists:
    """``allows(stored, client)``: whether a client address is in a key's stored allow-list.

    An unknown client address (a unix-socket peer) is never in a list: a key with an
    allow-list refuses what it can't place."""

    __slots__ = ("_lists",)

    _LISTS_LIMIT = 4096
    _VERDICTS_PER_LIST = 4096

    def __init__(self) -> None:
        # stored list -> (its networks, client address -> verdict)
        self._lists: dict[str, tuple[tuple[Network, ...], dict[str | None, bool]]] = {}

    def allows(self, stored: str, client: str | None) -> bool:
        known = self._lists.get(stored)
        if known is None:
            if len(self._lists) >= self._LISTS_LIMIT:
                self._lists.clear()
            known = self._lists[stored] = (_parse(stored), {})
        networks, verdicts = known
        verdict = verdicts.get(client)
        if verdict is None:
            address = _address(client) if client is not None else None
            verdict = address is not None and any(address in network for network in networks)
            if len(verdicts) >= self._VERDICTS_PER_LIST:
                verdicts.clear()
            verdicts[client] = verdict
        return verdict
