"""Resumable uploads as a tus client sends them: the headers of each request, written out."""

from __future__ import annotations

import base64
from typing import Any

from service.app import BLOBS
from service.store.directory_blobs import DirectoryBlobs
from service.store.s3_blobs import S3Blobs
from service.store.s3_partials import UPLOADS
from tests.support.api import Api, bearer, path_of
from tests.support.folders import folder

UPLOADS_URL = "/api/v1/uploads"
TUS = {"Tus-Resumable": "1.0.0"}
OCTETS = {"Content-Type": "application/offset+octet-stream"}


def metadata(**values: str) -> str:
    """An ``Upload-Metadata`` value: each pair as ``key base64(value)``."""
    return ",".join(
        f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in values.items()
    )


async def create(api: Api, auth: dict[str, str], length: int | None, **meta: str) -> Any:
    """``POST /uploads`` for an upload of ``length`` bytes (None: deferred)."""
    headers = {**TUS, **auth}
    if length is None:
        headers["Upload-Defer-Length"] = "1"
    else:
        headers["Upload-Length"] = str(length)
    if meta:
        headers["Upload-Metadata"] = metadata(**meta)
    return await api.client.post(UPLOADS_URL, headers=headers)


async def created(api: Api, auth: dict[str, str], length: int | None, **meta: str) -> str:
    """A new upload's URL."""
    response = await create(api, auth, length, **meta)
    assert response.status == 201, await response.text()
    return path_of(response.headers["Location"])


async def send(
    api: Api, url: str, auth: dict[str, str], offset: int, data: bytes, **headers: str
) -> Any:
    """``PATCH`` ``data`` at ``offset``."""
    extra = {name.replace("_", "-"): value for name, value in headers.items()}
    return await api.client.patch(
        url,
        data=data,
        headers={**TUS, **OCTETS, **auth, "Upload-Offset": str(offset), **extra},
    )


async def offset_of(api: Api, url: str, auth: dict[str, str]) -> int:
    response = await api.client.head(url, headers={**TUS, **auth})
    assert response.status == 200, response.status
    return int(response.headers["Upload-Offset"])


async def content_of(api: Api, token: str, file_id: str) -> bytes:
    response = await api.client.get(f"/api/v1/files/{file_id}/content", headers=bearer(token))
    assert response.status == 200
    return await response.read()


async def files_of(api: Api, token: str) -> list[dict[str, Any]]:
    response = await api.client.get("/api/v1/files", headers=bearer(token))
    return list((await response.json())["data"]["files"])


async def nothing_left(api: Api) -> None:
    """No bytes of an upload outside the files: no partial file, tail object or open multipart
    upload."""
    blobs = api.app[BLOBS]
    assert await blobs.leftovers() == []
    if isinstance(blobs, DirectoryBlobs):
        partials = blobs.root.parent / "uploads"
        assert not partials.exists() or list(partials.iterdir()) == []
    else:
        assert isinstance(blobs, S3Blobs)
        listed = await blobs.call("list_objects_v2", Prefix=blobs.base_prefix + UPLOADS)
        assert listed.get("Contents", []) == []


async def bound_inside(api: Api, token: str) -> tuple[dict[str, str], str, str]:
    """A key that may read and write files, bound to a new folder ``inside``, beside a new
    folder ``outside``: the key's headers and the two folders' ids."""
    inside = await folder(api, "inside", token=token)
    outside = await folder(api, "outside", token=token)
    bound = await api.create_key(
        token, permissions=["files.read", "files.write"], folder_ids=[inside["id"]]
    )
    return {"X-API-Key": bound["secret_key"]}, inside["id"], outside["id"]
