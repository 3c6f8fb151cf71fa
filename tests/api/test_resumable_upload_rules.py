"""What bounds resumable uploads: the credential (``files.write``, an upload-only key, a key
bound to folders), the folder and alias named in the metadata, the size limit, the account's
uploads in progress, and their expiry, after which the sweep leaves nothing of them behind."""

from __future__ import annotations

from typing import Any

from service.api.context import AUTHENTICATOR, POLICY
from tests.support.aliases import alias
from tests.support.api import Api, bearer
from tests.support.files import uploaded
from tests.support.openapi import validator
from tests.support.tus import (
    TUS,
    UPLOADS_URL,
    bound_inside,
    create,
    created,
    nothing_left,
    offset_of,
    send,
)


async def error_of(response: Any) -> dict[str, Any]:
    return dict((await response.json())["error"])


async def test_a_key_needs_files_write_and_an_upload_only_key_may_upload(api: Api) -> None:
    token = await api.user_with_session()
    reader = await api.create_key(token, permissions=["files.read"])
    refused = await create(api, {"X-API-Key": reader["secret_key"]}, 3)
    assert refused.status == 403 and refused.headers["Tus-Resumable"] == "1.0.0"
    assert (await create(api, {}, 3)).status == 401
    response = await api.client.post(
        "/api/v1/uploaders", json={"kind": "sharex", "name": "shots"}, headers=bearer(token)
    )
    key = {"X-API-Key": (await response.json())["data"]["key"]["secret_key"]}
    url = await created(api, key, 4, filename="shot.png")
    assert await offset_of(api, url, key) == 0
    done = await send(api, url, key, 0, b"\x89PNG")
    assert done.status == 204
    assert (await api.client.get(url, headers=key)).status == 200
    # What it uploaded is its owner's, and still nothing else is the key's.
    listed = await api.client.get("/api/v1/files", headers=bearer(token))
    assert [f["name"] for f in (await listed.json())["data"]["files"]] == ["shot.png"]
    assert (await api.client.get("/api/v1/files", headers=key)).status == 403


async def test_the_folder_is_checked_at_creation_and_for_a_bound_key_at_every_patch(
    api: Api,
) -> None:
    token = await api.user_with_session()
    key, inside, outside = await bound_inside(api, token)
    refused = await create(api, key, 3, folder_id=outside)
    assert (await error_of(refused))["code"] == "folder_not_found"
    unknown = await create(api, bearer(token), 3, folder_id="fld_" + "A" * 22)
    assert (await error_of(unknown))["code"] == "folder_not_found"
    # Made by the session outside the key's folders: the key cannot continue it.
    url = await created(api, bearer(token), 6, folder_id=outside)
    assert (await send(api, url, key, 0, b"abc")).status == 404
    assert (await send(api, url, bearer(token), 0, b"abc")).status == 204
    mine = await created(api, key, 2, folder_id=inside, filename="in.txt")
    done = await send(api, mine, key, 0, b"ok")
    file_id = done.headers["Filehost-File-Id"]
    made = await api.client.get(f"/api/v1/files/{file_id}", headers=key)
    assert (await made.json())["data"]["folder_id"] == inside
    top = await created(api, bearer(token), 1, folder_id="root")
    last = await send(api, top, bearer(token), 0, b"x")
    made = await api.client.get(
        f"/api/v1/files/{last.headers['Filehost-File-Id']}", headers=bearer(token)
    )
    assert (await made.json())["data"]["folder_id"] is None


