"""The ten permission names and their stored bit mask, and what each is said to grant."""

from pathlib import Path

from service.api.context import PREFIX
from service.api.routes.forward_auth import ROUTE_PERMISSIONS, SESSION_ONLY_RESOURCES
from service.app import create_app
from service.config import Settings
from service.domain.permissions import (
    ALL_PERMISSIONS_MASK,
    ENFORCED_BY,
    PERMISSION_DESCRIPTIONS,
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


def test_each_permission_is_said_to_be_enforced_where_it_is(tmp_path: Path) -> None:
    """``service``: a resource this service hosts, which a key reaches; ``gateway``: one only a
    gateway's forward-auth checks, hosted nowhere here; ``nothing``: the session-only keys."""
    app = create_app(Settings(redis_url="redis://127.0.0.1:1", data_dir=tmp_path))  # not started
    hosted = {
        resource.canonical.removeprefix(f"{PREFIX}/").split("/")[0]
        for resource in app.router.resources()
        if resource.canonical.startswith(f"{PREFIX}/")
    }
    assert set(ENFORCED_BY) == set(PERMISSION_DESCRIPTIONS) == set(PERMISSIONS)
    for name, enforced in ENFORCED_BY.items():
        resource = name.split(".")[0]
        assert name in ROUTE_PERMISSIONS[resource], name  # forward-auth knows every one
        if enforced == "service":
            assert resource in hosted and resource not in SESSION_ONLY_RESOURCES, name
        elif enforced == "gateway":
            assert resource not in hosted, name
            assert PERMISSION_DESCRIPTIONS[name].endswith("checked by a gateway"), name
        else:
            assert enforced == "nothing" and resource in SESSION_ONLY_RESOURCES, name
            assert PERMISSION_DESCRIPTIONS[name].startswith("Nothing:"), name
    # No description promises an action the service does not have (files are never updated).
    assert "update" not in " ".join(PERMISSION_DESCRIPTIONS.values()).lower()


def test_forward_auth_maps_every_resource_the_service_hosts(tmp_path: Path) -> None:
    """A gateway in front of this service's own API gets a permission for each of its resources,
    but for those whose requests carry no credential a gateway could check."""
    app = create_app(Settings(redis_url="redis://127.0.0.1:1", data_dir=tmp_path))  # not started
    hosted = {
        resource.canonical.removeprefix(f"{PREFIX}/").split("/")[0]
        for resource in app.router.resources()
        if resource.canonical.startswith(f"{PREFIX}/")
    }
    # The credential endpoints check what they are sent themselves, a download carries its
    # ticket in its body, and the API's description is public.
    unchecked = {"auth", "downloads", "openapi.json"}
    assert hosted - unchecked == set(ROUTE_PERMISSIONS)
