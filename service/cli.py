"""Command line: ``serve`` runs the service; ``users`` creates, lists, deletes accounts and sets
a forgotten password; ``backup`` and ``restore`` copy the store and the files' bytes.

Installed as ``filehost-auth`` (``[project.scripts]``); ``python -m service`` and, in a checkout,
``scripts/run`` are the same command, and each names itself in its help and messages.

Exit codes: 0 done, 1 the operation was refused (or declined at its prompt), the store is
unreachable, or ``serve`` could not start; 2 bad usage or a bad setting. Passwords are read from
standard input (or a no-echo prompt), never from an argument, so they stay out of shell history
and process lists.

What goes where: ``serve`` writes JSON lines on standard error and nothing else, its refusals
and usage errors included (``service.observability.log_lines``). The other commands are for
people: results on standard output (``users list --json`` for scripts), prompts and errors
(``error: …``) as plain text on standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import getpass
import logging
import os
import secrets
import sys
import textwrap
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NoReturn

import orjson
from redis.exceptions import RedisError

from service.auth.backup import DEFAULT_MAX_PAUSE_MS, BackupError, Backups
from service.auth.passwords import PasswordHasher
from service.auth.policy import Policy, make_policy
from service.auth.secret_box import SecretUnreadable
from service.auth.users import normalise_email
from service.clock import SystemClock, iso
from service.config import ConfigError, Settings, load_settings
from service.errors import ApiError, Code
from service.observability.log_lines import write_line
from service.store.blobs import FILES_DIRECTORY, DirectoryBlobs, StorageFull
from service.store.embedded import EmbeddedRedis, EmbeddedStoreError
from service.store.files import decode_cursor
from service.store.stores import Stores, open_stores
from service.store.topology import connect_client

# How each way of starting the command names itself (``main``'s ``prog``).
INSTALLED = "filehost-auth"
AS_MODULE = "python -m service"


class Refused(Exception):
    """A command that stops with a message of its own and an exit status (1 or 2)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse, except that ``serve``'s usage errors are a JSON line like all it writes."""

    def error(self, message: str) -> NoReturn:
        if self.prog.endswith(" serve"):
            write_line(
                logging.ERROR,
                "service",
                f"bad usage: {message} (see {self.prog} --help)",
                usage=self.format_usage().strip(),
            )
            sys.exit(2)
        super().error(message)


def _text(paragraph: str) -> str:
    """A paragraph of help wrapped as argparse would (its raw formatter keeps the examples')."""
    return textwrap.fill(paragraph, 88)


def _examples(prog: str, *lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line.format(prog=prog)}" for line in lines)


