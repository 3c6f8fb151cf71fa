"""Uploads to the files resource: multipart bodies written byte by byte, and the request."""

from __future__ import annotations

from typing import Any

from tests.support.api import Api, bearer

FILES_URL = "/api/v1/files"


def auth(*, key: str | None = None, token: str | None = None) -> dict[str, str]:
    if key is not None:
        return {"X-API-Key": key}
    if token is not None:
        return bearer(token)
    return {}


def multipart(
    data: bytes,
    *,
    filename: bytes | str = "hello.txt",
    content_type: str | None = "text/plain",
    field: str = "file",
    boundary: str = "xXxBoundaryxXx",
    extra: bytes = b"",
    folder_id: str | None = None,
    folder_after: bool = False,
) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body written byte by byte (so odd names arrive exactly as given);
    with ``folder_id``, that field too, before the file (after it with ``folder_after``); the
    file's part without a Content-Type for ``content_type`` None."""
    # A str is written as an HTTP quoted-string (backslash and quote escaped), bytes as they are.
    if isinstance(filename, str):
        name = filename.replace("\\", "\\\\").replace('"', '\\"').encode()
    else:
        name = filename
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="'.encode()
        + name
        + b'"\r\n'
        + (b"" if content_type is None else f"Content-Type: {content_type}\r\n".encode())
        + b"\r\n"
    )
    field_part = b""
    if folder_id is not None:
        field_part = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="folder_id"\r\n\r\n'
            f"{folder_id}\r\n"
        ).encode()
    before, after = (b"", field_part) if folder_after else (field_part, b"")
    body = before + head + data + b"\r\n" + after + f"{extra.decode()}--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


async def upload(
    api: Api,
    data: bytes,
    *,
    key: str | None = None,
    token: str | None = None,
    **parts: Any,
) -> Any:
    body, headers = multipart(data, **parts)
    return await api.client.post(
        FILES_URL, data=body, headers={**headers, **auth(key=key, token=token)}
    )


async def uploaded(api: Api, data: bytes, **kwargs: Any) -> dict[str, Any]:
    response = await upload(api, data, **kwargs)
    assert response.status == 201, await response.text()
    return (await response.json())["data"]


async def many_uploaded(
    api: Api, count: int, *, prefix: str = "file", **kwargs: Any
) -> list[dict[str, Any]]:
    """``count`` files uploaded one after another, ``<prefix>-<n>.txt`` holding ``<prefix> <n>``
    (the bulk and archive tests' hundreds)."""
    return [
        await uploaded(api, f"{prefix} {n}".encode(), filename=f"{prefix}-{n}.txt", **kwargs)
        for n in range(count)
    ]
