"""The object-store backend of the blob store (``protocols.blobs.BlobStore``): each file's bytes
as one object of an S3-compatible bucket (AWS S3, Cloudflare R2, Backblaze B2, SeaweedFS, Ceph RGW,
Garage), so any number of instances on any hosts serve every file. aiobotocore is the client.

**Keys.** A blob is ``<FILEHOST_S3_PREFIX>files/<file id>``, its thumbnail (if one was made)
``<FILEHOST_S3_PREFIX>files/<file id>.thumbnail``, one ``PutObject`` that replaces any, removed
in the same requests as the blob; nothing else of the service is written under ``files/``
(resumable uploads keep their parts elsewhere, so the sweep below never touches them).

**Uploads stream, in bounded memory, all or nothing** (``service.store.s3_writes``): parts
sent as they fill, at most ``WORKER_PARTS_IN_FLIGHT`` of all a worker's uploads on their way at
once, so a client sending slowly holds only its own buffer. A blob that fits in one buffer is
one ``PutObject``; a larger one a multipart upload from its first full buffer on. Both are
create-only (``If-None-Match: *``), so
a retried write never replaces an object. Whatever stops an upload (the client gone, the size
limit, the store failing) aborts its multipart upload at once, shielded from the cancellation;
whatever a crash leaves, ``sweep`` aborts once it is an hour old (the start-up and every hour).
A completion whose answer was lost and that the client retried is found whole by a ``HEAD``.

**Faults.** Every request is bounded by ``FILEHOST_S3_TIMEOUT_SECONDS`` (to connect, and for
each answer or piece of a body), and one without a body to send by that in all; a store that
can't be reached, answers too slowly, refuses the credentials or lost its bucket raises
``StorageUnavailable`` naming which (never a credential), which the HTTP layer answers 503
``storage_unavailable``. Nothing here holds a broken connection: the next request tries again.

**Downloads** read the object once for a whole file; a range is a ranged ``GET``.
``download_url`` gives a short-lived SigV4 URL for redirect downloads, signed for the address
clients reach the store at (``FILEHOST_S3_PUBLIC_ENDPOINT``, when it is not the service's own).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

from aiobotocore.session import get_session
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from service.config.settings import ObjectStoreSettings
from service.domain.blobs import READ_CHUNK, Blob, BlobMissing, Source, StorageUnavailable, Written
from service.store.blobs import (
    BLOB_ID,
    MAX_THUMBNAIL_BYTES,
    THUMBNAIL_SUFFIX,
    checked,
    thumbnail_name,
)
from service.store.s3_writes import (
    FIRST_BYTES,
    MultipartUpload,
    PartBody,
    fill,
    grown,
)

log = logging.getLogger("service.store.s3_blobs")

# Parts of all a worker's uploads on their way at once.
WORKER_PARTS_IN_FLIGHT = 8
# Objects one DeleteObjects request removes (S3's most): a blob and its thumbnail are two.
DELETE_BATCH = 1000
# How old an incomplete multipart upload of a blob is before ``sweep`` aborts it.
SWEEP_AFTER = timedelta(hours=1)
# How long a redirect download's URL works.
PRESIGNED_SECONDS = 60

FILES = "files/"
# One botocore session per process: it loads S3's service model once (~60 ms), so each client
# made from it (one per application) costs a few ms.
_SESSION: Any = None


def _session() -> Any:
    global _SESSION
    if _SESSION is None:
        _SESSION = get_session()
    return _SESSION


# What the object store's refusals mean, as a line an operator acts on.
_REFUSALS = {
    "NoSuchBucket": "the bucket FILEHOST_S3_BUCKET names does not exist",
    "InvalidAccessKeyId": "the object store does not know AWS_ACCESS_KEY_ID",
    "SignatureDoesNotMatch": "the object store refused AWS_SECRET_ACCESS_KEY",
    "AccessDenied": "the object store denied the credentials access to the bucket",
    "InvalidToken": "the object store refused AWS_SESSION_TOKEN",
    "ExpiredToken": "the object store says AWS_SESSION_TOKEN has expired",
    "AuthorizationHeaderMalformed": "the object store refused the signature's region "
    "(FILEHOST_S3_REGION)",
}
# A refusal without a body (to a HEAD) says only its status.
_BY_STATUS = {
    403: "the object store refused the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) "
    "or denied them the bucket",
    404: "the bucket FILEHOST_S3_BUCKET names does not exist",
}
# The refusals that are a configuration's, not a passing fault: start-up stops on them.
CONFIGURATION_REFUSALS = frozenset(_REFUSALS)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _status(error: ClientError) -> int | None:
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def unavailable(error: BaseException) -> StorageUnavailable:
    """What a failed request means, as ``StorageUnavailable`` (its reason never a credential)."""
    if isinstance(error, StorageUnavailable):
        return error
    if isinstance(error, ClientError):
        code = _code(error)
        reason = _REFUSALS.get(code) or _BY_STATUS.get(_status(error) or 0)
        reason = reason or f"the object store answered {_status(error)} {code}"
        return StorageUnavailable(reason)
    if isinstance(error, TimeoutError | ConnectTimeoutError | ReadTimeoutError):
        return StorageUnavailable("the object store did not answer in time")
    if isinstance(error, EndpointConnectionError):
        return StorageUnavailable("the object store can't be reached")
    return StorageUnavailable(f"the object store failed ({type(error).__name__})")


def _missing(error: ClientError) -> bool:
    return _code(error) in ("NoSuchKey", "404", "NotFound") or _status(error) == 404


class S3Blobs:
    """Blobs as objects of one bucket (see the module)."""

    def __init__(self, settings: ObjectStoreSettings) -> None:
        self._settings = settings
        self.bucket = settings.bucket
        self.base_prefix = settings.prefix
        self._prefix = settings.prefix + FILES
        self.timeout = self._timeout = settings.timeout_seconds
        self._client: Any = None
        self._signer: Any = None
        self._opening = asyncio.Lock()
        self._exit = AsyncExitStack()
        self._worker_parts = asyncio.Semaphore(WORKER_PARTS_IN_FLIGHT)

    def key(self, blob_id: str) -> str:
        return self._prefix + checked(blob_id)

    # -- the client --------------------------------------------------------------------------

    async def _open_client(self) -> Any:
        if self._client is None:
            async with self._opening:
                if self._client is None:
                    self._client = await self._made_client(self._settings.endpoint)
        return self._client

    async def _open_signer(self) -> Any:
        """The client that signs redirect downloads' URLs: for the address clients reach the
        store at (``public_endpoint``), which SigV4 signs into the URL, else the one client."""
        public = self._settings.public_endpoint
        if public is None:
            return await self._open_client()
        if self._signer is None:
            async with self._opening:
                if self._signer is None:
                    self._signer = await self._made_client(public)
        return self._signer

    async def _made_client(self, endpoint: str | None) -> Any:
        settings = self._settings
        config = Config(
            signature_version="s3v4",
            s3={
                "addressing_style": "path" if settings.path_addressing else "virtual",
                # The bytes are hashed once already (their SHA-256 is the file's); the transport
                # (TLS in production) guards them on the way.
                "payload_signing_enabled": False,
            },
            # botocore 1.36 and newer checksum every upload unless told otherwise, which
            # several S3-compatible servers refuse.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            connect_timeout=self._timeout,
            read_timeout=self._timeout,
            retries={"mode": "standard", "max_attempts": 3},
            max_pool_connections=64,
        )
        credentials: dict[str, Any] = {}
        if settings.access_key_id is not None:
            credentials = {
                "aws_access_key_id": str(settings.access_key_id),
                "aws_secret_access_key": str(settings.secret_access_key),
                "aws_session_token": (
                    None if settings.session_token is None else str(settings.session_token)
                ),
            }
        return await self._exit.enter_async_context(
            _session().create_client(
                "s3",
                endpoint_url=endpoint,
                region_name=settings.region,
                config=config,
                **credentials,
            )
        )

    async def close(self) -> None:
        self._client = self._signer = None
        await self._exit.aclose()

    async def call(self, operation: str, **arguments: Any) -> Any:
        """One request of the bucket's, bounded by the timeout (``ClientError`` raised as it
        is; any other failure as ``StorageUnavailable``)."""
        return await self._call(operation, **arguments)

    async def _call(self, operation: str, **arguments: Any) -> Any:
        """One request without a body to stream, bounded in all by the timeout."""
        client = await self._open_client()
        request = getattr(client, operation)(Bucket=self.bucket, **arguments)
        try:
            return await _bounded(request, self._timeout)
        except ClientError:
            raise
        except (BotoCoreError, OSError, TimeoutError) as error:
            raise unavailable(error) from None

    # -- writing -----------------------------------------------------------------------------

    async def put(self, blob_id: str, source: Source) -> Written:
        key = self.key(blob_id)
        digest = hashlib.sha256()
        buffer = bytearray(FIRST_BYTES)
        filled, ended = await fill(source, buffer)
        if not ended:
            buffer = grown(buffer, filled)
            more, ended = await fill(source, buffer, filled)
            filled += more
        if ended:  # the whole blob in one buffer: one request
            del buffer[filled:]
            await asyncio.to_thread(digest.update, buffer)
            try:
                await self._call("put_object", Key=key, Body=buffer, IfNoneMatch="*")
            except ClientError as error:
                raise unavailable(error) from None
            return Written(filled, digest.hexdigest())
        return await MultipartUpload(self, key).run(source, buffer, filled, digest)

    async def create_upload(self, key: str) -> str:
        """A new multipart upload of ``key``: its id."""
        try:
            created = await self._call("create_multipart_upload", Key=key)
        except ClientError as error:
            raise unavailable(error) from None
        return str(created["UploadId"])

    async def upload_part(
        self, key: str, upload_id: str, number: int, body: bytearray
    ) -> dict[str, Any]:
        """Send part ``number`` of an upload; the part as the completion names it."""
        client = await self._open_client()
        async with self._worker_parts:
            try:
                answer = await client.upload_part(
                    Bucket=self.bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=PartBody(body),
                )
            except (BotoCoreError, ClientError, OSError, TimeoutError) as error:
                raise unavailable(error) from None
        return {"PartNumber": number, "ETag": answer["ETag"]}

    async def complete(self, key: str, upload_id: str, parts: list[dict[str, Any]]) -> None:
        """Complete an upload from its ``parts``, create-only."""
        try:
            await self._call(
                "complete_multipart_upload",
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
        except ClientError as error:
            # A completion that was made, but whose answer was lost and retried: whole already.
            if _code(error) in ("NoSuchUpload", "PreconditionFailed") and await self._exists(key):
                return
            raise unavailable(error) from None

    async def abort(self, key: str, upload_id: str) -> None:
        """Abort an upload (quietly: one that is gone is as good)."""
        with contextlib.suppress(ClientError, StorageUnavailable):
            await self._call("abort_multipart_upload", Key=key, UploadId=upload_id)

    async def size_of(self, blob_id: str) -> int | None:
        """The size of the blob the bucket holds, None when it holds none."""
        try:
            answer = await self._call("head_object", Key=self.key(blob_id))
        except ClientError as error:
            if _missing(error):
                return None
            raise unavailable(error) from None
        return int(answer["ContentLength"])

    async def _exists(self, key: str) -> bool:
        try:
            await self._call("head_object", Key=key)
        except ClientError as error:
            if _missing(error):
                return False
            raise unavailable(error) from None
        return True

    # -- reading -----------------------------------------------------------------------------

    async def open(self, blob_id: str) -> Blob:
        key = self.key(blob_id)
        try:
            answer = await self._call("get_object", Key=key)
        except ClientError as error:
            if _missing(error):
                raise BlobMissing() from None
            raise unavailable(error) from None
        return _ObjectBlob(self, key, answer)

    async def _ranged(self, key: str, start: int, length: int) -> Any:
        try:
            return await self._call(
                "get_object", Key=key, Range=f"bytes={start}-{start + length - 1}"
            )
        except ClientError as error:
            raise unavailable(error) from None

    async def download_url(self, blob_id: str, disposition: str, content_type: str) -> str | None:
        """With ``FILEHOST_S3_DOWNLOADS=redirect``, a SigV4 URL that GETs the blob for
        ``PRESIGNED_SECONDS``, answered with these ``Content-Disposition`` and
        ``Content-Type``; None (the service streams it) otherwise."""
        if not self._settings.redirect_downloads:
            return None
        signer = await self._open_signer()
        return str(
            await signer.generate_presigned_url(
                "get_object",
                Params={
                    "Bucket": self.bucket,
                    "Key": self.key(blob_id),
                    "ResponseContentDisposition": disposition,
                    "ResponseContentType": content_type,
                },
                ExpiresIn=PRESIGNED_SECONDS,
            )
        )

    # -- removing, listing, sweeping ---------------------------------------------------------

    async def delete(self, blob_id: str) -> bool:
        try:
            await self._call("delete_object", Key=self.key(blob_id))
            await self._call("delete_object", Key=self.thumbnail_key(blob_id))
        except ClientError as error:
            raise unavailable(error) from None
        return True  # S3 does not say whether there was one

    async def delete_all(self, blob_ids: list[str]) -> list[str]:
        failed: list[str] = []
        # Each blob and its thumbnail: two keys of a request's most.
        for first in range(0, len(blob_ids), DELETE_BATCH // 2):
            batch = blob_ids[first : first + DELETE_BATCH // 2]
            objects = [
                {"Key": key}
                for blob_id in batch
                for key in (self.key(blob_id), self.thumbnail_key(blob_id))
            ]
            try:
                answer = await self._call(
                    "delete_objects", Delete={"Objects": objects, "Quiet": True}
                )
            except (ClientError, StorageUnavailable) as error:
                log.warning("could not remove objects: %s", unavailable(error).reason)
                failed += batch
                continue
            refused_ids = {
                str(refused.get("Key", ""))
                .removeprefix(self._prefix)
                .removesuffix(THUMBNAIL_SUFFIX)
                for refused in answer.get("Errors", ())
                if refused.get("Code") != "NoSuchKey"
            }
            failed += [blob_id for blob_id in batch if blob_id in refused_ids]
        return failed

    def thumbnail_key(self, blob_id: str) -> str:
        return self._prefix + thumbnail_name(blob_id)

    async def put_thumbnail(self, blob_id: str, data: bytes) -> None:
        try:
            await self._call("put_object", Key=self.thumbnail_key(blob_id), Body=data)
        except ClientError as error:
            raise unavailable(error) from None

    async def delete_thumbnail(self, blob_id: str) -> None:
        try:
            await self._call("delete_object", Key=self.thumbnail_key(blob_id))
        except ClientError as error:
            raise unavailable(error) from None

    async def thumbnail(self, blob_id: str) -> bytes | None:
        try:
            answer = await self._call("get_object", Key=self.thumbnail_key(blob_id))
        except ClientError as error:
            if _missing(error):
                return None
            raise unavailable(error) from None
        body = answer["Body"]
        try:
            return bytes(await _bounded(body.read(MAX_THUMBNAIL_BYTES), self.timeout))
        except Exception as error:  # botocore's, or the HTTP client's for a body cut short
            raise unavailable(error) from None
        finally:
            with contextlib.suppress(Exception):
                body.close()

    async def stored(self) -> list[str]:
        return [blob_id async for blob_id in self.listed()]

    async def listed(self) -> AsyncIterator[str]:
        """The ids of the blobs in the bucket under the prefix, a page at a time."""
        token: str | None = None
        while True:
            more = {} if token is None else {"ContinuationToken": token}
            try:
                page = await self._call("list_objects_v2", Prefix=self._prefix, **more)
            except ClientError as error:
                raise unavailable(error) from None
            for item in page.get("Contents", ()):
                blob_id = str(item["Key"]).removeprefix(self._prefix)
                if BLOB_ID.match(blob_id):
                    yield blob_id
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]

    async def leftovers(self) -> list[str]:
        """The keys of the blobs' multipart uploads neither completed nor aborted."""
        return [upload["Key"] async for upload in self._open_uploads()]

    async def _open_uploads(self) -> AsyncIterator[dict[str, Any]]:
        more: dict[str, str] = {}
        while True:
            try:
                page = await self._call("list_multipart_uploads", Prefix=self._prefix, **more)
            except ClientError as error:
                raise unavailable(error) from None
            for upload in page.get("Uploads", ()):
                yield upload
            if not page.get("IsTruncated"):
                return
            more = {
                "KeyMarker": page["NextKeyMarker"],
                "UploadIdMarker": page["NextUploadIdMarker"],
            }

    async def sweep(
        self, keep: frozenset[str] = frozenset(), older_than: timedelta = SWEEP_AFTER
    ) -> int:
        """Abort the multipart uploads of blobs begun before ``older_than`` ago (a crash's
        leftovers), but those of the blobs ``keep`` names (resumable uploads in progress);
        how many."""
        cutoff = datetime.now(UTC) - older_than
        old = [
            upload
            async for upload in self._open_uploads()
            if upload["Initiated"] < cutoff
            and str(upload["Key"]).removeprefix(self._prefix) not in keep
        ]
        for upload in old:
            await self.abort(upload["Key"], upload["UploadId"])
        return len(old)

    async def readiness(self) -> str | None:
        found = await self.probe()
        return None if found is None else found.reason

    async def probe(self) -> StorageUnavailable | None:
        """What is wrong with the store, if anything: a listing of one key (not a ``HEAD``:
        its error has a body naming the cause). ``configuration`` on what it returns says
        whether it is the settings' doing (a missing bucket, refused credentials) rather than
        a passing fault."""
        try:
            await self._call("list_objects_v2", Prefix=self._prefix, MaxKeys=1)
        except ClientError as error:
            found = unavailable(error)
            found.configuration = _code(error) in CONFIGURATION_REFUSALS or _status(error) in (
                403,
                404,
            )
            return found
        except StorageUnavailable as error:
            error.configuration = False
            return error
        return None


