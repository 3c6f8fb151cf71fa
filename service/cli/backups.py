"""``backup`` and ``restore``: the store and the files' bytes, consistently."""

from __future__ import annotations

import argparse
import sys

from service.auth.backup import Backups
from service.auth.policy import upgrade_records
from service.cli.prompts import counted
from service.cli.store import opened
from service.clock import SystemClock, iso
from service.config import Settings


def _size(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} bytes"


async def run(settings: Settings, args: argparse.Namespace) -> int:
    async with opened(settings) as (accounts, store):
        backups = Backups(store.backup, accounts.files.blobs, SystemClock())
        if args.command == "backup":
            made = await backups.back_up(args.to, args.max_pause_ms)
            # Bytes deletions left noted while an object store's were copied out go now.
            await accounts.removals.finish_all()
            print(
                f"backed up {counted(made.records, 'record')} and {counted(made.files, 'file')} "
                f"({_size(made.bytes)}) to {args.to}: the store as it was at "
                f"{iso(made.taken_at)}; writes waited {made.paused_ms} ms"
            )
            if made.missing_bytes:
                print(
                    f"warning: {counted(len(made.missing_bytes), 'file record')} already had no "
                    f"bytes in the file storage ({', '.join(made.missing_bytes[:5])}"
                    f"{', …' if len(made.missing_bytes) > 5 else ''}): kept as they were",
                    file=sys.stderr,
                )
        else:
            done = await backups.restore(args.source, keep_sessions=args.keep_sessions)
            await upgrade_records(accounts)
            expired = f"; {done.expired} past their deadline left out" if done.expired else ""
            resumed = " (finishing a restore cut short)" if done.resumed else ""
            taken = iso(done.taken_at)
            sessions = (
                "its sessions kept: end any ended since then again"
                if args.keep_sessions
                else f"{counted(done.sessions_ended, 'session')} left out: everyone signs in again"
            )
            print(
                f"restored {counted(done.records, 'record')} and {counted(done.files, 'file')} "
                f"({_size(done.bytes)}) from {args.source}{resumed}: the store as it was at "
                f"{taken}{expired}; {sessions}. Keys revoked since then are live again: "
                f"`keys list` shows every key with its last use, and `keys revoke --since "
                f"<time>` revokes those created or used since a time"
            )
    return 0
