"""Passkeys' relying party from ``FILEHOST_PUBLIC_URL``: the origin a browser reports for the
service's pages, whatever path or default port the operator wrote, and the host as the RP id."""

from __future__ import annotations

import pytest

from service.auth.passkeys import Passkeys


@pytest.mark.parametrize(
    ("public_url", "origin", "rp_id"),
    [
        ("https://files.example.com", "https://files.example.com", "files.example.com"),
        ("https://Files.Example.com:443/share", "https://files.example.com", "files.example.com"),
        ("http://localhost:8080/", "http://localhost:8080", "localhost"),
        ("http://localhost:80", "http://localhost", "localhost"),
        ("https://[::1]:8443/x", "https://[::1]:8443", "::1"),
    ],
)
def test_the_origin_and_rp_id_are_what_a_browser_reports(
    public_url: str, origin: str, rp_id: str
) -> None:
    passkeys = Passkeys(public_url)
    assert (passkeys.origin, passkeys.rp_id) == (origin, rp_id)
