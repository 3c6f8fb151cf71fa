"""The audit trail of one key or one session: ``GET /api/v1/audit-events?key_id=`` and
``?session_id=`` keep the events that name it, as the one that acted (a file a key uploaded, a
key a session created) or as the one acted on (a key edited, a session ended), page by page and
with the type filter; an id of another account's or of nothing finds nothing; a bad id is 400.

Driven over HTTP against the real Redis server of the fixtures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.domain import credentials
from tests.support.api import Api, assert_error, bearer, my_session_id
from tests.support.files import FILES_URL, uploaded
from tests.support.keys import EMAIL, edited, rolled

EVENTS = "/api/v1/audit-events"


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def listed(api: Api, token: str, **query: str) -> list[dict[str, Any]]:
    """Every event the query keeps, newest first, read two at a time through the cursors."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": "2", **query, **({"cursor": cursor} if cursor else {})}
        response = await api.client.get(EVENTS, params=params, headers=bearer(token))
        assert response.status == 200, await response.text()
        data = (await response.json())["data"]
        found += data["events"]
        cursor = data["next_cursor"]
        if cursor is None:
            return found


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


async def test_a_key_s_events_are_what_was_done_to_it_and_what_it_did(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, name="deploy", permissions=["files.read", "files.write"])
    other = await api.create_key(token, name="other", permissions=["files.write"])
    secret = key["secret_key"]
    stored = await uploaded(api, b"by the key", key=secret, filename="a.txt")
    await uploaded(api, b"by the other key", key=other["secret_key"], filename="b.txt")
    await uploaded(api, b"by the session", token=token, filename="c.txt")
    edited_view = await edited(api, token, key["id"], {"name": "deploy bot"})
    assert edited_view["name"] == "deploy bot"
    await edited(api, token, key["id"], {"enabled": False})
    await edited(api, token, key["id"], {"enabled": True})
    new_secret = (await rolled(api, token, key["id"]))["secret_key"]
    deleted = await api.client.delete(
        f"{FILES_URL}/{stored['id']}", headers={"X-API-Key": new_secret}
    )
    assert deleted.status == 200, await deleted.text()

    events = await listed(api, token, key_id=key["id"])

    assert kinds(events) == [
        "file.deleted",
        "key.rolled",
        "key.enabled",
        "key.disabled",
        "key.edited",
        "file.uploaded",
        "key.created",
    ]
    by_the_key = [e for e in events if e["type"].startswith("file.")]
    assert {e["actor"]["key_id"] for e in by_the_key} == {key["id"]}
    assert {e["target"]["file_id"] for e in by_the_key} == {stored["id"]}
    to_the_key = [e for e in events if e["type"].startswith("key.")]
    assert {e["target"]["key_id"] for e in to_the_key} == {key["id"]}
    # With the type filter too: both must hold.
    uploads = await listed(api, token, key_id=key["id"], type="file.uploaded")
    assert [e["id"] for e in uploads] == [e["id"] for e in events if e["type"] == "file.uploaded"]
    assert kinds(await listed(api, token, key_id=other["id"])) == ["file.uploaded", "key.created"]


async def test_a_revoked_key_s_events_are_still_found(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, name="old", permissions=["files.write"])
    await uploaded(api, b"before it went", key=key["secret_key"])
    revoked = await api.client.delete(f"/api/v1/keys/{key['id']}", headers=bearer(token))
    assert revoked.status == 200, await revoked.text()

    assert kinds(await listed(api, token, key_id=key["id"])) == [
        "key.revoked",
        "file.uploaded",
        "key.created",
    ]


async def test_a_session_s_events_are_its_sign_in_what_it_did_and_its_end(api: Api) -> None:
    first = await api.user_with_session(EMAIL)
    second = await api.login(EMAIL)
    first_id, second_id = await my_session_id(api, first), await my_session_id(api, second)
    key = await api.create_key(second, name="made by the second")
    await uploaded(api, b"by the first", token=first)
    ended = await api.client.delete(f"/api/v1/auth/sessions/{second_id}", headers=bearer(first))
    assert ended.status == 200, await ended.text()

    seconds = await listed(api, first, session_id=second_id)
    firsts = await listed(api, first, session_id=first_id)

    assert kinds(seconds) == ["session.ended", "key.created", "login.succeeded"]
    assert seconds[0]["actor"]["session_id"] == first_id  # ended by the first: it names both
    assert seconds[0]["target"]["session_id"] == second_id
    assert seconds[1]["target"]["key_id"] == key["id"]
    assert kinds(firsts) == ["session.ended", "file.uploaded", "login.succeeded"]
    both = await listed(api, first, session_id=second_id, key_id=key["id"])
    assert kinds(both) == ["key.created"]


async def test_an_id_of_nothing_or_of_another_account_finds_nothing(api: Api) -> None:
    alice = await api.user_with_session(EMAIL)
    bob = await api.user_with_session("bob@example.com")
    bobs_key = await api.create_key(bob, name="bob's", permissions=["files.write"])
    await uploaded(api, b"bob's file", key=bobs_key["secret_key"])

    assert await listed(api, alice, key_id=bobs_key["id"]) == []
    assert await listed(api, alice, key_id=credentials.new_id("key")) == []
    assert await listed(api, alice, session_id=await my_session_id(api, bob)) == []


async def test_a_name_that_spells_out_another_key_s_id_is_not_that_key(api: Api) -> None:
    token = await api.user_with_session(EMAIL)
    key = await api.create_key(token, name="the real one")
    await api.create_key(token, name=f'"key_id":"{key["id"]}"')

    events = await listed(api, token, key_id=key["id"])

    assert [e["target"]["name"] for e in events] == ["the real one"]


@pytest.mark.parametrize(
    "query",
    [
        "key_id=",
        "key_id=key_",
        "key_id=key_abc",
        "key_id=fil_" + "A" * 22,
        "key_id=key_" + "A" * 21 + "%22",
        "key_id=KEY_" + "A" * 22,
        "key_id=key_" + "A" * 22 + "&key_id=key_" + "B" * 22,
        "session_id=ses_short",
        "session_id=key_" + "A" * 22,
        "session_id=ses_" + "A" * 22 + "&session_id=ses_" + "A" * 22,
    ],
)
async def test_a_bad_key_or_session_id_is_400(api: Api, query: str) -> None:
    token = await api.user_with_session(EMAIL)
    response = await api.client.get(f"{EVENTS}?{query}", headers=bearer(token))
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) == {query.partition("=")[0]}
