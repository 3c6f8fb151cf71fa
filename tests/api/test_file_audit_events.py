"""Uploads and deletions of files are audit events (``file.uploaded``, ``file.deleted``) naming
the session or the API key that made them (the key by its id, and its name and prefix as they
were then) and the file (id, name, size), recorded in the step that writes or removes the file's
record: an upload that fails, or is undone, records nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync

from service.app import STORE
from tests.support.api import Api, assert_error, bearer
from tests.support.blobs import stored_names
from tests.support.clock import FakeClock, iso_of
from tests.support.files import FILES_URL, multipart, upload, uploaded
from tests.support.keys import EMAIL, audit_events, edit
from tests.support.openapi import validator

UA = "deploy-script/2.0"
FILE_EVENTS = ("file.uploaded", "file.deleted")


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def file_events(api: Api, token: str) -> list[dict[str, Any]]:
    found = [event for event in await audit_events(api, token) if event["type"] in FILE_EVENTS]
    for event in found:
        validator("/components/schemas/AuditEvent").validate(event)
    return found


async def my_session(api: Api, token: str) -> dict[str, Any]:
    """The session as an event names it: its public id and the User-Agent it signed in with."""
    response = await api.client.get("/api/v1/auth/sessions", headers=bearer(token))
    sessions = (await response.json())["data"]["sessions"]
    mine = next(session for session in sessions if session["current"])
    return {"type": "session", "session_id": mine["id"], "device": mine["user_agent"]}


async def test_a_key_that_uploads_and_deletes_is_named_with_its_name_and_prefix(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, name="deploy bot", permissions=["files.write"])
    headers = {"X-API-Key": key["secret_key"], "User-Agent": UA}

    body, multipart_headers = multipart(b"twelve bytes", filename="notes.txt")
    response = await api.client.post(FILES_URL, data=body, headers={**multipart_headers, **headers})
    assert response.status == 201, await response.text()
    created = (await response.json())["data"]
    uploaded_at = iso_of(clock)
    # Renamed later: the events keep the name it had when it acted.
    assert (await edit(api, token, key["id"], {"name": "renamed"})).status == 200
    clock.advance(seconds=5)
    deleted = await api.client.delete(f"{FILES_URL}/{created['id']}", headers=headers)
    assert deleted.status == 200, await deleted.text()

    newest_first = await file_events(api, token)
    assert [event["type"] for event in newest_first] == ["file.deleted", "file.uploaded"]
    deletion, upload_event = newest_first
    assert upload_event["actor"] == {
        "type": "api_key",
        "key_id": key["id"],
        "name": "deploy bot",
        "key_prefix": key["key_prefix"],
    }
    assert deletion["actor"] == {**upload_event["actor"], "name": "renamed"}
    target = {"type": "file", "file_id": created["id"], "name": "notes.txt", "size": 12}
    assert upload_event["target"] == deletion["target"] == target
    assert upload_event["at"] == uploaded_at
    assert deletion["at"] == iso_of(clock)
    for event in newest_first:
        assert (event["ip"], event["user_agent"], event["changes"]) == ("127.0.0.1", UA, None)
        assert key["secret_key"] not in str(event)


async def test_a_session_that_uploads_and_deletes_is_named_by_its_public_id(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    created = await uploaded(api, b"x" * 40, token=token, filename="a.bin")
    deleted = await api.client.delete(f"{FILES_URL}/{created['id']}", headers=bearer(token))
    assert deleted.status == 200

    session = await my_session(api, token)
    events = await file_events(api, token)
    assert [event["type"] for event in events] == ["file.deleted", "file.uploaded"]
    for event in events:
        assert event["actor"] == session
        assert event["target"] == {
            "type": "file",
            "file_id": created["id"],
            "name": "a.bin",
            "size": 40,
        }


async def test_a_key_sent_as_a_bearer_token_is_named_as_the_key(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, name="ci", permissions=["files.write"])
    body, headers = multipart(b"y")
    response = await api.client.post(
        FILES_URL, data=body, headers={**headers, **bearer(key["secret_key"])}
    )
    assert response.status == 201, await response.text()
    [event] = await file_events(api, token)
    assert event["actor"]["type"] == "api_key" and event["actor"]["key_id"] == key["id"]


async def test_failed_uploads_and_deletions_record_nothing(make_api: Any, tmp_path: Path) -> None:
    api = await make_api(data_dir=tmp_path, max_upload_bytes=100, max_files_per_account=1)
    token = await api.user_with_session(EMAIL)
    refused = [
        (await upload(api, b"z" * 101, token=token), 413),  # over the size limit
        (await upload(api, b"z", token=token, field="other"), 400),  # not the file field
        (
            await api.client.post(
                FILES_URL, data=b"{}", headers={**bearer(token), "Content-Type": "text/plain"}
            ),
            415,
        ),
    ]
    for response, status in refused:
        assert response.status == status, await response.text()
    kept = await uploaded(api, b"one", token=token)
    await assert_error(await upload(api, b"two", token=token), 409, "file_limit_reached")
    unknown = await api.client.delete(f"{FILES_URL}/fil_{'0' * 22}", headers=bearer(token))
    await assert_error(unknown, 404, "file_not_found")

    events = await file_events(api, token)
    assert [(event["type"], event["target"]["file_id"]) for event in events] == [
        ("file.uploaded", kept["id"])
    ]


async def test_an_upload_undone_after_its_record_was_written_takes_its_event_back(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session(EMAIL)
    files = api.app[STORE].files
    add = files.add

    async def added_then_lost(*args: Any, **kwargs: Any) -> bool:
        await add(*args, **kwargs)  # the record and its event are written...
        raise ConnectionError("the reply is lost")  # ...but the upload cannot know it

    monkeypatch.setattr(files, "add", added_then_lost)
    response = await upload(api, b"lost", token=token)
    assert response.status == 500  # an error of no known kind: the upload is undone
    monkeypatch.undo()

    assert await file_events(api, token) == []
    assert await stored_names(api) == []
    listed = await api.client.get(FILES_URL, headers=bearer(token))
    assert (await listed.json())["data"]["files"] == []


async def test_an_upload_whose_event_cannot_be_written_is_503_and_leaves_nothing(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user(EMAIL)
    token = await api.login(EMAIL)
    created = await uploaded(api, b"kept", token=token)
    trail = f"fh:{{{user.id}}}:audit"
    redis_client.delete(trail)
    redis_client.set(trail, "not a sorted set")

    await assert_error(await upload(api, b"new", token=token), 503, "store_unavailable")
    failed = await api.client.delete(f"{FILES_URL}/{created['id']}", headers=bearer(token))
    await assert_error(failed, 503, "store_unavailable")

    redis_client.delete(trail)
    listed = await api.client.get(FILES_URL, headers=bearer(token))
    assert [item["id"] for item in (await listed.json())["data"]["files"]] == [created["id"]]
    assert await stored_names(api) == [created["id"]]


async def test_two_deletions_of_one_file_record_one_event(api: Api) -> None:
    import asyncio

    token = await api.user_with_session(EMAIL)
    created = await uploaded(api, b"once", token=token)
    path = f"{FILES_URL}/{created['id']}"
    first, second = await asyncio.gather(
        api.client.delete(path, headers=bearer(token)),
        api.client.delete(path, headers=bearer(token)),
    )
    assert sorted([first.status, second.status]) == [200, 404]
    deletions = [e for e in await file_events(api, token) if e["type"] == "file.deleted"]
    assert len(deletions) == 1
