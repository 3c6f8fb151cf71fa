"""Uploader configurations, ``POST /api/v1/uploaders``: a ShareX custom uploader whose exact
request (built from its own fields) uploads and whose URL template gives a link that downloads
the same bytes; a curl script, run with ``sh`` against this real TCP server, doing the same;
the key made for them may only upload (not even ask whose it is), bound to the folder asked
for, aliasing with ``aliases.write`` only when asked; a session only, counted toward the key
limit and audited; a wrong body refused by field."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis as redis_sync

from service.api.context import REMOVALS_AT_START
from tests.support.aliases import ALIASES, alias, alias_part
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import parse_iso
from tests.support.files import uploaded
from tests.support.folders import folder
from tests.support.keys import as_an_earlier_release_made_it
from tests.support.openapi import validator

UPLOADERS = "/api/v1/uploaders"
FILES = "/api/v1/files"
EVENTS = "/api/v1/audit-events"
ANSWER = "/paths/~1api~1v1~1uploaders/post/responses/201/content/application~1json/schema"
_JSON_FIELD = re.compile(r"\{json:([A-Za-z0-9_.]+)\}")


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


def origin(api: Api) -> str:
    return str(api.client.make_url("")).rstrip("/")


async def uploader(api: Api, token: str, **body: Any) -> dict[str, Any]:
    response = await api.client.post(UPLOADERS, json=body, headers=bearer(token))
    assert response.status == 201, await response.text()
    answer = await response.json()
    validator(ANSWER).validate(answer)
    return answer["data"]


def json_path(answer: Any, path: str) -> Any:
    for part in path.split("."):
        answer = answer[part]
    return answer


async def upload_as_sharex(config: dict[str, Any], data: bytes, name: str) -> Any:
    """The request ShareX sends for ``config``: its method, URL, headers, its arguments as
    form fields and the file under its file form name; the parsed answer."""
    assert config["Body"] == "MultipartFormData"
    form = aiohttp.FormData()
    for field, value in config.get("Arguments", {}).items():
        form.add_field(field, value)
    form.add_field(config["FileFormName"], data, filename=name, content_type="image/png")
    async with aiohttp.ClientSession() as session:
        async with session.request(
            config["RequestMethod"], config["RequestURL"], data=form, headers=config["Headers"]
        ) as response:
            assert response.status == 201, await response.text()
            return await response.json()


async def fetch(link: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """``GET`` of an absolute link, as a browser or curl would follow it."""
    async with aiohttp.ClientSession() as session:
        async with session.get(link, headers=headers or {}) as response:
            return response.status, await response.read()


def sharex_link(config: dict[str, Any], answer: Any) -> str:
    """ShareX's URL template filled from the answer, as ShareX fills ``{json:…}``."""
    return _JSON_FIELD.sub(lambda match: str(json_path(answer, match.group(1))), config["URL"])


# -- ShareX ------------------------------------------------------------------------------------


async def test_a_sharex_uploader_uploads_with_exactly_the_request_it_describes(api: Api) -> None:
    token = await api.user_with_session()
    made = await uploader(api, token, kind="sharex", name="My laptop")
    key = made["key"]
    assert made["filename"] == "filehost-My-laptop.sxcu"
    assert key["name"] == "My laptop" and key["permissions"] == ["files.write"]
    assert key["folder_ids"] is None
    config = json.loads(made["content"])
    assert config["RequestURL"] == f"{origin(api)}/api/v1/files"
    assert config["Headers"] == {"X-API-Key": key["secret_key"]}
    assert config["DestinationType"] == "ImageUploader, TextUploader, FileUploader"
    assert config["FileFormName"] == "file" and "Arguments" not in config
    assert config["URL"] == "{json:data.url}"  # absolute, as the answer gives it
    assert config["ErrorMessage"] == "{json:error.message}"

    answer = await upload_as_sharex(config, b"\x89PNG shot", "shot.png")
    link = sharex_link(config, answer)
    assert link == f"{origin(api)}/api/v1/files/{answer['data']['id']}/content"
    assert await fetch(link, bearer(token)) == (200, b"\x89PNG shot")
    # The key may only upload: listing and reading are refused.
    for path in (FILES, f"{FILES}/{answer['data']['id']}/content"):
        response = await api.client.get(path, headers={"X-API-Key": key["secret_key"]})
        await assert_error(response, 403, "insufficient_permission")


