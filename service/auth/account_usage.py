"""What an account holds, for its owner to hold it against the deployment's limits: its files
(how many and how many bytes, in all and by type class), folders, vanity aliases and API keys.
Read, never kept: the files' bytes are summed from their records (one read of the account's
whole order, as a search reads it), the rest counted where they are stored."""

from __future__ import annotations

import asyncio

from service.auth.api_keys import ApiKeys
from service.domain.file_search import TYPES, type_class
from service.domain.records import AccountUsage
from service.store.protocols import AliasStore, FilesStore, FoldersStore


class Usage:
    def __init__(
        self, files: FilesStore, folders: FoldersStore, aliases: AliasStore, api_keys: ApiKeys
    ) -> None:
        self._files = files
        self._folders = folders
        self._aliases = aliases
        self._api_keys = api_keys

    async def of(self, user_id: str) -> AccountUsage:
        records, folders, aliases, keys = await asyncio.gather(
            self._files.every_file(user_id),
            self._folders.count(user_id),
            self._aliases.count(user_id),
            self._api_keys.list_keys(user_id),
        )
        counts = dict.fromkeys(TYPES, 0)
        sizes = dict.fromkeys(TYPES, 0)
        for record in records:
            kind = type_class(record.content_type)
            counts[kind] += 1
            sizes[kind] += record.size
        return AccountUsage(
            files=len(records),
            file_bytes=sum(sizes.values()),
            by_type=tuple((kind, counts[kind], sizes[kind]) for kind in TYPES),
            folders=folders,
            aliases=aliases,
            keys=len(keys),
        )
