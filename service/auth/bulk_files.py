"""Many files at once (``POST /files/bulk``): a move or a deletion of up to ``MAX_BULK_IDS``
files, each through the single file's own path (``Files.change``, ``Files.delete``), so each
is checked as one would be (the account's file, inside a bound key's folders: else
``file_not_found``, exactly like an unknown id), recorded as one audit event of its own, and
leaves nothing behind (its bytes and aliases go as a deletion's do).

A move's destination is checked once, before any file (404 ``folder_not_found`` refuses the
whole request, as nothing could move); each file's own write checks again that it is live. An
id given twice is acted on once, and its outcome told at each place it was given. The files
are worked on a few at a time: each is a compare-and-set of its own, so their order does not
matter, and a refusal of one (``ApiError``) is its outcome, never the request's. Anything else
(the store unreachable) ends the request, as it would a single operation's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from service.auth.files import Actor, Files
from service.auth.reach import Reach
from service.domain import audit_events as audit
from service.domain.principal import Principal
from service.errors import ApiError

MAX_BULK_IDS = 1000
ACTIONS = ("move", "delete")
# Files worked on at once: enough to overlap the round trips, few enough to leave the store's
# connections to other requests.
_AT_ONCE = 8


class BulkFiles:
    def __init__(self, files: Files, reach: Reach) -> None:
        self._files = files
        self._reach = reach

    async def apply(
        self,
        principal: Principal,
        action: str,
        file_ids: list[str],
        folder_id: str | None = None,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> list[ApiError | None]:
        """Move (to ``folder_id``, None the top level) or delete each of ``file_ids``: for each,
        in order, None when done, else the refusal it met."""
        if action == "move":
            folder_id = await self._reach.place(principal, folder_id, "folder_id")
        outcomes: dict[str, ApiError | None] = {}
        waiting = iter(dict.fromkeys(file_ids))

        async def work(ids: Iterator[str]) -> None:
            for file_id in ids:
                try:
                    if action == "delete":
                        await self._files.delete(principal, file_id, origin, actor)
                    else:
                        await self._files.change(
                            principal, file_id, None, folder_id, origin, actor, placed=True
                        )
                except ApiError as refused:
                    outcomes[file_id] = refused
                else:
                    outcomes[file_id] = None

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(_AT_ONCE):
                    group.create_task(work(waiting))
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        return [outcomes[file_id] for file_id in file_ids]