async def test_with_an_alias_sharex_copies_a_public_link_and_its_key_may_alias(api: Api) -> None:
    token = await api.user_with_session()
    made = await uploader(api, token, kind="sharex", name="shots", alias=True)
    assert made["key"]["permissions"] == ["files.write", "aliases.write"]
    config = json.loads(made["content"])
    assert config["Arguments"] == {"alias": "true"}
    assert config["URL"] == "{json:data.alias.url}"

    answer = await upload_as_sharex(config, b"aliased bytes", "a.png")
    link = sharex_link(config, answer)
    assert link == f"{origin(api)}/a/{answer['data']['alias']['slug']}"
    assert await fetch(link) == (200, b"aliased bytes")  # no credential: the public link


async def test_a_key_without_aliases_write_gets_no_alias(api: Api) -> None:
    token = await api.user_with_session()
    made = await uploader(api, token, kind="sharex", name="plain")
    config = json.loads(made["content"])
    config["Arguments"] = {"alias": "true"}  # asked for all the same
    form = aiohttp.FormData()
    form.add_field("alias", "true")
    form.add_field("file", b"x", filename="x.png")
    async with aiohttp.ClientSession() as session:
        async with session.post(
            config["RequestURL"], data=form, headers=config["Headers"]
        ) as response:
            await assert_error(response, 403, "insufficient_permission")


async def test_an_uploaders_key_may_upload_and_alias_its_upload_and_nothing_else(
    api: Api,
) -> None:
    """Upload-only is the permission check's, whatever the key's permission names: with a
    file's id (a folder alias's listing shows them) or an alias's, the key changes nothing."""
    token = await api.user_with_session()
    private = await uploaded(api, b"private bytes", token=token)
    guarded = await alias(
        api, {"file_id": private["id"], "password": "a long password", "max_views": 1}, token=token
    )
    made = await uploader(api, token, kind="sharex", name="shots", alias=True)
    assert made["key"]["uploader"] == "sharex"
    key = made["key"]["secret_key"]
    mine = await uploaded(api, b"shot", key=key, extra=alias_part())
    assert mine["alias"]["slug"]

    async def refused(method: str, path: str, body: Any = None) -> None:
        response = await api.client.request(method, path, json=body, headers={"X-API-Key": key})
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"]["upload_only"] is True

    for file_id in (private["id"], mine["id"]):
        await refused("PATCH", f"{FILES}/{file_id}", {"name": "renamed"})
        await refused("PATCH", f"{FILES}/{file_id}", {"folder_id": None})
        await refused("DELETE", f"{FILES}/{file_id}")
    for alias_id in (guarded["id"], mine["alias"]["id"]):
        await refused("PATCH", f"{ALIASES}/{alias_id}", {"password": None, "max_views": None})
        await refused("DELETE", f"{ALIASES}/{alias_id}")
    await refused("POST", ALIASES, {"file_id": private["id"]})
    # What it holds no permission for is refused as upload-only too, not as a permission to add.
    await refused("GET", FILES)
    await refused("GET", f"{FILES}/{mine['id']}/content")
    await refused("GET", "/api/v1/folders")
    # Nothing changed: the file is there, its alias still asks for its password.
    response = await api.client.get(f"{FILES}/{private['id']}", headers=bearer(token))
    assert (await response.json())["data"]["name"] == private["name"]
    response = await api.client.get(f"{ALIASES}/{guarded['id']}", headers=bearer(token))
    shown = (await response.json())["data"]
    assert shown["password_protected"] is True and shown["max_views"] == 1

    # Given every permission by its owner, it still may only upload; listed as an uploader's.
    response = await api.client.patch(
        f"/api/v1/keys/{made['key']['id']}",
        json={"permissions": ["files.read", "files.write", "aliases.read", "aliases.write"]},
        headers=bearer(token),
    )
    assert response.status == 200, await response.text()
    assert (await response.json())["data"]["uploader"] == "sharex"
    await refused("GET", FILES)
    await refused("DELETE", f"{FILES}/{private['id']}")
    assert (await uploaded(api, b"another", key=key))["size"] == 7
    listed = await api.client.get("/api/v1/keys", headers=bearer(token))
    [shown] = (await listed.json())["data"]["keys"]
    assert shown["uploader"] == "sharex"
    # A gateway is never told it may pass: what it forwards is not an upload to this service.
    verify = await api.client.get(
        "/api/v1/auth/verify", headers={"X-API-Key": key, "X-Required-Permission": "files.write"}
    )
    await assert_error(verify, 403, "insufficient_permission")


