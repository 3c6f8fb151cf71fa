"""Backups (``service.auth.backup``) of the app in-process on the fixtures' real Redis, with its
blob store (the data directory, or under ``--blobs s3`` the object store): the bytes of a file
deleted after the store was read are still in the backup, the backup is private and holds no
secret, a thumbnail is no file's bytes (left out, made again after a restore), and a restore
goes only into an empty store and blob store (or finishes one cut short).
The round trip under traffic against real processes is ``tests/system/test_backup.py``."""

from __future__ import annotations

import base64
import hashlib
import shutil
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from service.api.context import POLICY, REMOVALS_AT_START, SETTINGS
from service.app import BLOBS, STORE
from service.auth.backup import FILES, BackupError, Backups
from service.clock import SystemClock
from service.domain.blobs import ChunkSource
from service.domain.outcomes import PauseTooLong
from service.store.backup import BackupStore
from service.store.directory_blobs import DirectoryBlobs
from service.store.s3_blobs import S3Blobs
from tests.support.api import Api, assert_error, bearer
from tests.support.blobs import is_directory, stored_names
from tests.support.files import uploaded
from tests.support.images import image_bytes, opened


def blob_store(api: Api, data_dir: Path) -> Any:
    """The blob store of a deployment in ``data_dir``: the app's own for its ``live`` one; in an
    object store, another one's is under a prefix of its own."""
    if is_directory(api):
        return DirectoryBlobs(data_dir / "files")
    if data_dir.name == "live":
        return api.app[BLOBS]
    own = api.app[SETTINGS].object_store
    return S3Blobs(replace(own, prefix=f"{own.prefix}{data_dir.name}/"))


def backups(api: Api, data_dir: Path) -> Backups:
    return Backups(api.app[STORE].backup, blob_store(api, data_dir), SystemClock())


async def lose_every_file(api: Api, data_dir: Path) -> None:
    """The files' bytes lost with the store: the data directory gone, the objects deleted."""
    if is_directory(api):
        shutil.rmtree(data_dir)
    else:
        blobs = blob_store(api, data_dir)
        assert await blobs.delete_all(await blobs.stored()) == []


async def one(data: bytes) -> Any:
    yield data


@pytest.fixture
async def live(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path / "live")


async def listed_files(api: Api, token: str) -> dict[str, Any]:
    response = await api.client.get("/api/v1/files", headers=bearer(token))
    return {entry["id"]: entry for entry in (await response.json())["data"]["files"]}


async def content(api: Api, token: str, file_id: str) -> tuple[int, bytes]:
    response = await api.client.get(f"/api/v1/files/{file_id}/content", headers=bearer(token))
    return response.status, await response.read()


