"""The public side of vanity aliases, ``/a/{slug}``, without a credential: a file's bytes under
the rules of a download, a folder's listing as JSON or HTML and what lies below it (nothing
outside), one identical 404 for every alias that may not be used, views counted to the limit
and never for HEAD or 304, a password in a header or through the form and its cookie, guesses
throttled, the rate per client address, and a download that outlives its file's deletion. Over
HTTP, on the fixtures' real Redis (and the API suite's cluster run)."""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from service.api.context import REMOVALS_AT_START
from service.config.readers import secret_keys
from tests.support.aliases import ALIASES, alias, edit_alias, public
from tests.support.api import Api, assert_error, bearer
from tests.support.blobs import put_back, take_bytes
from tests.support.files import uploaded
from tests.support.folders import SETTINGS, folder, patch
from tests.support.mfa import OTHER_SECRETS_KEY, SECRETS_KEY
from tests.support.openapi import validator

# Headers that differ from one answer to the next whatever it is.
PER_ANSWER = {"x-request-id", "date"}
# What Chromium and Firefox send for a navigation.
BROWSER_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
)


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def views_of(api: Api, token: str, alias_id: str) -> int:
    response = await api.client.get(f"{ALIASES}/{alias_id}", headers=bearer(token))
    return (await response.json())["data"]["views"]


# -- a file ------------------------------------------------------------------------------------