async def test_an_uploaders_key_is_not_told_whose_account_it_is(api: Api) -> None:
    """Its configuration travels, and no uploader asks who it is: a leaked one names no email,
    whether sent as a key or as a Bearer token; an ordinary key is still answered."""
    token = await api.user_with_session("alice@example.com")
    made = (await uploader(api, token, kind="curl", name="shell"))["key"]
    for headers in ({"X-API-Key": made["secret_key"]}, bearer(made["secret_key"])):
        response = await api.client.get("/api/v1/auth/session", headers=headers)
        error = await assert_error(response, 403, "insufficient_permission")
        assert error["details"] == {"upload_only": True}
        assert "alice" not in await response.text()
    ordinary = (await api.create_key(token, permissions=["files.write"]))["secret_key"]
    response = await api.client.get("/api/v1/auth/session", headers={"X-API-Key": ordinary})
    assert (await response.json())["data"]["user"]["email"] == "alice@example.com"


async def test_keys_uploaders_made_before_the_mark_are_made_upload_only_at_the_next_start(
    api: Api, make_api: Any, tmp_path: Path, redis_client: redis_sync.Redis
) -> None:
    """A deployment upgraded: the keys its uploaders already hold are found by their
    ``key.created`` event and marked, once, recorded as ``key.edited``."""
    await api.app[REMOVALS_AT_START]
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    made = (await uploader(api, token, kind="curl", name="old laptop"))["key"]
    ordinary = await api.create_key(token, permissions=["files.read", "files.write"])
    as_an_earlier_release_made_it(redis_client, user.id, made)
    key = {"X-API-Key": made["secret_key"]}
    first = await uploaded(api, b"one", key=made["secret_key"])
    response = await api.client.delete(f"{FILES}/{first['id']}", headers=key)
    assert response.status == 200, "the earlier release's key deletes"

    restarted = await make_api(data_dir=tmp_path)
    await restarted.app[REMOVALS_AT_START]
    second = await uploaded(restarted, b"two", key=made["secret_key"])
    response = await restarted.client.delete(f"{FILES}/{second['id']}", headers=key)
    assert (await assert_error(response, 403, "insufficient_permission"))["details"]["upload_only"]
    keys = await restarted.client.get("/api/v1/keys", headers=bearer(token))
    shown = {key["id"]: key["uploader"] for key in (await keys.json())["data"]["keys"]}
    assert shown == {made["id"]: "curl", ordinary["id"]: None}
    response = await restarted.client.get(
        EVENTS, params={"type": "key.edited"}, headers=bearer(token)
    )
    [edited] = (await response.json())["data"]["events"]
    assert edited["target"]["key_id"] == made["id"]
    assert edited["changes"] == {"uploader": "curl"}
    assert redis_client.exists("fh:upgraded:uploader-keys")


# -- curl --------------------------------------------------------------------------------------


async def run_script(script: Path, *files: Path) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        "sh",
        str(script),
        *map(str, files),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    return process.returncode or 0, out.decode(), err.decode()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize("alias", [True, False])
