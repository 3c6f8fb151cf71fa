"""Many files at once: ``POST /files/bulk`` moves or deletes hundreds of files, each checked
and recorded as its single operation is (another account's id and one outside a bound key's
folders fail as unknown, each file its own audit event, a deleted file's bytes and aliases
gone), with an outcome per id in the order given; and the bodies it refuses. Over HTTP, on the
fixtures' real Redis and blob store."""

from __future__ import annotations

from typing import Any

import pytest

from service.auth.bulk_files import MAX_BULK_IDS
from tests.support.aliases import alias, public
from tests.support.api import Api, assert_error, bearer
from tests.support.blobs import stored_names
from tests.support.bound import account, file_ids
from tests.support.clock import FakeClock
from tests.support.files import FILES_URL, many_uploaded, uploaded
from tests.support.folders import folder, folder_files
from tests.support.keys import audit_events
from tests.support.openapi import validator

BULK = f"{FILES_URL}/bulk"


@pytest.fixture
async def api(make_api: Any) -> Api:
    """Without a request rate: a test uploads hundreds of files one after another."""
    return await make_api(rate_limit_per_second=0)


JSON = {"Content-Type": "application/json"}
UNKNOWN_FILE = "fil_0000000000000000000000"
UNKNOWN_FOLDER = "fld_0000000000000000000000"


async def bulk(api: Api, body: Any, headers: dict[str, str]) -> Any:
    return await api.client.post(BULK, json=body, headers=headers)


