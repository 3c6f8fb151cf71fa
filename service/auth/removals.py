"""What a deletion leaves to do once records are gone: the bytes of removed files, the aliases of
removed files and folders, and the rest of a detached subtree, removed in bounded steps.

The store's side, and why it is done in steps, is ``service.store.folder_removal``. Here:
``purge`` is the one place where a removed record's leftovers go, for a file deleted on its own
and for every file and folder of a deleted subtree alike: first whatever else names it (its
aliases, ``Aliases.remove_targets``; a folder's place among the folders of the keys bound to it,
``unbind``), then a file's bytes, then the note that they were still to go. A leftover that fails
(the disk, the store) keeps its note and is tried again by the next ``finish``. ``finish`` runs
at the end of a folder's deletion, on the account's next folder change when a deletion was cut
short, and for every listed account at start-up (``finish_all``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from service.auth.aliases import Aliases
from service.domain.credentials import is_valid_id
from service.store.protocols import FolderRemovalStore
from service.store.protocols.blobs import BlobStore

log = logging.getLogger("service.auth.removals")

# Records one step of a subtree's removal touches at most: small enough that Redis serves others
# between steps, large enough that a big subtree takes few round trips.
REMOVAL_BATCH = 256


# Takes removed folders out of the folders of the account's keys bound to them
# (``ApiKeys.forget_folders``): the user id, the folders' ids.
Unbind = Callable[[str, list[str]], Awaitable[None]]


class Removals:
    def __init__(
        self,
        store: FolderRemovalStore,
        blobs: BlobStore,
        aliases: Aliases,
        batch: int = REMOVAL_BATCH,
        unbind: Unbind | None = None,
    ) -> None:
        self._store = store
        self._blobs = blobs
        self._aliases = aliases
        self._batch = batch
        self._unbind = unbind

    async def purge(self, user_id: str, ids: list[str]) -> None:
        """Remove what is left of these removed files and folders (see the module). Should
        removing their aliases or unbinding the folders fail, nothing is noted done: the next
        ``finish`` tries again. Bytes that could not be removed, or that a backup copying an
        object store's holds back (``FolderRemovalStore.backing_up``), stay noted, and the
        account is listed for the next start to visit."""
        await self._aliases.remove_targets(user_id, ids)
        folders = [removed_id for removed_id in ids if is_valid_id(removed_id, "fld")]
        if folders and self._unbind is not None:
            await self._unbind(user_id, folders)
        files = [removed_id for removed_id in ids if is_valid_id(removed_id, "fil")]
        failed: set[str] = set()
        if files and await self._store.backing_up():
            # A backup is copying bytes out of the store: its records may name these, so they
            # stay noted until the next run after it.
            failed = set(files)
        elif files:
            try:
                failed = set(await self._blobs.delete_all(files))
            except OSError as error:  # the object store unreachable, say: all of them again
                log.warning("could not remove the bytes of deleted files: %s", error)
                failed = set(files)
        if failed:
            log.info("the bytes of %d deleted file(s) are left for the next run", len(failed))
            await self._store.expect(user_id)  # visited at the next start, if no sooner
        await self._store.forget(
            user_id, [removed_id for removed_id in ids if removed_id not in failed]
        )

    async def release(self, user_id: str, file_id: str) -> None:
        """Remove the bytes of an upload undone after its record was written (a backup may
        have read that record meanwhile: then they are noted for later, as ``purge`` does)."""
        await self._store.note(user_id, [file_id])
        await self.purge(user_id, [file_id])

    async def finish(self, user_id: str) -> None:
        """Finish every removal the account has pending: the leftovers of removed records,
        then each detached subtree, a step at a time."""
        async for ids in self._store.leftovers(user_id, self._batch):
            await self.purge(user_id, ids)
        for top in await self._store.trash(user_id):
            done = False
            while not done:
                done, ids = await self._store.remove_batch(user_id, top, self._batch)
                await self.purge(user_id, ids)
        await self._store.settle(user_id)

    async def expect(self, user_id: str) -> None:
        """Note the account among those to visit at start-up, before a deletion begins."""
        await self._store.expect(user_id)

    async def finish_all(self) -> None:
        """Finish the removals of every account that may have one (at start-up). A failure is
        logged (the store unreachable, say), and left for the next run."""
        try:
            accounts = await self._store.accounts()
        except Exception as error:
            log.warning("could not look for deletions to finish: %s", type(error).__name__)
            return
        for user_id in accounts:
            try:
                await self.finish(user_id)
            except Exception as error:
                log.warning("could not finish a deletion: %s", type(error).__name__)
