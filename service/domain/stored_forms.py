"""How a file's and a folder's records are kept as text in their indexes, and read back: the
forms the stores write, and that a folder-bound key's checks (``service.auth.reach``) read
where one script answered with them. An unreadable one is ``CorruptRecord``."""

from __future__ import annotations

from typing import Any

import orjson

from service.domain.credentials import is_valid_id
from service.domain.folders import name_key
from service.domain.records import FileRecord, FolderRecord
from service.errors import CorruptRecord

FILE_POSITION_LENGTH = 13 + 1 + 26


_FIELDS = ("id", "name", "size", "content_type", "sha256", "created_at", "folder_id")


def file_position(record: FileRecord) -> str:
    """Where a file sorts, in the order and in its folder's index."""
    return f"{record.created_at:013d}:{record.id}"


def file_member(record: FileRecord) -> str:
    """How a file is stored: its position in the order, then its JSON record."""
    fields = {name: getattr(record, name) for name in _FIELDS}
    return f"{file_position(record)}:" + orjson.dumps(fields).decode()


def file_record(member: str) -> FileRecord:
    """The record a stored member holds; ``CorruptRecord`` when it cannot be read. Read for every
    file a listing shows (a search reads a whole account's), so its checks are plain ones."""
    try:
        value: Any = orjson.loads(member[FILE_POSITION_LENGTH + 1 :])
    except orjson.JSONDecodeError:
        raise CorruptRecord() from None
    if type(value) is not dict:
        raise CorruptRecord()
    try:
        file_id = value["id"]
        name = value["name"]
        size = value["size"]
        content_type = value["content_type"]
        sha256 = value["sha256"]
        created_at = value["created_at"]
    except KeyError:
        raise CorruptRecord() from None
    folder_id = value.get("folder_id")
    # ``type(...) is int`` leaves out bool, which is an int to isinstance.
    if type(size) is not int or type(created_at) is not int or size < 0 or created_at < 0:
        raise CorruptRecord()
    if not (
        type(file_id) is str
        and type(name) is str
        and type(content_type) is str
        and type(sha256) is str
        and (folder_id is None or type(folder_id) is str)
    ):
        raise CorruptRecord()
    if member[: FILE_POSITION_LENGTH + 1] != f"{created_at:013d}:{file_id}:":
        raise CorruptRecord()
    return FileRecord(file_id, name, size, content_type, sha256, created_at, folder_id)


# Where a detached folder's parent would be: the top of a subtree being deleted.
DETACHED = "-"


def folder_value(record: FolderRecord, *, detached: bool = False) -> str:
    """How a folder's record is stored (see the module)."""
    parent = DETACHED if detached else (record.parent_id or "")
    return f"{parent}:{record.created_at}:{record.updated_at}:{record.name}"


def folder_record(folder_id: str, value: str) -> FolderRecord:
    """The record a stored value holds; ``CorruptRecord`` when it cannot be read."""
    parent, created, updated, name = [*value.split(":", 3), "", "", ""][:4]
    if not (parent == "" or parent == DETACHED or is_valid_id(parent, "fld")):
        raise CorruptRecord()
    if not (created.isascii() and created.isdigit() and updated.isascii() and updated.isdigit()):
        raise CorruptRecord()
    if not name or value.count(":") < 3:
        raise CorruptRecord()
    return FolderRecord(folder_id, name, parent or None, int(created), int(updated))


def child_member(record: FolderRecord) -> str:
    """How a folder is kept in its parent's children: by name key, then id."""
    return f"{name_key(record.name)}\0{record.id}"
