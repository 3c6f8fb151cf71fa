"""Vanity aliases for keys bound to folders: such a key makes aliases only of files and folders
inside its folders, reads, changes and deletes only aliases whose target is inside, every other
alias answering exactly like an unknown id, lists only those, and forward-auth passes it only
those; a key left with no folder is refused even its list. The public side does not care who
made an alias."""

from __future__ import annotations

from typing import Any

import pytest

from service.domain.credentials import new_id
from tests.support.aliases import ALIASES, alias, alias_part, create_alias, listed, public
from tests.support.api import Api, assert_error, bearer
from tests.support.bound import (
    EVERY_FILE_AND_FOLDER_PERMISSION,
    FOLDERS,
    VERIFY,
    Account,
    account,
    verify_headers,
)
from tests.support.clock import FakeClock
from tests.support.files import multipart

PERMISSIONS = [*EVERY_FILE_AND_FOLDER_PERMISSION, "aliases.read", "aliases.write"]


@pytest.fixture
async def world(api: Api, clock: FakeClock) -> Account:
    return await account(api, clock, permissions=PERMISSIONS)


def key(world: Account) -> str:
    return str(world.key["secret_key"])


async def owners_aliases(api: Api, world: Account) -> dict[str, dict[str, Any]]:
    """An alias, made by the account's session, of each file and of each folder, named by place
    (``file:inbox``, ``folder:private``, ...)."""
    made = {}
    for place, file_id in world.files.items():
        body = {"file_id": file_id, "slug": f"file-{place.replace('_', '-')}"}
        made[f"file:{place}"] = await alias(api, body, token=world.token)
    for place, record in world.folders.items():
        body = {"folder_id": record["id"], "slug": f"folder-{place.replace('_', '-')}"}
        made[f"folder:{place}"] = await alias(api, body, token=world.token)
    return made


INSIDE = (
    "file:inbox",
    "file:inbox_sub",
    "file:outbox",
    "folder:inbox",
    "folder:inbox_sub",
    "folder:outbox",
)
OUTSIDE = ("file:private", "file:top", "folder:private")


async def test_a_bound_key_makes_aliases_only_of_what_is_inside(api: Api, world: Account) -> None:
    for place in ("inbox", "inbox_sub", "outbox"):
        made = await alias(api, {"file_id": world.files[place]}, key=key(world))
        assert made["target"] == {"type": "file", "id": world.files[place]}
    made = await alias(api, {"folder_id": world.folder_id("inbox_sub")}, key=key(world))
    assert made["target"]["type"] == "folder"

    refused = []
    for file_id in (world.files["private"], world.files["top"], new_id("fil")):
        response = await create_alias(api, {"file_id": file_id}, key=key(world))
        refused.append(await assert_error(response, 404, "file_not_found"))
    assert all(error == refused[0] for error in refused)
    assert refused[0]["details"] == {"field": "file_id"}
    refused = []
    for folder_id in (world.folder_id("private"), new_id("fld")):
        response = await create_alias(api, {"folder_id": folder_id}, key=key(world))
        refused.append(await assert_error(response, 404, "folder_not_found"))
    assert all(error == refused[0] for error in refused)
    assert refused[0]["details"] == {"field": "folder_id"}
    # Nothing was made of what it was refused: the account holds the four it made.
    assert len(await listed(api, token=world.token)) == 4


async def test_an_alias_outside_answers_exactly_like_an_unknown_one(
    api: Api, world: Account
) -> None:
    made = await owners_aliases(api, world)
    for place in INSIDE:
        path = f"{ALIASES}/{made[place]['id']}"
        response = await api.client.get(path, headers={"X-API-Key": key(world)})
        assert response.status == 200, (place, await response.text())
    unknown = []
    for alias_id in [made[place]["id"] for place in OUTSIDE] + [new_id("als"), "nonsense"]:
        for method, body in (("GET", None), ("PATCH", {"enabled": False}), ("DELETE", None)):
            response = await api.client.request(
                method, f"{ALIASES}/{alias_id}", json=body, headers={"X-API-Key": key(world)}
            )
            unknown.append(await assert_error(response, 404, "alias_not_found"))
    assert all(error == unknown[0] for error in unknown)
    # Nothing outside was changed or deleted: each still opens.
    for place in OUTSIDE:
        response = await api.client.get(
            f"{ALIASES}/{made[place]['id']}", headers=bearer(world.token)
        )
        assert (await response.json())["data"]["enabled"] is True
        assert (await public(api, f"/a/{made[place]['slug']}")).status == 200


