"""Which of an account's files and folders a principal may act on: the one place every file and
folder operation asks before it reads, lists, changes or puts anything.

Today a principal reaches the whole of its account: another account's file or folder, a folder
being deleted and an id of the wrong shape all answer exactly like an unknown id (404
``file_not_found`` / ``folder_not_found``), and nothing here costs a round trip beyond the read
the operation needs anyway. A key bound to folders reaches only their subtrees: its checks
belong in these methods (each receives the ``Principal``) and nowhere else, so that every route
of ``service.auth.files`` and ``service.auth.folders`` obeys them:

- ``file`` / ``stored_file``: the file's folder inside the key's folders;
- ``folder`` / ``stored_folder``: the folder inside them;
- ``place``: where something is created, uploaded or moved to, inside them (the top level
  not at all);
- ``listing``: the folder listed inside them;
- ``account``: a listing of the whole account, narrowed to them;
- ``alias_target``: what an alias is made of, inside them;
- ``alias`` / ``aliases``: an alias, and a page of the account's, whose target is inside them.

What a vanity alias itself reaches, for whoever holds its link, is decided here too
(``shared_file``, ``shared_folder``): its target, and for a folder what lies in its subtree.
"""

from __future__ import annotations

from service.domain.credentials import is_valid_id
from service.domain.principal import Principal
from service.domain.records import AliasRecord, FilePage, FileRecord, FolderPage, FolderRecord
from service.errors import ApiError, Code
from service.store.files import FilesStore
from service.store.folders import FoldersStore, folder_record


def _no_folder(field: str | None) -> ApiError:
    """404 ``folder_not_found``, naming the request's field when it was not the path's id."""
    return ApiError(Code.FOLDER_NOT_FOUND, details=None if field is None else {"field": field})


class Reach:
    def __init__(self, files: FilesStore, folders: FoldersStore) -> None:
        self._files = files
        self._folders = folders

    def account(self, principal: Principal) -> str:
        """The account whose files a whole-account listing (``GET /files``) shows."""
        return principal.user_id

    async def file(self, principal: Principal, file_id: str) -> FileRecord:
        """The principal's file (one read, on the hot connection); 404 for any other id."""
        record = None
        if is_valid_id(file_id, "fil"):
            record = await self._files.get(principal.user_id, file_id)
        if record is None:
            raise ApiError(Code.FILE_NOT_FOUND)
        return record

    async def stored_file(self, principal: Principal, file_id: str) -> tuple[str, FileRecord]:
        """The principal's file as stored, for a change made compare-and-set on it (which
        itself checks, in its script, that the file's folder is live); 404 for any other id."""
        found = None
        if is_valid_id(file_id, "fil"):
            found = await self._files.read(principal.user_id, file_id)
        if found is None:
            raise ApiError(Code.FILE_NOT_FOUND)
        return found

    async def folder(
        self, principal: Principal, folder_id: str, field: str | None = None
    ) -> list[FolderRecord]:
        """A live folder of the principal's and its parents up to the top (the folder first):
        one round trip; 404 for any other id. ``field`` names where the id came from."""
        lineage = None
        if is_valid_id(folder_id, "fld"):
            lineage = await self._folders.lineage(principal.user_id, folder_id)
        if lineage is None:
            raise _no_folder(field)
        return lineage

    async def stored_folder(self, principal: Principal, folder_id: str) -> tuple[str, FolderRecord]:
        """The principal's folder as stored, for a change made compare-and-set on it (whose
        script checks it is live); 404 for any other id."""
        read = None
        if is_valid_id(folder_id, "fld"):
            read = await self._folders.read(principal.user_id, folder_id)
        if read is None:
            raise _no_folder(None)
        return read, folder_record(folder_id, read)

    async def place(self, principal: Principal, folder_id: str | None, field: str) -> str | None:
        """Where the principal may create, upload or move something: the top level (None) or
        a live folder of its (checked here, and again by the write's own script); 404 for any
        other id, naming ``field``."""
        if folder_id is None:
            return None
        await self.folder(principal, folder_id, field)
        return folder_id

    async def alias_target(
        self, principal: Principal, kind: str, target_id: str, field: str
    ) -> FileRecord | FolderRecord:
        """A file (``kind`` ``file``) or a live folder (``folder``) of the principal's that an
        alias may be made of; 404 ``file_not_found`` / ``folder_not_found`` naming ``field``
        for any other id."""
        if kind == "folder":
            return (await self.folder(principal, target_id, field))[0]
        record = None
        if is_valid_id(target_id, "fil"):
            record = await self._files.get(principal.user_id, target_id)
        if record is None:
            raise ApiError(Code.FILE_NOT_FOUND, details={"field": field})
        return record

    async def alias(self, principal: Principal, record: AliasRecord) -> AliasRecord:
        """One of the account's aliases, read or changed by the principal; 404
        ``alias_not_found`` when its target is out of the principal's reach."""
        return record

    async def aliases(self, principal: Principal, records: list[AliasRecord]) -> list[AliasRecord]:
        """The aliases of a page of the account's that the principal reaches."""
        return records

    async def shared_file(
        self, user_id: str, file_id: str, within: str | None
    ) -> FileRecord | None:
        """A file reached through an alias: the account's file, and with ``within`` (the
        aliased folder) one in that folder's subtree; None for anything else."""
        if not is_valid_id(file_id, "fil"):
            return None
        record = await self._files.get(user_id, file_id)
        if record is None or within is None:
            return record
        if record.folder_id is None or not await self._folders.inside(
            user_id, record.folder_id, within
        ):
            return None
        return record

    async def shared_folder(
        self, user_id: str, folder_id: str, within: str
    ) -> list[FolderRecord] | None:
        """A live folder reached through the alias of the folder ``within``: it or one in its
        subtree, with its parents up to ``within`` (the folder first); None for any other."""
        lineage = None
        if is_valid_id(folder_id, "fld"):
            lineage = await self._folders.lineage(user_id, folder_id)
        if lineage is None:
            return None
        for depth, record in enumerate(lineage):
            if record.id == within:
                return lineage[: depth + 1]
        return None

    async def shared_contents(
        self, user_id: str, folder_id: str, folder_limit: int, limit: int, after: str | None
    ) -> tuple[FolderPage, FilePage] | None:
        """What a folder reached through an alias lists: its first ``folder_limit`` folders by
        name and a page of ``limit`` files, newest first (after the position ``after``); None
        when it is no longer live."""
        folders = await self._folders.children_page(user_id, folder_id, folder_limit, None)
        if folders is None:
            return None
        files = await self._files.folder_page(user_id, folder_id, limit, after)
        if files is None:
            return None
        return folders, files

    def listing(self, principal: Principal, folder_id: str | None, field: str) -> str | None:
        """The folder whose contents the principal lists (None: the top level). The listing's
        own script checks the folder is live; an id of the wrong shape is 404 here."""
        if folder_id is not None and not is_valid_id(folder_id, "fld"):
            raise _no_folder(field)
        return folder_id
