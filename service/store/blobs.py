"""Where the bytes of uploaded files live: what the backends share (the interface they implement
is ``service.store.protocols.BlobStore``). Knows nothing of HTTP, accounts or Redis.

A blob is named by the file's id (``fil_`` and 22 base62 characters), never by anything a client
wrote, so no client input ever reaches a path or an object key. A blob is written whole or not
at all, and never changed once in place, only removed. Two backends:
``service.store.directory_blobs`` (files in the data directory) and ``service.store.s3_blobs``
(an S3-compatible object store); ``service.store.blob_stores`` opens the one the settings name.
"""

from __future__ import annotations

import re

# What a blob may be called: the file ids ``service.domain.credentials.new_id("fil")`` makes.
BLOB_ID = re.compile(r"^fil_[0-9A-Za-z]{22}$")
# The directory under FILEHOST_DATA_DIR that holds the files' bytes, with the directory backend.
FILES_DIRECTORY = "files"


def checked(blob_id: str) -> str:
    """``blob_id``, when it may name a blob (``BLOB_ID``); ``ValueError`` otherwise."""
    if not BLOB_ID.match(blob_id):
        raise ValueError("not a blob id")
    return blob_id
