"""The command line's arguments: each command, its options, help and examples."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from service.auth.backup import DEFAULT_MAX_PAUSE_MS
from service.observability.log_lines import write_line

# How each way of starting the command names itself (``main``'s ``prog``).
INSTALLED = "filehost-auth"
AS_MODULE = "python -m service"


class _Parser(argparse.ArgumentParser):
    """argparse, except that ``serve``'s usage errors are a JSON line like all it writes, and that
    an argument a command does not know is that command's error (argparse makes it the top
    parser's, in plain text, even for ``serve``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Each command's own parser by name (``command_parser`` fills it), for its usage errors.
        self.commands: Mapping[str, argparse.ArgumentParser] = {}

    def parse_command(self, argv: Sequence[str] | None) -> argparse.Namespace:
        args, unknown = self.parse_known_args(argv)
        if unknown:
            owner = self.commands.get(args.command, self)
            owner.error(f"unrecognized arguments: {' '.join(unknown)}")
        return args

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


def command_parser(prog: str) -> _Parser:
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
            "{prog} keys revoke --since 2025-01-01T03:00Z",
        )
        + "\n\n"
        + _text(
            "exit status: 0 done; 1 refused, declined, store unreachable, or serve could not "
            "start; 2 bad usage or setting"
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = commands.choices

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
        help="list users: id, email, created, second factors, last login",
        formatter_class=raw,
        epilog=_examples(
            prog,
            "{prog} users list",
            "{prog} users list --json | jq -r 'select(.second_factor == \"none\") | .email'",
        ),
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

    keys = commands.add_parser(
        "keys",
        help="every live API key with its last use; revoke those created or used since a time",
        description=_text(
            "list shows every live API key of every account: its owner, name, prefix, when it "
            "was made and last used. revoke --since revokes at once every key created or used "
            "at or after that time (after restoring a backup, a key revoked since it was taken "
            "is live again; after a compromise, the keys whoever got in could have made or "
            "used), recorded as key.revoked by the command line. Asks on a terminal; elsewhere "
            "needs --yes. docs/operating.md#backing-up-and-restoring."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "{prog} keys list",
            "{prog} keys list --json | jq -r 'select(.last_used_at == null) | .id'",
            "{prog} keys revoke --since 2025-01-01T03:00Z",
        ),
    )
    key_actions = keys.add_subparsers(dest="action", required=True, metavar="ACTION")
    key_listing = key_actions.add_parser("list", help="list every live key")
    key_listing.add_argument("--json", action="store_true", help="one JSON object per line")
    key_revoking = key_actions.add_parser(
        "revoke", help="revoke every key created or used since a time"
    )
    key_revoking.add_argument(
        "--since",
        required=True,
        type=moment,
        help="an ISO 8601 time (UTC unless it says otherwise; a date alone is its midnight)",
    )
    key_revoking.add_argument("--yes", action="store_true", help="revoke without asking")

    blobs = commands.add_parser(
        "blobs",
        help="move a deployment's files' bytes from the data directory into an object store",
        description=_text(
            "migrate --to s3 copies the bytes of every file the records name from "
            "FILEHOST_DATA_DIR/files into the bucket FILEHOST_S3_* names, checking each "
            "against its record (size and SHA-256). Safe while serve runs, and resumable: what "
            "is in the bucket already is left as it is. Run it while serving, then once more "
            "with serve stopped, and start with FILEHOST_BLOB_STORE=s3. "
            "docs/operating.md#moving-a-deployment-to-object-storage."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "FILEHOST_S3_BUCKET=filehost {prog} blobs migrate --to s3",
            "FILEHOST_S3_BUCKET=filehost {prog} blobs migrate --to s3 --prune",
        ),
    )
    blob_actions = blobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    migrate = blob_actions.add_parser("migrate", help="copy every file's bytes into the bucket")
    migrate.add_argument("--to", required=True, choices=("s3",), help="where to: s3")
    migrate.add_argument(
        "--prune",
        action="store_true",
        help="also remove the objects no record names (deleted since they were copied)",
    )

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
            "The service comes back as it was when the backup was taken, but signed out: every "
            "session is left out (--keep-sessions keeps them). Keys keep their own deadlines, "
            "so one revoked after the backup is live again: see `keys list` and "
            "`keys revoke --since`."
        ),
        formatter_class=raw,
        epilog=_examples(
            prog,
            "{prog} restore --from /var/backups/filehost-20250101-0300",
            "{prog} keys revoke --since 2025-01-01T03:00Z   # then, after a compromise",
        ),
    )
    restore.add_argument(
        "--from", dest="source", required=True, type=Path, help="the backup's directory"
    )
    restore.add_argument(
        "--keep-sessions",
        action="store_true",
        help="restore the backup's sessions too (they stay signed in until their deadlines)",
    )
    return parser


def milliseconds(text: str) -> int:
    """How long writes may wait, as ``--max-pause-ms`` takes it."""
    value = int(text)
    if not 1 <= value <= 60_000:
        raise argparse.ArgumentTypeError("must be between 1 and 60000")
    return value


def moment(text: str) -> int:
    """``--since``: an ISO 8601 time (a date alone is its midnight; no zone: UTC), as ms."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            "must be an ISO 8601 time, such as 2025-01-01T03:00Z or 2025-01-01"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)
