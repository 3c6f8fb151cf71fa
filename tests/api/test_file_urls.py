"""A file's ``url`` is absolute, made as an alias's is, in every view of a file (an upload's
answer, a resumable upload's finished file, the list by either path, one file, a change): under
``FILEHOST_PUBLIC_URL``, else from the request's own origin (its Host; the scheme from a trusted
proxy's ``X-Forwarded-Proto``), where the gateway lane leaves ``GET /files`` to aiohttp. The
ShareX uploader copies it as it is. Over HTTP, on the fixtures' real Redis."""

from __future__ import annotations

import io
import ipaddress
import json
from typing import Any

import aiohttp
import pytest

from tests.support.api import bearer, path_of
from tests.support.files import upload
from tests.support.lane import count_lane_answers
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


async def test_without_a_public_url_every_view_takes_the_requests_origin_as_an_alias_does(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane_took = count_lane_answers(monkeypatch)
    api = await make_api(trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),))
    token = await api.user_with_session()
    # As a proxy in front of the service sends it: the public name, and https.
    proxied = {**bearer(token), "Host": "files.example.net", "X-Forwarded-Proto": "https"}
    form = aiohttp.FormData({"alias": "true"})
    form.add_field("file", io.BytesIO(b"hi"), filename="hi.txt")
    response = await api.client.post(FILES, data=form, headers=proxied)
    assert response.status == 201, await response.text()
    file = (await response.json())["data"]
    origin = "https://files.example.net"
    assert file["url"] == f"{origin}{FILES}/{file['id']}/content"
    assert file["alias"]["url"].startswith(f"{origin}/a/")

    response = await api.client.get(FILES, headers=proxied)
    assert [view["url"] for view in (await response.json())["data"]["files"]] == [file["url"]]
    assert FILES not in lane_took  # the lane has no origin to make it from: aiohttp answered
    response = await api.client.get(path_of(file["url"]), headers=proxied)
    assert response.status == 200 and await response.read() == b"hi"
