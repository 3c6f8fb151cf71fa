"""Download tickets: a session takes one for a file, a folder or a selection of files (``POST
/download-tickets``), and a form posting it to ``POST /downloads``, with no credential header,
gets the file as an attachment (whatever its type) or the folder or the selection as a ZIP
archive, for a minute and while the session lasts;
every other use is 404 ``download_ticket_not_found``; a key, bad bodies and bad forms are
refused with their codes; the ticket is stored only as a digest and never logged.

Driven over HTTP against the real Redis server of the fixtures (and, under ``--blobs s3``, the
S3 server); time moves only through the injected ``clock``.
"""

from __future__ import annotations

import hashlib
import io
import logging
import zipfile
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync

from service.domain import credentials
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.files import FILES_URL, uploaded

TICKETS = "/api/v1/download-tickets"
DOWNLOADS = "/api/v1/downloads"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
# Past what the service keeps in memory: streamed from the blob store.
LARGE = bytes(range(256)) * 4096 * 3


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def take(api: Api, token: str, **target: str) -> dict[str, Any]:
    response = await api.client.post(TICKETS, json=target, headers=bearer(token))
    assert response.status == 201, await response.text()
    assert response.headers["Cache-Control"] == "no-store"
    data: dict[str, Any] = (await response.json())["data"]
    assert set(data) == {"ticket", "expires_at"}
    return data


async def post_form(api: Api, body: str, headers: dict[str, str] | None = None) -> Any:
    return await api.client.post(DOWNLOADS, data=body, headers={**FORM, **(headers or {})})


async def test_a_file_downloads_as_an_attachment_by_its_ticket_alone(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    picture = await uploaded(
        api, b"\x89PNG not really", token=token, filename="cat.png", content_type="image/png"
    )
    large = await uploaded(api, LARGE, token=token, filename="big.bin")

    taken = await take(api, token, file_id=picture["id"])
    response = await post_form(api, f"ticket={taken['ticket']}")

    assert response.status == 200, await response.text()
    assert await response.read() == b"\x89PNG not really"
    # Shown inline through its content address, saved through a ticket.
    assert response.headers["Content-Disposition"].startswith('attachment; filename="cat.png"')
    assert response.headers["Content-Type"] == "image/png"
    assert response.headers["ETag"] == f'"{picture["sha256"]}"'
    clock.advance(seconds=59)  # good again within its minute: a browser's retry
    assert (await post_form(api, f"ticket={taken['ticket']}")).status == 200

    streamed = await post_form(
        api, f"ticket={(await take(api, token, file_id=large['id']))['ticket']}"
    )
    assert streamed.status == 200
    assert hashlib.sha256(await streamed.read()).hexdigest() == large["sha256"]
    assert streamed.headers["Content-Disposition"].startswith("attachment;")


async def test_a_folder_downloads_as_its_zip_archive(api: Api) -> None:
    token = await api.user_with_session()
    response = await api.client.post(
        "/api/v1/folders", json={"name": "Trip"}, headers=bearer(token)
    )
    folder = (await response.json())["data"]
    await uploaded(api, b"first", token=token, filename="a.txt", folder_id=folder["id"])
    await uploaded(api, b"second", token=token, filename="b.txt", folder_id=folder["id"])

    taken = await take(api, token, folder_id=folder["id"])
    answer = await post_form(api, f"ticket={taken['ticket']}")

    assert answer.status == 200, await answer.text()
    assert answer.headers["Content-Type"] == "application/zip"
    assert answer.headers["Content-Disposition"].startswith('attachment; filename="Trip.zip"')
    archive = zipfile.ZipFile(io.BytesIO(await answer.read()))
    assert {name: archive.read(name) for name in archive.namelist()} == {
        "a.txt": b"first",
        "b.txt": b"second",
    }


async def test_a_selection_downloads_as_one_zip_archive_in_its_order(api: Api) -> None:
    token = await api.user_with_session()
    first = await uploaded(api, b"one", token=token, filename="one.txt")
    second = await uploaded(api, b"two", token=token, filename="two.txt")
    taken = await take(api, token, ids=[second["id"], first["id"], second["id"]])

    answer = await post_form(api, f"ticket={taken['ticket']}")

    assert answer.status == 200, await answer.text()
    assert answer.headers["Content-Disposition"].startswith('attachment; filename="files.zip"')
    archive = zipfile.ZipFile(io.BytesIO(await answer.read()))
    assert archive.namelist() == ["two.txt", "one.txt"]
    assert archive.read("one.txt") == b"one"
    # Refused when it is taken as the archive itself would be: naming what is not the account's.
    unknown = credentials.new_id("fil")
    response = await api.client.post(
        TICKETS, json={"ids": [first["id"], unknown]}, headers=bearer(token)
    )
    assert (await assert_error(response, 404, "file_not_found"))["details"] == {"ids": [unknown]}
    too_many = await api.client.post(TICKETS, json={"ids": ["fil_x"] * 1001}, headers=bearer(token))
    await assert_error(too_many, 400, "too_many_ids")


async def test_a_ticket_ends_after_a_minute_with_its_session_or_its_file(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    other = await api.login("alice@example.com")
    stored = await uploaded(api, b"bytes", token=token)
    expiring = await take(api, token, file_id=stored["id"])
    of_the_other_session = await take(api, other, file_id=stored["id"])
    clock.advance(seconds=60)
    await assert_error(
        await post_form(api, f"ticket={expiring['ticket']}"), 404, "download_ticket_not_found"
    )

    logged_out = await api.client.post("/api/v1/auth/logout", headers=bearer(other))
    assert logged_out.status == 200, await logged_out.text()
    await assert_error(
        await post_form(api, f"ticket={of_the_other_session['ticket']}"),
        404,
        "download_ticket_not_found",
    )

    before_deletion = await take(api, token, file_id=stored["id"])
    deleted = await api.client.delete(f"{FILES_URL}/{stored['id']}", headers=bearer(token))
    assert deleted.status == 200
    await assert_error(
        await post_form(api, f"ticket={before_deletion['ticket']}"), 404, "file_not_found"
    )


async def test_only_a_session_takes_a_ticket_for_a_file_or_folder_of_its_own(api: Api) -> None:
    token = await api.user_with_session()
    stored = await uploaded(api, b"mine", token=token)
    key = await api.create_key(token, permissions=["files.read", "folders.read"])
    bob = await api.user_with_session("bob@example.com")

    by_key = await api.client.post(
        TICKETS, json={"file_id": stored["id"]}, headers={"X-API-Key": key["secret_key"]}
    )
    await assert_error(by_key, 403, "session_required")
    await assert_error(
        await api.client.post(TICKETS, json={"file_id": stored["id"]}), 401, "credential_missing"
    )
    of_bob = await api.client.post(TICKETS, json={"file_id": stored["id"]}, headers=bearer(bob))
    await assert_error(of_bob, 404, "file_not_found")
    unknown_folder = await api.client.post(
        TICKETS, json={"folder_id": credentials.new_id("fld")}, headers=bearer(token)
    )
    await assert_error(unknown_folder, 404, "folder_not_found")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"file_id": "fil_x", "folder_id": "fld_y"},
        {"file_id": 7},
        {"file_id": ""},
        {"file_id": "fil_x", "name": "extra"},
        {"folder_id": None},
        {"ids": []},
        {"ids": "fil_x"},
        {"ids": [7]},
        {"ids": ["fil_x"], "file_id": "fil_y"},
    ],
)
async def test_a_bad_ticket_request_is_400(api: Api, body: dict[str, Any]) -> None:
    token = await api.user_with_session()
    response = await api.client.post(TICKETS, json=body, headers=bearer(token))
    await assert_error(response, 400, "validation_failed")


