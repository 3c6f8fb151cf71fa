"""Where each file goes in a ZIP archive: a path made of folder names and the file's name, each
part made safe to extract and unique in its folder. Pure functions, no I/O.

A part is never empty, ``.`` or ``..``, and holds no ``/``, ``\\`` or control character (each
is ``_``), so no entry names a path outside the archive however its names were spelt; a path
is relative (no leading ``/``). Two entries of one folder never share a name, compared as
case-insensitive file systems compare them (``name_key``): the second ``a.txt`` is
``a (2).txt``, the next ``a (3).txt``, and a file never takes a sub-folder's name.
"""

from __future__ import annotations

import posixpath
import unicodedata
from dataclasses import dataclass

from service.domain.folders import name_key
from service.domain.records import FileRecord, FolderRecord

_UNSAFE = frozenset("/\\")


def safe_part(name: str) -> str:
    """One part of an entry's path: ``name`` with what could leave its folder replaced."""
    part = "".join(
        "_" if char in _UNSAFE or unicodedata.category(char) == "Cc" else char for char in name
    ).strip()
    if part in ("", ".", ".."):
        return "_"
    return part


class _Names:
    """The names taken in one folder of the archive."""

    __slots__ = ("_taken",)

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def claim(self, name: str) -> str:
        """``name``, or the first of ``stem (2).ext``, ``stem (3).ext``, ... not taken yet."""
        candidate, number = name, 1
        stem, extension = posixpath.splitext(name)
        while name_key(candidate) in self._taken:
            number += 1
            candidate = f"{stem} ({number}){extension}"
        self._taken.add(name_key(candidate))
        return candidate


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of an archive: its path, when it last changed (ms), and the file whose bytes
    it holds (None: a folder, whose path ends with ``/``)."""

    path: str
    modified: int
    file: FileRecord | None = None


def flat_entries(records: list[FileRecord]) -> list[Entry]:
    """Files side by side at the archive's top (a selection), in the order given."""
    names = _Names()
    return [
        Entry(names.claim(safe_part(record.name)), record.created_at, record) for record in records
    ]


def tree_entries(top: str, folders: list[FolderRecord], files: list[FileRecord]) -> list[Entry]:
    """A folder's subtree (the folder ``top``, ``folders`` below it and the ``files`` in any of
    them) as entries: each folder (but ``top``) an entry of its own, so that an empty one is
    kept, then its files, paths made of the folders' names below ``top``. Folders by name,
    files by name then upload (the first uploaded keeps its name), so the same subtree is
    always the same archive."""
    children: dict[str, list[FolderRecord]] = {}
    for folder in folders:
        children.setdefault(folder.parent_id or "", []).append(folder)
    held: dict[str, list[FileRecord]] = {}
    for record in files:
        held.setdefault(record.folder_id or "", []).append(record)
    entries: list[Entry] = []
    waiting = [(top, "")]
    while waiting:
        folder_id, prefix = waiting.pop()
        names = _Names()
        below = sorted(children.get(folder_id, []), key=lambda f: (name_key(f.name), f.id))
        for child in below:
            path = f"{prefix}{names.claim(safe_part(child.name))}/"
            entries.append(Entry(path, child.updated_at))
            waiting.append((child.id, path))
        inside = sorted(
            held.get(folder_id, []), key=lambda r: (name_key(r.name), r.created_at, r.id)
        )
        entries.extend(
            Entry(prefix + names.claim(safe_part(record.name)), record.created_at, record)
            for record in inside
        )
    return entries
