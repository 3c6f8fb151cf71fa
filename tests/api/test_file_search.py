"""Finding and ordering files: ``GET /files`` with ``q`` (words of a name, ignoring case and
accents), ``sort`` and ``type``, past the first page, in one folder or the whole account, for a
key bound to folders, and the cursors that go on from each page (refused with any other query).
Over HTTP, on the fixtures' real Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.app import STORE
from service.domain.credentials import new_id
from service.domain.file_search import RECORDS_AT_ONCE, WHOLE_LISTING_FROM
from service.domain.records import FileRecord
from service.store.files import FilesStore
from tests.support.api import Api, assert_error, bearer
from tests.support.bound import account, file_ids
from tests.support.clock import FakeClock
from tests.support.files import FILES_URL, uploaded
from tests.support.folders import folder
from tests.support.openapi import validator

# name, size, content type: uploaded in this order, a millisecond apart.
FILES = [
    ("Holiday.PNG", 7, "image/png"),
    ("straße-map.jpg", 3, "image/jpeg"),
    ("clip.mp4", 11, "video/mp4"),
    ("song.mp3", 5, "audio/mpeg"),
    ("notes.txt", 2, "text/plain"),
    ("report.pdf", 13, "application/pdf"),
    ("archive.zip", 1, "application/zip"),
    ("holiday-2.png", 9, "image/png"),
    ("STRASSE.txt", 4, "text/plain"),
    ("data.bin", 8, "application/octet-stream"),
]


async def _upload_all(api: Api, clock: FakeClock, token: str, **where: Any) -> dict[str, str]:
    ids = {}
    for name, size, content_type in FILES:
        clock.advance(seconds=0.001)
        made = await uploaded(
            api, b"x" * size, token=token, filename=name, content_type=content_type, **where
        )
        ids[name] = made["id"]
    return ids


async def _pages(api: Api, headers: dict[str, str], **query: Any) -> list[list[str]]:
    """The names of every page ``GET /files`` answers with ``query``, following its cursors."""
    params = {name: str(value) for name, value in query.items()}
    pages = []
    while True:
        response = await api.client.get(FILES_URL, params=params, headers=headers)
        assert response.status == 200, await response.text()
        answer = await response.json()
        validator("/components/schemas/FileListEnvelope").validate(answer)
        pages.append([file["name"] for file in answer["data"]["files"]])
        if answer["data"]["next_cursor"] is None:
            return pages
        params["cursor"] = answer["data"]["next_cursor"]


async def test_q_finds_names_case_insensitively_past_the_first_page(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    await _upload_all(api, clock, token)
    pages = await _pages(api, bearer(token), q="HOLIDAY", limit=1)
    assert pages == [["holiday-2.png"], ["Holiday.PNG"]]  # newest first, two pages
    # Full case folding: ß is ss, both ways.
    found = await _pages(api, bearer(token), q="strasse")
    assert found == [["STRASSE.txt", "straße-map.jpg"]]
    assert await _pages(api, bearer(token), q="Straße") == found
    assert await _pages(api, bearer(token), q="nothing like it") == [[]]


async def test_q_finds_every_word_ignoring_accents_as_people_type(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    for name in ("Résumé 2026.pdf", "RESUME-old.txt", "resumes.zip", "re-sume.txt", "Ἀθῆναι.jpg"):
        clock.advance(seconds=0.001)
        await uploaded(api, b"x", token=token, filename=name, content_type="text/plain")
    resumes = [["resumes.zip", "RESUME-old.txt", "Résumé 2026.pdf"]]
    assert await _pages(api, bearer(token), q="resume") == resumes
    assert await _pages(api, bearer(token), q="RÉSUMÉ") == resumes
    assert await _pages(api, bearer(token), q="re\u0301sume\u0301") == resumes  # as macOS types it
    assert await _pages(api, bearer(token), q="sumé 2026") == [["Résumé 2026.pdf"]]
    # Every word, in any order, wherever it is in the name.
    assert await _pages(api, bearer(token), q="2026  RESUME") == [["Résumé 2026.pdf"]]
    assert await _pages(api, bearer(token), q="old txt resume") == [["RESUME-old.txt"]]
    assert await _pages(api, bearer(token), q="resume 2025") == [[]]
    assert await _pages(api, bearer(token), q="αθηναι") == [["Ἀθῆναι.jpg"]]
    # Marks of other scripts spell other words: a search keeps them.
    await uploaded(api, b"x", token=token, filename="नमस्ते.txt", content_type="text/plain")
    assert await _pages(api, bearer(token), q="नमस्ते") == [["नमस्ते.txt"]]
    assert await _pages(api, bearer(token), q="नमसत") == [[]]


async def test_every_order_covers_every_file_page_by_page(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    await _upload_all(api, clock, token)
    by_upload = [name for name, _, _ in FILES]
    sizes = {name: size for name, size, _ in FILES}
    expected = {
        "name": sorted(by_upload, key=str.casefold),
        "-name": sorted(by_upload, key=str.casefold, reverse=True),
        "created_at": by_upload,
        "-created_at": by_upload[::-1],
        "size": sorted(by_upload, key=sizes.__getitem__),
        "-size": sorted(by_upload, key=sizes.__getitem__, reverse=True),
    }
    for sort, order in expected.items():
        pages = await _pages(api, bearer(token), sort=sort, limit=3)
        assert [name for page in pages for name in page] == order, sort
        assert [len(page) for page in pages] == [3, 3, 3, 1], sort
    # q and sort together: the matches, in that order.
    assert await _pages(api, bearer(token), q=".png", sort="size") == [
        ["Holiday.PNG", "holiday-2.png"]
    ]


async def test_type_classes_come_from_the_stored_content_type(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    await _upload_all(api, clock, token)
    expected = {
        "image": ["holiday-2.png", "straße-map.jpg", "Holiday.PNG"],
        "video": ["clip.mp4"],
        "audio": ["song.mp3"],
        "text": ["STRASSE.txt", "notes.txt"],
        "pdf": ["report.pdf"],
        "other": ["data.bin", "archive.zip"],
    }
    for kind, names in expected.items():
        assert await _pages(api, bearer(token), type=kind) == [names], kind
    assert await _pages(api, bearer(token), type="text", q="strasse") == [["STRASSE.txt"]]


async def test_a_search_combines_with_a_folder(api: Api, clock: FakeClock) -> None:
    token = await api.user_with_session()
    inside = await folder(api, "Inside", token=token)
    await _upload_all(api, clock, token, folder_id=inside["id"])
    clock.advance(seconds=0.001)
    await uploaded(api, b"top", token=token, filename="holiday-top.png", content_type="image/png")
    assert await _pages(api, bearer(token), q="holiday", folder_id=inside["id"]) == [
        ["holiday-2.png", "Holiday.PNG"]
    ]
    assert await _pages(api, bearer(token), q="holiday", folder_id="root") == [["holiday-top.png"]]
    assert await _pages(api, bearer(token), q="holiday") == [
        ["holiday-top.png", "holiday-2.png", "Holiday.PNG"]
    ]
    unknown = await api.client.get(
        FILES_URL,
        params={"q": "holiday", "folder_id": "fld_0000000000000000000000"},
        headers=bearer(token),
    )
    details = (await assert_error(unknown, 404, "folder_not_found"))["details"]
    assert details == {"field": "folder_id"}


async def test_a_key_bound_to_folders_finds_only_what_they_hold(api: Api, clock: FakeClock) -> None:
    laid_out = await account(api, clock)
    # Every file is named <place>.txt; the key's folders hold inbox, inbox_sub and outbox.
    found = await file_ids(api, laid_out.secret, q=".txt", sort="name", limit=1)
    assert found == [laid_out.files[place] for place in ("inbox", "inbox_sub", "outbox")]
    assert await file_ids(api, laid_out.secret, q="private") == []
    inbox = laid_out.folder_id("inbox")
    assert await file_ids(api, laid_out.secret, type="text", folder_id=inbox) == [
        laid_out.files["inbox"]
    ]
    for outside in (laid_out.folder_id("private"), "root"):
        refused = await api.client.get(
            FILES_URL, params={"q": "txt", "folder_id": outside}, headers=laid_out.secret
        )
        await assert_error(refused, 404, "folder_not_found")
    # Another account's files are never found.
    other = await api.user_with_session("other@example.com")
    assert await file_ids(api, bearer(other), q="txt") == []


async def test_a_cursor_goes_on_only_with_the_query_it_was_made_for(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    await _upload_all(api, clock, token)

    async def cursor_of(**query: Any) -> str:
        params = {name: str(value) for name, value in query.items()}
        response = await api.client.get(
            FILES_URL, params={**params, "limit": "1"}, headers=bearer(token)
        )
        assert response.status == 200, await response.text()
        cursor = (await response.json())["data"]["next_cursor"]
        assert cursor is not None
        return str(cursor)

    searched = await cursor_of(q="holiday")
    plain = await cursor_of()
    refused_with = [
        {"q": "png", "cursor": searched},  # another name
        {"q": "holiday", "sort": "name", "cursor": searched},  # another order
        {"q": "holiday", "type": "image", "cursor": searched},  # another type
        {"q": "holiday", "folder_id": "root", "cursor": searched},  # another place
        {"cursor": searched},  # the plain listing
        {"sort": "-created_at", "cursor": plain},  # a plain listing's cursor, searched
        {"q": "holiday", "cursor": searched[:-2]},  # not a cursor at all
    ]
    for params in refused_with:
        response = await api.client.get(FILES_URL, params=params, headers=bearer(token))
        details = (await assert_error(response, 400, "validation_failed"))["details"]
        assert set(details) == {"cursor"}, params
    going_on = await api.client.get(
        FILES_URL, params={"q": "holiday", "cursor": searched}, headers=bearer(token)
    )
    assert [file["name"] for file in (await going_on.json())["data"]["files"]] == ["Holiday.PNG"]


async def test_a_search_that_is_not_one_is_refused_naming_each_parameter(api: Api) -> None:
    token = await api.user_with_session()
    cases = [
        ([("q", "")], {"q"}),
        ([("q", "x" * 101)], {"q"}),
        ([("q", "   ")], {"q"}),  # no word to look for
        ([("q", " \u0301 ")], {"q"}),  # nor an accent alone
        ([("q", "a"), ("q", "b")], {"q"}),
        ([("sort", "name,size")], {"sort"}),
        ([("sort", "")], {"sort"}),
        ([("type", "images")], {"type"}),
        ([("q", ""), ("sort", "up"), ("type", "pdf")], {"q", "sort"}),
    ]
    for params, fields in cases:
        response = await api.client.get(FILES_URL, params=params, headers=bearer(token))
        details = (await assert_error(response, 400, "validation_failed"))["details"]
        assert set(details) == fields, params
    # 100 characters is a search; q matches its own length in characters, not bytes.
    longest = await api.client.get(FILES_URL, params={"q": "é" * 100}, headers=bearer(token))
    assert longest.status == 200


async def test_a_search_of_thousands_of_files_is_the_same_search(
    api: Api, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More files than a page holds are read and searched a part at a time, the worker
    answering others between the parts: the answers are those of one search over them all."""
    user = await api.create_user("many@example.com")
    token = await api.login("many@example.com")
    files = api.app[STORE].files
    count = WHOLE_LISTING_FROM + 2 * RECORDS_AT_ONCE + 7
    for index in range(count):
        stem = "Report" if index % 3 == 0 else "photo"
        extension, content_type = ("txt", "text/plain") if index % 2 else ("png", "image/png")
        record = FileRecord(
            id=new_id("fil"),
            name=f"{stem}-{index:05}.{extension}",
            size=index,
            content_type=content_type,
            sha256="0" * 64,
            created_at=clock.ms + index,
        )
        assert await files.add(user.id, record, count)
    turns = 0
    sleep = asyncio.sleep

    async def counted(delay: float) -> None:
        nonlocal turns
        turns += delay == 0
        await sleep(delay)

    monkeypatch.setattr(asyncio, "sleep", counted)
    reports = [f"Report-{index:05}.{'txt' if index % 2 else 'png'}" for index in range(0, count, 3)]
    pages = await _pages(api, bearer(token), q="report", sort="name", limit=1000)
    assert [name for page in pages for name in page] == reports
    assert turns >= 2 * (count // RECORDS_AT_ONCE)  # read, then searched, a part at a time
    texts = await _pages(api, bearer(token), q="REPORT", type="text", sort="-size", limit=1000)
    assert [name for page in texts for name in page] == [
        name for name in reversed(reports) if name.endswith(".txt")
    ]


async def test_without_a_search_the_listing_reads_only_its_page(
    api: Api, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plain listing (on the gateway's path) never reads the whole account: any query
    without ``q``, ``sort`` and ``type`` takes the listing's own path."""
    token = await api.user_with_session()
    inside = await folder(api, "Inside", token=token)
    await _upload_all(api, clock, token, folder_id=inside["id"])

    reads: list[str] = []
    every_file = FilesStore.every_file

    async def whole(self: FilesStore, user_id: str) -> Any:
        reads.append(user_id)
        return await every_file(self, user_id)

    monkeypatch.setattr(FilesStore, "every_file", whole)
    for params in ({}, {"limit": "2"}, {"folder_id": inside["id"]}, {"folder_id": "root"}):
        response = await api.client.get(FILES_URL, params=params, headers=bearer(token))
        assert response.status == 200, (params, await response.text())
    assert reads == []
    searched = await api.client.get(FILES_URL, params={"sort": "name"}, headers=bearer(token))
    assert searched.status == 200 and len(reads) == 1  # the search reads them all, once
