"""Where the bytes of uploaded files live: what the backends share (the interface they implement
is ``service.store.protocols.BlobStore``). Knows nothing of HTTP, accounts or Redis.

A blob is named by the file's id (``fil_`` and 22 base62 characters), never by anything a client
wrote, so no client input ever reaches a path or an object key. A blob is written whole or not
at all, and never changed once in place, only removed. Two backends:
``service.store.directory_blobs`` (files in the data directory) and ``service.store.s3_blobs``
(an S3-compatible object store); ``service.store.blob_stores`` opens the one the settings name.

Beside a blob, each backend may keep its thumbnail (``thumbnail_name``: the blob's id and
``THUMBNAIL_SUFFIX``), written by ``put_thumbnail``, replaced as a whole, and removed by every
deletion of the blob. It is never one of the blobs ``stored`` lists (so a backup, a restore's
check and a migration's inventory see only the files), and can always be made again.
"""

from __future__ import annotations

import re

# What a blob may be called: the file ids ``service.domain.credentials.new_id("fil")`` makes.
BLOB_ID = re.compile(r"^fil_[0-9A-Za-z]{22}$")
# The directory under FILEHOST_DATA_DIR that holds the files' bytes, with the directory backend.
FILES_DIRECTORY = "files"


# A thumbnail's name beside its blob's; and the most of one that is ever read back.
THUMBNAIL_SUFFIX = ".thumbnail"
MAX_THUMBNAIL_BYTES = 1024 * 1024


def thumbnail_name(blob_id: str) -> str:
    """Where the thumbnail of ``blob_id`` is kept, beside it (``ValueError`` as ``checked``)."""
    return checked(blob_id) + THUMBNAIL_SUFFIX


def checked(blob_id: str) -> str:
    """``blob_id``, when it may name a blob (``BLOB_ID``); ``ValueError`` otherwise."""
    if not BLOB_ID.match(blob_id):
        raise ValueError("not a blob id")
    return blob_id