async def test_a_file_alias_answers_exactly_as_the_files_content(api: Api) -> None:
    token = await api.user_with_session()
    data = bytes(range(256)) * 40
    file = await uploaded(api, data, token=token, filename="page.html", content_type="text/html")
    await alias(api, {"file_id": file["id"], "slug": "page"}, token=token)
    own = await api.client.get(f"/api/v1/files/{file['id']}/content", headers=bearer(token))
    shared = await public(api, "/a/page")
    assert (shared.status, await shared.read()) == (200, data)
    kept = {"ratelimit", "ratelimit-policy"}  # the credential's, on its own download only
    mine = PER_ANSWER | {"etag"}
    assert {k.lower(): v for k, v in shared.headers.items() if k.lower() not in mine} == {
        k.lower(): v for k, v in own.headers.items() if k.lower() not in mine | kept
    }
    assert shared.headers["Content-Type"] == "application/octet-stream"
    assert shared.headers["Content-Disposition"].startswith("attachment;")
    assert shared.headers["X-Content-Type-Options"] == "nosniff"
    assert shared.headers["Content-Security-Policy"].startswith("default-src 'none'")
    # The owner's ETag is the bytes' SHA-256; the public one tells nothing of them.
    assert own.headers["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    assert re.fullmatch(r'"[0-9a-f]{32}"', shared.headers["ETag"])
    assert hashlib.sha256(data).hexdigest()[:16] not in shared.headers["ETag"]
    assert "RateLimit" not in shared.headers


async def test_views_count_200_and_206_to_the_limit_and_never_head_or_304(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"0123456789", token=token)
    made = await alias(api, {"file_id": file["id"], "slug": "counted", "max_views": 3}, token=token)
    head = await api.client.head("/a/counted")
    assert (head.status, await head.read(), head.headers["Content-Length"]) == (200, b"", "10")
    etag = head.headers["ETag"]
    assert etag != f'"{file["sha256"]}"'
    not_modified = await public(api, "/a/counted", **{"If-None-Match": etag})
    assert not_modified.status == 304
    unsatisfiable = await public(api, "/a/counted", Range="bytes=50-")
    await assert_error(unsatisfiable, 416, "range_not_satisfiable")
    assert await views_of(api, token, made["id"]) == 0
    part = await public(api, "/a/counted", Range="bytes=2-4")
    assert (part.status, await part.read()) == (206, b"234")
    assert (await public(api, "/a/counted")).status == 200
    # The bytes' SHA-256 is not the tag: asked with it, the whole file comes, not a 304.
    sha = f'"{file["sha256"]}"'
    assert (await public(api, "/a/counted", **{"If-None-Match": sha})).status == 200
    assert await views_of(api, token, made["id"]) == 3
    # Used up: HEAD and a conditional request are refused as any unusable alias, telling nothing.
    unknown = await api.client.head("/a/never-made")
    for refused in (
        await api.client.head("/a/counted"),
        await public(api, "/a/counted", **{"If-None-Match": etag}),
    ):
        assert refused.status == 404 and "ETag" not in refused.headers
        assert refused.headers.get("Content-Length") == unknown.headers.get("Content-Length")
    await assert_error(await public(api, "/a/counted"), 404, "alias_not_found")
    await assert_error(await public(api, "/a/counted", Range="bytes=0-1"), 404, "alias_not_found")
    assert await views_of(api, token, made["id"]) == 3


async def test_a_view_counted_for_an_answer_that_failed_before_its_bytes_is_given_back(
    api: Api,
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"bytes", token=token)
    made = await alias(api, {"file_id": file["id"], "slug": "missing", "max_views": 1}, token=token)
    saved = await take_bytes(api, file["id"])  # a listed file without its bytes: 404, no view
    await assert_error(await public(api, "/a/missing"), 404, "alias_not_found")
    assert await views_of(api, token, made["id"]) == 0
    await put_back(api, file["id"], saved)
    assert (await public(api, "/a/missing")).status == 200


async def test_a_download_under_way_when_its_file_is_deleted_finishes_whole(api: Api) -> None:
    token = await api.user_with_session()
    data = hashlib.sha256(b"seed").digest() * (256 * 1024)  # 8 MiB
    file = await uploaded(api, data, token=token)
    await alias(api, {"file_id": file["id"], "slug": "big"}, token=token)
    response = await public(api, "/a/big")
    assert response.status == 200
    first = await response.content.readexactly(64 * 1024)
    deleted = await api.client.delete(f"/api/v1/files/{file['id']}", headers=bearer(token))
    assert deleted.status == 200
    rest = await response.read()
    assert hashlib.sha256(first + rest).digest() == hashlib.sha256(data).digest()
    await assert_error(await public(api, "/a/big"), 404, "alias_not_found")


async def test_credentials_are_not_needed_and_not_looked_at(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await alias(api, {"file_id": file["id"], "slug": "open"}, token=token)
    for headers in ({"X-API-Key": "fhk_nonsense"}, {"Authorization": "Basic eDp5"}, {}):
        assert (await public(api, "/a/open", **headers)).status == 200


# -- the one 404 -------------------------------------------------------------------------------


@pytest.mark.parametrize("accept", [None, BROWSER_ACCEPT])
async def test_every_unusable_alias_is_the_same_404(
    api: Api, clock: Any, accept: str | None
) -> None:
    token = await api.user_with_session()
    other = await api.user_with_session("bob@example.com")
    file = await uploaded(api, b"x", token=token)
    theirs = await uploaded(api, b"y", token=other)
    outside = await uploaded(api, b"z", token=token)
    shared = await folder(api, "shared", token=token)
    sibling = await folder(api, "sibling", token=token)

    async def made(slug: str, **body: Any) -> dict[str, Any]:
        return await alias(api, {"file_id": file["id"], "slug": slug, **body}, token=token)

    await made("expired", expires_in_seconds=60)
    disabled = await made("disabled")
    await edit_alias(api, disabled["id"], {"enabled": False}, token=token)
    deleted = await made("deleted")
    await api.client.delete(f"{ALIASES}/{deleted['id']}", headers=bearer(token))
    await made("used-up", max_views=1)
    assert (await public(api, "/a/used-up")).status == 200
    await alias(api, {"file_id": theirs["id"], "slug": "switched"}, token=other)
    await patch(api, SETTINGS, {"public_aliases_enabled": False}, token=other)
    await alias(api, {"folder_id": shared["id"], "slug": "shared"}, token=token)
    clock.advance(seconds=60)
    paths = [
        "/a/never-made",
        "/a/x",  # not even a slug
        "/a/expired",
        "/a/disabled",
        "/a/deleted",
        "/a/used-up",
        "/a/switched",
        f"/a/shared/{outside['id']}",  # a file outside the aliased folder
        f"/a/shared/{sibling['id']}",  # a folder outside it
        "/a/shared/fil_0000000000000000000000",
        "/a/shared/anything",
        f"/a/expired/{file['id']}",  # below an alias that is no folder's
        "/a/expired/thumbnail",
        "/a/shared/thumbnail",  # a folder has none
        "/a/never-made/thumbnail",
    ]
    asked = {} if accept is None else {"Accept": accept}
    answers = []
    for path in paths:
        response = await public(api, path, **asked)
        headers = sorted(
            (k.lower(), v) for k, v in response.headers.items() if k.lower() not in PER_ANSWER
        )
        answers.append((response.status, headers, await response.read()))
    # The password form of a link that can't be used posts to the same answer.
    response = await api.client.post(
        "/a/expired", data={"password": "anything"}, headers=asked, allow_redirects=False
    )
    headers = sorted(
        (k.lower(), v) for k, v in response.headers.items() if k.lower() not in PER_ANSWER
    )
    paths.append("POST /a/expired")
    answers.append((response.status, headers, await response.read()))
    assert answers[0][0] == 404
    if accept is None:  # an API client's: JSON, as ever
        assert (
            answers[0][2]
            == b'{"success":false,"error":{"code":"alias_not_found","message":"No such alias."}}'
        )
    else:  # a person's browser: the one page, naming nothing of the link
        assert dict(answers[0][1])["content-type"] == "text/html; charset=utf-8"
        assert dict(answers[0][1])["content-security-policy"].startswith("default-src 'none'")
        page = answers[0][2].decode()
        assert "<h1>This link is not available</h1>" in page and "expired" in page
        assert '<link rel="stylesheet" href="/static/base.css">' in page
        assert '<link rel="stylesheet" href="/static/alias.css">' in page
    assert all(answer == answers[0] for answer in answers), [
        path for path, answer in zip(paths, answers, strict=True) if answer != answers[0]
    ]


@pytest.mark.parametrize(
    ("accept", "a_page"),
    [
        (BROWSER_ACCEPT, True),
        ("text/html", True),
        ("text/html, */*", True),
        ("application/json;q=0.5, text/html", True),
        ("application/json, text/html", False),  # JSON named as high: an API client
        ("text/html;q=0.5, application/json", False),
        ("text/html;q=0.5, */*", False),
        ("text/html;q=0", False),
        ("*/*", False),
        ("application/json", False),
    ],
)
async def test_the_page_goes_to_a_client_that_prefers_html_to_json(
    api: Api, accept: str, a_page: bool
) -> None:
    response = await public(api, "/a/never-made", Accept=accept)
    assert response.status == 404
    expected = "text/html; charset=utf-8" if a_page else "application/json"
    assert response.headers["Content-Type"] == expected


# -- a folder ----------------------------------------------------------------------------------


async def test_a_folder_alias_lists_its_subtree_and_reaches_nothing_outside(api: Api) -> None:
    token = await api.user_with_session()
    top = await folder(api, "Top", token=token)
    inner = await folder(api, "Inner", top["id"], token=token)
    deep = await uploaded(api, b"deep", token=token, folder_id=inner["id"], filename="deep.txt")
    here = await uploaded(api, b"here", token=token, folder_id=top["id"], filename="here.txt")
    made = await alias(api, {"folder_id": top["id"], "slug": "top"}, token=token)
    origin = str(api.client.make_url("")).rstrip("/")

    response = await public(api, "/a/top", Accept="application/json")
    assert response.status == 200
    answer = await response.json()
    validator("/components/schemas/SharedFolderEnvelope").validate(answer)
    assert answer["data"] == {
        "folder": {"name": "Top"},
        "folders": [{"name": "Inner", "url": f"{origin}/a/top/{inner['id']}"}],
        "files": [
            {
                "name": "here.txt",
                "size": 4,
                "content_type": "text/plain",
                "created_at": here["created_at"],
                "url": f"{origin}/a/top/{here['id']}",
            }
        ],
        "next_cursor": None,
    }
    response = await public(api, f"/a/top/{inner['id']}", Accept="application/json")
    answer = await response.json()
    assert answer["data"]["folder"] == {"name": "Inner"}
    assert [item["name"] for item in answer["data"]["files"]] == ["deep.txt"]
    below = await public(api, f"/a/top/{deep['id']}")
    assert (below.status, await below.read()) == (200, b"deep")
    assert await views_of(api, token, made["id"]) == 3  # two listings and a file


async def test_a_folders_page_is_html_that_escapes_every_name(api: Api) -> None:
    token = await api.user_with_session()
    top = await folder(api, '<script>alert("folder")<\u2215script>', token=token)
    await folder(api, "a&b", top["id"], token=token)
    await uploaded(api, b"x", token=token, folder_id=top["id"], filename='"><img src=x onerror=1>')
    await alias(api, {"folder_id": top["id"], "slug": "escaped"}, token=token)
    response = await public(api, "/a/escaped", Accept="text/html,*/*")
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    csp = response.headers["Content-Security-Policy"]
    assert "script-src" not in csp and "default-src 'none'" in csp and "'unsafe-inline'" not in csp
    page = await response.text()
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;folder&quot;)&lt;\u2215script&gt;" in page
    assert "a&amp;b" in page and "&quot;&gt;&lt;img src=x onerror=1&gt;" in page


async def test_a_folders_page_says_sizes_and_times_as_the_dashboard_does(
    api: Api, clock: Any
) -> None:
    token = await api.user_with_session()
    top = await folder(api, "sizes", token=token)
    await uploaded(api, b"x" * 1536, token=token, folder_id=top["id"], filename="a.bin")
    await uploaded(api, b"y", token=token, folder_id=top["id"], filename="b.bin")
    await alias(api, {"folder_id": top["id"], "slug": "sizes"}, token=token)
    clock.advance(seconds=180)
    page = await (await public(api, "/a/sizes", Accept=BROWSER_ACCEPT)).text()
    assert '<td class="size" data-label="Size">1.5 KiB</td>' in page
    assert '<td class="size" data-label="Size">1 byte</td>' in page
    assert page.count('<span class="ago">3 minutes ago</span>') == 2
    assert re.search(r'<time class="when" datetime="[0-9T:-]+Z" title="[0-9 :-]+ UTC">', page)
    # The whole shared folder in one go, as the public archive serves it.
    assert '<a class="more" href="/a/sizes/archive" download>' in page
    archive = await public(api, "/a/sizes/archive")
    assert (archive.status, archive.headers["Content-Type"]) == (200, "application/zip")


async def test_a_folders_files_come_a_page_at_a_time(api: Api, clock: Any) -> None:
    token = await api.user_with_session()
    top = await folder(api, "many", token=token)
    for n in range(5):
        await uploaded(api, b"x", token=token, folder_id=top["id"], filename=f"f{n}.txt")
        clock.advance(seconds=1)
    await alias(api, {"folder_id": top["id"], "slug": "many"}, token=token)
    names: list[str] = []
    cursor = None
    while True:
        params = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        answer = await (await public(api, f"/a/many{params}", Accept="application/json")).json()
        names += [item["name"] for item in answer["data"]["files"]]
        cursor = answer["data"]["next_cursor"]
        if cursor is None:
            break
    assert names == [f"f{n}.txt" for n in reversed(range(5))]
    await assert_error(
        await public(api, "/a/many?cursor=nonsense", Accept="application/json"),
        400,
        "validation_failed",
    )


# -- passwords ---------------------------------------------------------------------------------


async def test_an_api_client_sends_the_password_in_a_header_never_in_the_url(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"secret bytes", token=token)
    await alias(
        api, {"file_id": file["id"], "slug": "locked", "password": "open sesame"}, token=token
    )
    required = await public(api, "/a/locked", Accept="application/json")
    await assert_error(required, 401, "alias_password_required")
    assert required.headers["WWW-Authenticate"] == 'AliasPassword realm="filehost"'
    await assert_error(
        await public(api, "/a/locked?password=open%20sesame"), 401, "alias_password_required"
    )
    wrong = await public(api, "/a/locked", **{"X-Alias-Password": "open says me"})
    error = await assert_error(wrong, 401, "alias_password_invalid")
    assert "open" not in str(error)
    right = await public(api, "/a/locked", **{"X-Alias-Password": "open sesame"})
    assert (right.status, await right.read()) == (200, b"secret bytes")
    twice = await api.client.get(
        "/a/locked", headers=[("X-Alias-Password", "open sesame"), ("X-Alias-Password", "x")]
    )
    await assert_error(twice, 400, "duplicate_header")


async def test_a_browser_gets_the_form_and_its_right_password_the_file(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"for browsers", token=token)
    await alias(api, {"file_id": file["id"], "slug": "form", "password": "letmein"}, token=token)
    page = await public(api, "/a/form", Accept="text/html")
    assert page.status == 401 and page.headers["Content-Type"].startswith("text/html")
    assert "form-action 'self'" in page.headers["Content-Security-Policy"]
    body = await page.text()
    assert '<form method="post" action="/a/form">' in body and 'name="password"' in body
    wrong = await api.client.post("/a/form", data={"password": "nope"})
    assert wrong.status == 401 and "not right" in await wrong.text()
    # Right: the cookie and the file from a GET, which the browser may reload.
    right = await api.client.post("/a/form", data={"password": "letmein"}, allow_redirects=False)
    assert (right.status, right.headers["Location"]) == (303, "/a/form")
    cookie = right.headers["Set-Cookie"]
    assert "Path=/a/form" in cookie and "HttpOnly" in cookie and "letmein" not in cookie
    shown = await public(api, "/a/form", Cookie=cookie.split(";", 1)[0], Accept="text/html")
    assert (shown.status, await shown.read()) == (200, b"for browsers")
    await assert_error(
        await api.client.post("/a/form", json={"password": "letmein"}),
        415,
        "unsupported_media_type",
    )


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded; charset=bogus", b"password=letmein"),
        ("application/x-www-form-urlencoded; charset=utf-8", b"password=\xff\xfe"),
        (
            "multipart/form-data; boundary=b",
            b'--b\r\nContent-Disposition: form-data; name="password"\r\n'
            b"Content-Type: text/plain; charset=bogus\r\n\r\nletmein\r\n--b--\r\n",
        ),
    ],
)
async def test_a_form_that_cannot_be_decoded_is_400_and_logs_no_error(
    api: Api, content_type: str, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"guarded", token=token)
    await alias(api, {"file_id": file["id"], "slug": "form", "password": "letmein"}, token=token)
    response = await api.client.post("/a/form", data=body, headers={"Content-Type": content_type})
    await assert_error(response, 400, "bad_request")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_folders_password_gives_a_cookie_for_its_path_that_a_new_password_ends(
    api: Api, clock: Any
) -> None:
    token = await api.user_with_session()
    top = await folder(api, "private", token=token)
    inside = await uploaded(api, b"inside", token=token, folder_id=top["id"])
    made = await alias(
        api, {"folder_id": top["id"], "slug": "private", "password": "pass1234"}, token=token
    )
    other_file = await uploaded(api, b"other", token=token)
    await alias(
        api, {"file_id": other_file["id"], "slug": "other", "password": "pass1234"}, token=token
    )
    answer = await api.client.post(
        "/a/private", data={"password": "pass1234"}, allow_redirects=False
    )
    assert (answer.status, answer.headers["Location"]) == (303, "/a/private")
    cookie = answer.headers["Set-Cookie"]
    assert "Path=/a/private" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Max-Age=1800" in cookie and "pass1234" not in cookie
    value = cookie.split(";", 1)[0]
    with_cookie = {"Cookie": value, "Accept": "application/json"}
    assert (await public(api, "/a/private", **with_cookie)).status == 200
    below = await public(api, f"/a/private/{inside['id']}", Cookie=value)
    assert (below.status, await below.read()) == (200, b"inside")
    # the cookie is this alias's only, and a new password ends it
    await assert_error(await public(api, "/a/other", Cookie=value), 401, "alias_password_required")
    await edit_alias(api, made["id"], {"password": "pass5678"}, token=token)
    await assert_error(
        await public(api, "/a/private", **with_cookie), 401, "alias_password_required"
    )
    answer = await api.client.post(
        "/a/private", data={"password": "pass5678"}, allow_redirects=False
    )
    value = answer.headers["Set-Cookie"].split(";", 1)[0]
    clock.advance(seconds=30 * 60)
    await assert_error(
        await public(api, "/a/private", Cookie=value, Accept="application/json"),
        401,
        "alias_password_required",
    )