async def test_a_bound_key_changes_and_deletes_the_aliases_inside(api: Api, world: Account) -> None:
    made = await owners_aliases(api, world)
    inside = made["file:inbox_sub"]
    response = await api.client.patch(
        f"{ALIASES}/{inside['id']}", json={"enabled": False}, headers={"X-API-Key": key(world)}
    )
    assert response.status == 200, await response.text()
    assert (await response.json())["data"]["enabled"] is False
    response = await api.client.delete(
        f"{ALIASES}/{inside['id']}", headers={"X-API-Key": key(world)}
    )
    assert response.status == 200, await response.text()
    assert (await public(api, f"/a/{inside['slug']}")).status == 404


async def test_a_bound_key_lists_only_the_aliases_inside(api: Api, world: Account) -> None:
    made = await owners_aliases(api, world)
    seen = {item["id"] for item in await listed(api, key=key(world))}
    assert seen == {made[place]["id"] for place in INSIDE}
    # The session, and a key of the same permissions bound to nothing, see every one.
    assert len(await listed(api, token=world.token)) == len(made)
    whole = await api.create_key(world.token, name="whole", permissions=PERMISSIONS)
    assert len(await listed(api, key=whole["secret_key"])) == len(made)


async def test_an_upload_asking_for_an_alias_makes_it_inside(api: Api, world: Account) -> None:
    body, headers = multipart(b"linked", extra=alias_part())
    response = await api.client.post(
        "/api/v1/files", data=body, headers={**headers, "X-API-Key": key(world)}
    )
    assert response.status == 201, await response.text()
    data = (await response.json())["data"]
    assert data["folder_id"] == world.folder_id("inbox")  # its first folder
    got = await api.client.get(
        f"{ALIASES}/{data['alias']['id']}", headers={"X-API-Key": key(world)}
    )
    assert got.status == 200
    assert (await (await public(api, f"/a/{data['alias']['slug']}")).read()) == b"linked"


async def test_forward_auth_passes_a_bound_key_only_the_aliases_inside(
    api: Api, world: Account
) -> None:
    made = await owners_aliases(api, world)
    for place in INSIDE:
        for method in ("GET", "PATCH", "DELETE"):
            uri = f"{ALIASES}/{made[place]['id']}"
            response = await api.client.get(VERIFY, headers=verify_headers(key(world), uri, method))
            assert response.status == 200, (place, method, await response.text())
    for alias_id in [made[place]["id"] for place in OUTSIDE] + [new_id("als")]:
        uri = f"{ALIASES}/{alias_id}"
        response = await api.client.get(VERIFY, headers=verify_headers(key(world), uri))
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"] == {"bound_to_folders": True}


async def test_a_key_whose_folders_are_all_gone_is_refused_its_aliases(
    api: Api, world: Account
) -> None:
    made = await alias(api, {"file_id": world.files["top"]}, token=world.token)
    for name in ("inbox", "outbox"):
        response = await api.client.delete(
            f"{FOLDERS}/{world.folder_id(name)}",
            params={"recursive": "true"},
            headers=bearer(world.token),
        )
        assert response.status == 200, await response.text()
    for method, path in (("GET", ALIASES), ("GET", f"{ALIASES}/{made['id']}")):
        response = await api.client.request(method, path, headers={"X-API-Key": key(world)})
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"] == {"bound_to_folders": True, "folder_ids": []}