async def test_a_file_deleted_after_the_store_was_read_is_whole_in_the_backup(
    live: Api, tmp_path: Path, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its record is in the snapshot, so its bytes must be too: they were pinned while writes
    waited (an object store's: deletions only note their bytes while the backup copies)."""
    token = await live.user_with_session("alice@example.com")
    kept = await uploaded(live, b"kept bytes", token=token)
    doomed = await uploaded(live, b"bytes deleted mid-backup", token=token)
    snapshot = BackupStore.snapshot

    async def then_delete(self: BackupStore, *args: Any, **kwargs: Any) -> Any:
        taken = await snapshot(self, *args, **kwargs)
        response = await live.client.delete(f"/api/v1/files/{doomed['id']}", headers=bearer(token))
        assert response.status == 200
        return taken

    monkeypatch.setattr(BackupStore, "snapshot", then_delete)
    made = await backups(live, tmp_path / "live").back_up(tmp_path / "backup")
    monkeypatch.undo()

    assert (made.files, made.missing_bytes) == (2, [])
    assert (await content(live, token, doomed["id"]))[0] == 404  # gone from the service
    await live.app[POLICY].removals.finish_all()  # what the backup command does at its end
    assert doomed["id"] not in await stored_names(live)
    # Everything lost: the store and the files' bytes. The app serves what is restored.
    redis_server.flush()
    await lose_every_file(live, tmp_path / "live")
    restored = await backups(live, tmp_path / "live").restore(tmp_path / "backup")
    assert (restored.files, restored.sessions_ended) == (2, 1)
    # Every session of the backup was left out: its owner signs in again.
    response = await live.client.get("/api/v1/files", headers=bearer(token))
    await assert_error(response, 401, "invalid_session")
    token = await live.login("alice@example.com")
    assert set(await listed_files(live, token)) == {kept["id"], doomed["id"]}
    assert await content(live, token, doomed["id"]) == (200, b"bytes deleted mid-backup")
    assert await content(live, token, kept["id"]) == (200, b"kept bytes")


async def test_a_thumbnail_is_left_out_of_a_backup_and_made_again_after_a_restore(
    live: Api, tmp_path: Path, redis_server: Any
) -> None:
    token = await live.user_with_session("alice@example.com")
    png = image_bytes("PNG", (400, 200))
    image = await uploaded(live, png, token=token, filename="i.png", content_type="image/png")
    thumbnail = f"/api/v1/files/{image['id']}/thumbnail"
    first = await live.client.get(thumbnail, headers=bearer(token))
    assert first.status == 200
    assert await stored_names(live) == [image["id"]]  # the thumbnail is no file's bytes

    made = await backups(live, tmp_path / "live").back_up(tmp_path / "backup")
    assert made.files == 1
    assert [path.name for path in (tmp_path / "backup" / FILES).iterdir()] == [image["id"]]
    redis_server.flush()
    await lose_every_file(live, tmp_path / "live")
    await backups(live, tmp_path / "live").restore(tmp_path / "backup")
    token = await live.login("alice@example.com")
    again = await live.client.get(thumbnail, headers=bearer(token))
    assert again.status == 200
    assert opened(await again.read()).size == opened(await first.read()).size == (320, 160)


async def test_the_backup_is_private_and_holds_no_secret(live: Api, tmp_path: Path) -> None:
    token = await live.user_with_session("alice@example.com")
    key = await live.create_key(token)
    await uploaded(live, b"some bytes", token=token)

    await backups(live, tmp_path / "live").back_up(tmp_path / "backup")

    every = [tmp_path / "backup", *sorted((tmp_path / "backup").rglob("*"))]
    for path in every:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    held = b"".join(path.read_bytes() for path in every if path.is_file())
    dumps = b"".join(
        base64.b64decode(orjson.loads(line)["dump"])
        for line in (tmp_path / "backup" / "records.jsonl").read_bytes().splitlines()
    )
    for secret in (key["secret_key"], token, "correct horse battery staple"):
        assert secret.encode() not in held + dumps
    # What is there instead: the digests, which the restored service needs.
    assert hashlib.sha256(token.encode()).hexdigest().encode() in held


async def test_a_restore_refuses_a_store_or_a_data_directory_that_holds_anything(
    live: Api, tmp_path: Path, redis_server: Any
) -> None:
    await live.user_with_session("alice@example.com")
    await backups(live, tmp_path / "live").back_up(tmp_path / "backup")

    with pytest.raises(BackupError, match="not empty: keys under fh: in Redis"):
        await backups(live, tmp_path / "target").restore(tmp_path / "backup")
    assert not (tmp_path / "target").exists()

    redis_server.flush()
    stray = "fil_" + "x" * 22
    await blob_store(live, tmp_path / "target").put(stray, ChunkSource(one(b"left from before")))
    with pytest.raises(BackupError, match=r"not empty: 1 file\(s\) in"):
        await backups(live, tmp_path / "target").restore(tmp_path / "backup")
    assert await live.app[STORE].backup.held() == []


@pytest.mark.parametrize("upgraded", [True, False], ids=["upgraded", "from before an upgrade"])
async def test_a_restore_goes_into_a_deployment_only_started_and_keeps_the_backups_upgrades(
    live: Api, tmp_path: Path, redis_server: Any, redis_client: Any, upgraded: bool
) -> None:
    """A start marks its upgrades done, over no data too: that is no data to the restore, and the
    restored store holds the backup's marks, so a backup made before an upgrade still needs it
    (the command line then runs it, ``tests/system/test_backup.py``)."""
    mark = live.app[STORE].keys.uploader_keys_marked
    await live.app[REMOVALS_AT_START]  # the start's upgrades, done
    await live.user_with_session("alice@example.com")
    if not upgraded:
        redis_client.delete(mark)
    await backups(live, tmp_path / "live").back_up(tmp_path / "backup")
    redis_server.flush()
    redis_client.set(mark, "1")  # what a start over no data leaves

    await backups(live, tmp_path / "target").restore(tmp_path / "backup")

    assert redis_client.exists(mark) == upgraded
    assert await live.login("alice@example.com")


async def test_a_restore_cut_short_is_finished_by_running_it_again(
    live: Api, tmp_path: Path, redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await live.user_with_session("alice@example.com")
    stored = await uploaded(live, b"some bytes", token=token)
    await backups(live, tmp_path / "live").back_up(tmp_path / "backup")
    redis_server.flush()

    async def cut_short(*_: Any, **__: Any) -> int:
        raise ConnectionError("the store went away")

    monkeypatch.setattr(BackupStore, "restore", cut_short)
    with pytest.raises(ConnectionError):
        await backups(live, tmp_path / "target").restore(tmp_path / "backup")
    monkeypatch.undo()
    again = await backups(live, tmp_path / "target").restore(tmp_path / "backup")

    assert again.resumed and again.files == 1
    assert await live.app[STORE].backup.restoring() is None
    token = await live.login("alice@example.com")  # the backup's session was left out
    assert await content(live, token, stored["id"]) == (200, b"some bytes")


async def test_a_backup_that_cannot_finish_leaves_nothing_behind(
    live: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await live.user_with_session("alice@example.com")
    await uploaded(live, b"some bytes", token=token)

    async def too_long(*_: Any, **__: Any) -> Any:
        raise PauseTooLong(2500, 2000)

    monkeypatch.setattr(BackupStore, "snapshot", too_long)
    with pytest.raises(BackupError, match="took 2500 ms, longer than writes may wait"):
        await backups(live, tmp_path / "live").back_up(tmp_path / "backup")

    assert not (tmp_path / "backup").exists()
    if is_directory(live):
        files = tmp_path / "live" / "files"
        hidden = [p.name for p in files.iterdir() if p.name.startswith(".")]
        assert hidden == []  # no pinned bytes left over
    assert not await live.app[STORE].redis.exists("fh:backing-up")  # deletions go on


async def test_a_backup_goes_only_into_a_new_or_empty_directory(live: Api, tmp_path: Path) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "something").write_text("")

    with pytest.raises(BackupError, match="not an empty directory"):
        await backups(live, tmp_path / "live").back_up(tmp_path / "used")

    assert [p.name for p in (tmp_path / "used").iterdir()] == ["something"]


async def test_a_backup_of_another_prefix_is_refused(
    live: Api, make_api: Any, tmp_path: Path, redis_server: Any
) -> None:
    await live.user_with_session("alice@example.com")
    await backups(live, tmp_path / "live").back_up(tmp_path / "backup")
    redis_server.flush()
    other = await make_api(data_dir=tmp_path / "other", redis_prefix="other")

    with pytest.raises(BackupError, match="FILEHOST_REDIS_PREFIX=fh"):
        await backups(other, tmp_path / "other").restore(tmp_path / "backup")