async def test_the_curl_script_uploads_each_file_and_prints_a_link_to_its_bytes(
    api: Api, tmp_path: Path, alias: bool
) -> None:
    token = await api.user_with_session()
    made = await uploader(api, token, kind="curl", name="shell", alias=alias)
    assert made["filename"] == "filehost-shell.sh"
    content = made["content"]
    assert content.startswith("#!/bin/sh\n") and "\nset -eu\n" in content
    assert made["key"]["secret_key"] in content
    script = tmp_path / made["filename"]
    script.write_text(content)
    first = tmp_path / 'odd; name, "quoted".txt'
    first.write_bytes(b"first file\n")
    second = tmp_path / "second.bin"
    second.write_bytes(bytes(range(256)))

    status, out, err = await run_script(script, first, second)
    assert status == 0, err
    links = out.splitlines()
    assert len(links) == 2, out
    headers = {} if alias else bearer(token)
    for link, path in zip(links, (first, second), strict=True):
        if alias:
            assert re.fullmatch(rf"{re.escape(origin(api))}/a/[A-Za-z0-9]{{10,}}", link), link
        else:
            assert re.fullmatch(rf"{re.escape(origin(api))}{FILES}/fil_\w+/content", link), link
        assert await fetch(link, headers) == (200, path.read_bytes())
    listed = await api.client.get(FILES, headers=bearer(token))
    names = {file["name"] for file in (await listed.json())["data"]["files"]}
    # curl sends a double quote in a file name as %22, as browsers do: read back as one.
    assert names == {first.name, second.name}


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_the_curl_script_stops_at_a_refusal_and_without_files(
    api: Api, tmp_path: Path
) -> None:
    token = await api.user_with_session()
    made = await uploader(api, token, kind="curl", name="revoked")
    script = tmp_path / made["filename"]
    script.write_text(made["content"])
    status, _, err = await run_script(script)
    assert status == 2 and "usage" in err
    response = await api.client.delete(f"/api/v1/keys/{made['key']['id']}", headers=bearer(token))
    assert response.status == 200
    data = tmp_path / "f.txt"
    data.write_bytes(b"x")
    status, out, err = await run_script(script, data)
    # The service's own words (the key's revocation, and when), not only curl's status.
    assert status == 1 and out == ""
    said = rf"{re.escape(str(data))}: refused, HTTP 401: The API key was revoked at \S+Z\.\n"
    assert re.fullmatch(said, err), err


# -- the key -----------------------------------------------------------------------------------


async def test_an_uploader_bound_to_a_folder_uploads_into_it(api: Api) -> None:
    token = await api.user_with_session()
    inbox = await folder(api, "Inbox", token=token)
    made = await uploader(api, token, kind="sharex", name="inbox", folder_id=inbox["id"])
    assert made["key"]["folder_ids"] == [inbox["id"]]
    answer = await upload_as_sharex(json.loads(made["content"]), b"filed", "f.png")
    assert answer["data"]["folder_id"] == inbox["id"]
    # Another folder is out of its reach.
    other = await folder(api, "Other", token=token)
    form = aiohttp.FormData()
    form.add_field("folder_id", other["id"])
    form.add_field("file", b"x", filename="x.png")
    secret = {"X-API-Key": made["key"]["secret_key"]}
    response = await api.client.post(FILES, data=form, headers=secret)
    await assert_error(response, 404, "folder_not_found")


async def test_a_folder_not_the_accounts_is_404_naming_folder_id(api: Api) -> None:
    token = await api.user_with_session()
    stranger = await api.user_with_session("mallory@example.com")
    theirs = await folder(api, "Theirs", token=stranger)
    refused = []
    for folder_id in (theirs["id"], "fld_0000000000000000000000", "not-a-folder"):
        response = await api.client.post(
            UPLOADERS,
            json={"kind": "curl", "name": "x", "folder_id": folder_id},
            headers=bearer(token),
        )
        refused.append(await assert_error(response, 404, "folder_not_found"))
    assert all(error == refused[0] for error in refused)
    assert refused[0]["details"] == {"field": "folder_id"}
    keys = await api.client.get("/api/v1/keys", headers=bearer(token))
    assert (await keys.json())["data"]["keys"] == []  # no key was made


async def test_the_key_is_audited_and_counts_toward_the_key_limit(
    make_api: Any, tmp_path: Path
) -> None:
    api = await make_api(data_dir=tmp_path, max_keys_per_account=1)
    token = await api.user_with_session()
    made = await uploader(api, token, kind="curl", name="only one")
    response = await api.client.post(
        UPLOADERS, json={"kind": "sharex", "name": "one more"}, headers=bearer(token)
    )
    await assert_error(response, 409, "key_limit_reached")
    response = await api.client.get(EVENTS, params={"type": "key.created"}, headers=bearer(token))
    (event,) = (await response.json())["data"]["events"]
    assert event["target"]["key_id"] == made["key"]["id"]
    assert event["changes"]["uploader"] == "curl"
    assert event["changes"]["permissions"] == ["files.write"]
    assert made["key"]["secret_key"] not in json.dumps(event)