async def test_a_deep_link_into_a_protected_folder_asks_once_then_goes_on_to_what_it_named(
    api: Api,
) -> None:
    token = await api.user_with_session()
    top = await folder(api, "private", token=token)
    inside = await uploaded(api, b"inside", token=token, folder_id=top["id"])
    await alias(
        api, {"folder_id": top["id"], "slug": "private", "password": "pass1234"}, token=token
    )
    for below in (inside["id"], "archive"):
        api.client.session.cookie_jar.clear()  # a browser that has not given the password yet
        form = await public(api, f"/a/private/{below}", Accept="text/html")
        assert form.status == 401
        body = await form.text()
        # The form posts to the link itself (no form is taken below it), naming what was asked.
        assert '<form method="post" action="/a/private">' in body
        assert f'<input name="below" value="{below}" type="hidden">' in body
        wrong = await api.client.post(
            "/a/private", data={"password": "nope", "below": below}, allow_redirects=False
        )
        assert wrong.status == 401 and f'name="below" value="{below}"' in await wrong.text()
        right = await api.client.post(
            "/a/private", data={"password": "pass1234", "below": below}, allow_redirects=False
        )
        assert (right.status, right.headers["Location"]) == (303, f"/a/private/{below}")
    cookie = right.headers["Set-Cookie"].split(";", 1)[0]
    shown = await public(api, f"/a/private/{inside['id']}", Cookie=cookie)
    assert (shown.status, await shown.read()) == (200, b"inside")
    # Anything else named goes back to the link: the redirect never leaves it.
    for elsewhere in ("../other", "//evil.example", "https://evil.example/", "fil_a/../b", ""):
        right = await api.client.post(
            "/a/private", data={"password": "pass1234", "below": elsewhere}, allow_redirects=False
        )
        assert (right.status, right.headers["Location"]) == (303, "/a/private"), elsewhere


