"""The vanity aliases resource: make one of a file or a folder (a slug chosen or picked, the
account's defaults), list newest first, read, change, delete; slugs unique across the service
ignoring case and the names kept for the service; who may do what; another account's alias
answering like an unknown one; the bound; an alias going with its target, its account, and the
kill switch; an upload that hands back a link; the audit trail. Over HTTP, on the fixtures' real
Redis (and the API suite's cluster run)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync

from service.api.context import POLICY
from service.config import Settings
from tests.support.aliases import (
    ALIASES,
    alias,
    alias_kept_before_the_bound,
    alias_keys,
    alias_part,
    create_alias,
    edit_alias,
    listed,
    public,
)
from tests.support.api import Api, assert_error, bearer
from tests.support.files import multipart, upload, uploaded
from tests.support.folders import SETTINGS, folder, patch
from tests.support.openapi import validator

UNKNOWN = "als_0000000000000000000000"
EVENTS = "/api/v1/audit-events"


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def events_of(api: Api, token: str, kind: str) -> list[dict[str, Any]]:
    params = {"type": kind} if kind else {}
    response = await api.client.get(EVENTS, params=params, headers=bearer(token))
    assert response.status == 200, await response.text()
    return (await response.json())["data"]["events"]


# -- the whole story ---------------------------------------------------------------------------


async def test_an_alias_of_a_file_is_made_read_listed_opened_and_deleted(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"hello", token=token)
    made = await alias(api, {"file_id": file["id"], "slug": "Hello-There"}, token=token)
    origin = str(api.client.make_url("")).rstrip("/")
    assert made == {
        "id": made["id"],
        "slug": "Hello-There",
        "url": f"{origin}/a/Hello-There",
        "target": {"type": "file", "id": file["id"]},
        "created_at": made["created_at"],
        "expires_at": None,
        "max_views": None,
        "views": 0,
        "password_protected": False,
        "enabled": True,
    }
    opened = await public(api, "/a/hello-there")  # the link answers in any case
    assert (opened.status, await opened.read()) == (200, b"hello")

    response = await api.client.get(f"{ALIASES}/{made['id']}", headers=bearer(token))
    answer = await response.json()
    validator("/components/schemas/AliasEnvelope").validate(answer)
    assert answer["data"] == {**made, "views": 1}
    assert await listed(api, token=token) == [{**made, "views": 1}]

    response = await api.client.delete(f"{ALIASES}/{made['id']}", headers=bearer(token))
    assert response.status == 200
    deleted = await response.json()
    validator("/components/schemas/DeletedAliasEnvelope").validate(deleted)
    assert deleted["data"]["id"] == made["id"]
    await assert_error(await public(api, "/a/Hello-There"), 404, "alias_not_found")
    await assert_error(
        await api.client.get(f"{ALIASES}/{made['id']}", headers=bearer(token)),
        404,
        "alias_not_found",
    )
    assert await listed(api, token=token) == []
    # the file itself is untouched
    assert (
        await api.client.get(f"/api/v1/files/{file['id']}", headers=bearer(token))
    ).status == 200


async def test_a_picked_slug_is_twelve_base62_characters_and_the_list_is_newest_first(
    api: Api, clock: Any
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    made = []
    for _ in range(5):
        made.append(await alias(api, {"file_id": file["id"]}, token=token))
        clock.advance(seconds=1)
    for item in made:
        assert re.fullmatch(r"[0-9A-Za-z]{12}", item["slug"])
    assert len({item["slug"].lower() for item in made}) == 5
    assert [item["id"] for item in await listed(api, token=token)] == [
        item["id"] for item in reversed(made)
    ]


async def test_the_url_is_made_from_the_public_url_when_it_is_set(make_api: Any) -> None:
    api = await make_api(public_url="https://files.example.com/x")
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    made = await alias(api, {"file_id": file["id"], "slug": "abc"}, token=token)
    assert made["url"] == "https://files.example.com/x/a/abc"


async def test_a_forwarded_scheme_is_believed_from_a_trusted_proxy_only(make_api: Any) -> None:
    import ipaddress

    trusting = await make_api(trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),))
    token = await trusting.user_with_session()
    file = await uploaded(trusting, b"x", token=token)
    headers = {**bearer(token), "X-Forwarded-Proto": "https", "Host": "files.example.com"}
    response = await trusting.client.post(
        ALIASES, json={"file_id": file["id"], "slug": "via-proxy"}, headers=headers
    )
    assert (await response.json())["data"]["url"] == "https://files.example.com/a/via-proxy"

    distrusting = await make_api()
    token = await distrusting.user_with_session("bob@example.com")
    file = await uploaded(distrusting, b"x", token=token)
    headers = {**bearer(token), "X-Forwarded-Proto": "https", "Host": "files.example.com"}
    response = await distrusting.client.post(
        ALIASES, json={"file_id": file["id"], "slug": "direct"}, headers=headers
    )
    assert (await response.json())["data"]["url"] == "http://files.example.com/a/direct"


# -- slugs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "slug",
    [
        "ab",
        "a" * 65,
        "has space",
        "dot.ted",
        "ümlaut",
        "slash/",
        "",
        7,
        None,
        "api",
        "Static",
        "LOGIN",
        "admin",
        "a",
        "well-known",
        "healthz",
    ],
)
async def test_a_slug_that_breaks_the_rules_or_is_kept_for_the_service_is_refused(
    api: Api, slug: Any
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    response = await create_alias(api, {"file_id": file["id"], "slug": slug}, token=token)
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) == {"slug"}
    assert await listed(api, token=token) == []


async def test_a_slug_is_one_across_accounts_whatever_its_case(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    mine = await uploaded(api, b"a", token=alice)
    theirs = await uploaded(api, b"b", token=bob)
    await alias(api, {"file_id": mine["id"], "slug": "Report"}, token=alice)
    for slug in ("report", "REPORT", "Report"):
        response = await create_alias(api, {"file_id": theirs["id"], "slug": slug}, token=bob)
        await assert_error(response, 409, "alias_taken")
    assert await listed(api, token=bob) == []
    assert await events_of(api, bob, "alias.created") == []  # its event was taken back


# -- fields and defaults -----------------------------------------------------------------------


async def test_bad_fields_are_named_each(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    body = {
        "file_id": file["id"],
        "expires_in_seconds": 59,
        "max_views": 0,
        "password": "abc",
        "enabled": "yes",
        "colour": "red",
    }
    error = await assert_error(await create_alias(api, body, token=token), 400, "validation_failed")
    assert set(error["details"]) == {
        "expires_in_seconds",
        "max_views",
        "password",
        "enabled",
        "colour",
    }
    both = {"file_id": file["id"], "folder_id": "fld_0000000000000000000000"}
    error = await assert_error(await create_alias(api, both, token=token), 400, "validation_failed")
    assert set(error["details"]) == {"file_id", "folder_id"}
    error = await assert_error(await create_alias(api, {}, token=token), 400, "validation_failed")
    assert set(error["details"]) == {"file_id"}
    assert "abc" not in str(error)


async def test_the_accounts_defaults_apply_when_left_out_and_null_overrides_them(
    api: Api, clock: Any
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    response = await patch(
        api,
        SETTINGS,
        {"default_alias_expires_in_seconds": 3600, "default_alias_max_views": 3},
        token=token,
    )
    assert response.status == 200
    defaulted = await alias(api, {"file_id": file["id"]}, token=token)
    assert defaulted["max_views"] == 3
    assert defaulted["expires_at"] is not None
    explicit = await alias(
        api, {"file_id": file["id"], "expires_in_seconds": None, "max_views": None}, token=token
    )
    assert (explicit["expires_at"], explicit["max_views"]) == (None, None)
    clock.advance(seconds=3600)
    await assert_error(await public(api, f"/a/{defaulted['slug']}"), 404, "alias_not_found")
    assert (await public(api, f"/a/{explicit['slug']}")).status == 200


async def test_an_alias_kept_with_an_expiry_past_year_9999_reads_lists_and_shows_in_the_trail(
    api: Api,
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    file = await uploaded(api, b"x", token=token)
    alias_id = await alias_kept_before_the_bound(api, user.id, file["id"], 10**12)
    response = await api.client.get(f"{ALIASES}/{alias_id}", headers=bearer(token))
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/AliasEnvelope").validate(answer)
    # The last second RFC 3339 writes, for an expiry some 31,700 years away.
    assert answer["data"]["expires_at"] == "9999-12-31T23:59:59Z"
    assert await listed(api, token=token) == [answer["data"]]
    assert await listed(api, file["id"], token=token) == [answer["data"]]
    for kind in ("", "alias.created"):
        (created,) = [e for e in await events_of(api, token, kind) if e["type"] == "alias.created"]
        assert created["changes"]["expires_at"] == "9999-12-31T23:59:59Z"


async def test_a_change_sets_each_field_and_a_new_slug_frees_the_old(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    made = await alias(api, {"file_id": file["id"], "slug": "first"}, token=token)
    response = await edit_alias(
        api,
        made["id"],
        {"slug": "second", "max_views": 9, "expires_in_seconds": 600, "password": "s3cret"},
        token=token,
    )
    assert response.status == 200, await response.text()
    changed = (await response.json())["data"]
    validator("/components/schemas/AliasEnvelope").validate({"success": True, "data": changed})
    assert changed["slug"] == "second" and changed["url"].endswith("/a/second")
    assert (changed["max_views"], changed["password_protected"]) == (9, True)
    assert changed["id"] == made["id"] and changed["created_at"] == made["created_at"]
    await assert_error(await public(api, "/a/first"), 404, "alias_not_found")
    await assert_error(await public(api, "/a/second"), 401, "alias_password_required")
    # the old slug is free again, for anyone
    await alias(api, {"file_id": file["id"], "slug": "first"}, token=token)

    response = await edit_alias(
        api,
        made["id"],
        {"password": None, "max_views": None, "expires_in_seconds": None},
        token=token,
    )
    changed = (await response.json())["data"]
    assert (changed["password_protected"], changed["max_views"], changed["expires_at"]) == (
        False,
        None,
        None,
    )
    assert (await public(api, "/a/second")).status == 200
    response = await edit_alias(api, made["id"], {"enabled": False}, token=token)
    assert (await response.json())["data"]["enabled"] is False
    await assert_error(await public(api, "/a/second"), 404, "alias_not_found")
    response = await edit_alias(api, made["id"], {"enabled": True, "slug": "SECOND"}, token=token)
    assert (await response.json())["data"]["slug"] == "SECOND"  # a change of case only
    assert (await public(api, "/a/second")).status == 200


async def test_a_new_slug_that_is_taken_changes_nothing(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    one = await alias(api, {"file_id": file["id"], "slug": "one"}, token=token)
    await alias(api, {"file_id": file["id"], "slug": "two"}, token=token)
    response = await edit_alias(api, one["id"], {"slug": "TWO", "max_views": 4}, token=token)
    await assert_error(response, 409, "alias_taken")
    after = await listed(api, token=token)
    assert {item["slug"] for item in after} == {"one", "two"}
    assert next(item for item in after if item["id"] == one["id"])["max_views"] is None
    assert (await public(api, "/a/one")).status == 200
    assert await events_of(api, token, "alias.changed") == []


# -- who may do what ---------------------------------------------------------------------------


async def test_permissions_making_one_needs_read_permission_on_its_target(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    docs = await folder(api, "Docs", token=token)

    async def key(*permissions: str) -> str:
        return (await api.create_key(token, permissions=list(permissions)))["secret_key"]

    writer = await key("aliases.write")
    response = await create_alias(api, {"file_id": file["id"]}, key=writer)
    error = await assert_error(response, 403, "insufficient_permission")
    assert error["details"]["required_permission"] == "files.read"
    response = await create_alias(api, {"folder_id": docs["id"]}, key=writer)
    error = await assert_error(response, 403, "insufficient_permission")
    assert error["details"]["required_permission"] == "folders.read"

    files_writer = await key("aliases.write", "files.read")
    made = await alias(api, {"file_id": file["id"]}, key=files_writer)
    await assert_error(
        await create_alias(api, {"folder_id": docs["id"]}, key=files_writer),
        403,
        "insufficient_permission",
    )
    reader = await key("aliases.read")
    assert [item["id"] for item in await listed(api, key=reader)] == [made["id"]]
    await assert_error(
        await edit_alias(api, made["id"], {"enabled": False}, key=reader),
        403,
        "insufficient_permission",
    )
    await assert_error(
        await api.client.get(ALIASES, headers={"X-API-Key": files_writer}),
        403,
        "insufficient_permission",
    )


async def test_another_accounts_alias_and_target_answer_like_unknown_ones(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    file = await uploaded(api, b"x", token=alice)
    docs = await folder(api, "Docs", token=alice)
    made = await alias(api, {"file_id": file["id"], "slug": "alices"}, token=alice)
    for alias_id in (made["id"], UNKNOWN, "als_nope", "nothing"):
        for method in ("GET", "PATCH", "DELETE"):
            response = await api.client.request(
                method, f"{ALIASES}/{alias_id}", json={"enabled": False}, headers=bearer(bob)
            )
            await assert_error(response, 404, "alias_not_found")
    error = await assert_error(
        await create_alias(api, {"file_id": file["id"]}, token=bob), 404, "file_not_found"
    )
    assert error["details"] == {"field": "file_id"}
    error = await assert_error(
        await create_alias(api, {"folder_id": docs["id"]}, token=bob), 404, "folder_not_found"
    )
    assert error["details"] == {"field": "folder_id"}
    assert (await public(api, "/a/alices")).status == 200  # untouched


async def test_the_bound_of_aliases_per_account(make_api: Any) -> None:
    api = await make_api(max_aliases_per_account=2)
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await alias(api, {"file_id": file["id"]}, token=token)
    await alias(api, {"file_id": file["id"]}, token=token)
    error = await assert_error(
        await create_alias(api, {"file_id": file["id"]}, token=token), 409, "alias_limit_reached"
    )
    assert error["details"] == {"max_aliases": 2}


# -- with their target, their account, the kill switch -----------------------------------------


async def test_deleting_a_file_deletes_its_aliases_with_an_event_each(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    kept = await uploaded(api, b"kept", token=token)
    gone = await uploaded(api, b"gone", token=token)
    await alias(api, {"file_id": kept["id"], "slug": "kept"}, token=token)
    first = await alias(api, {"file_id": gone["id"], "slug": "gone-1"}, token=token)
    await alias(api, {"file_id": gone["id"], "slug": "gone-2"}, token=token)
    response = await api.client.delete(f"/api/v1/files/{gone['id']}", headers=bearer(token))
    assert response.status == 200
    for slug in ("gone-1", "gone-2"):
        await assert_error(await public(api, f"/a/{slug}"), 404, "alias_not_found")
    assert alias_keys(redis_client) == {"fh:alias:kept"}
    assert [item["slug"] for item in await listed(api, token=token)] == ["kept"]
    deleted = await events_of(api, token, "alias.deleted")
    assert {event["target"]["slug"] for event in deleted} == {"gone-1", "gone-2"}
    assert all(event["changes"] == {"reason": "target_deleted"} for event in deleted)
    assert first["id"] in {event["target"]["alias_id"] for event in deleted}


async def test_deleting_a_folder_with_its_subtree_deletes_every_alias_in_it(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    top = await folder(api, "top", token=token)
    inner = await folder(api, "inner", top["id"], token=token)
    deep_file = await uploaded(api, b"deep", token=token, folder_id=inner["id"])
    outside = await uploaded(api, b"outside", token=token)
    await alias(api, {"folder_id": top["id"], "slug": "top"}, token=token)
    await alias(api, {"folder_id": inner["id"], "slug": "inner"}, token=token)
    await alias(api, {"file_id": deep_file["id"], "slug": "deep"}, token=token)
    await alias(api, {"file_id": outside["id"], "slug": "outside"}, token=token)
    response = await api.client.delete(
        f"/api/v1/folders/{top['id']}?recursive=true", headers=bearer(token)
    )
    assert response.status == 200
    assert alias_keys(redis_client) == {"fh:alias:outside"}
    assert [item["slug"] for item in await listed(api, token=token)] == ["outside"]


async def test_deleting_the_account_leaves_no_alias_behind(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    for n in range(3):
        file = await uploaded(api, b"x", token=alice)
        await alias(api, {"file_id": file["id"], "slug": f"alice-{n}"}, token=alice)
    theirs = await uploaded(api, b"x", token=bob)
    await alias(api, {"file_id": theirs["id"], "slug": "bobs"}, token=bob)
    await api.app[POLICY].users.delete_user("alice@example.com")
    assert alias_keys(redis_client) == {"fh:alias:bobs"}
    await assert_error(await public(api, "/a/alice-0"), 404, "alias_not_found")


async def test_the_kill_switch_turns_every_alias_off_and_on_again_without_changing_them(
    api: Api,
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await alias(api, {"file_id": file["id"], "slug": "first"}, token=token)
    await alias(api, {"file_id": file["id"], "slug": "second", "max_views": 5}, token=token)
    assert (
        await patch(api, SETTINGS, {"public_aliases_enabled": False}, token=token)
    ).status == 200
    for slug in ("first", "second"):
        await assert_error(await public(api, f"/a/{slug}"), 404, "alias_not_found")
    # one made while it is off is off too
    await alias(api, {"file_id": file["id"], "slug": "third"}, token=token)
    await assert_error(await public(api, "/a/third"), 404, "alias_not_found")
    assert all(item["enabled"] for item in await listed(api, token=token))
    assert (await patch(api, SETTINGS, {"public_aliases_enabled": True}, token=token)).status == 200
    for slug in ("first", "second", "third"):
        assert (await public(api, f"/a/{slug}")).status == 200


async def test_a_kill_switch_walk_cut_short_is_finished_at_the_next_start(
    api: Api, settings: Settings, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await alias(api, {"file_id": file["id"], "slug": "cut"}, token=token)
    user_id = (await (await api.client.get("/api/v1/auth/session", headers=bearer(token))).json())[
        "data"
    ]["user"]["id"]
    # The setting changed and the walk was noted, but the worker died before it walked.
    redis_client.hset(f"fh:{{{user_id}}}:settings", "public_aliases_enabled", "0")
    redis_client.sadd("fh:alias-switches", user_id)
    assert (await public(api, "/a/cut")).status == 200
    await api.app[POLICY].aliases.finish_all()
    await assert_error(await public(api, "/a/cut"), 404, "alias_not_found")
    assert not redis_client.sismember("fh:alias-switches", user_id)


# -- an upload that hands back a link ----------------------------------------------------------


async def test_an_upload_with_alias_true_hands_back_a_link(api: Api) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token, permissions=["files.write", "aliases.write"]))["secret_key"]
    for before in (True, False):
        body, headers = multipart(b"shot", extra=b"" if before else alias_part())
        if before:
            field = alias_part()
            body = field + body
        response = await api.client.post(
            "/api/v1/files", data=body, headers={**headers, "X-API-Key": key}
        )
        assert response.status == 201, await response.text()
        answer = await response.json()
        validator("/components/schemas/FileEnvelope").validate(answer)
        link = answer["data"]["alias"]
        assert set(link) == {"id", "slug", "url"} and link["url"].endswith(f"/a/{link['slug']}")
        opened = await public(api, f"/a/{link['slug']}")
        assert (opened.status, await opened.read()) == (200, b"shot")


async def test_an_upload_asking_for_an_alias_without_aliases_write_keeps_nothing(api: Api) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token, permissions=["files.write", "files.read"]))["secret_key"]
    for extra in (alias_part(), alias_part("yes")):
        body, headers = multipart(b"shot", extra=extra)
        response = await api.client.post(
            "/api/v1/files", data=body, headers={**headers, "X-API-Key": key}
        )
        assert response.status in (400, 403)
    files = await (await api.client.get("/api/v1/files", headers=bearer(token))).json()
    assert files["data"]["files"] == []
    plain = await upload(api, b"plain", key=key)
    assert "alias" not in (await plain.json())["data"]


# -- the audit trail ---------------------------------------------------------------------------


async def test_each_change_is_an_event_naming_the_alias_and_never_its_password(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    made = await alias(
        api, {"file_id": file["id"], "slug": "audited", "password": "hunter22"}, token=token
    )
    await edit_alias(api, made["id"], {"slug": "renamed", "password": "hunter23"}, token=token)
    await edit_alias(api, made["id"], {}, token=token)  # nothing changes: nothing recorded
    await api.client.delete(f"{ALIASES}/{made['id']}", headers=bearer(token))
    created = await events_of(api, token, "alias.created")
    changed = await events_of(api, token, "alias.changed")
    deleted = await events_of(api, token, "alias.deleted")
    assert [len(created), len(changed), len(deleted)] == [1, 1, 1]
    target = {"type": "alias", "alias_id": made["id"], "target_id": file["id"]}
    assert created[0]["target"] == {**target, "slug": "audited"}
    assert created[0]["changes"]["password_protected"] is True
    assert changed[0]["target"] == {**target, "slug": "audited"}
    assert changed[0]["changes"] == {"slug": "renamed", "password_changed": True}
    assert deleted[0]["target"] == {**target, "slug": "renamed"}
    assert created[0]["actor"]["type"] == "session"
    trail = str(await events_of(api, token, ""))
    assert "hunter22" not in trail and "hunter23" not in trail and "$2b$" not in trail


async def test_a_kill_switch_whose_answer_failed_is_finished_by_asking_again(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await alias(api, {"file_id": file["id"], "slug": "again"}, token=token)
    user_id = (await (await api.client.get("/api/v1/auth/session", headers=bearer(token))).json())[
        "data"
    ]["user"]["id"]
    redis_client.hset(f"fh:{{{user_id}}}:settings", "public_aliases_enabled", "0")
    redis_client.sadd("fh:alias-switches", user_id)
    assert (await public(api, "/a/again")).status == 200
    assert (
        await patch(api, SETTINGS, {"public_aliases_enabled": False}, token=token)
    ).status == 200
    await assert_error(await public(api, "/a/again"), 404, "alias_not_found")
