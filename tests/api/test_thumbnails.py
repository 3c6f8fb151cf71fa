"""Files' thumbnails, ``GET /api/v1/files/{id}/thumbnail`` and each file view's ``thumbnail_url``:
a WebP of at most 320×320 for a real PNG, JPEG, GIF and WebP (its EXIF orientation applied);
404 ``thumbnail_not_found`` for SVG, HTML, text, a corrupt image and a decompression bomb
(refused from its header, and never decoded again); kept beside the file in the blob store and
removed with it, alone or with its folder; another account's file and one outside a bound key's
folders unknown. Over HTTP, on the fixtures' real Redis (and the API suite's cluster and S3 run).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from PIL import ImageFile

import service.auth.thumbnails as thumbnails_module
from service.app import BLOBS
from tests.support.api import Api, assert_error, bearer
from tests.support.bound import account
from tests.support.clock import FakeClock
from tests.support.files import FILES_URL, uploaded
from tests.support.folders import folder
from tests.support.images import image_bytes, opened, png_bomb, solid_webp, turned_jpeg
from tests.support.openapi import validator


def thumbnail_path(file_id: str) -> str:
    return f"{FILES_URL}/{file_id}/thumbnail"


async def thumbnail_of(api: Api, file_id: str, headers: dict[str, str]) -> Any:
    return await api.client.get(thumbnail_path(file_id), headers=headers)


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """How long each attempt of the service's to make a thumbnail took (its header read, then
    its pixels decoded when the header allows), in seconds, in order."""
    timings: list[float] = []
    cost, make = thumbnails_module.decoding_cost, thumbnails_module.make_thumbnail

    def timed_cost(data: bytes | bytearray) -> int:
        started = time.perf_counter()
        try:
            return cost(data)
        finally:
            timings.append(time.perf_counter() - started)

    def timed_make(data: bytes | bytearray) -> bytes:
        started = time.perf_counter()
        try:
            return make(data)
        finally:
            timings[-1] += time.perf_counter() - started

    monkeypatch.setattr(thumbnails_module, "decoding_cost", timed_cost)
    monkeypatch.setattr(thumbnails_module, "make_thumbnail", timed_make)
    return timings


@pytest.mark.parametrize(
    ("image_format", "content_type", "options"),
    [
        ("PNG", "image/png", {}),
        ("JPEG", "image/jpeg", {"quality": 85}),
        ("GIF", "image/gif", {"save_all": True, "append_images": [], "duration": 100}),
        ("WEBP", "image/webp", {}),
    ],
)
async def test_a_raster_image_gets_a_webp_thumbnail_of_at_most_320_pixels(
    api: Api, image_format: str, content_type: str, options: dict[str, Any]
) -> None:
    token = await api.user_with_session()
    data = image_bytes(image_format, (1200, 900), **options)
    file = await uploaded(
        api,
        data,
        token=token,
        filename=f"picture.{image_format.lower()}",
        content_type=content_type,
    )
    assert file["thumbnail_url"] == thumbnail_path(file["id"])
    listed = await api.client.get(FILES_URL, headers=bearer(token))
    answer = await listed.json()
    validator("/components/schemas/FileListEnvelope").validate(answer)
    assert answer["data"]["files"][0]["thumbnail_url"] == file["thumbnail_url"]
    response = await thumbnail_of(api, file["id"], bearer(token))
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"] == "image/webp"
    thumbnail = opened(await response.read())
    assert (thumbnail.format, thumbnail.size) == ("WEBP", (320, 240))
    # Kept beside the file, in whichever blob store holds it.
    assert (
        await api.app[BLOBS].thumbnail(file["id"])
        == await (await thumbnail_of(api, file["id"], bearer(token))).read()
    )


async def test_the_exif_orientation_is_applied(api: Api) -> None:
    token = await api.user_with_session()
    file = await uploaded(
        api, turned_jpeg((800, 400)), token=token, filename="p.jpg", content_type="image/jpeg"
    )
    response = await thumbnail_of(api, file["id"], bearer(token))
    assert opened(await response.read()).size == (160, 320)


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        (b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>', "image/svg+xml"),
        (b"<!doctype html><script>alert(1)</script>", "text/html"),
        (b"just some words", "text/plain"),
        # A PNG's bytes under a type that is not a raster image's are never decoded.
        (image_bytes("PNG", (40, 40)), "text/plain"),
        (image_bytes("PNG", (40, 40)), "application/octet-stream"),
    ],
)
async def test_what_is_not_a_raster_image_has_none(
    api: Api, decodes: list[float], data: bytes, content_type: str
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, data, token=token, filename="f", content_type=content_type)
    assert file["thumbnail_url"] is None
    response = await thumbnail_of(api, file["id"], bearer(token))
    validator("/components/schemas/ThumbnailNotFoundError").validate(await response.json())
    await assert_error(response, 404, "thumbnail_not_found")
    assert decodes == []
    assert await api.app[BLOBS].thumbnail(file["id"]) is None


@pytest.mark.parametrize(
    ("data", "content_type", "pixels_read"),
    [
        (png_bomb(50_000, 50_000), "image/png", False),  # Pillow's own bomb bound refuses it
        (png_bomb(7_000, 7_000), "image/png", False),  # ours: 49 MP declared, over 20 decoded
        (image_bytes("PNG", (300, 300))[:400], "image/png", True),  # cut short
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 200, "image/png", False),  # a signature, then nothing
        (image_bytes("JPEG", (300, 300))[:-300], "image/jpeg", True),
        (image_bytes("BMP", (64, 64)), "image/png", False),  # a format never decoded
        (b"GIF89a nonsense", "image/gif", False),
    ],
)
async def test_a_bomb_or_a_corrupt_image_has_none_and_is_never_decoded_again(
    api: Api,
    decodes: list[float],
    monkeypatch: pytest.MonkeyPatch,
    data: bytes,
    content_type: str,
    pixels_read: bool,
) -> None:
    loads: list[tuple[int, int]] = []
    real_load = ImageFile.ImageFile.load

    def load(image: ImageFile.ImageFile) -> Any:
        loads.append(image.size)
        return real_load(image)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    token = await api.user_with_session()
    file = await uploaded(api, data, token=token, filename="bad", content_type=content_type)
    assert file["thumbnail_url"] == thumbnail_path(file["id"])
    for _ in range(3):
        await assert_error(
            await thumbnail_of(api, file["id"], bearer(token)), 404, "thumbnail_not_found"
        )
    assert len(decodes) == 1
    # A bomb is refused from its header: not a pixel of it is decoded, in no time.
    assert bool(loads) == pixels_read, loads
    assert decodes[0] < 0.5, decodes
    assert await api.app[BLOBS].thumbnail(file["id"]) == b""


async def test_an_image_that_would_take_too_much_memory_to_decode_has_none(
    api: Api, decodes: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within every pixel bound, but a WebP's decoder holds several canvases: 14 megapixels of
    WebP would take about 240 MB, past the 200 MiB a worker's decodes share."""
    token = await api.user_with_session()
    big = await uploaded(
        api, solid_webp((4100, 3500)), token=token, filename="w.webp", content_type="image/webp"
    )
    made: list[int] = []
    monkeypatch.setattr(thumbnails_module, "make_thumbnail", lambda data: made.append(1))
    await assert_error(
        await thumbnail_of(api, big["id"], bearer(token)), 404, "thumbnail_not_found"
    )
    assert len(decodes) == 1 and made == []  # refused from its header


