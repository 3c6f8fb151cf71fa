"""Which of an account's files and folders a principal may act on: the one place every file and
folder operation asks before it reads, lists, changes or puts anything.

A session, and an API key without folders, reach the whole of their account: another account's
file or folder, a folder being deleted and an id of the wrong shape all answer exactly like an
unknown id (404 ``file_not_found`` / ``folder_not_found``), and nothing here costs a round trip
beyond the read the operation needs anyway.

An API key bound to folders (``Principal.bound``) reaches only their subtrees
(``service.store.bindings`` says exactly what is inside), and its checks are in these methods
and nowhere else, so that every route of ``service.auth.files`` and ``service.auth.folders``
(and whatever else asks here) obeys them. What lies outside answers exactly like an unknown id;
the top level is outside; a key whose folders were all deleted is refused everything (403
``insufficient_permission``), never widened. Each check reads the key's folders in the same
script as what the operation reads, so a bound key's request costs the round trips an unbound
key's does, or one more where the operation reads nothing of its own (``listing``, ``place``,
``default_place``):

- ``file`` / ``stored_file``: the file's folder inside the key's folders;
- ``folder`` / ``stored_folder``: the folder inside them (its lineage, hence its ``path``, ends
  at the key's outermost folder above it: nothing outside is named);
- ``place``: where something is created, uploaded or moved to, inside them (the top level not
  at all); ``default_place``: where an upload without a folder goes;
- ``listing``: the folder listed inside them; ``top_folders``: a bound key's top level (its
  folders that none of its others holds);
- ``account`` / ``files_page``: a listing of the whole account, narrowed to them;
- ``inside``: which of a batch of files and folders (the targets of a page of aliases) they
  hold, in one read;
- ``whole_account``: what belongs to the account as a whole (its settings), refused to them;
- ``bound_folders``: a bound key's folders as its binding lists them now, for forward-auth to
  pass on, read with the check of what the request names (as ``file`` or ``folder`` checks
  it), or else of whether the key reaches anything at all;
- ``alias_target``: what an alias is made of, inside them;
- ``alias`` / ``aliases``: an alias, and a page of the account's, whose target is inside them
  (an alias outside answers 404 ``alias_not_found``, and a page leaves it out).

What a vanity alias itself reaches, for whoever holds its link, is decided here too
(``shared_file``, ``shared_folder``, ``shared_contents``): its target, and for a folder what
lies in its subtree. No key is involved there: a link reaches what its alias names.
"""

from __future__ import annotations

from service.domain.credentials import is_valid_id
from service.domain.cursors import encode_folder_cursor
from service.domain.principal import Principal
from service.domain.records import AliasRecord, FilePage, FileRecord, FolderPage, FolderRecord
from service.domain.stored_forms import child_member, file_record, folder_record
from service.errors import ApiError, Code
from service.store.protocols import BindingsStore, FilesStore, FoldersStore

# A bound key's check answers (``service.store.bindings``).
_INSIDE = 1
_NOTHING = -1
# A page as large as any listing: every file an account may hold, and more.
_WHOLE = 1 << 30


def _no_folder(field: str | None) -> ApiError:
    """404 ``folder_not_found``, naming the request's field when it was not the path's id."""
    return ApiError(Code.FOLDER_NOT_FOUND, details=None if field is None else {"field": field})


def _reaches_something(status: int) -> None:
    """403 for a bound key that reaches nothing: its folders were all deleted."""
    if status == _NOTHING:
        raise ApiError(
            Code.INSUFFICIENT_PERMISSION,
            "This API key is bound to folders that no longer exist: it reaches nothing. Bind "
            "it to a folder again, or make another key.",
            details={"bound_to_folders": True, "folder_ids": []},
        )


