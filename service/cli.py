"""Command line: ``serve`` runs the service; ``users`` creates, lists and deletes accounts.

Exit codes: 0 done, 1 the operation was refused or the store is unreachable, 2 bad usage or a bad
setting. Passwords are read from standard input (or a no-echo prompt), never from an argument,
so they stay out of shell history and process lists.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import getpass
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import orjson
from redis.exceptions import RedisError

from service.auth.passwords import PasswordHasher
from service.auth.policy import Policy, make_policy
from service.auth.users import normalise_email
from service.clock import SystemClock, iso
from service.config import ConfigError, Settings, load_settings
from service.errors import ApiError
from service.store.blobs import FILES_DIRECTORY, DirectoryBlobs
from service.store.embedded import EmbeddedRedis, EmbeddedStoreError
from service.store.files import decode_cursor
from service.store.stores import Stores, open_stores
from service.store.topology import connect_client


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m service",
        description="Authentication core of a file-hosting service. Settings come from the "
        "environment (REDIS_URL, FILEHOST_*); see the README.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", help="address to listen on (FILEHOST_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (FILEHOST_PORT, default 8080)")
    serve.add_argument(
        "--workers", type=int, help="worker processes sharing the port (FILEHOST_WORKERS)"
    )

    users = commands.add_parser("users", help="manage user accounts")
    actions = users.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a user")
    create.add_argument("--email", required=True)
    create.add_argument(
        "--password-stdin",
        action="store_true",
        required=True,
        help="read the password from standard input (one line)",
    )
    listing = actions.add_parser("list", help="list users")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    delete = actions.add_parser(
        "delete",
        help="delete a user, ending their sessions and revoking their keys, with their files, "
        "folders and settings",
    )
    delete.add_argument("--email", required=True)
    return parser


def _read_password() -> str:
    if sys.stdin.isatty():
        return getpass.getpass("Password: ")
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


async def _account_file_ids(store: Stores, email: str) -> list[str]:
    """The ids of every file of the account with ``email`` whose bytes may be stored: its files,
    and those deleted whose bytes a removal still has to remove (none when there is no such
    user)."""
    user_id = await store.users.find_id(normalise_email(email))
    if user_id is None:
        return []
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
        else:
            # The files' bytes go after their records, as a file's deletion does: a crash in
            # between leaves unreferenced bytes, never a record without its bytes.
            file_ids = await _account_file_ids(store, args.email)
            user = await accounts.users.delete_user(args.email)
            blobs = DirectoryBlobs(settings.data_dir / FILES_DIRECTORY)
            for file_id in file_ids:
                await blobs.delete(file_id)
            resumed = (
                " (an earlier deletion had been cut short; now finished)" if user.resumed else ""
            )
            print(
                f"deleted user {user.email} ({user.id}); their sessions and keys are revoked,"
                f" their folders and settings deleted and their {len(file_ids)} file(s)"
                f" removed{resumed}"
            )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
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
    except ConfigError as error:
        print(f"configuration error: {error}", file=sys.stderr)
        return 2

    if args.command == "serve":
        from service.server import serve

        try:
            return serve(settings)
        except EmbeddedStoreError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1

    try:
        return asyncio.run(_users(settings, args))
    except ApiError as error:
        reasons = "; ".join(f"{field} {why}" for field, why in (error.details or {}).items())
        print(f"error: {error.message}{' ' + reasons if reasons else ''}", file=sys.stderr)
        return 1
    except (RedisError, EmbeddedStoreError) as error:
        print(f"error: the store is unreachable ({type(error).__name__})", file=sys.stderr)
        return 1
