"""An account laid out for the tests of keys bound to folders: folders inside and outside a key's
folders, a file in each and one at the top level, and the key; plus the requests those tests
make with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.api import Api, bearer
from tests.support.clock import FakeClock
from tests.support.files import uploaded
from tests.support.folders import folder

KEYS = "/api/v1/keys"
FILES = "/api/v1/files"
FOLDERS = "/api/v1/folders"
VERIFY = "/api/v1/auth/verify"
EVERY_FILE_AND_FOLDER_PERMISSION = ["files.read", "files.write", "folders.read", "folders.write"]


@dataclass
class Account:
    """``inbox`` (holding ``inbox_sub``) and ``outbox`` are the key's folders; ``private`` is
    outside them, as is ``top_file`` at the top level. ``files`` maps each place (``inbox``,
    ``inbox_sub``, ``outbox``, ``private``, ``top``) to the id of the one file in it."""

    token: str
    folders: dict[str, dict[str, Any]]
    files: dict[str, str]
    key: dict[str, Any]

    @property
    def secret(self) -> dict[str, str]:
        return {"X-API-Key": self.key["secret_key"]}

    def folder_id(self, name: str) -> str:
        return str(self.folders[name]["id"])


async def bound_key(
    api: Api, token: str, folder_ids: list[str] | None, permissions: list[str] | None = None
) -> dict[str, Any]:
    """A new key bound to ``folder_ids`` (None: the whole account)."""
    return await api.create_key(
        token,
        name="bound",
        permissions=permissions or EVERY_FILE_AND_FOLDER_PERMISSION,
        folder_ids=folder_ids,
    )


async def account(
    api: Api, clock: FakeClock, email: str = "bound@example.com", **key: Any
) -> Account:
    """The account of the module's docstring, its key holding ``key``'s permissions; its files
    uploaded a millisecond apart (of ``clock``), in the order of ``Account.files``."""
    token = await api.user_with_session(email)
    folders = {
        "inbox": await folder(api, "Inbox", token=token),
        "outbox": await folder(api, "Outbox", token=token),
        "private": await folder(api, "Private", token=token),
    }
    folders["inbox_sub"] = await folder(api, "Sub", folders["inbox"]["id"], token=token)
    files = {}
    for place in ("inbox", "inbox_sub", "outbox", "private"):
        clock.advance(seconds=0.001)
        made = await uploaded(
            api,
            place.encode(),
            token=token,
            filename=f"{place}.txt",
            folder_id=folders[place]["id"],
        )
        files[place] = made["id"]
    clock.advance(seconds=0.001)
    files["top"] = (await uploaded(api, b"top", token=token, filename="top.txt"))["id"]
    ids = [folders["inbox"]["id"], folders["outbox"]["id"]]
    return Account(token, folders, files, await bound_key(api, token, ids, **key))


async def listed_key(api: Api, token: str, key_id: str) -> dict[str, Any]:
    response = await api.client.get(KEYS, headers=bearer(token))
    assert response.status == 200, await response.text()
    return next(key for key in (await response.json())["data"]["keys"] if key["id"] == key_id)


async def file_ids(api: Api, headers: dict[str, str], **query: Any) -> list[str]:
    """Every file ``GET /files`` lists with ``headers``, following ``next_cursor`` to the end."""
    found: list[str] = []
    params = {name: str(value) for name, value in query.items()}
    while True:
        response = await api.client.get(FILES, params=params, headers=headers)
        assert response.status == 200, await response.text()
        data = (await response.json())["data"]
        found += [file["id"] for file in data["files"]]
        if data["next_cursor"] is None:
            return found
        params["cursor"] = data["next_cursor"]


def verify_headers(secret: str, uri: str, method: str = "GET") -> dict[str, str]:
    """A gateway's sub-request for the original request ``method uri``, nginx's way."""
    return {"X-API-Key": secret, "X-Original-Method": method, "X-Original-URI": uri}