async def test_the_cookie_key_comes_from_the_secrets_key_and_is_never_stored(
    make_api: Any, tmp_path: Path, redis_client: Any
) -> None:
    """Whoever holds a backup (the store's records) can't sign a cookie that opens a protected
    folder alias: the key is derived from the operator's secrets key, which no backup holds,
    and the key earlier releases kept in the store is deleted at start-up."""
    redis_client.set("fh:alias-cookie-secret", "a key an earlier release stored")
    api = await make_api(data_dir=tmp_path, secrets_key=secret_keys("K", SECRETS_KEY))
    await api.app[REMOVALS_AT_START]
    assert not redis_client.exists("fh:alias-cookie-secret")
    token = await api.user_with_session()
    top = await folder(api, "private", token=token)
    await alias(
        api, {"folder_id": top["id"], "slug": "private", "password": "pw-1234"}, token=token
    )
    answer = await api.client.post(
        "/a/private", data={"password": "pw-1234"}, allow_redirects=False
    )
    cookie = {"Cookie": answer.headers["Set-Cookie"].split(";", 1)[0], "Accept": "application/json"}
    assert not [name for name in redis_client.keys("fh:*") if "cookie" in name]

    same = await make_api(data_dir=tmp_path, secrets_key=secret_keys("K", SECRETS_KEY))
    assert (await public(same, "/a/private", **cookie)).status == 200  # another instance
    other = await make_api(data_dir=tmp_path, secrets_key=secret_keys("K", OTHER_SECRETS_KEY))
    await assert_error(await public(other, "/a/private", **cookie), 401, "alias_password_required")