# -- who may, and what is refused ---------------------------------------------------------------


async def test_an_api_key_is_refused_like_on_every_session_only_route(api: Api) -> None:
    token = await api.user_with_session()
    every = ["files.read", "files.write", "keys.read", "keys.write", "aliases.write"]
    key = await api.create_key(token, permissions=every)
    response = await api.client.post(
        UPLOADERS,
        json={"kind": "sharex", "name": "x"},
        headers={"X-API-Key": key["secret_key"]},
    )
    refused = await assert_error(response, 403, "session_required")
    response = await api.client.post(
        "/api/v1/keys", json={"name": "x"}, headers={"X-API-Key": key["secret_key"]}
    )
    assert await assert_error(response, 403, "session_required") == refused
    response = await api.client.post(UPLOADERS, json={"kind": "sharex", "name": "x"})
    assert response.status == 401
    # Forward-auth maps the route as the key endpoints: a key never passes.
    verify = await api.client.get(
        "/api/v1/auth/verify",
        headers={
            "X-API-Key": key["secret_key"],
            "X-Original-Method": "POST",
            "X-Original-URI": UPLOADERS,
        },
    )
    await assert_error(verify, 403, "session_required")


async def test_the_key_lives_expires_days_else_the_accounts_default(api: Api) -> None:
    token = await api.user_with_session()

    def lifetime(key: dict[str, Any]) -> timedelta:
        return parse_iso(key["expires_at"]) - parse_iso(key["created_at"])

    assert lifetime((await uploader(api, token, kind="curl", name="a"))["key"]) == timedelta(90)
    made = await uploader(api, token, kind="sharex", name="b", expires_days=365)
    assert lifetime(made["key"]) == timedelta(365)
    changed = await api.client.patch(
        "/api/v1/settings", json={"default_key_expires_days": 7}, headers=bearer(token)
    )
    assert changed.status == 200, await changed.text()
    assert lifetime((await uploader(api, token, kind="curl", name="c"))["key"]) == timedelta(7)
    made = await uploader(api, token, kind="curl", name="d", expires_days=30)
    assert lifetime(made["key"]) == timedelta(30)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"name": "x"}, {"kind"}),
        ({"kind": "flameshot", "name": "x"}, {"kind"}),
        ({"kind": "sharex"}, {"name"}),
        ({"kind": "sharex", "name": "   "}, {"name"}),
        ({"kind": "sharex", "name": "a\x07b"}, {"name"}),
        ({"kind": "sharex", "name": "x" * 101}, {"name"}),
        ({"kind": "curl", "name": "x", "alias": "yes"}, {"alias"}),
        ({"kind": "curl", "name": "x", "folder_id": 7}, {"folder_id"}),
        ({"kind": "curl", "name": "x", "expires_days": 0}, {"expires_days"}),
        ({"kind": "curl", "name": "x", "expires_days": "7"}, {"expires_days"}),
        ({"kind": "curl", "name": "x", "expires_days": None}, {"expires_days"}),
        ({"kind": "curl", "name": "x", "lifetime": 7}, {"lifetime"}),
        ({"kind": 1, "name": 2}, {"kind", "name"}),
    ],
)
async def test_a_wrong_body_is_400_naming_each_field(
    api: Api, body: dict[str, Any], fields: set[str]
) -> None:
    token = await api.user_with_session()
    response = await api.client.post(UPLOADERS, json=body, headers=bearer(token))
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) == fields
    keys = await api.client.get("/api/v1/keys", headers=bearer(token))
    assert (await keys.json())["data"]["keys"] == []


async def test_the_file_name_is_safe_whatever_the_name(api: Api) -> None:
    token = await api.user_with_session()
    for name, expected in (
        ("Résumé shots", "filehost-Resume-shots.sxcu"),
        ("../../etc/passwd", "filehost-etc-passwd.sxcu"),
        ("日本", "filehost-uploader.sxcu"),
    ):
        made = await uploader(api, token, kind="sharex", name=name)
        assert made["filename"] == expected
        assert json.loads(made["content"])["Name"] == name
