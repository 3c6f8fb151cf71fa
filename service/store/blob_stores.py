"""The blob store the settings name (``FILEHOST_BLOB_STORE``): the data directory's files, or an
S3-compatible object store; where each keeps resumable uploads' bytes, and the small files'
bytes served from memory over it. What the application, the command line and the benchmark
open."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.config import Settings
from service.config.settings import ObjectStoreSettings
from service.store.blobs import FILES_DIRECTORY
from service.store.directory_blobs import DirectoryBlobs
from service.store.directory_partials import DirectoryPartials
from service.store.protocols.blobs import BlobStore, PartialBlobs
from service.store.small_blobs import SmallBlobs

if TYPE_CHECKING:
    from service.store.s3_blobs import S3Blobs


def open_blob_store(settings: Settings) -> BlobStore:
    object_store = settings.object_store
    if object_store is None:
        return DirectoryBlobs(settings.data_dir / FILES_DIRECTORY)
    return open_object_store(object_store)


def open_object_store(object_store: ObjectStoreSettings) -> S3Blobs:
    """The object-store backend. Its module is imported only here: the S3 client is among the
    slowest imports, which every worker and command of a deployment without an object store
    would pay (docs/development.md)."""
    from service.store.s3_blobs import S3Blobs

    return S3Blobs(object_store)


def open_partials(blobs: BlobStore) -> PartialBlobs:
    """Where the blob store keeps resumable uploads' bytes until they are whole."""
    if isinstance(blobs, DirectoryBlobs):
        return DirectoryPartials(blobs)
    from service.store.s3_blobs import S3Blobs  # as in open_object_store
    from service.store.s3_partials import S3Partials

    assert isinstance(blobs, S3Blobs), blobs
    return S3Partials(blobs)


@dataclass(frozen=True, slots=True)
class BlobStores:
    blobs: BlobStore
    partials: PartialBlobs
    small: SmallBlobs


def blob_stores_over(blobs: BlobStore) -> BlobStores:
    """``blobs``, with where it keeps resumable uploads' bytes and its small files' cache."""
    return BlobStores(blobs, open_partials(blobs), SmallBlobs(blobs))