async def test_password_guesses_are_throttled_per_alias_even_for_the_right_one(
    make_api: Any,
) -> None:
    api = await make_api(alias_password_failures_per_alias=3, alias_password_failures_per_address=0)
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await alias(
        api, {"file_id": file["id"], "slug": "guessed", "password": "the right one"}, token=token
    )
    for n in range(3):
        wrong = await public(api, "/a/guessed", **{"X-Alias-Password": f"guess {n}"})
        await assert_error(wrong, 401, "alias_password_invalid")
    throttled = await public(api, "/a/guessed", **{"X-Alias-Password": "the right one"})
    error = await assert_error(throttled, 429, "alias_password_throttled")
    assert int(throttled.headers["Retry-After"]) == error["details"]["retry_after_seconds"] > 0
    form = await api.client.post("/a/guessed", data={"password": "the right one"})
    assert form.status == 429 and "Too many wrong passwords" in await form.text()


async def test_one_address_guessing_locks_out_only_itself_and_many_meet_a_ceiling(
    make_api: Any,
) -> None:
    """Twenty wrong passwords from one address used to make the right one 429 for everyone:
    now one address is held back for its own guesses at one alias, and only a guess spread
    over many addresses meets the alias's ceiling."""
    api = await make_api(
        alias_password_failures_per_alias_address=3,
        alias_password_failures_per_alias=8,
        alias_password_failures_per_address=0,
        trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),),
    )
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await alias(
        api, {"file_id": file["id"], "slug": "kept", "password": "the right one"}, token=token
    )

    async def guess(address: str, password: str = "wrong") -> Any:  # noqa: S107
        return await public(
            api, "/a/kept", **{"X-Alias-Password": password, "X-Forwarded-For": address}
        )

    for _ in range(3):
        await assert_error(await guess("203.0.113.1"), 401, "alias_password_invalid")
    await assert_error(await guess("203.0.113.1"), 429, "alias_password_throttled")
    await assert_error(await guess("203.0.113.1", "the right one"), 429, "alias_password_throttled")
    # The owner, anywhere else, is not locked out by that.
    assert (await guess("198.51.100.7", "the right one")).status == 200
    # Spread over addresses, the guesses meet the alias's ceiling (8): then it holds for all.
    for n in range(5):
        await assert_error(await guess(f"192.0.2.{n}"), 401, "alias_password_invalid")
    await assert_error(await guess("192.0.2.200"), 429, "alias_password_throttled")
    await assert_error(
        await guess("198.51.100.7", "the right one"), 429, "alias_password_throttled"
    )


