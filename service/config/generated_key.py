"""The secrets key a deployment makes for itself when the operator configured none, so second
factors work out of the box (as Gitea writes its generated secret and Vaultwarden its keys into
their data directories).

With neither ``FILEHOST_SECRETS_KEY`` nor ``FILEHOST_SECRETS_KEY_FILE`` set, ``serve`` writes 32
random bytes, base64, to ``<FILEHOST_DATA_DIR>/secrets.key`` (mode 0600, created only if absent)
and uses it as if ``FILEHOST_SECRETS_KEY_FILE`` named that file; every command reads it the same
way. The file is in no backup (a backup holds the store and the files' bytes, never the data
directory's other files), so a stolen backup still opens nothing sealed with it. A configured key
always wins, and the file is then never read.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import secrets
from pathlib import Path

from service.config.readers import ConfigError, secret_keys
from service.config.settings import Settings

GENERATED_KEY_NAME = "secrets.key"


def generated_key_path(data_dir: Path) -> Path:
    return data_dir / GENERATED_KEY_NAME


def with_generated_key(settings: Settings, *, create: bool) -> tuple[Settings, Path | None]:
    """``settings`` with the data directory's generated key when no key is configured, and
    the file it is in (None when a key is configured, or there is none and ``create`` is
    false). ``create``: write one when there is none (``serve``); a data directory where it
    can't be written raises the ``OSError``. A file that can't be read, or holds no key, is a
    ``ConfigError``."""
    if settings.secrets_key is not None or settings.secrets_key_file is not None:
        return settings, None
    path = generated_key_path(settings.data_dir)
    if create and not path.exists():
        _write_new_key(path)
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return settings, None
    except NotADirectoryError:
        if create:
            raise
        return settings, None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"cannot read the generated secrets key {path} ({type(error).__name__}); fix its "
            "permissions, or set FILEHOST_SECRETS_KEY_FILE"
        ) from None
    keys = secret_keys(str(path), text)
    return dataclasses.replace(settings, secrets_key_file=keys), path


def secrets_key_source(settings: Settings) -> str:
    """Where ``settings``' secrets key comes from: ``configured``, ``generated`` (the data
    directory's file, as ``with_generated_key`` reads it) or ``missing``."""
    if settings.secrets_key is not None:
        return "configured"
    if settings.secrets_key_file is None:
        return "missing"
    try:
        generated = secret_keys("", generated_key_path(settings.data_dir).read_text("ascii"))
    except (OSError, UnicodeDecodeError, ConfigError):
        return "configured"
    return "generated" if tuple(generated) == tuple(settings.secrets_key_file) else "configured"


def _write_new_key(path: Path) -> None:
    """A new key at ``path``, whole or not at all: written to a file of its own, then linked
    into place, so a process reading it never sees half a key, and two starting at once keep
    the first one's."""
    key = base64.b64encode(secrets.token_bytes(32)) + b"\n"
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(handle, key)
        os.fsync(handle)
    finally:
        os.close(handle)
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(draft)
