"""The object store's rows of ``SETTINGS`` (``service.config.table``): where the files' bytes
go with ``FILEHOST_BLOB_STORE=s3``, and the credentials every S3 tool reads."""

from __future__ import annotations

from service.config.readers import (
    Choice,
    Float,
    S3Endpoint,
    SecretFile,
    SecretText,
    Text,
)
from service.config.setting import Setting

OBJECT_STORE_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "blob_store",
        "FILEHOST_BLOB_STORE",
        Choice(("directory", "s3")),
        "directory",
        "Where the files' bytes live: `directory`, the data directory's `files/` (one host, or a "
        "shared volume); `s3`, an S3-compatible object store, so any number of instances on any "
        "hosts serve every file ([operating.md](operating.md#files-in-object-storage))",
    ),
    Setting(
        "s3_endpoint",
        "FILEHOST_S3_ENDPOINT",
        S3Endpoint(),
        None,
        "The object store's address, e.g. `http://127.0.0.1:8333` (SeaweedFS) or "
        "`https://<account>.r2.cloudflarestorage.com`",
        "unset: AWS S3 in `FILEHOST_S3_REGION`",
    ),
    Setting(
        "s3_public_endpoint",
        "FILEHOST_S3_PUBLIC_ENDPOINT",
        S3Endpoint(),
        None,
        "With `FILEHOST_S3_DOWNLOADS=redirect`, the object store's address as clients reach it "
        "(`https://files-store.example.com`), which its presigned URLs are made and signed for: "
        "the store must answer there under its own name, as a proxy in front of it passing the "
        "`Host` header on",
        "unset: `FILEHOST_S3_ENDPOINT`",
    ),
    Setting(
        "s3_bucket",
        "FILEHOST_S3_BUCKET",
        Text(
            r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]",
            "a bucket name: 3–63 lower-case letters, digits, `.` or `-`",
        ),
        None,
        "The bucket the bytes go to; the service never creates or deletes a bucket",
        "unset",
        "; required with `s3`",
    ),
    Setting(
        "s3_region",
        "FILEHOST_S3_REGION",
        Text(r"[a-z0-9-]{1,32}", "1–32 lower-case letters, digits or `-`"),
        "us-east-1",
        "The region requests are signed for (`auto` for Cloudflare R2)",
    ),
    Setting(
        "s3_prefix",
        "FILEHOST_S3_PREFIX",
        Text(r"[A-Za-z0-9!_.*'()/-]{1,200}", "1–200 characters safe in an object key"),
        "",
        "A prefix of every object's key, so several deployments can share a bucket (`/` is "
        "added when it does not end with one)",
        "empty",
    ),
    Setting(
        "s3_addressing",
        "FILEHOST_S3_ADDRESSING",
        Choice(("path", "virtual")),
        None,
        "How the bucket is named in a request: in the path (`http://host/bucket/key`, what most "
        "self-hosted stores want) or as a virtual host (`http://bucket.host/key`)",
        "`path` with `FILEHOST_S3_ENDPOINT`, else `virtual`",
    ),
    Setting(
        "s3_downloads",
        "FILEHOST_S3_DOWNLOADS",
        Choice(("proxy", "redirect")),
        "proxy",
        "How downloads are served: `proxy`, the service streams the bytes; `redirect`, an "
        "authorised download answers 302 to a presigned GET valid for 60 s (aliases with a "
        "password or a view limit are always proxied)",
    ),
    Setting(
        "s3_timeout_seconds",
        "FILEHOST_S3_TIMEOUT_SECONDS",
        Float(1.0, 300.0),
        10.0,
        "The longest the service waits on the object store (to connect, for an answer, between "
        "two pieces of a body) before answering 503 `storage_unavailable`",
    ),
    Setting(
        "s3_access_key_id",
        "AWS_ACCESS_KEY_ID",
        SecretText(),
        None,
        "The object store's access key (the name every S3 tool reads)",
        "unset: the AWS SDK's own chain (an instance's role, say)",
        "; not with `AWS_ACCESS_KEY_ID_FILE`",
    ),
    Setting(
        "s3_access_key_id_file",
        "AWS_ACCESS_KEY_ID_FILE",
        SecretFile(),
        None,
        "The same read from a file (a container's secret)",
        "unset",
    ),
    Setting(
        "s3_secret_access_key",
        "AWS_SECRET_ACCESS_KEY",
        SecretText(),
        None,
        "The object store's secret key; never logged, in no metric and no answer",
        "unset",
        "; not with `AWS_SECRET_ACCESS_KEY_FILE`",
    ),
    Setting(
        "s3_secret_access_key_file",
        "AWS_SECRET_ACCESS_KEY_FILE",
        SecretFile(),
        None,
        "The same read from a file",
        "unset",
    ),
    Setting(
        "s3_session_token",
        "AWS_SESSION_TOKEN",
        SecretText(),
        None,
        "A temporary credential's session token, with the two above",
        "unset",
        "; not with `AWS_SESSION_TOKEN_FILE`",
    ),
    Setting(
        "s3_session_token_file",
        "AWS_SESSION_TOKEN_FILE",
        SecretFile(),
        None,
        "The same read from a file",
        "unset",
    ),
)
