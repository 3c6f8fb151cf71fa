"""``GET /api/v1/usage``: what the account holds against the deployment's limits (files by count
and bytes, in all and by type class; folders, aliases and keys by count; each with its most),
moving as files come and go, never counting another account's; for a session or a key with
``settings.read`` that is not bound to folders.

Driven over HTTP against the real Redis server of the fixtures (and, under ``--blobs s3``, the
S3 server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.aliases import alias
from tests.support.api import Api, assert_error, bearer
from tests.support.files import FILES_URL, uploaded

USAGE = "/api/v1/usage"
TYPES = ("image", "video", "audio", "text", "pdf", "other")


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(
        data_dir=tmp_path,
        max_files_per_account=50,
        max_folders_per_account=20,
        max_aliases_per_account=10,
        max_keys_per_account=5,
        max_upload_bytes=1_000_000,
    )


async def usage(api: Api, **credential: str) -> dict[str, Any]:
    response = await api.client.get(USAGE, headers=credential)
    assert response.status == 200, await response.text()
    data: dict[str, Any] = (await response.json())["data"]
    return data


def by_type(**counts: tuple[int, int]) -> dict[str, dict[str, int]]:
    return {
        kind: dict(zip(("count", "bytes"), counts.get(kind, (0, 0)), strict=True)) for kind in TYPES
    }


async def test_an_empty_account_holds_nothing_of_what_it_may(api: Api) -> None:
    token = await api.user_with_session()

    assert await usage(api, **bearer(token)) == {
        "files": {
            "count": 0,
            "bytes": 0,
            "max": 50,
            "max_file_bytes": 1_000_000,
            "by_type": by_type(),
        },
        "folders": {"count": 0, "max": 20},
        "aliases": {"count": 0, "max": 10},
        "keys": {"count": 0, "max": 5},
    }


async def test_what_the_account_holds_is_counted_as_it_comes_and_goes(api: Api) -> None:
    token = await api.user_with_session()
    bob = await api.user_with_session("bob@example.com")
    await uploaded(api, b"bob's bytes are not alice's", token=bob)
    picture = await uploaded(api, b"P" * 1000, token=token, content_type="image/png")
    await uploaded(api, b"V" * 3000, token=token, content_type="video/mp4")
    notes = await uploaded(api, b"T" * 20, token=token, content_type="text/plain")
    await uploaded(api, b"%PDF" * 10, token=token, content_type="application/pdf")
    await uploaded(api, b"Z" * 7, token=token, content_type="application/zip")
    for name in ("Work", "Trips"):
        made = await api.client.post("/api/v1/folders", json={"name": name}, headers=bearer(token))
        assert made.status == 201
    await alias(api, {"file_id": picture["id"]}, token=token)
    reader = await api.create_key(token, permissions=["settings.read"])

    seen = await usage(api, **{"X-API-Key": reader["secret_key"]})

    assert seen["files"] == {
        "count": 5,
        "bytes": 1000 + 3000 + 20 + 40 + 7,
        "max": 50,
        "max_file_bytes": 1_000_000,
        "by_type": by_type(
            image=(1, 1000), video=(1, 3000), text=(1, 20), pdf=(1, 40), other=(1, 7)
        ),
    }
    assert seen["folders"] == {"count": 2, "max": 20}
    assert seen["aliases"] == {"count": 1, "max": 10}
    assert seen["keys"] == {"count": 1, "max": 5}

    deleted = await api.client.delete(f"{FILES_URL}/{notes['id']}", headers=bearer(token))
    assert deleted.status == 200
    after = (await usage(api, **bearer(token)))["files"]
    assert (after["count"], after["bytes"], after["by_type"]["text"]) == (
        4,
        4047,
        {"count": 0, "bytes": 0},
    )


async def test_only_a_session_or_a_whole_account_key_with_settings_read_reads_it(
    api: Api,
) -> None:
    token = await api.user_with_session()
    without = await api.create_key(token, permissions=["files.read"])
    response = await api.client.post(
        "/api/v1/folders", json={"name": "Mine"}, headers=bearer(token)
    )
    folder = (await response.json())["data"]
    bound = await api.create_key(token, permissions=["settings.read"], folder_ids=[folder["id"]])

    lacking = await api.client.get(USAGE, headers={"X-API-Key": without["secret_key"]})
    await assert_error(lacking, 403, "insufficient_permission")
    of_a_bound_key = await api.client.get(USAGE, headers={"X-API-Key": bound["secret_key"]})
    await assert_error(of_a_bound_key, 403, "insufficient_permission")
    await assert_error(await api.client.get(USAGE), 401, "credential_missing")