async def test_password_guesses_are_throttled_per_address_across_aliases(make_api: Any) -> None:
    api = await make_api(alias_password_failures_per_alias=0, alias_password_failures_per_address=2)
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    for slug in ("first", "second"):
        await alias(api, {"file_id": file["id"], "slug": slug, "password": "pw-right"}, token=token)
    for slug in ("first", "second"):
        await assert_error(
            await public(api, f"/a/{slug}", **{"X-Alias-Password": "wrong"}),
            401,
            "alias_password_invalid",
        )
    await assert_error(
        await public(api, "/a/first", **{"X-Alias-Password": "pw-right"}),
        429,
        "alias_password_throttled",
    )


# -- the rate per address ----------------------------------------------------------------------


async def test_the_public_side_is_limited_per_address_without_a_credentials_bucket(
    make_api: Any, redis_client: Any
) -> None:
    api = await make_api(alias_rate_per_second=1, alias_rate_burst=2)
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    made = await alias(
        api, {"file_id": file["id"], "slug": "popular", "max_views": 10}, token=token
    )
    buckets = set(redis_client.keys("fh:rate:*"))
    assert (await public(api, "/a/popular")).status == 200
    assert (await public(api, "/a/popular")).status == 200
    refused = await public(api, "/a/popular")
    error = await assert_error(refused, 429, "rate_limited")
    assert int(refused.headers["Retry-After"]) == error["details"]["retry_after_seconds"] >= 1
    assert "RateLimit" not in refused.headers
    assert await views_of(api, token, made["id"]) == 2  # a refused request's view is given back
    made_now = set(redis_client.keys("fh:rate:*")) - buckets
    assert made_now and all(key.startswith("fh:rate:{alias-ip:") for key in made_now)


