"""Folders as plain values: the rules of a name a client gives (a folder's, or a file's when it is
renamed), how names compare among siblings, and the word for the top level. Pure functions, no
I/O.

A given name follows the rules uploads' names are cleaned to (``service.domain.files``): for
display only, never a path; so it is refused, rather than cleaned, when cleaning would change it.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from enum import IntEnum

from service.domain.files import MAX_NAME_LENGTH, display_name

# The top level, where ``parent_id`` (a folder) or ``folder_id`` (a file) is null: how a query
# (``GET /files?folder_id=root``) or an upload's form field names it, and how the store suffixes
# the top level's indexes.
TOP = "root"

NAME_RULE = (
    f"must be 1 to {MAX_NAME_LENGTH} characters after trimming, without control characters, "
    "'/' or '\\', and not '.' or '..'"
)


def given_name(raw: object) -> str | None:
    """The name as kept (trimmed), or None when it breaks the rules (``NAME_RULE``): a name that
    ``display_name`` would not keep as it is."""
    if not isinstance(raw, str):
        return None
    name = raw.strip()
    if not name or len(name) > MAX_NAME_LENGTH or display_name(name) != name:
        return None
    return name


def name_key(name: str) -> str:
    """How a name compares with its siblings': ignoring case (full case folding, so ``Straße``
    and ``STRASSE`` clash) and the Unicode form it was typed in. Never holds NUL (a kept name
    has no control characters), which separates the key from the id in the store's members.
    An ASCII name's is the same as its lower case, and found faster so."""
    if name.isascii():
        return name.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


class Outcome(IntEnum):
    """What a folder script answered."""

    DONE = 1
    ACCOUNT_GONE = -1
    NOT_FOUND = -2  # the folder (or the parent a creation names) is not a live folder
    TOO_DEEP = -3
    NAME_TAKEN = -4
    LIMIT_REACHED = -5
    DESTINATION_NOT_FOUND = -6
    CYCLE = -7
    NOT_EMPTY = -8
    CHANGED = -9  # the record is no longer the one read: read it again


@dataclass(frozen=True, slots=True)
class Changed:
    """A script's outcome, and whether the account has a deletion to finish."""

    outcome: Outcome
    pending: bool = False