async def test_an_alias_asked_for_is_made_when_the_upload_finishes(api: Api) -> None:
    token = await api.user_with_session()
    reader = await api.create_key(token, permissions=["files.write"])
    refused = await create(api, {"X-API-Key": reader["secret_key"]}, 3, alias="true")
    assert refused.status == 403
    url = await created(api, bearer(token), 5, alias="true", filename="shared.txt")
    done = await send(api, url, bearer(token), 0, b"hello")
    link = done.headers["Filehost-Alias-Url"]
    slug = link.rsplit("/", 1)[1]
    public = await api.client.get(f"/a/{slug}")
    assert (public.status, await public.read()) == (200, b"hello")
    answer = await (await api.client.get(url, headers=bearer(token))).json()
    validator("/components/schemas/UploadEnvelope").validate(answer)
    view = answer["data"]
    assert view["file"]["alias"]["url"] == link and view["file"]["name"] == "shared.txt"


async def test_too_large_an_upload_is_refused_before_a_byte(make_api: Any) -> None:
    api = await make_api(max_upload_bytes=1000)
    token = await api.user_with_session()
    response = await create(api, bearer(token), 1001)
    assert response.status == 413
    assert (await error_of(response))["details"] == {"max_bytes": 1000}
    for huge in ("9" * 19, "9" * 25, "0" * 30 + "1001"):  # too large, however many digits
        response = await api.client.post(
            UPLOADS_URL, headers={**TUS, **bearer(token), "Upload-Length": huge}
        )
        assert response.status == 413, huge
    deferred = await created(api, bearer(token), None)
    told = await send(api, deferred, bearer(token), 0, b"", Upload_Length="1001")
    assert told.status == 413
    big = await send(api, deferred, bearer(token), 0, b"x" * 1001)
    assert big.status == 413
    assert await offset_of(api, deferred, bearer(token)) == 0


async def test_an_account_has_a_bounded_number_of_uploads_in_progress(make_api: Any) -> None:
    api = await make_api(max_uploads_in_progress=2, max_upload_bytes_in_progress=100)
    token = await api.user_with_session()
    auth = bearer(token)
    first = await created(api, auth, 10)
    await created(api, auth, 10)
    third = await create(api, auth, 10)
    assert third.status == 409
    error = await error_of(third)
    assert error["code"] == "upload_limit_reached"
    assert error["details"] == {"max_uploads": 2, "max_bytes": 100}
    # An empty one is finished by its creation: it never takes a place, so is never refused.
    empty = await create(api, auth, 0)
    assert (empty.status, empty.headers["Upload-Offset"]) == (201, "0")
    # A finished upload no longer counts; nor does one terminated.
    assert (await send(api, first, auth, 0, b"0123456789")).status == 204
    big = await create(api, auth, 91)
    assert (await error_of(big))["code"] == "upload_limit_reached"
    assert (await create(api, auth, 90)).status == 201


async def test_an_expired_upload_is_gone_and_the_sweep_leaves_nothing(api: Api, clock: Any) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 10 * 1024 * 1024)
    assert (await send(api, url, auth, 0, b"x" * (9 * 1024 * 1024))).status == 204
    kept = await created(api, auth, 4)
    await send(api, kept, auth, 0, b"ab")
    clock.advance(hours=23)
    assert (await send(api, kept, auth, 2, b"c")).status == 204
    # That use renewed the session's idle deadline in the background; it must land before the
    # clock moves past the old one.
    await api.app[AUTHENTICATOR]._background.drain()
    clock.advance(hours=2)  # a day since the first was made: it expired
    head = await api.client.head(url, headers={**TUS, **auth})
    assert head.status == 404
    assert (await api.app[POLICY].uploads.sweep()) == 2
    await nothing_left(api)
    listed = await api.client.get("/api/v1/files", headers=auth)
    assert (await listed.json())["data"]["files"] == []


async def test_a_terminated_or_finished_upload_leaves_nothing_behind(api: Api) -> None:
    token = await api.user_with_session()
    auth = bearer(token)
    data = b"y" * (8 * 1024 * 1024 + 10)
    ended = await created(api, auth, len(data) + 1)
    assert (await send(api, ended, auth, 0, data)).status == 204
    assert (await api.client.delete(ended, headers={**TUS, **auth})).status == 204
    done = await created(api, auth, len(data))
    assert (await send(api, done, auth, 0, data[:100])).status == 204
    assert (await send(api, done, auth, 100, data[100:])).status == 204
    await nothing_left(api)