async def test_requests_at_once_make_it_once(api: Api, decodes: list[float]) -> None:
    token = await api.user_with_session()
    file = await uploaded(
        api, image_bytes("PNG", (900, 900)), token=token, filename="a.png", content_type="image/png"
    )
    answers = await asyncio.gather(
        *(thumbnail_of(api, file["id"], bearer(token)) for _ in range(6))
    )
    bodies = {await answer.read() for answer in answers}
    assert [answer.status for answer in answers] == [200] * 6 and len(bodies) == 1
    assert len(decodes) == 1


async def test_deleting_a_file_or_its_folder_removes_its_thumbnail(api: Api) -> None:
    token = await api.user_with_session()
    blobs = api.app[BLOBS]
    outer = await folder(api, "outer", token=token)
    inner = await folder(api, "inner", outer["id"], token=token)
    png = image_bytes("PNG", (500, 500))
    alone = await uploaded(api, png, token=token, content_type="image/png")
    inside = [
        await uploaded(api, png, token=token, content_type="image/png", folder_id=place["id"])
        for place in (outer, inner)
    ]
    bad = await uploaded(
        api, b"not a png", token=token, content_type="image/png", folder_id=inner["id"]
    )
    for file in (alone, *inside, bad):
        await thumbnail_of(api, file["id"], bearer(token))
        assert await blobs.thumbnail(file["id"]) is not None
    deleted = await api.client.delete(f"{FILES_URL}/{alone['id']}", headers=bearer(token))
    assert deleted.status == 200
    assert await blobs.thumbnail(alone["id"]) is None
    deleted = await api.client.delete(
        f"/api/v1/folders/{outer['id']}", params={"recursive": "true"}, headers=bearer(token)
    )
    assert deleted.status == 200, await deleted.text()
    for file in (*inside, bad):
        assert await blobs.thumbnail(file["id"]) is None
    # Only files' bytes are ever listed: a thumbnail is never taken for a file.
    assert await blobs.stored() == []


