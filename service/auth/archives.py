"""What a ZIP archive holds: a selection of the principal's files (``GET /files/archive``), a
folder's whole subtree (``GET /folders/{id}/archive``), or the subtree of a folder a vanity
alias shares (``GET /a/{slug}/archive``), as entries with their paths
(``service.domain.archive_names``), and each file's bytes when its turn comes.

Everything is decided before the first byte is sent: which files (each checked as a single
read would be: another account's, or outside a bound key's folders, is ``file_not_found``),
their paths, and that there are at most ``MAX_ARCHIVE_FILES``. A file deleted between that
and its turn is left out of the archive (its bytes are gone); nothing else changes it.
"""

from __future__ import annotations

from service.auth.files import Files
from service.auth.reach import Reach
from service.domain.archive_names import Entry, flat_entries, tree_entries
from service.domain.blobs import Blob, BlobMissing
from service.domain.principal import Principal
from service.domain.records import FileRecord, FolderRecord
from service.errors import ApiError, Code

# The most files one archive holds: an account's default maximum of files, so any folder of an
# account within that default fits.
MAX_ARCHIVE_FILES = 10_000
# How many unknown ids a refusal names.
_NAMED = 10


def _too_many(count: int) -> ApiError:
    return ApiError(
        Code.ARCHIVE_TOO_LARGE,
        f"An archive holds at most {MAX_ARCHIVE_FILES} files; this one would hold {count}. "
        "Download a folder further down, or a selection.",
        details={"max_files": MAX_ARCHIVE_FILES, "files": count},
    )


class Archives:
    def __init__(self, files: Files, reach: Reach) -> None:
        self._files = files
        self._reach = reach

    async def selection(self, principal: Principal, file_ids: list[str]) -> list[Entry]:
        """The entries of the principal's files ``file_ids`` (each once, in the order first
        given), side by side; 404 ``file_not_found`` naming the ids that are not its files."""
        distinct = list(dict.fromkeys(file_ids))
        if len(distinct) > MAX_ARCHIVE_FILES:
            raise _too_many(len(distinct))
        found = await self._reach.files_of(principal, distinct)
        missing = [file_id for file_id, record in zip(distinct, found, strict=True) if not record]
        if missing:
            raise ApiError(Code.FILE_NOT_FOUND, details={"ids": missing[:_NAMED]})
        return flat_entries([record for record in found if record is not None])

    async def folder(self, principal: Principal, folder_id: str) -> tuple[str, list[Entry]]:
        """The name of the principal's folder ``folder_id`` and the entries of its subtree;
        404 ``folder_not_found`` for any other id, 409 ``archive_too_large``."""
        lineage = await self._reach.folder(principal, folder_id)
        return await self.tree(principal.user_id, lineage[0])

    async def tree(self, user_id: str, folder: FolderRecord) -> tuple[str, list[Entry]]:
        """The name of ``folder`` (a live folder of ``user_id``'s, checked by the caller) and
        the entries of its subtree; 409 ``archive_too_large`` past ``MAX_ARCHIVE_FILES``."""
        folders, files = await self._reach.subtree(user_id, folder.id)
        if len(files) > MAX_ARCHIVE_FILES:
            raise _too_many(len(files))
        return folder.name, tree_entries(folder.id, folders, files)

    async def open(self, record: FileRecord) -> Blob | None:
        """A file's bytes for its turn in an archive; None when they are gone (it was deleted
        since its entry was made)."""
        try:
            return await self._files.blobs.open(record.id)
        except BlobMissing:
            return None