class Reach:
    def __init__(self, files: FilesStore, folders: FoldersStore, bindings: BindingsStore) -> None:
        self._files = files
        self._folders = folders
        self._bindings = bindings

    def account(self, principal: Principal) -> str:
        """The account whose files a whole-account listing (``GET /files``) shows, for a
        principal that is not bound (a bound key's is ``files_page``)."""
        return principal.user_id

    def whole_account(self, principal: Principal) -> None:
        """403 ``insufficient_permission`` for a key bound to folders: what belongs to the
        whole account (its settings) is inside none of them. No read."""
        if principal.bound:
            raise ApiError(
                Code.INSUFFICIENT_PERMISSION,
                "This API key is bound to folders: it may not act on the account as a whole.",
                details={"bound_to_folders": True},
            )

    async def bound_folders(
        self, principal: Principal, target: tuple[str, str] | None = None
    ) -> list[str]:
        """A bound key's folders as its binding lists them now, after checking in the same read
        that ``target`` (``("file", id)`` or ``("folder", id)``) is inside them, 404
        ``file_not_found`` / ``folder_not_found`` as ``file`` and ``folder`` answer; without a
        target, that one of them is live (else 403, as for a key whose folders were all
        deleted). No read, and no folders, for any other principal."""
        if not principal.bound:
            return []
        status, folder_ids = await self._bindings.folders_after_check(
            principal.user_id,
            principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
            target,
        )
        _reaches_something(status)
        if status == _INSIDE or target is None:
            return folder_ids
        if target[0] == "file":
            raise ApiError(Code.FILE_NOT_FOUND)
        raise _no_folder(None)

    async def file(self, principal: Principal, file_id: str) -> FileRecord:
        """The principal's file (one read, on the hot connection); 404 for any other id."""
        if principal.bound:
            return (await self._bound_file(principal, file_id))[1]
        record = None
        if is_valid_id(file_id, "fil"):
            record = await self._files.get(principal.user_id, file_id)
        if record is None:
            raise ApiError(Code.FILE_NOT_FOUND)
        return record

    async def stored_file(self, principal: Principal, file_id: str) -> tuple[str, FileRecord]:
        """The principal's file as stored, for a change made compare-and-set on it (which
        itself checks, in its script, that the file's folder is live); 404 for any other id."""
        if principal.bound:
            return await self._bound_file(principal, file_id)
        found = None
        if is_valid_id(file_id, "fil"):
            found = await self._files.read(principal.user_id, file_id)
        if found is None:
            raise ApiError(Code.FILE_NOT_FOUND)
        return found

    async def folder(
        self, principal: Principal, folder_id: str, field: str | None = None
    ) -> list[FolderRecord]:
        """A live folder of the principal's and its parents up to the top (for a bound key, up
        to its outermost folder above it), the folder first: one round trip; 404 for any other
        id. ``field`` names where the id came from."""
        if principal.bound:
            found = await self._bound_folder(principal, folder_id, field)
            return [folder_record(found_id, stored) for found_id, stored in found]
        lineage = None
        if is_valid_id(folder_id, "fld"):
            lineage = await self._folders.lineage(principal.user_id, folder_id)
        if lineage is None:
            raise _no_folder(field)
        return lineage

    async def stored_folder(self, principal: Principal, folder_id: str) -> tuple[str, FolderRecord]:
        """The principal's folder as stored, for a change made compare-and-set on it (whose
        script checks it is live); 404 for any other id."""
        if principal.bound:
            read = (await self._bound_folder(principal, folder_id, None))[0][1]
            return read, folder_record(folder_id, read)
        found = None
        if is_valid_id(folder_id, "fld"):
            found = await self._folders.read(principal.user_id, folder_id)
        if found is None:
            raise _no_folder(None)
        return found, folder_record(folder_id, found)

    async def place(self, principal: Principal, folder_id: str | None, field: str) -> str | None:
        """Where the principal may create, upload or move something: the top level (None) or
        a live folder of its (checked here, and again by the write's own script); 404 for any
        other id, naming ``field``. A bound key's place is inside its folders, never the top
        level (one read)."""
        if principal.bound:
            await self._bound_folder(principal, folder_id or "", field)
            return folder_id
        if folder_id is None:
            return None
        await self.folder(principal, folder_id, field)
        return folder_id

    async def default_place(self, principal: Principal, default: str | None) -> str | None:
        """Where an upload that names no folder goes, given the account's ``default`` folder
        (None: the top level). For a bound key, the default folder when it is inside its
        folders, else the first of them that is live (one read); 404 when none is."""
        if not principal.bound:
            return default
        status, chosen = await self._bindings.place(
            principal.user_id,
            principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
            default,
        )
        _reaches_something(status)
        if chosen is None:
            raise _no_folder("folder_id")
        return chosen

    async def listing(self, principal: Principal, folder_id: str | None, field: str) -> str | None:
        """The folder whose contents the principal lists (None: the top level). The listing's
        own script checks the folder is live; an id of the wrong shape is 404 here. A bound
        key's folder is checked inside its folders first (one read); its top level is
        ``top_folders``, so None is 404 here."""
        if principal.bound:
            await self._bound_folder(principal, folder_id or "", field)
            return folder_id
        if folder_id is not None and not is_valid_id(folder_id, "fld"):
            raise _no_folder(field)
        return folder_id

    async def top_folders(self, principal: Principal, limit: int, after: str | None) -> FolderPage:
        """A bound key's top level: its live folders that none of its others holds, by name
        like any folder's children, after the child member ``after``. One round trip (a key
        has at most ``MAX_KEY_FOLDERS`` folders, read whole)."""
        status, records = await self._bindings.tops(
            principal.user_id,
            principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
        )
        _reaches_something(status)
        members = sorted((child_member(record), record) for record in records)
        if after is not None:
            members = [(member, record) for member, record in members if member > after]
        page = members[:limit]
        more = len(members) > limit
        return FolderPage(
            [record for _, record in page], encode_folder_cursor(page[-1][0]) if more else None
        )

    async def files_page(self, principal: Principal, limit: int, after: str | None) -> FilePage:
        """A page of a bound key's files, across its folders, newest first: one round trip,
        which may hold fewer than ``limit`` files (``service.store.bindings``)."""
        status, page = await self._bindings.files_page(
            principal.user_id,
            principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
            limit,
            after,
        )
        _reaches_something(status)
        return page

    async def every_file(self, principal: Principal) -> list[FileRecord]:
        """Every file the principal reaches, newest first, for a listing filtered or ordered
        otherwise (``Files.search``): one command for the whole account's order, or for a bound
        key one script over it (its files_page without a bound)."""
        if not principal.bound:
            return await self._files.every_file(principal.user_id)
        return (await self.files_page(principal, _WHOLE, None)).files

    async def every_file_in(
        self, principal: Principal, folder_id: str | None, field: str
    ) -> list[FileRecord]:
        """Every file of one folder the principal lists (None: the top level), newest first:
        one script (a bound key's folder checked first, as ``listing``); 404 naming
        ``field`` for a folder that is not the principal's."""
        folder_id = await self.listing(principal, folder_id, field)
        page = await self._files.folder_page(principal.user_id, folder_id, _WHOLE, None)
        if page is None:
            raise _no_folder(field)
        return page.files

    async def files_of(self, principal: Principal, file_ids: list[str]) -> list[FileRecord | None]:
        """The records of ``file_ids`` the principal reaches, in order, None for any other id
        (unknown, another account's, of another shape, outside a bound key's folders): one
        command, and for a bound key one script more (``inside``)."""
        valid = [file_id for file_id in file_ids if is_valid_id(file_id, "fil")]
        found = dict(zip(valid, await self._files.get_many(principal.user_id, valid), strict=True))
        if principal.bound:
            known = [file_id for file_id in valid if found[file_id] is not None]
            inside = await self.inside(principal, [("file", file_id) for file_id in known])
            for file_id, kept in zip(known, inside, strict=True):
                if not kept:
                    found[file_id] = None
        return [found.get(file_id) for file_id in file_ids]

    async def subtree(
        self, user_id: str, folder_id: str
    ) -> tuple[list[FolderRecord], list[FileRecord]]:
        """The live folders below ``folder_id`` (itself left out) and the files in it or in any
        of them: two commands, every folder record and every file of the account, the subtree
        worked out here. Whoever asks has checked the folder (``folder``, ``shared_folder``)."""
        every_folder = await self._folders.every_folder(user_id)
        children: dict[str, list[FolderRecord]] = {}
        for record in every_folder:
            if record.parent_id is not None:
                children.setdefault(record.parent_id, []).append(record)
        below: list[FolderRecord] = []
        inside, waiting = {folder_id}, [folder_id]
        while waiting:
            for child in children.get(waiting.pop(), []):
                if child.id not in inside:  # a damaged record never walks in a circle
                    inside.add(child.id)
                    below.append(child)
                    waiting.append(child.id)
        files = [
            record for record in await self._files.every_file(user_id) if record.folder_id in inside
        ]
        return below, files

    async def inside(self, principal: Principal, targets: list[tuple[str, str]]) -> list[bool]:
        """Whether each of a batch of files and folders (``(kind, id)``, kind ``file`` or
        ``folder``: say, the targets of a page of aliases) is one the principal reaches. All
        of them for a principal that is not bound (no read, and no check that they exist);
        for a bound key one read, however many."""
        if not principal.bound:
            return [True] * len(targets)
        status, inside = await self._bindings.targets(
            principal.user_id,
            principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
            targets,
        )
        _reaches_something(status)
        return inside

    async def alias_target(
        self, principal: Principal, kind: str, target_id: str, field: str
    ) -> FileRecord | FolderRecord:
        """A file (``kind`` ``file``) or a live folder (``folder``) of the principal's that an
        alias may be made of (for a bound key, inside its folders); 404 ``file_not_found`` /
        ``folder_not_found`` naming ``field`` for any other id. One read."""
        if kind == "folder":
            return (await self.folder(principal, target_id, field))[0]
        record = None
        if principal.bound:
            status, stored = await self._bindings.file(
                principal.user_id,
                principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
                target_id,
            )
            _reaches_something(status)
            if status == _INSIDE and stored is not None:
                record = file_record(stored)
        elif is_valid_id(target_id, "fil"):
            record = await self._files.get(principal.user_id, target_id)
        if record is None:
            raise ApiError(Code.FILE_NOT_FOUND, details={"field": field})
        return record

    async def alias(self, principal: Principal, record: AliasRecord) -> AliasRecord:
        """One of the account's aliases, read or changed by the principal; for a bound key
        whose folders do not hold its target, 404 ``alias_not_found`` as for an unknown id
        (one read; none for any other principal)."""
        if principal.bound:
            (inside,) = await self.inside(principal, [(record.target_type, record.target_id)])
            if not inside:
                raise ApiError(Code.ALIAS_NOT_FOUND)
        return record

    async def aliases(self, principal: Principal, records: list[AliasRecord]) -> list[AliasRecord]:
        """The aliases of a page of the account's that the principal reaches: for a bound key
        those whose target its folders hold (one read, so a page may hold fewer than asked);
        every one for any other principal, with no read. A bound key that reaches nothing is
        refused even an empty page, as everything else."""
        if not principal.bound:
            return records
        inside = await self.inside(
            principal, [(record.target_type, record.target_id) for record in records]
        )
        return [record for record, kept in zip(records, inside, strict=True) if kept]

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

    async def _bound_file(self, principal: Principal, file_id: str) -> tuple[str, FileRecord]:
        status, stored = await self._bindings.file(
            principal.user_id,
            principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
            file_id,
        )
        _reaches_something(status)
        if status != _INSIDE or stored is None:
            raise ApiError(Code.FILE_NOT_FOUND)
        return stored, file_record(stored)

    async def _bound_folder(
        self, principal: Principal, folder_id: str, field: str | None
    ) -> list[tuple[str, str]]:
        """The folder's lineage up to the key's outermost folder above it, as stored; the top
        level ('') is never inside."""
        status, lineage = await self._bindings.folder(
            principal.user_id,
            principal.key_id,  # type: ignore[arg-type]  # a bound principal is a key
            folder_id,
        )
        _reaches_something(status)
        if status != _INSIDE or not lineage:
            raise _no_folder(field)
        return lineage
