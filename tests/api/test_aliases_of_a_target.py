"""``GET /aliases?target_id=``: the aliases of one file or folder only (the dashboard's "share
once" looks for an existing link there before making one), newest first, a page at a time, as
the aliases change, go and go with their target; another account's target never listed. Over
HTTP, on the fixtures' real Redis (and the API suite's cluster run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.aliases import ALIASES, alias, edit_alias, listed
from tests.support.api import Api, assert_error, bearer
from tests.support.files import uploaded
from tests.support.folders import folder


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


def slugs(aliases: list[dict[str, Any]]) -> list[str]:
    return [item["slug"] for item in aliases]


async def test_one_targets_aliases_newest_first_as_they_change_and_go(api: Api, clock: Any) -> None:
    token = await api.user_with_session()
    report = await uploaded(api, b"report", token=token)
    other = await uploaded(api, b"other", token=token)
    docs = await folder(api, "Docs", token=token)
    for slug in ("report-1", "report-2", "report-3"):
        await alias(api, {"file_id": report["id"], "slug": slug}, token=token)
        await alias(api, {"file_id": other["id"], "slug": f"other-{slug}"}, token=token)
        clock.advance(seconds=1)
    await alias(api, {"folder_id": docs["id"], "slug": "the-docs"}, token=token)

    # Pages of two (the helper follows the cursors): only the report's, newest first.
    of_report = await listed(api, report["id"], token=token)
    assert slugs(of_report) == ["report-3", "report-2", "report-1"]
    assert {item["target"]["id"] for item in of_report} == {report["id"]}
    assert slugs(await listed(api, docs["id"], token=token)) == ["the-docs"]
    assert len(await listed(api, token=token)) == 7  # without the filter: every one

    # A new slug is listed once, under its new name; a deleted alias no more.
    response = await edit_alias(api, of_report[1]["id"], {"slug": "renamed"}, token=token)
    assert response.status == 200, await response.text()
    response = await api.client.delete(f"{ALIASES}/{of_report[0]['id']}", headers=bearer(token))
    assert response.status == 200
    assert slugs(await listed(api, report["id"], token=token)) == ["renamed", "report-1"]

    # The file deleted: its aliases went with it, the other file's stay.
    response = await api.client.delete(f"/api/v1/files/{report['id']}", headers=bearer(token))
    assert response.status == 200
    assert await listed(api, report["id"], token=token) == []
    assert len(await listed(api, other["id"], token=token)) == 3


async def test_another_accounts_target_is_never_listed_and_a_bad_id_is_named(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    file = await uploaded(api, b"alice's", token=alice)
    await alias(api, {"file_id": file["id"], "slug": "alices"}, token=alice)
    bobs = await uploaded(api, b"bob's", token=bob)
    await alias(api, {"file_id": bobs["id"], "slug": "bobs"}, token=bob)

    assert await listed(api, file["id"], token=bob) == []
    assert slugs(await listed(api, bobs["id"], token=bob)) == ["bobs"]
    assert slugs(await listed(api, file["id"], token=alice)) == ["alices"]

    for query in (
        "target_id=als_0000000000000000000000",
        "target_id=fil_short",
        "target_id=",
        f"target_id={file['id']}&target_id={file['id']}",
    ):
        error = await assert_error(
            await api.client.get(f"{ALIASES}?{query}", headers=bearer(alice)),
            400,
            "validation_failed",
        )
        assert set(error["details"]) == {"target_id"}, query
