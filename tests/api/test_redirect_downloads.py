"""Redirect downloads (``FILEHOST_S3_DOWNLOADS=redirect``) against a real S3 server: an authorised
download answers 302 to a presigned SigV4 ``GET`` that works for 60 s and is answered with the
service's own ``Content-Disposition`` and ``Content-Type``; a ``Range`` is the store's to serve;
an alias with a password or a view limit is always proxied, since a URL could be reused; a
conditional request the service can answer is still a 304; a download ticket's download is
redirected too, saved as an attachment whatever the file's type."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from tests.support.aliases import alias, public
from tests.support.api import Api, bearer
from tests.support.files import uploaded
from tests.support.seaweedfs import SeaweedFS


@pytest.fixture
async def api(make_api: Any, tmp_path: Path, seaweedfs: SeaweedFS) -> Api:
    return await make_api(data_dir=tmp_path, **seaweedfs.settings(), s3_downloads="redirect")


async def follow(location: str, **headers: str) -> tuple[int, bytes, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.get(location, headers=headers) as response:
            return response.status, await response.read(), response.headers


async def test_a_download_is_a_302_to_a_presigned_url_answered_as_the_service_would(
    api: Api, seaweedfs: SeaweedFS
) -> None:
    token = await api.user_with_session()
    data = b"<html>not run</html>" * 1000
    made = await uploaded(api, data, token=token, filename="page.html", content_type="text/html")
    content = f"/api/v1/files/{made['id']}/content"
    response = await api.client.get(content, headers=bearer(token), allow_redirects=False)
    assert response.status == 302
    location = response.headers["Location"]
    parts = urlsplit(location)
    assert location.startswith(seaweedfs.endpoint)
    query = parse_qs(parts.query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-Expires"] == ["60"]
    status, body, headers = await follow(location)
    assert (status, body) == (200, data)
    # Risky types leave the store as the service sends them: a download, never a page.
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"].startswith('attachment; filename="page.html"')
    status, body, _ = await follow(location, Range="bytes=2-5")
    assert (status, body) == (206, data[2:6])
    # A tag the service knows is answered by it.
    etag = f'"{made["sha256"]}"'
    headers = {**bearer(token), "If-None-Match": etag}
    assert (await api.client.get(content, headers=headers, allow_redirects=False)).status == 304
    # A credential is still needed to be sent there.
    assert (await api.client.get(content, allow_redirects=False)).status == 401
    # HEAD is answered by the service: the store's URL is signed for GET alone.
    head = await api.client.head(content, headers=bearer(token), allow_redirects=False)
    assert (head.status, head.headers["Content-Length"], await head.read()) == (
        200,
        str(len(data)),
        b"",
    )
    assert head.headers["ETag"] == etag
    await alias(api, {"file_id": made["id"], "slug": "open-page"}, token=token)
    head = await api.client.head("/a/open-page", allow_redirects=False)
    assert (head.status, head.headers["Content-Length"]) == (200, str(len(data)))


async def test_a_signature_that_was_tampered_with_is_refused_by_the_store(api: Api) -> None:
    token = await api.user_with_session()
    made = await uploaded(api, b"private", token=token)
    response = await api.client.get(
        f"/api/v1/files/{made['id']}/content", headers=bearer(token), allow_redirects=False
    )
    location = response.headers["Location"]
    other = location.replace(made["id"], "fil_" + "A" * 22)
    assert (await follow(other))[0] == 403


async def test_only_links_without_a_password_or_a_view_limit_are_redirected(api: Api) -> None:
    token = await api.user_with_session()
    made = await uploaded(api, b"shared bytes", token=token)
    await alias(api, {"file_id": made["id"], "slug": "open"}, token=token)
    await alias(
        api, {"file_id": made["id"], "slug": "guarded", "password": "pw-12345"}, token=token
    )
    limited = await alias(
        api, {"file_id": made["id"], "slug": "twice", "max_views": 2}, token=token
    )

    opened = await public(api, "/a/open")
    assert opened.status == 302
    assert (await follow(opened.headers["Location"]))[:2] == (200, b"shared bytes")
    guarded = await public(api, "/a/guarded", **{"X-Alias-Password": "pw-12345"})
    assert (guarded.status, await guarded.read()) == (200, b"shared bytes")
    for _ in range(2):
        answer = await public(api, "/a/twice")
        assert (answer.status, await answer.read()) == (200, b"shared bytes")
    assert (await public(api, "/a/twice")).status == 404
    response = await api.client.get(f"/api/v1/aliases/{limited['id']}", headers=bearer(token))
    assert (await response.json())["data"]["views"] == 2


async def test_the_urls_are_made_for_the_address_clients_reach_the_store_at(
    make_api: Any, tmp_path: Path, seaweedfs: SeaweedFS
) -> None:
    """The service reaches the store at one address (a private one, say) and clients at
    another: SigV4 signs the host into the URL, so it is made for the clients' address."""
    public = seaweedfs.endpoint.replace("127.0.0.1", "localhost")
    api = await make_api(
        data_dir=tmp_path,
        **seaweedfs.settings(),
        s3_downloads="redirect",
        s3_public_endpoint=public,
    )
    token = await api.user_with_session()
    made = await uploaded(api, b"reached from outside", token=token)
    response = await api.client.get(
        f"/api/v1/files/{made['id']}/content", headers=bearer(token), allow_redirects=False
    )
    location = response.headers["Location"]
    assert response.status == 302 and location.startswith(public + "/"), location
    assert (await follow(location))[:2] == (200, b"reached from outside")
    # Signed for that address: the same URL at the service's own address is refused.
    private = location.replace(public, seaweedfs.endpoint, 1)
    assert (await follow(private))[0] == 403


async def test_a_ticket_s_download_is_redirected_and_saved_whatever_the_type(api: Api) -> None:
    token = await api.user_with_session()
    made = await uploaded(
        api, b"\x89PNG" * 500, token=token, filename="cat.png", content_type="image/png"
    )
    taken = await api.client.post(
        "/api/v1/download-tickets", json={"file_id": made["id"]}, headers=bearer(token)
    )
    ticket = (await taken.json())["data"]["ticket"]

    response = await api.client.post(
        "/api/v1/downloads",
        data=f"ticket={ticket}",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        allow_redirects=False,
    )

    assert response.status == 302
    status, body, headers = await follow(response.headers["Location"])
    assert (status, body) == (200, b"\x89PNG" * 500)
    assert headers["Content-Type"] == "image/png"
    assert headers["Content-Disposition"].startswith('attachment; filename="cat.png"')