# -- what a worker keeps in memory -------------------------------------------------------------


async def test_a_slug_given_to_another_file_serves_that_file_from_the_next_request(
    api: Api,
) -> None:
    # Whatever a worker keeps of a slug or of a file's bytes, a slug deleted and taken again
    # serves only what it names now.
    first_owner = await api.user_with_session()
    second_owner = await api.user_with_session("bob@example.com")
    before = await uploaded(api, b"the file it was", token=first_owner)
    after = await uploaded(api, b"the file it is now", token=second_owner)
    made = await alias(api, {"file_id": before["id"], "slug": "handed-on"}, token=first_owner)
    assert await (await public(api, "/a/handed-on")).read() == b"the file it was"

    deleted = await api.client.delete(f"{ALIASES}/{made['id']}", headers=bearer(first_owner))
    assert deleted.status == 200
    await assert_error(await public(api, "/a/handed-on"), 404, "alias_not_found")
    await alias(api, {"file_id": after["id"], "slug": "handed-on"}, token=second_owner)

    for _ in range(2):
        assert await (await public(api, "/a/handed-on")).read() == b"the file it is now"


async def test_a_renamed_or_deleted_file_is_served_as_it_is_now(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"named twice", token=token, filename="old.txt")
    await alias(api, {"file_id": file["id"], "slug": "renamed"}, token=token)
    assert 'filename="old.txt"' in (await public(api, "/a/renamed")).headers["Content-Disposition"]

    renamed = await api.client.patch(
        f"/api/v1/files/{file['id']}", json={"name": "new.txt"}, headers=bearer(token)
    )
    assert renamed.status == 200
    assert 'filename="new.txt"' in (await public(api, "/a/renamed")).headers["Content-Disposition"]

    gone = await api.client.delete(f"/api/v1/files/{file['id']}", headers=bearer(token))
    assert gone.status == 200
    await assert_error(await public(api, "/a/renamed"), 404, "alias_not_found")