async def results(api: Api, body: Any, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = await bulk(api, body, headers)
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/BulkResultsEnvelope").validate(answer)
    return list(answer["data"]["results"])


def not_found(file_id: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "ok": False,
        "error": {"code": "file_not_found", "message": "No such file."},
    }


async def test_hundreds_of_files_move_then_delete_each_as_alone(api: Api) -> None:
    token = await api.user_with_session()
    other = await api.user_with_session("other@example.com")
    theirs = (await uploaded(api, b"theirs", token=other))["id"]
    files = await many_uploaded(api, 300, token=token)
    ids = [file["id"] for file in files]
    shared = await alias(api, {"file_id": ids[7], "slug": "shared-one"}, token=token)
    target = await folder(api, "Archive", token=token)

    # 250 of them move, amid an unknown id, another account's, one of another shape, and an
    # id given twice (acted on once, told twice).
    asked = [*ids[:125], UNKNOWN_FILE, theirs, "not-an-id", ids[0], *ids[125:250]]
    moved = await results(
        api, {"action": "move", "ids": asked, "folder_id": target["id"]}, bearer(token)
    )
    assert [result["id"] for result in moved] == asked
    assert moved[125:128] == [not_found(UNKNOWN_FILE), not_found(theirs), not_found("not-an-id")]
    assert all(result == {"id": result["id"], "ok": True} for result in moved[:125] + moved[128:])
    assert sorted(await file_ids(api, bearer(token), folder_id=target["id"])) == sorted(ids[:250])
    events = await audit_events(api, token, "file.moved")
    assert sorted(event["target"]["file_id"] for event in events) == sorted(ids[:250])
    assert {event["changes"]["folder_id"] for event in events} == {target["id"]}

    # Back to the top (folder_id null): the moved ones go, the others stay where they are.
    back = await results(api, {"action": "move", "ids": ids[:10], "folder_id": None}, bearer(token))
    assert all(result["ok"] for result in back)
    assert len(await file_ids(api, bearer(token), folder_id=target["id"])) == 240

    # Every one deleted, with the other account's amid them untouched.
    asked = [theirs, *ids, ids[-1]]
    deleted = await results(api, {"action": "delete", "ids": asked}, bearer(token))
    assert deleted[0] == not_found(theirs)
    assert deleted[1:] == [{"id": file_id, "ok": True} for file_id in [*ids, ids[-1]]]
    listing = await api.client.get(FILES_URL, headers=bearer(token))
    assert (await listing.json())["data"]["files"] == []
    assert await stored_names(api) == [theirs]  # the bytes went with each file
    events = await audit_events(api, token, "file.deleted")
    assert sorted(event["target"]["file_id"] for event in events) == sorted(ids)
    assert (await public(api, f"/a/{shared['slug']}")).status == 404  # its alias too
    # Deleting them again: each unknown now.
    again = await results(api, {"action": "delete", "ids": ids[:3]}, bearer(token))
    assert again == [not_found(file_id) for file_id in ids[:3]]


async def test_a_bound_key_acts_only_inside_its_folders(api: Api, clock: FakeClock) -> None:
    laid_out = await account(api, clock)
    files, secret = laid_out.files, laid_out.secret
    inbox, outbox = laid_out.folder_id("inbox"), laid_out.folder_id("outbox")
    asked = [files["inbox"], files["private"], files["top"], files["inbox_sub"]]
    moved = await results(api, {"action": "move", "ids": asked, "folder_id": outbox}, secret)
    assert [result["ok"] for result in moved] == [True, False, False, True]
    assert moved[1] == not_found(files["private"])
    # A destination outside its folders (or the top level) refuses the whole request.
    for outside in (laid_out.folder_id("private"), None, UNKNOWN_FOLDER):
        refused = await bulk(
            api, {"action": "move", "ids": [files["outbox"]], "folder_id": outside}, secret
        )
        details = (await assert_error(refused, 404, "folder_not_found"))["details"]
        assert details == {"field": "folder_id"}
    deleted = await results(
        api, {"action": "delete", "ids": [files["top"], files["inbox"]]}, secret
    )
    assert [result["ok"] for result in deleted] == [False, True]
    remaining = await folder_files(api, laid_out.token, outbox)
    assert sorted(file["id"] for file in remaining) == sorted([files["outbox"], files["inbox_sub"]])
    assert inbox  # the key's own folder stays, emptied of what moved


async def test_bodies_it_cannot_act_on_are_refused_before_any_file(api: Api) -> None:
    token = await api.user_with_session()
    kept = (await uploaded(api, b"kept", token=token))["id"]
    cases: list[tuple[Any, set[str]]] = [
        ({"ids": [kept]}, {"action"}),
        ({"action": "copy", "ids": [kept]}, {"action"}),
        ({"action": "delete"}, {"ids"}),
        ({"action": "delete", "ids": []}, {"ids"}),
        ({"action": "delete", "ids": kept}, {"ids"}),
        ({"action": "delete", "ids": [kept, 7]}, {"ids"}),
        ({"action": "delete", "ids": ["x" * 65]}, {"ids"}),
        ({"action": "move", "ids": [kept]}, {"folder_id"}),
        ({"action": "move", "ids": [kept], "folder_id": 3}, {"folder_id"}),
        ({"action": "delete", "ids": [kept], "folder_id": None}, {"folder_id"}),
        ({"action": "delete", "ids": [kept], "force": True}, {"force"}),
    ]
    for body, fields in cases:
        details = (
            await assert_error(await bulk(api, body, bearer(token)), 400, "validation_failed")
        )["details"]
        assert set(details) == fields, body
    too_many = await bulk(
        api, {"action": "delete", "ids": [kept] * (MAX_BULK_IDS + 1)}, bearer(token)
    )
    details = (await assert_error(too_many, 400, "too_many_ids"))["details"]
    assert details == {"max_ids": MAX_BULK_IDS, "ids": MAX_BULK_IDS + 1}
    await assert_error(
        await api.client.post(BULK, data=b"[1, 2]", headers=JSON | bearer(token)),
        400,
        "body_not_object",
    )
    await assert_error(
        await api.client.post(BULK, data=b"{", headers=JSON | bearer(token)), 400, "malformed_json"
    )
    reader = await api.create_key(token, permissions=["files.read"])
    refused = await bulk(
        api, {"action": "delete", "ids": [kept]}, {"X-API-Key": reader["secret_key"]}
    )
    await assert_error(refused, 403, "insufficient_permission")
    # Exactly the most ids is taken (the same id, acted on once).
    taken = await results(api, {"action": "delete", "ids": [kept] * MAX_BULK_IDS}, bearer(token))
    assert taken == [{"id": kept, "ok": True}] * MAX_BULK_IDS
