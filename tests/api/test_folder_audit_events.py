"""Every change of a folder, and every rename or move of a file, is an audit event naming its
target and who acted (a session, or an API key by its id, name and prefix), recorded in the step
that makes the change: a refused change records nothing, and neither does one that changes
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api, assert_error, bearer
from tests.support.files import FILES_URL, uploaded
from tests.support.folders import FOLDERS, create_folder, folder, patch
from tests.support.keys import audit_events
from tests.support.openapi import validator

KINDS = (
    "folder.created",
    "folder.renamed",
    "folder.moved",
    "folder.deleted",
    "file.renamed",
    "file.moved",
)


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def folder_events(api: Api, token: str) -> list[dict[str, Any]]:
    """The account's folder and file-change events, oldest first."""
    found = [e for e in await audit_events(api, token) if e["type"] in KINDS]
    for event in found:
        validator("/components/schemas/AuditEvent").validate(event)
    return list(reversed(found))


async def test_each_folder_change_is_an_event_naming_the_folder(api: Api) -> None:
    token = await api.user_with_session()
    top = await folder(api, "top", token=token)
    made = await folder(api, "draft", top["id"], token=token)
    await patch(api, f"{FOLDERS}/{made['id']}", {"name": "final", "parent_id": None}, token)
    await api.client.delete(f"{FOLDERS}/{made['id']}", headers=bearer(token))
    await api.client.delete(f"{FOLDERS}/{top['id']}?recursive=true", headers=bearer(token))

    target = {"type": "folder", "folder_id": made["id"]}
    events = await folder_events(api, token)
    assert [(e["type"], e["target"], e["changes"]) for e in events] == [
        ("folder.created", {**target, "folder_id": top["id"], "name": "top"}, {"parent_id": None}),
        ("folder.created", {**target, "name": "draft"}, {"parent_id": top["id"]}),
        ("folder.renamed", {**target, "name": "draft"}, {"name": "final"}),
        ("folder.moved", {**target, "name": "draft"}, {"parent_id": None}),
        ("folder.deleted", {**target, "name": "final"}, {"recursive": False}),
        (
            "folder.deleted",
            {**target, "folder_id": top["id"], "name": "top"},
            {"recursive": True},
        ),
    ]
    assert all(e["actor"]["type"] == "session" for e in events)


async def test_a_files_rename_and_move_are_events_naming_the_file_and_the_key(
    api: Api,
) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token, name="sorter", permissions=["files.write"])
    docs = await folder(api, "docs", token=token)
    created = await uploaded(api, b"12345", token=token, filename="a.txt")
    response = await patch(
        api,
        f"{FILES_URL}/{created['id']}",
        {"name": "b.txt", "folder_id": docs["id"]},
        key=key["secret_key"],
    )
    assert response.status == 200
    target = {"type": "file", "file_id": created["id"], "name": "a.txt", "size": 5}
    events = [e for e in await folder_events(api, token) if e["type"].startswith("file.")]
    assert [(e["type"], e["target"], e["changes"]) for e in events] == [
        ("file.renamed", target, {"name": "b.txt"}),
        ("file.moved", target, {"folder_id": docs["id"]}),
    ]
    for event in events:
        assert event["actor"] == {
            "type": "api_key",
            "key_id": key["id"],
            "name": "sorter",
            "key_prefix": key["key_prefix"],
        }


async def test_a_refused_change_and_one_that_changes_nothing_record_nothing(api: Api) -> None:
    token = await api.user_with_session()
    top = await folder(api, "top", token=token)
    inner = await folder(api, "inner", top["id"], token=token)
    created = await uploaded(api, b"x", token=token, folder_id=top["id"])
    before = await folder_events(api, token)

    await assert_error(await create_folder(api, "TOP", token=token), 409, "folder_name_taken")
    cycle = await patch(api, f"{FOLDERS}/{top['id']}", {"parent_id": inner["id"]}, token)
    await assert_error(cycle, 409, "folder_cycle")
    refused = await api.client.delete(f"{FOLDERS}/{top['id']}", headers=bearer(token))
    await assert_error(refused, 409, "folder_not_empty")
    await patch(api, f"{FOLDERS}/{top['id']}", {"name": "top"}, token)
    await patch(api, f"{FILES_URL}/{created['id']}", {"folder_id": top["id"]}, token)

    assert await folder_events(api, token) == before