async def test_a_file_deleted_while_its_thumbnail_is_made_leaves_none(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await api.user_with_session()
    file = await uploaded(
        api, image_bytes("PNG", (400, 400)), token=token, content_type="image/png"
    )
    real = thumbnails_module.make_thumbnail
    deleting: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def slow(data: bytes | bytearray) -> bytes:
        made = real(data)
        asyncio.run_coroutine_threadsafe(_wait(deleting), loop).result()
        return made

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(thumbnails_module, "make_thumbnail", slow)
    asked = asyncio.ensure_future(thumbnail_of(api, file["id"], bearer(token)))
    await asyncio.sleep(0.05)
    deleted = await api.client.delete(f"{FILES_URL}/{file['id']}", headers=bearer(token))
    assert deleted.status == 200
    deleting.set_result(None)
    await assert_error(await asked, 404, "file_not_found")
    assert await api.app[BLOBS].thumbnail(file["id"]) is None


async def _wait(future: asyncio.Future[None]) -> None:
    await future


async def test_only_a_file_the_credential_reaches_has_one(api: Api, clock: FakeClock) -> None:
    bound = await account(api, clock)
    png = image_bytes("PNG", (64, 64))
    inside = await uploaded(
        api, png, token=bound.token, content_type="image/png", folder_id=bound.folder_id("inbox")
    )
    outside = await uploaded(
        api, png, token=bound.token, content_type="image/png", folder_id=bound.folder_id("private")
    )
    assert (await thumbnail_of(api, inside["id"], bound.secret)).status == 200
    await assert_error(await thumbnail_of(api, outside["id"], bound.secret), 404, "file_not_found")
    other = await api.user_with_session("other@example.com")
    await assert_error(await thumbnail_of(api, inside["id"], bearer(other)), 404, "file_not_found")
    await assert_error(
        await thumbnail_of(api, "fil_" + "x" * 22, bearer(bound.token)), 404, "file_not_found"
    )
    upload_only = await api.create_key(bound.token, name="up", permissions=["files.write"])
    await assert_error(
        await thumbnail_of(api, inside["id"], {"X-API-Key": upload_only["secret_key"]}),
        403,
        "insufficient_permission",
    )
