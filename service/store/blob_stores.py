"""The blob store the settings name (``FILEHOST_BLOB_STORE``): the data directory's files, or an
S3-compatible object store; and where each keeps resumable uploads' bytes. What the
application, the command line and the benchmark open."""

from __future__ import annotations

from service.config import Settings
from service.store.blobs import FILES_DIRECTORY, BlobStore
from service.store.directory_blobs import DirectoryBlobs
from service.store.directory_partials import DirectoryPartials
from service.store.partial_blobs import PartialBlobs
from service.store.s3_blobs import S3Blobs
from service.store.s3_partials import S3Partials


def open_blob_store(settings: Settings) -> BlobStore:
    object_store = settings.object_store
    if object_store is None:
        return DirectoryBlobs(settings.data_dir / FILES_DIRECTORY)
    return S3Blobs(object_store)


def open_partials(blobs: BlobStore) -> PartialBlobs:
    """Where the blob store keeps resumable uploads' bytes until they are whole."""
    if isinstance(blobs, S3Blobs):
        return S3Partials(blobs)
    assert isinstance(blobs, DirectoryBlobs), blobs
    return DirectoryPartials(blobs)