async def test_a_bad_form_is_refused_with_its_code_and_nothing_of_a_ticket_is_logged(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = await api.user_with_session()
    stored = await uploaded(api, b"bytes", token=token)
    ticket = (await take(api, token, file_id=stored["id"]))["ticket"]

    as_json = await api.client.post(DOWNLOADS, json={"ticket": ticket})
    await assert_error(as_json, 415, "unsupported_media_type")
    twice = await post_form(api, f"ticket={ticket}&ticket={ticket}")
    assert (await assert_error(twice, 400, "validation_failed"))["details"] == {
        "ticket": "must be given once"
    }
    await assert_error(await post_form(api, ""), 400, "validation_failed")
    # Read whole only up to the bound of every body read whole (FILEHOST_MAX_BODY_BYTES).
    too_large = await post_form(api, f"ticket={ticket}&pad=" + "x" * 100_000)
    await assert_error(too_large, 413, "payload_too_large")
    await assert_error(await post_form(api, f"ticket={ticket}&x=1"), 400, "validation_failed")
    with_a_key_too = await post_form(api, f"ticket={ticket}", {"X-API-Key": "fhk_anything"})
    await assert_error(with_a_key_too, 400, "ambiguous_credentials")
    with_a_session_too = await post_form(api, f"ticket={ticket}", bearer(token))
    await assert_error(with_a_session_too, 400, "ambiguous_credentials")
    for not_a_ticket in (token, ticket[:-1] + "x", credentials.generate_download_ticket(), "x"):
        refused = await post_form(api, f"ticket={not_a_ticket}")
        await assert_error(refused, 404, "download_ticket_not_found")
    assert (await post_form(api, f"ticket={ticket}")).status == 200

    assert ticket not in caplog.text
    assert ticket[4:20] not in caplog.text


async def test_a_ticket_is_stored_only_as_its_digest(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    token = await api.user_with_session()
    stored = await uploaded(api, b"bytes", token=token)
    ticket = (await take(api, token, file_id=stored["id"]))["ticket"]

    names = list(redis_client.scan_iter("*download-ticket*"))

    assert len(names) == 1
    assert names[0].endswith(credentials.digest(ticket))
    assert ticket[4:] not in str(redis_client.get(names[0]))
    assert 60_000 < redis_client.pttl(names[0]) <= 120_000