def _parser(prog: str) -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog=prog,
        formatter_class=raw,
        description=_text(
            "Authentication core of a file-hosting service. Installed as "
            f"`{INSTALLED}`; `{AS_MODULE}` and, in a checkout, `scripts/run` are the same command. "
            "Settings come from the environment (REDIS_URL, FILEHOST_*; docs/configuration.md)."
        ),
        epilog=_examples(
            prog,
            "{prog} serve --port 8081",
            "echo 'a long password' | {prog} users create --email you@example.com --password-stdin",
            "{prog} users set-password --email you@example.com --password-stdin",
            "{prog} users delete --email you@example.com",
            "{prog} users reset-mfa --email you@example.com",
            "{prog} backup --to /var/backups/filehost-$(date +%Y%m%d-%H%M)",
        )
        + "\n\n"
        + _text(
            "exit status: 0 done; 1 refused, declined, store unreachable, or serve could not "
            "start; 2 bad usage or setting"
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="run the HTTP service",
        description=_text(
            "Serve the API and the dashboard until SIGTERM or SIGINT. Writes JSON lines "
            "on standard error, nothing on standard output. Exits 1 when it cannot start (the port "
            "in use, the embedded store's data directory held by another serve), 2 on a bad "
            "setting."
        ),
        formatter_class=raw,
        epilog=_examples(prog, "{prog} serve", "FILEHOST_PORT=8081 {prog} serve --workers 2"),
    )
    serve.add_argument("--host", help="address to listen on (FILEHOST_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (FILEHOST_PORT, default 8080)")
    serve.add_argument(
        "--workers", type=int, help="worker processes sharing the port (FILEHOST_WORKERS)"
    )

    users = commands.add_parser(
        "users",
        help="manage user accounts",
        description=_text("Create, list and delete accounts, and set a forgotten password."),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "echo 'a long password' | {prog} users create --email you@example.com --password-stdin",
            "{prog} users list --json",
            "{prog} users set-password --email you@example.com --password-stdin",
            "{prog} users delete --email you@example.com --yes",
        ),
    )
    actions = users.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="create a user",
        description=_text(
            "Create a user. The password is read from standard input (one line), or "
            "asked twice without echo on a terminal."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "echo 'a long password' | {prog} users create --email you@example.com --password-stdin",
            "{prog} users create --email you@example.com --password-stdin   # asks for it",
        ),
    )
    create.add_argument("--email", required=True)
    create.add_argument(
        "--password-stdin",
        action="store_true",
        required=True,
        help="read the password from standard input (one line; asked twice on a terminal)",
    )
    listing = actions.add_parser(
        "list",
        help="list users",
        formatter_class=raw,
        epilog=_examples(prog, "{prog} users list", "{prog} users list --json | jq -r .email"),
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    reset = actions.add_parser(
        "set-password",
        help="set a user's password (a forgotten one), ending all their sessions",
        description=_text(
            "Replace a user's password without the current one: for a user who forgot "
            "theirs. Every session of the account ends (they sign in again with the new password); "
            "their API keys keep working. Recorded in the account's audit trail as "
            "password.changed by the command line. The same rules as any password "
            "(FILEHOST_PASSWORD_MIN_LENGTH)."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "{prog} users set-password --email you@example.com --password-stdin   # asks twice",
            "printf '%s\\n' \"$NEW_PASSWORD\" | {prog} users set-password --email "
            "you@example.com --password-stdin",
        ),
    )
    reset.add_argument("--email", required=True)
    reset.add_argument(
        "--password-stdin",
        action="store_true",
        required=True,
        help="read the new password from standard input (one line; asked twice on a terminal)",
    )
    delete = actions.add_parser(
        "delete",
        help="delete a user with their sessions, keys, files, folders and settings",
        description=_text(
            "Delete a user: their sessions end, their API keys are revoked, their files "
            "(records and bytes), folders, settings and audit trail are removed, for good. On a "
            "terminal it says how many of each and asks first; elsewhere (a script, a pipe) it "
            "needs --yes."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "{prog} users delete --email you@example.com          # asks on a terminal",
            "{prog} users delete --email you@example.com --yes    # in a script",
        ),
    )
    delete.add_argument("--email", required=True)
    delete.add_argument("--yes", action="store_true", help="delete without asking")
    reset_mfa = actions.add_parser(
        "reset-mfa",
        help="remove every second factor of a user who lost theirs; ends their sessions",
        description=_text(
            "Remove a user's TOTP, passkeys, recovery codes and any enrolment or login step in "
            "progress, and end every session of the account (API keys keep working); recorded "
            "as mfa.reset. Check who is asking first. Asks on a terminal; elsewhere needs --yes."
        ),
        formatter_class=raw,
        epilog=_examples(prog, "{prog} users reset-mfa --email you@example.com --yes"),
    )
    reset_mfa.add_argument("--email", required=True)
    reset_mfa.add_argument("--yes", action="store_true", help="reset without asking")

    secrets_ = commands.add_parser(
        "secrets",
        help="the key that encrypts TOTP secrets: make one, re-encrypt with a new one",
        description=_text(
            "new-key prints a new key for FILEHOST_SECRETS_KEY. rotate seals every stored "
            "TOTP secret again with the first configured key, after a new key was put first "
            "(docs/operating.md#the-secrets-key)."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "{prog} secrets new-key",
            "FILEHOST_SECRETS_KEY=$NEW,$OLD {prog} secrets rotate",
        ),
    )
    secrets_.add_argument("action", choices=("new-key", "rotate"))

    backup = commands.add_parser(
        "backup",
        help="write a consistent backup of the store and the files' bytes",
        description=_text(
            "Copy every record in the store and the bytes of every file they name, as one "
            "state the service was in, into a new directory (mode 0700, files 0600: it holds "
            "password hashes and digests, never a secret). Writes wait while the store is read "
            "(reads go on), at most --max-pause-ms; serve may keep running. "
            "docs/operating.md#backing-up-and-restoring."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "{prog} backup --to /var/backups/filehost-$(date +%Y%m%d-%H%M)",
            "{prog} restore --from /var/backups/filehost-20250101-0300",
        ),
    )
    backup.add_argument(
        "--to", required=True, type=Path, help="a new directory (or an empty one) to write"
    )
    backup.add_argument(
        "--max-pause-ms",
        type=milliseconds,
        default=DEFAULT_MAX_PAUSE_MS,
        help="how long the service's writes may wait while the store is read "
        f"(default {DEFAULT_MAX_PAUSE_MS}); the backup fails if reading takes longer",
    )
    restore = commands.add_parser(
        "restore",
        help="restore a backup into an empty store and data directory",
        description=_text(
            "Write a backup's files and records into this deployment's store (REDIS_URL, or "
            "the embedded one) and data directory (FILEHOST_DATA_DIR), which must hold nothing. "
            "The service comes back as it was when the backup was taken: sessions and keys keep "
            "their own deadlines, and what was revoked or ended after it is live again."
        ),
        formatter_class=raw,
        epilog=_examples(prog, "{prog} restore --from /var/backups/filehost-20250101-0300"),
    )
    restore.add_argument(
        "--from", dest="source", required=True, type=Path, help="the backup's directory"
    )
    return parser


def milliseconds(text: str) -> int:
    """How long writes may wait, as ``--max-pause-ms`` takes it."""
    value = int(text)
    if not 1 <= value <= 60_000:
        raise argparse.ArgumentTypeError("must be between 1 and 60000")
    return value


def _read_password() -> str:
    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat it: ") != password:
            raise Refused("the two passwords differ; nothing was changed")
        return password
    line = sys.stdin.readline()
    return line.removesuffix("\n").removesuffix("\r")


@asynccontextmanager
async def _policy(settings: Settings) -> AsyncIterator[tuple[Policy, Stores]]:
    embedded = None
    url = settings.redis_url
    if url is None:
        # Attaches to the store a running serve owns, or starts a private one (stopped below).
        embedded = EmbeddedRedis(settings.data_dir, settings.embedded_server)
        try:
            embedded.start()
        except EmbeddedStoreError as error:  # what to do about it (main() adds "unreachable")
            print(f"error: {error}", file=sys.stderr)
            raise
        url = embedded.url
    client, close = connect_client(settings, url)  # the topology FILEHOST_REDIS_MODE names
    passwords = PasswordHasher(settings.bcrypt_cost, concurrency=1, queue_max=0)
    store = open_stores(client, settings.redis_prefix)
    try:
        yield make_policy(store, passwords, SystemClock(), settings), store
    finally:
        passwords.close()
        await close()
        if embedded is not None:
            embedded.stop()


async def _account_file_ids(store: Stores, user_id: str) -> list[str]:
    """The ids of every file of the account whose bytes may be stored: its files, and those
    deleted whose bytes a removal still has to remove."""
    ids = []
    async for removed in store.folder_removal.leftovers(user_id, 1000):
        ids += [removed_id for removed_id in removed if removed_id.startswith("fil_")]
    files, after = store.files, None
    while True:
        page = await files.list_page(user_id, 1000, after)
        ids += [record.id for record in page.files]
        if page.next_cursor is None:
            return ids
        after = decode_cursor(page.next_cursor)


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


async def _what_deletion_ends(accounts: Policy, user_id: str) -> str:
    """What deleting the account loses, counted: its keys, files and sessions."""
    keys = len(await accounts.api_keys.list_keys(user_id))
    files = await accounts.files.count(user_id)
    sessions = len(await accounts.sessions.list_sessions(user_id))
    return (
        f"{_count(keys, 'API key')} (revoked), {_count(files, 'file')} (bytes removed) and "
        f"{_count(sessions, 'session')} (ended)"
    )


def _confirmed(question: str) -> bool:
    print(question, end=" ", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def _delete(
    settings: Settings, accounts: Policy, store: Stores, args: argparse.Namespace
) -> None:
    email = normalise_email(args.email)
    user_id = await store.users.find_id(email)
    if user_id is None:
        raise ApiError(Code.USER_NOT_FOUND)
    if not args.yes:
        loses = await _what_deletion_ends(accounts, user_id)
        if not sys.stdin.isatty():
            raise Refused(
                f"not on a terminal, so nothing was asked and nothing deleted: add --yes to "
                f"delete {email} with {loses}",
                status=2,
            )
        question = f"Delete {email} ({user_id}) with {loses}? This cannot be undone. [y/N]"
        if not _confirmed(question):
            raise Refused("not deleted")
    # The files' bytes go after their records, as a file's deletion does: a crash in between
    # leaves unreferenced bytes, never a record without its bytes.
    file_ids = await _account_file_ids(store, user_id)
    deleted = await accounts.users.delete_user(args.email)
    blobs = DirectoryBlobs(settings.data_dir / FILES_DIRECTORY)
    for file_id in file_ids:
        await blobs.delete(file_id)
    resumed = " (an earlier deletion had been cut short; now finished)" if deleted.resumed else ""
    print(
        f"deleted user {deleted.email} ({deleted.id}); their sessions and keys are revoked,"
        f" their folders and settings deleted and their {len(file_ids)} file(s) removed{resumed}"
    )


async def _reset_mfa(accounts: Policy, store: Stores, args: argparse.Namespace) -> None:
    email = normalise_email(args.email)
    user_id = await store.users.find_id(email)
    if user_id is None:
        raise ApiError(Code.USER_NOT_FOUND)
    if not args.yes:
        if not sys.stdin.isatty():
            raise Refused(
                f"not on a terminal, so nothing was asked and nothing reset: add --yes to remove "
                f"every second factor of {email} and end their sessions",
                status=2,
            )
        question = (
            f"Remove every second factor of {email} ({user_id}) and end their sessions? [y/N]"
        )
        if not _confirmed(question):
            raise Refused("not reset")
    had, ended = await accounts.factors.reset(user_id)
    what = "every second factor removed" if had else "they had no second factor"
    print(f"{email}: {what}; {_count(ended, 'session')} ended (their API keys still work)")


async def _secrets(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "new-key":
        print(base64.b64encode(secrets.token_bytes(32)).decode("ascii"))
        return 0
    if not settings.mfa.secrets_keys:
        raise Refused("set FILEHOST_SECRETS_KEY (the new key first, then the old ones) to rotate")
    async with _policy(settings) as (accounts, _):
        resealed = current = 0
        unreadable = []
        for user in await accounts.users.list_users():
            try:
                again, already = await accounts.factors.reseal(user.id)
            except SecretUnreadable:
                unreadable.append(user.email)
                continue
            resealed, current = resealed + again, current + already
    print(f"{_count(resealed, 'secret')} sealed again with the first key; {current} already were")
    if unreadable:
        print(
            f"error: no configured key opens the TOTP secret of {', '.join(unreadable)}: put "
            "the key that sealed it back, or run users reset-mfa for them",
            file=sys.stderr,
        )
        return 1
    return 0


async def _users(settings: Settings, args: argparse.Namespace) -> int:
    async with _policy(settings) as (accounts, store):
        if args.action == "create":
            user = await accounts.users.create_user(args.email, _read_password())
            print(f"created user {user.email} ({user.id})")
        elif args.action == "list":
            for user in await accounts.users.list_users():
                if args.json:
                    print(
                        orjson.dumps(
                            {"id": user.id, "email": user.email, "created_at": iso(user.created_at)}
                        ).decode()
                    )
                else:
                    print(f"{user.id}  {user.email}  {iso(user.created_at)}")
        elif args.action == "set-password":
            changed = await accounts.users.set_password(args.email, _read_password())
            print(
                f"password of {normalise_email(args.email)} changed; "
                f"{_count(changed.sessions_ended, 'session')} ended (their API keys still work)"
            )
        elif args.action == "reset-mfa":
            await _reset_mfa(accounts, store, args)
        else:
            await _delete(settings, accounts, store, args)
    return 0


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count} bytes"


async def _backups(settings: Settings, args: argparse.Namespace) -> int:
    async with _policy(settings) as (_, store):
        blobs = DirectoryBlobs(settings.data_dir / FILES_DIRECTORY)
        backups = Backups(store.backup, blobs, SystemClock())
        if args.command == "backup":
            made = await backups.back_up(args.to, args.max_pause_ms)
            print(
                f"backed up {_count(made.records, 'record')} and {_count(made.files, 'file')} "
                f"({_size(made.bytes)}) to {args.to}: the store as it was at "
                f"{iso(made.taken_at)}; writes waited {made.paused_ms} ms"
            )
            if made.missing_bytes:
                print(
                    f"warning: {_count(len(made.missing_bytes), 'file record')} already had no "
                    f"bytes in {blobs.root} ({', '.join(made.missing_bytes[:5])}"
                    f"{', …' if len(made.missing_bytes) > 5 else ''}): kept as they were",
                    file=sys.stderr,
                )
        else:
            done = await backups.restore(args.source)
            expired = f"; {done.expired} past their deadline left out" if done.expired else ""
            resumed = " (finishing a restore cut short)" if done.resumed else ""
            print(
                f"restored {_count(done.records, 'record')} and {_count(done.files, 'file')} "
                f"({_size(done.bytes)}) from {args.source}{resumed}: the store as it was at "
                f"{iso(done.taken_at)}{expired}. Revoke again any key, and end any session, "
                "revoked or ended after that time"
            )
    return 0


def _invoked_as() -> str:
    """How the command was started, for its messages: the installed script's name, else the
    module's."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name and name not in ("__main__.py", "-c") else AS_MODULE


def _settings(args: argparse.Namespace) -> Settings:
    settings = load_settings()
    overrides = {
        name: getattr(args, name)
        for name in ("host", "port", "workers")
        if getattr(args, name, None) is not None
    }
    settings = dataclasses.replace(settings, **overrides)
    if not 1 <= settings.workers <= 64:
        raise ConfigError("--workers must be between 1 and 64")
    if not 0 <= settings.port <= 65535:
        raise ConfigError("--port must be between 0 and 65535")
    if settings.workers > 1 and settings.port == 0:
        raise ConfigError("several workers need a fixed port, not 0")
    return settings


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    prog = prog or _invoked_as()
    args = _parser(prog).parse_args(argv)
    try:
        settings = _settings(args)
    except ConfigError as error:
        if args.command == "serve":
            write_line(logging.ERROR, "service", f"configuration error: {error}")
        else:
            print(f"configuration error: {error}", file=sys.stderr)
        return 2

    if args.command == "serve":
        from service.server import serve

        return serve(settings, prog)

    run = {"users": _users, "secrets": _secrets}.get(args.command, _backups)
    try:
        return asyncio.run(run(settings, args))
    except BackupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except StorageFull:  # restoring files' bytes
        where = settings.data_dir / FILES_DIRECTORY
        print(f"error: no room left in {where} for the files' bytes", file=sys.stderr)
        return 1
    except OSError as error:  # the backup's directory: permissions, space
        where = f" ({error.filename})" if error.filename else ""
        print(f"error: {error.strerror or error}{where}", file=sys.stderr)
        return 1
    except Refused as refused:
        print(f"error: {refused}", file=sys.stderr)
        return refused.status
    except ApiError as error:
        reasons = "; ".join(f"{field} {why}" for field, why in (error.details or {}).items())
        print(f"error: {error.message}{' ' + reasons if reasons else ''}", file=sys.stderr)
        return 1
    except (RedisError, EmbeddedStoreError) as error:
        print(f"error: the store is unreachable ({type(error).__name__})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; nothing more was done", file=sys.stderr)
        return 130
