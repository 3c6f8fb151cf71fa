"""A plain S3 client (botocore's own, synchronous) for the tests to look at what the service left
in a bucket, beside the service's client: the objects under a prefix, the multipart uploads
still open, an object's bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import botocore.session
from botocore.config import Config

if TYPE_CHECKING:
    from tests.support.seaweedfs import SeaweedFS

_CLIENTS: dict[str, Any] = {}


def plain_client(server: SeaweedFS) -> Any:
    client = _CLIENTS.get(server.endpoint)
    if client is None:
        from tests.support.seaweedfs import ACCESS_KEY, SECRET_KEY

        client = _CLIENTS[server.endpoint] = botocore.session.get_session().create_client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                retries={"max_attempts": 1},
                connect_timeout=2,
                read_timeout=10,
            ),
        )
    return client


def plain_client_put(server: SeaweedFS, key: str, data: bytes) -> None:
    from tests.support.seaweedfs import BUCKET

    plain_client(server).put_object(Bucket=BUCKET, Key=key, Body=data)


def objects(server: SeaweedFS, prefix: str) -> dict[str, int]:
    """Every object under ``prefix``: its key (without the prefix) and size."""
    from tests.support.seaweedfs import BUCKET

    found: dict[str, int] = {}
    pages = plain_client(server).get_paginator("list_objects_v2")
    for page in pages.paginate(Bucket=BUCKET, Prefix=prefix):
        for item in page.get("Contents", ()):
            found[item["Key"].removeprefix(prefix)] = item["Size"]
    return found


def open_uploads(server: SeaweedFS, prefix: str) -> list[str]:
    """The keys of the multipart uploads under ``prefix`` neither completed nor aborted."""
    from tests.support.seaweedfs import BUCKET

    answer = plain_client(server).list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    return [upload["Key"] for upload in answer.get("Uploads", ())]


def object_bytes(server: SeaweedFS, key: str) -> bytes:
    from tests.support.seaweedfs import BUCKET

    return bytes(plain_client(server).get_object(Bucket=BUCKET, Key=key)["Body"].read())