async def test_the_account_full_when_the_last_byte_comes_ends_the_upload(make_api: Any) -> None:
    api = await make_api(max_files_per_account=1)
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 3)
    await uploaded(api, b"took the room", token=token)
    refused = await send(api, url, auth, 0, b"abc")
    assert (await error_of(refused))["code"] == "file_limit_reached"
    assert (await api.client.head(url, headers={**TUS, **auth})).status == 404
    await nothing_left(api)


async def test_an_alias_that_cannot_be_made_at_the_end_leaves_the_file(make_api: Any) -> None:
    api = await make_api(max_aliases_per_account=1)
    token = await api.user_with_session()
    auth = bearer(token)
    url = await created(api, auth, 3, alias="true")
    other = await uploaded(api, b"other", token=token)
    await alias(api, {"file_id": other["id"]}, token=token)
    done = await send(api, url, auth, 0, b"abc")
    assert done.status == 204 and "Filehost-Alias-Url" not in done.headers
    view = (await (await api.client.get(url, headers=auth)).json())["data"]
    assert view["file"]["size"] == 3
    assert "alias" not in view["file"] and view["alias_error"] == "alias_limit_reached"


async def test_the_uploads_in_progress_are_listed_for_whoever_may_continue_them(
    make_api: Any, clock: Any
) -> None:
    """What to resume, or to terminate when the account has no place left: an upload whose
    client lost its address holds a place until it expires, and nothing else finds it."""
    api = await make_api(max_uploads_in_progress=3)
    token = await api.user_with_session()
    session = bearer(token)
    key, inside, outside = await bound_inside(api, token)
    response = await api.client.post(
        "/api/v1/uploaders", json={"kind": "curl", "name": "shots"}, headers=session
    )
    uploader = {"X-API-Key": (await response.json())["data"]["key"]["secret_key"]}
    first = await created(api, session, 10, filename="first.bin", folder_id=outside)
    clock.advance(seconds=1)
    second = await created(api, key, 10, filename="second.bin", folder_id=inside)
    clock.advance(seconds=1)
    third = await created(api, uploader, 4)
    await send(api, second, key, 0, b"01234")
    refused = await create(api, session, 10)
    assert (await error_of(refused))["code"] == "upload_limit_reached"

    async def listed(headers: dict[str, str]) -> list[dict[str, Any]]:
        response = await api.client.get(UPLOADS_URL, headers=headers)
        assert response.status == 200, await response.text()
        answer = await response.json()
        validator("/components/schemas/UploadListEnvelope").validate(answer)
        return list(answer["data"]["uploads"])

    everything = await listed(session)  # those that expire first first
    assert [upload["url"] for upload in everything] == [first, second, third]
    assert [(u["name"], u["offset"], u["length"]) for u in everything] == [
        ("first.bin", 0, 10),
        ("second.bin", 5, 10),
        (None, 0, 4),
    ]
    assert everything[1] == (await (await api.client.get(second, headers=session)).json())["data"]
    # A bound key sees those it could continue: into its folders, or into none (it would put
    # the file in its own); an uploader's key, those it made.
    assert [upload["url"] for upload in await listed(key)] == [second, third]
    assert [upload["url"] for upload in await listed(uploader)] == [third]
    # Terminated or finished, an upload leaves the list and its place.
    assert (await api.client.delete(first, headers={**TUS, **session})).status == 204
    assert (await send(api, third, uploader, 0, b"done")).status == 204
    assert [upload["url"] for upload in await listed(session)] == [second]
    assert (await create(api, session, 10)).status == 201
    reader = await api.create_key(token, permissions=["files.read"])
    response = await api.client.get(UPLOADS_URL, headers={"X-API-Key": reader["secret_key"]})
    assert response.status == 403
