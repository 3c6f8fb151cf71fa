"""The ten permission names and their stored bit mask."""

from service.domain.permissions import (
    ALL_PERMISSIONS_MASK,
    PERMISSIONS,
    to_mask,
    to_names,
    unknown_names,
)
from service.domain.principal import CredentialType, Principal
from tests.support.api import SPEC_PERMISSIONS


def test_the_ten_names_of_the_spec_in_its_order() -> None:
    assert list(PERMISSIONS) == SPEC_PERMISSIONS


def test_mask_round_trips_in_canonical_order() -> None:
    assert to_names(to_mask(["settings.write", "files.read", "files.read"])) == [
        "files.read",
        "settings.write",
    ]
    assert to_names(ALL_PERMISSIONS_MASK) == list(PERMISSIONS)
    assert to_names(0) == []


def test_stored_bits_never_move() -> None:
    # Masks are persisted in Redis: a reordering would silently change what stored keys may do.
    assert to_mask(["files.read"]) == 1
    assert to_mask(["settings.write"]) == 1 << 9


def test_unknown_names_are_listed_once_in_order() -> None:
    assert unknown_names(["files.read", "admin", "FILES.READ", "admin"]) == ["admin", "FILES.READ"]


def test_a_principal_may_only_what_its_mask_holds() -> None:
    principal = Principal("usr_x", CredentialType.API_KEY, to_mask(["folders.read"]), 0)
    assert principal.may("folders.read")
    assert not principal.may("files.read")
