"""Command line: ``serve`` runs the service; ``users`` creates, lists, deletes accounts and sets
a forgotten password; ``backup`` and ``restore`` copy the store and the files' bytes;
``secrets`` makes and rotates the key TOTP secrets are sealed with. The arguments are in
``parser``; each command other than ``serve`` in a module of its own.

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
import dataclasses
import logging
import os
import sys
from collections.abc import Sequence

from redis.exceptions import RedisError

from service.auth.backup import BackupError
from service.cli import backups, blobs, keys, secret_keys, users
from service.cli.parser import AS_MODULE, INSTALLED, command_parser
from service.cli.prompts import Refused
from service.config import ConfigError, Settings, load_settings
from service.config.generated_key import with_generated_key
from service.domain.blobs import StorageFull
from service.errors import ApiError, Code
from service.observability.log_lines import write_line
from service.store.blobs import FILES_DIRECTORY
from service.store.embedded import EmbeddedStoreError

__all__ = ["AS_MODULE", "INSTALLED", "main"]


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
    if args.command != "serve":  # serve makes it when there is none
        # The data directory's generated secrets key, when none is configured.
        settings, _ = with_generated_key(settings, create=False)
    if not 1 <= settings.workers <= 64:
        raise ConfigError("--workers must be between 1 and 64")
    if not 0 <= settings.port <= 65535:
        raise ConfigError("--port must be between 0 and 65535")
    if settings.workers > 1 and settings.port == 0:
        raise ConfigError("several workers need a fixed port, not 0")
    return settings


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    prog = prog or _invoked_as()
    args = command_parser(prog).parse_command(argv)
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

    run = {
        "users": users.run,
        "secrets": secret_keys.run,
        "keys": keys.run,
        "blobs": blobs.run,
    }.get(args.command, backups.run)
    try:
        return asyncio.run(run(settings, args))
    except BackupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except StorageFull:  # restoring files' bytes
        files = settings.data_dir / FILES_DIRECTORY
        print(f"error: no room left in {files} for the files' bytes", file=sys.stderr)
        return 1
    except OSError as error:  # the backup's directory: permissions, space
        where = f" ({error.filename})" if error.filename else ""
        print(f"error: {error.strerror or error}{where}", file=sys.stderr)
        return 1
    except Refused as refused:
        print(f"error: {refused}", file=sys.stderr)
        return refused.status
    except ApiError as error:
        print(f"error: {in_cli_words(error)}", file=sys.stderr)
        return 1
    except EmbeddedStoreError:  # said already, with what to do (``service.cli.store``)
        print("error: the store is unreachable; nothing was done", file=sys.stderr)
        return 1
    except RedisError as error:
        print(f"error: the store is unreachable ({_store_failure(error)})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; nothing more was done", file=sys.stderr)
        return 130
    except Exception as error:  # a fault of ours: a sentence, not a traceback, and status 1
        print(
            f"error: {args.command} failed unexpectedly ({type(error).__name__}: {error}); "
            "please report it",
            file=sys.stderr,
        )
        return 1


# The API's field names as the command line knows them: its options, or what it reads.
_FIELDS = {
    "email": "--email",
    "password": "the password",
    "new_password": "the password",
}


def in_cli_words(error: ApiError) -> str:
    """A refusal of the policy as a person at the command line reads it: what was wrong with
    which option (``--email must be …``), else the refusal's own sentence; never its code, the
    API's field names or a JSON envelope."""
    reasons = [
        f"{_FIELDS.get(field, field)} {why}"
        for field, why in (error.details or {}).items()
        if isinstance(why, str)
    ]
    if error.code == Code.VALIDATION_FAILED and reasons:
        return "; ".join(reasons)
    return error.message


def _store_failure(error: RedisError) -> str:
    """What went wrong reaching the store, in the client's words when it has some (they name
    the address, never a password), else its kind."""
    said = str(error).strip()
    return said.rstrip(".") if said else type(error).__name__
