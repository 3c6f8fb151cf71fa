"""A file's ``url`` under ``FILEHOST_PUBLIC_URL``: absolute, as an alias's is, in every view of
a file (an upload's answer, a resumable upload's finished file, the list by either path, one
file, a change), and the ShareX uploader made then copies it as it is. Without a public URL it
stays the path (``tests/api/test_files.py``). Over HTTP, on the fixtures' real Redis."""

from __future__ import annotations

import json
from typing import Any

from tests.support.api import bearer
from tests.support.files import upload
from tests.support.openapi import validator
from tests.support.tus import created, send

PUBLIC = "https://files.example.com"
FILES = "/api/v1/files"


async def test_every_view_of_a_file_has_an_absolute_url_under_the_public_url(
    make_api: Any,
) -> None:
    api = await make_api(public_url=PUBLIC)
    token = await api.user_with_session()
    auth = bearer(token)
    response = await upload(api, b"hello", token=token, filename="hello.txt")
    answer = await response.json()
    validator("/components/schemas/FileEnvelope").validate(answer)
    file = answer["data"]
    absolute = f"{PUBLIC}{FILES}/{file['id']}/content"
    assert file["url"] == absolute

    views = []
    # The first page's own path, a folder's, and a search's.
    for path in (FILES, f"{FILES}?folder_id=root", f"{FILES}?q=hello"):
        response = await api.client.get(path, headers=auth)
        assert response.status == 200
        views += (await response.json())["data"]["files"]
    response = await api.client.get(f"{FILES}/{file['id']}", headers=auth)
    views.append((await response.json())["data"])
    response = await api.client.patch(f"{FILES}/{file['id']}", json={"name": "b"}, headers=auth)
    views.append((await response.json())["data"])
    assert [view["url"] for view in views] == [absolute] * 5

    resumable = await created(api, auth, 3, filename="tus.txt")
    assert (await send(api, resumable, auth, 0, b"abc")).status == 204
    response = await api.client.get(resumable, headers={"Tus-Resumable": "1.0.0", **auth})
    finished = (await response.json())["data"]["file"]
    assert finished["url"] == f"{PUBLIC}{FILES}/{finished['id']}/content"


async def test_a_sharex_uploader_copies_the_absolute_url_as_it_is(make_api: Any) -> None:
    api = await make_api(public_url=PUBLIC)
    token = await api.user_with_session()
    response = await api.client.post(
        "/api/v1/uploaders", json={"kind": "sharex", "name": "laptop"}, headers=bearer(token)
    )
    assert response.status == 201
    config = json.loads((await response.json())["data"]["content"])
    assert config["RequestURL"] == f"{PUBLIC}{FILES}"
    assert config["URL"] == "{json:data.url}"