async def _bounded(request: Any, seconds: float) -> Any:
    """``request`` run as a task of its own, cancelled after ``seconds`` (``TimeoutError``):
    the HTTP client's timers need a task, and the gateway lane, which reads small files, runs
    outside any."""
    task = asyncio.ensure_future(request)
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        return await task
    except asyncio.CancelledError:
        if expired:
            raise TimeoutError() from None
        raise
    finally:
        timer.cancel()


class _ObjectBlob:
    """An object open for reading: its size from the ``GET`` that opened it, whose body is
    read for the whole object; a range is a ``GET`` of its own."""

    def __init__(self, blobs: S3Blobs, key: str, answer: Any) -> None:
        self._blobs = blobs
        self._key = key
        self._answer: Any = answer
        self.size = int(answer["ContentLength"])

    def fileno(self) -> None:
        return None

    async def chunks(self, start: int, length: int) -> AsyncIterator[bytes]:
        answer = self._answer
        if (start, length) != (0, self.size):
            self._release()
            answer = self._answer = await self._blobs._ranged(self._key, start, length)
        body, left = answer["Body"], length
        while left > 0:
            try:
                # Each read a task of its own (``_bounded``), as the gateway lane reads too.
                chunk = await _bounded(body.read(min(READ_CHUNK, left)), self._blobs.timeout)
            except Exception as error:  # botocore's, or the HTTP client's for a body cut short
                raise unavailable(error) from None
            if not chunk:  # the object ended early: never pad, stop short
                raise OSError("blob ended early")
            left -= len(chunk)
            yield chunk

    def _release(self) -> None:
        if self._answer is not None:
            with contextlib.suppress(Exception):
                self._answer["Body"].close()
            self._answer = None

    async def close(self) -> None:
        self._release()
