"""Resumable uploads' bytes in the object store (``service.store.partial_blobs``): S3 multipart
parts of the file's own object (``files/<file id>``), begun with the upload's first full part,
and the bytes short of a part (S3 takes parts of 5 MiB or more, but the last) as an object of
their own, ``uploads/<upload id>/<n>``, read back and sent on by the next ``PATCH``, on whatever
instance it lands. At most one part's worth of an upload is ever held anywhere but in parts.

The state (in Redis with the offset): the multipart upload's id (``upload``), the parts sent
(``parts``: number, ETag, size), and the bytes short of a part (``tail``) and which tail object
holds them (``gen``: each append that leaves a tail writes a new one, so a tail the state names
is never overwritten by an append that is not committed). The offset is the parts' bytes and the
tail's. A part sent and not yet in the state (a crash between) is sent again under the same
number, which replaces it; parts past those the state names are left out of the completion,
which S3 then drops.

An append sends parts as they fill, at most ``PARTS_IN_FLIGHT`` on their way, committing after
each; what is short of a part at its end, or when the client went away, goes to a tail object.
Finishing sends the tail as the last part (or, for an upload that never reached a part, puts
the object whole) and completes the upload, create-only; discarding aborts it and removes the
tails. The sweep of the blob store never aborts a live upload's parts (``S3Blobs.sweep``'s
``keep``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from botocore.exceptions import ClientError

from service.domain.blobs import Commit, Partial
from service.store.partial_blobs import fill_keeping, hashed
from service.store.s3_blobs import S3Blobs, unavailable
from service.store.s3_writes import PART_BYTES, PARTS_IN_FLIGHT

UPLOADS = "uploads/"


def _parts_bytes(state: dict[str, Any]) -> int:
    return sum(size for _, _, size in state.get("parts", ()))


class S3Partials:
    def __init__(self, blobs: S3Blobs) -> None:
        self._blobs = blobs

    def _tails(self, upload_id: str) -> str:
        return f"{self._blobs.base_prefix}{UPLOADS}{upload_id}/"

    def _tail_key(self, upload_id: str, generation: int) -> str:
        return f"{self._tails(upload_id)}{generation}"

    async def append(
        self,
        partial: Partial,
        source: Any,
        digests: list[Any],
        commit: Commit | None,
    ) -> tuple[int, dict[str, Any]]:
        blobs = self._blobs
        key = blobs.key(partial.blob_id)
        state = {
            "upload": partial.state.get("upload"),
            "parts": [list(part) for part in partial.state.get("parts", ())],
            "tail": partial.state.get("tail", 0),
            "gen": partial.state.get("gen", 0),
        }
        was = state["gen"] if state["tail"] else None
        buffer = bytearray(PART_BYTES)
        filled = state["tail"]
        if filled:
            buffer[:filled] = await self._read_tail(partial.upload_id, state["gen"], filled)
        in_flight: deque[tuple[asyncio.Task[dict[str, Any]], int]] = deque()
        failure: BaseException | None = None
        # A multipart upload this append began, until a commit names it: one never committed
        # is aborted on the way out, so a refused or failed request leaves none behind.
        began: str | None = None
        keep: Commit | None = None
        if commit is not None:

            async def keep(offset: int, kept: dict[str, Any]) -> None:
                nonlocal began
                await commit(offset, kept)
                began = None

        try:
            while True:
                count, ended, failure = await fill_keeping(source, buffer, filled)
                await hashed(digests, memoryview(buffer)[filled : filled + count])
                filled += count
                if failure is not None or ended:
                    break  # what is left is the tail
                if state["upload"] is None:
                    state["upload"] = began = await blobs.create_upload(key)
                number = len(state["parts"]) + len(in_flight) + 1
                task = asyncio.create_task(
                    blobs.upload_part(key, state["upload"], number, buffer[:filled])
                )
                in_flight.append((task, filled))
                buffer, filled = bytearray(PART_BYTES), 0
                while len(in_flight) >= PARTS_IN_FLIGHT:
                    await self._sent(in_flight, state, keep)
            while in_flight:
                await self._sent(in_flight, state, keep)
            await asyncio.shield(self._keep_tail(partial.upload_id, buffer, filled, state))
            offset = _parts_bytes(state) + state["tail"]
            if keep is not None:
                await asyncio.shield(keep(offset, state))
                if was is not None and (state["gen"] != was or not state["tail"]):
                    await self._drop_tail(partial.upload_id, was)  # no longer the state's
        except BaseException:
            for task, _ in in_flight:
                task.cancel()
            await asyncio.gather(*(task for task, _ in in_flight), return_exceptions=True)
            await self._abort_uncommitted(key, began)
            raise
        if failure is not None:
            await self._abort_uncommitted(key, began)
            raise failure
        return offset, state

    async def _abort_uncommitted(self, key: str, began: str | None) -> None:
        if began is not None:
            await asyncio.shield(self._blobs.abort(key, began))

    async def abandon(self, partial: Partial, state: dict[str, Any]) -> None:
        began = state.get("upload")
        if began is not None and began != partial.state.get("upload"):
            await self._abort_uncommitted(self._blobs.key(partial.blob_id), began)
        if state.get("tail") and state.get("gen") != partial.state.get("gen", 0):
            await self._drop_tail(partial.upload_id, state["gen"])

    async def _sent(
        self,
        in_flight: deque[tuple[asyncio.Task[dict[str, Any]], int]],
        state: dict[str, Any],
        commit: Commit | None,
    ) -> None:
        """The oldest part on its way, sent: into the state, and committed (the tail the
        state named is in it, so it is no longer the tail)."""
        task, size = in_flight.popleft()
        sent = await task
        state["parts"].append([sent["PartNumber"], sent["ETag"], size])
        state["tail"] = 0
        if commit is not None:
            await commit(_parts_bytes(state), state)

    async def _read_tail(self, upload_id: str, generation: int, size: int) -> bytes:
        try:
            answer = await self._blobs.call("get_object", Key=self._tail_key(upload_id, generation))
            data = await answer["Body"].read()
        except ClientError as error:
            raise unavailable(error) from None
        if len(data) != size:
            raise unavailable(OSError("an upload's tail is not what its state says"))
        return bytes(data)

    async def _keep_tail(
        self, upload_id: str, buffer: bytearray, filled: int, state: dict[str, Any]
    ) -> None:
        """The bytes short of a part into a new tail object, named in ``state``."""
        if filled:
            generation = state["gen"] + 1
            try:
                await self._blobs.call(
                    "put_object",
                    Key=self._tail_key(upload_id, generation),
                    Body=bytes(buffer[:filled]),
                )
            except ClientError as error:
                raise unavailable(error) from None
            state["gen"] = generation
        state["tail"] = filled

    async def _drop_tail(self, upload_id: str, generation: int) -> None:
        with contextlib.suppress(ClientError, OSError):
            await self._blobs.call("delete_object", Key=self._tail_key(upload_id, generation))

    async def _drop_tails(self, upload_id: str) -> None:
        """Every tail object of the upload (those of appends never committed included)."""
        with contextlib.suppress(ClientError, OSError):
            listed = await self._blobs.call("list_objects_v2", Prefix=self._tails(upload_id))
            keys = [{"Key": item["Key"]} for item in listed.get("Contents", ())]
            if keys:
                await self._blobs.call("delete_objects", Delete={"Objects": keys, "Quiet": True})

    async def finish(self, partial: Partial) -> None:
        blobs, state = self._blobs, partial.state
        key = blobs.key(partial.blob_id)
        tail = state.get("tail", 0)
        data = await self._read_tail(partial.upload_id, state.get("gen", 0), tail) if tail else b""
        try:
            if state.get("upload") is None:  # never reached a part: one object
                await blobs.call("put_object", Key=key, Body=data, IfNoneMatch="*")
            else:
                parts = [
                    {"PartNumber": number, "ETag": etag}
                    for number, etag, _ in state.get("parts", ())
                ]
                if data:
                    parts.append(
                        await blobs.upload_part(
                            key, state["upload"], len(parts) + 1, bytearray(data)
                        )
                    )
                await blobs.complete(key, state["upload"], parts)
        except ClientError as error:
            # Made whole by an earlier finish whose request failed before it was recorded.
            if await blobs.size_of(partial.blob_id) != partial.offset:
                raise unavailable(error) from None
        await self._drop_tails(partial.upload_id)

    async def discard(self, partial: Partial) -> None:
        blobs = self._blobs
        if partial.state.get("upload"):
            await blobs.abort(blobs.key(partial.blob_id), partial.state["upload"])
        await self._drop_tails(partial.upload_id)
