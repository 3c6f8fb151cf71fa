"""The object-store blob store against a real S3 server (SeaweedFS): a blob written whole, in one
request or as a multipart upload from its first full buffer, with its SHA-256; read whole and by
range; create-only; an upload cut off by its source or cancelled leaving no object and no open
multipart upload; the sweep of a crash's leftovers; deletes one by one and in batches; and every
fault as ``StorageUnavailable`` naming the cause, never a credential."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from service.config import Settings
from service.config.readers import Secret
from service.domain.blobs import BlobMissing, ChunkSource, StorageUnavailable
from service.domain.credentials import new_id
from service.store.s3_blobs import S3Blobs
from service.store.s3_writes import PART_BYTES
from tests.support.blobs import Refused, failing_after, source_of
from tests.support.redis import free_port
from tests.support.s3 import object_bytes, objects, open_uploads, plain_client
from tests.support.seaweedfs import BUCKET, SeaweedFS


def store_settings(server: SeaweedFS, **changed: Any) -> Any:
    settings = replace(Settings(), **{**server.settings(), **changed})
    return settings.object_store


@pytest.fixture
async def blobs(seaweedfs: SeaweedFS) -> AsyncIterator[S3Blobs]:
    store = S3Blobs(store_settings(seaweedfs))
    yield store
    await store.close()


def prefix_of(blobs: S3Blobs) -> str:
    return blobs.key("fil_" + "a" * 22).removesuffix("fil_" + "a" * 22)


@pytest.mark.parametrize("size", [0, 1, 300_000, PART_BYTES - 1, 3 * PART_BYTES + 12_345])
async def test_a_blob_is_stored_whole_with_its_digest_and_read_back(
    blobs: S3Blobs, seaweedfs: SeaweedFS, size: int
) -> None:
    data = os.urandom(size)
    blob_id = new_id("fil")
    written = await blobs.put(blob_id, source_of(data))
    assert (written.size, written.sha256) == (size, hashlib.sha256(data).hexdigest())
    assert object_bytes(seaweedfs, blobs.key(blob_id)) == data
    assert open_uploads(seaweedfs, prefix_of(blobs)) == []
    blob = await blobs.open(blob_id)
    try:
        assert blob.size == size and blob.fileno() is None
        assert b"".join([chunk async for chunk in blob.chunks(0, size)]) == data
    finally:
        await blob.close()
    if size > 10:
        blob = await blobs.open(blob_id)
        try:
            part = b"".join([chunk async for chunk in blob.chunks(size // 2, 7)])
        finally:
            await blob.close()
        assert part == data[size // 2 : size // 2 + 7]


async def test_a_missing_blob_is_blob_missing(blobs: S3Blobs) -> None:
    with pytest.raises(BlobMissing):
        await blobs.open(new_id("fil"))


async def test_writes_are_create_only(blobs: S3Blobs, seaweedfs: SeaweedFS) -> None:
    blob_id = new_id("fil")
    await blobs.put(blob_id, source_of(b"first"))
    with pytest.raises(StorageUnavailable):
        await blobs.put(blob_id, source_of(b"second"))
    assert object_bytes(seaweedfs, blobs.key(blob_id)) == b"first"


@pytest.mark.parametrize("cut_at", [1000, PART_BYTES + 5, 3 * PART_BYTES])
async def test_an_upload_its_source_stops_leaves_no_object_and_no_open_upload(
    blobs: S3Blobs, seaweedfs: SeaweedFS, cut_at: int
) -> None:
    blob_id = new_id("fil")
    with pytest.raises(Refused):
        await blobs.put(blob_id, failing_after(os.urandom(cut_at), cut_at))
    assert objects(seaweedfs, prefix_of(blobs)) == {}
    assert open_uploads(seaweedfs, prefix_of(blobs)) == []


async def test_a_cancelled_upload_is_aborted_at_once(blobs: S3Blobs, seaweedfs: SeaweedFS) -> None:
    """The client gone mid-body: the task is cancelled while parts are on their way."""
    started = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        yield os.urandom(2 * PART_BYTES + 1)
        started.set()
        await asyncio.sleep(3600)
        yield b""

    task = asyncio.create_task(blobs.put(new_id("fil"), ChunkSource(chunks())))
    await asyncio.wait_for(started.wait(), 30)
    await asyncio.sleep(0.2)
    assert open_uploads(seaweedfs, prefix_of(blobs)) != []
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(50):  # the abort is shielded, and may finish just after
        if not open_uploads(seaweedfs, prefix_of(blobs)):
            break
        await asyncio.sleep(0.1)
    assert open_uploads(seaweedfs, prefix_of(blobs)) == []
    assert objects(seaweedfs, prefix_of(blobs)) == {}


async def test_the_sweep_aborts_what_a_crash_left_once_it_is_old(
    blobs: S3Blobs, seaweedfs: SeaweedFS
) -> None:
    client = plain_client(seaweedfs)
    left = client.create_multipart_upload(Bucket=BUCKET, Key=blobs.key(new_id("fil")))
    other = client.create_multipart_upload(Bucket=BUCKET, Key="elsewhere/not-ours")
    assert await blobs.sweep() == 0  # younger than an hour: maybe an upload under way
    assert len(open_uploads(seaweedfs, prefix_of(blobs))) == 1
    kept = client.create_multipart_upload(Bucket=BUCKET, Key=blobs.key(resumed := new_id("fil")))
    assert await blobs.sweep(keep=frozenset({resumed}), older_than=timedelta(seconds=-1)) == 1
    assert open_uploads(seaweedfs, prefix_of(blobs)) == [blobs.key(resumed)]
    client.abort_multipart_upload(Bucket=BUCKET, Key=blobs.key(resumed), UploadId=kept["UploadId"])
    assert open_uploads(seaweedfs, prefix_of(blobs)) == []
    assert open_uploads(seaweedfs, "elsewhere/") == ["elsewhere/not-ours"]
    client.abort_multipart_upload(
        Bucket=BUCKET, Key="elsewhere/not-ours", UploadId=other["UploadId"]
    )
    assert left["UploadId"]


async def test_deletes_one_at_a_time_and_in_batches(blobs: S3Blobs, seaweedfs: SeaweedFS) -> None:
    ids = [new_id("fil") for _ in range(5)]
    for blob_id in ids:
        await blobs.put(blob_id, source_of(blob_id.encode()))
    assert sorted(await blobs.stored()) == sorted(ids)
    assert await blobs.delete(ids[0]) is True
    assert await blobs.delete_all([*ids[1:], new_id("fil")]) == []  # one never stored
    assert objects(seaweedfs, prefix_of(blobs)) == {}
    assert await blobs.stored() == []


async def test_a_store_that_cannot_be_reached_is_storage_unavailable(seaweedfs: SeaweedFS) -> None:
    unreachable = S3Blobs(
        store_settings(
            seaweedfs, s3_endpoint=f"http://127.0.0.1:{free_port()}", s3_timeout_seconds=1.0
        )
    )
    try:
        with pytest.raises(StorageUnavailable) as raised:
            await unreachable.put(new_id("fil"), source_of(b"bytes"))
        assert "reached" in raised.value.reason or "in time" in raised.value.reason
        with pytest.raises(StorageUnavailable):
            await unreachable.open(new_id("fil"))
        assert await unreachable.readiness() is not None
    finally:
        await unreachable.close()


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"s3_bucket": "no-such-bucket"}, "FILEHOST_S3_BUCKET"),
        ({"s3_secret_access_key": Secret("not-the-secret")}, "AWS_SECRET_ACCESS_KEY"),
        ({"s3_access_key_id": Secret("AKIANOBODY")}, "AWS_ACCESS_KEY_ID"),
    ],
)
async def test_a_refusal_names_the_setting_and_never_the_credential(
    seaweedfs: SeaweedFS, changed: dict[str, Any], named: str
) -> None:
    refused = S3Blobs(store_settings(seaweedfs, **changed))
    try:
        reason = await refused.readiness()
        assert reason is not None and named in reason, reason
        said = [reason]
        if named != "FILEHOST_S3_BUCKET":  # SeaweedFS makes a bucket a write names
            with pytest.raises(StorageUnavailable) as raised:
                await refused.put(new_id("fil"), source_of(b"bytes"))
            said.append(raised.value.reason)
        for secret in ("not-the-secret", "AKIANOBODY", "filehost-tests-secret"):
            assert not any(secret in line for line in said)
    finally:
        await refused.close()


async def test_a_ready_store_is_ready(blobs: S3Blobs) -> None:
    assert await blobs.readiness() is None
