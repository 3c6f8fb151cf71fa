"""Finding a login's client address: the peer, or X-Forwarded-For read past trusted proxies only."""

from __future__ import annotations

import ipaddress
from unittest.mock import Mock

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from service.api.client_address import client_address
from service.auth.login_throttle import address_bucket

PROXIES = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))


def request_from(peer: str | None, *forwarded_for: str):  # type: ignore[no-untyped-def]
    transport = Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        (peer, 40000) if name == "peername" and peer is not None else default
    )
    headers = CIMultiDict(("X-Forwarded-For", value) for value in forwarded_for)
    return make_mocked_request("POST", "/api/v1/auth/login", headers=headers, transport=transport)


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "expected"),
    [
        # Not behind a trusted proxy: the header is the client's own claim and is ignored.
        ("203.0.113.5", ("198.51.100.1",), "203.0.113.5"),
        # One trusted proxy: the entry it appended (rightmost) is the client.
        ("10.0.0.2", ("198.51.100.1",), "198.51.100.1"),
        # Entries left of the first untrusted one were written by the client: never believed.
        ("10.0.0.2", ("6.6.6.6, 198.51.100.1",), "198.51.100.1"),
        # A chain of trusted proxies is walked through.
        ("10.0.0.2", ("198.51.100.1, 10.1.1.1, 10.2.2.2",), "198.51.100.1"),
        # Several header lines are one list, in order.
        ("10.0.0.2", ("6.6.6.6", "198.51.100.1, 10.1.1.1"), "198.51.100.1"),
        # A trusted proxy that sent no header: the proxy itself.
        ("10.0.0.2", (), "10.0.0.2"),
        # Garbage stops the walk at the last proxy seen; it never picks a forged address.
        ("10.0.0.2", ("198.51.100.1, not-an-ip",), "10.0.0.2"),
        ("10.0.0.2", ("198.51.100.1, not-an-ip, 10.3.3.3",), "10.3.3.3"),
        ("fd00::1", ("2001:db8::7",), "2001:db8::7"),
    ],
)
def test_client_address(peer: str, forwarded_for: tuple[str, ...], expected: str) -> None:
    assert client_address(request_from(peer, *forwarded_for), PROXIES) == expected


def test_no_trusted_proxies_means_the_peer() -> None:
    assert client_address(request_from("10.0.0.2", "198.51.100.1"), ()) == "10.0.0.2"


def test_a_unix_socket_peer_has_no_address() -> None:
    assert client_address(request_from(None), PROXIES) is None


@pytest.mark.parametrize(
    ("address", "bucket"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        (None, None),
        ("", None),
    ],
)
def test_addresses_are_counted_per_ipv4_address_or_ipv6_64(
    address: str | None, bucket: str | None
) -> None:
    assert address_bucket(address) == bucket
