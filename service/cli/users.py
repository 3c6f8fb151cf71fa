"""``users``: create, list, set a forgotten password, remove second factors, delete (asking
first, or refusing without ``--yes`` when not on a terminal)."""

from __future__ import annotations

import argparse
import sys

import orjson

from service.auth.policy import Policy
from service.auth.users import normalise_email
from service.cli.prompts import Refused, confirmed, counted, read_password
from service.cli.store import opened
from service.clock import iso
from service.config import Settings
from service.domain.audit_events import LOGIN_SUCCEEDED
from service.domain.cursors import decode_file_cursor
from service.domain.factors import MfaState
from service.domain.records import UserRecord
from service.errors import ApiError, Code
from service.store.stores import Stores


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
        after = decode_file_cursor(page.next_cursor)


async def _what_deletion_ends(accounts: Policy, user_id: str) -> str:
    """What deleting the account loses, counted: its keys, files and sessions."""
    keys = len(await accounts.api_keys.list_keys(user_id))
    files = await accounts.files.count(user_id)
    sessions = len(await accounts.sessions.list_sessions(user_id))
    return (
        f"{counted(keys, 'API key')} (revoked), {counted(files, 'file')} (bytes removed) and "
        f"{counted(sessions, 'session')} (ended)"
    )


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
        if not confirmed(question):
            raise Refused("not deleted")
    # The files' bytes go after their records, as a file's deletion does: a crash in between
    # leaves unreferenced bytes, never a record without its bytes.
    file_ids = await _account_file_ids(store, user_id)
    deleted = await accounts.users.delete_user(args.email)
    failed = await accounts.files.blobs.delete_all(file_ids)
    if failed:
        print(
            f"warning: the bytes of {len(failed)} file(s) could not be removed from the file "
            f"storage ({', '.join(failed[:5])}{', …' if len(failed) > 5 else ''}): remove them "
            "by hand; nothing names them any more",
            file=sys.stderr,
        )
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
        if not confirmed(question):
            raise Refused("not reset")
    had, ended = await accounts.factors.reset(user_id)
    what = "every second factor removed" if had else "they had no second factor"
    print(f"{email}: {what}; {counted(ended, 'session')} ended (their API keys still work)")


def second_factor(state: MfaState) -> str:
    """An account's second factors in a word or two: none, totp, 1 passkey, totp + 2 passkeys."""
    factors = ["totp"] if state.totp_enabled_at is not None else []
    if state.passkeys:
        factors.append(counted(len(state.passkeys), "passkey"))
    return " + ".join(factors) or "none"


async def _listed(accounts: Policy, user: UserRecord) -> dict[str, str | None]:
    """What ``users list`` shows of an account: its second factors, and its last login as far
    as the audit trail remembers (FILEHOST_AUDIT_RETENTION_DAYS)."""
    state = await accounts.factors.state(user.id)
    logins = await accounts.audit.page(user.id, 1, None, LOGIN_SUCCEEDED)
    return {
        "id": user.id,
        "email": user.email,
        "created_at": iso(user.created_at),
        "second_factor": second_factor(state),
        "last_login_at": iso(logins.events[0].event["at"]) if logins.events else None,
    }


def _table(rows: list[dict[str, str | None]]) -> list[str]:
    """The rows under a header, each column as wide as its widest value."""
    lines = [list(_COLUMNS.values())]
    lines += [[row[name] or "never" for name in _COLUMNS] for row in rows]
    widths = [max(len(line[column]) for line in lines) for column in range(len(_COLUMNS))]
    return [
        "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]


_COLUMNS = {
    "id": "ID",
    "email": "EMAIL",
    "created_at": "CREATED",
    "second_factor": "SECOND FACTOR",
    "last_login_at": "LAST LOGIN",
}


async def _list(accounts: Policy, as_json: bool) -> None:
    rows = [await _listed(accounts, user) for user in await accounts.users.list_users()]
    if as_json:
        for row in rows:
            print(orjson.dumps(row).decode())
    elif rows:
        print("\n".join(_table(rows)))
    else:
        print(
            "no users yet; create one with: users create --email you@example.com", file=sys.stderr
        )


async def run(settings: Settings, args: argparse.Namespace) -> int:
    async with opened(settings) as (accounts, store):
        if args.action == "create":
            user = await accounts.users.create_user(args.email, read_password())
            print(f"created user {user.email} ({user.id})")
        elif args.action == "list":
            await _list(accounts, args.json)
        elif args.action == "set-password":
            changed = await accounts.users.set_password(args.email, read_password())
            print(
                f"password of {normalise_email(args.email)} changed; "
                f"{counted(changed.sessions_ended, 'session')} ended (their API keys still work)"
            )
        elif args.action == "reset-mfa":
            await _reset_mfa(accounts, store, args)
        else:
            await _delete(settings, accounts, store, args)
    return 0
