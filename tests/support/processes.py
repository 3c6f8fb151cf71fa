"""Spawned ``python -m service`` processes: ``serve`` as an operator runs it and the command
line, their environment, and the processes they start, found and signalled by pid.

Each ``serve`` runs in its own session, so a stuck server and its workers can be cleaned up by
process group; its standard output and error go to files, so the access log can be read
afterwards. Nothing here reads the log format beyond that: logs are searched as plain text (a
worker's pid and a path or status on the same line), so the access log can change shape without
breaking the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from service.observability.log_lines import FLUSH_SECONDS
from tests.support.paths import REPO_ROOT

# The password of the users these tests create with the CLI.
PASSWORD = "Serve-Test-Password-1"
# Request-rate limits are a separate concern: the hardening tests send many requests with one
# credential.
NO_RATE_LIMIT = {"FILEHOST_RATE_LIMIT_PER_SECOND": "0"}
# Deadlines (s) for what must happen: a command to finish, serve to listen, its workers to bind,
# serve to exit on SIGTERM. Generous, since they only cost time when something is broken: on a
# busy machine (a load of 13 or more on 2 cores) a Python process takes seconds to import the
# service, and a command hashing a password at a high bcrypt cost tens of seconds.
CLI_BOUND = 180.0
START_BOUND = 60.0


def wait_listening(
    process: subprocess.Popen[Any], port: int, what: str, details: Callable[[], str], timeout: float
) -> None:
    """Return once ``process`` listens on ``port`` on loopback; fail naming ``what``, with
    ``details()`` (its output, say), when it exits first or does not listen within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode}: {details()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not listen in time: {details()}") from None
            time.sleep(0.05)


def service_env(redis_url: str | None, port: int, **extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "REDIS_URL" and not name.startswith("FILEHOST_")
    }
    env["FILEHOST_BCRYPT_COST"] = "4"
    env["FILEHOST_PORT"] = str(port)
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
        if os.environ.get("FILEHOST_TEST_REDIS") == "cluster":  # pytest --redis cluster
            env["FILEHOST_REDIS_MODE"] = "cluster"
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=REPO_ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=CLI_BOUND,
        check=False,
    )


async def run_cli_async(*args: str, env: dict[str, str]) -> tuple[int, str]:
    """``run_cli`` without blocking the event loop (a command run while the test also serves
    requests): its exit status, and its standard output and error together."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        *args,
        cwd=REPO_ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), CLI_BOUND)
    assert process.returncode is not None
    return process.returncode, output.decode()


def serve_once(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``serve`` run to its end, for one that must refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "service", "serve", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_BOUND,
        check=False,
    )


class Server:
    """One ``serve`` process; ``stop()`` returns its exit code. ``launcher``: a Python script
    run instead of ``python -m service`` (one that changes the service before serving)."""

    def __init__(
        self,
        env: dict[str, str],
        port: int,
        log_dir: Path,
        *args: str,
        launcher: Path | None = None,
    ) -> None:
        self.port = port
        self.stdout_path = log_dir / f"serve-{port}.out"
        self.stderr_path = log_dir / f"serve-{port}.err"
        command = [str(launcher)] if launcher is not None else ["-m", "service"]
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, *command, "serve", *args],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def wait_ready(self, timeout: float = START_BOUND) -> None:
        wait_listening(self.process, self.port, "serve", self.stderr, timeout)

    def stop(self, timeout: float = START_BOUND) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout)
                raise AssertionError(f"serve did not exit on SIGTERM: {self.stderr()}") from None
        return self.process.returncode

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def banner(self) -> dict[str, Any]:
        """The start-up line (logged once the port is bound): its ``dashboard``, ``api``,
        ``workers``, ``store`` and ``create_user`` fields among the rest."""
        for line in self.stderr().splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                entry = orjson.loads(line)
                if isinstance(entry, dict) and "dashboard" in entry:
                    return entry
        raise AssertionError(f"no start-up line: {self.stderr()}")

    def access_lines(self) -> list[tuple[int, str, str, int]]:
        """(pid, method, path, status) of every access-log line so far. A worker writes its
        lines up to ``FLUSH_SECONDS`` late, so while serve runs this waits that long first."""
        if self.process.poll() is None:
            time.sleep(2 * FLUSH_SECONDS)
        lines = []
        for line in self.stderr().splitlines():
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:  # a line cut short by a concurrent read
                continue
            if entry.get("logger") == "aiohttp.access":
                lines.append((entry["pid"], entry["method"], entry["path"], entry["status"]))
        return lines


@contextlib.contextmanager
def running(env: dict[str, str], port: int, log_dir: Path, *args: str) -> Iterator[Server]:
    server = Server(env, port, log_dir, *args)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def env_for(redis_url: str | None, port: int, **extra: str) -> dict[str, str]:
    """The environment of a ``serve`` or CLI process under test (bcrypt cost 4, no rate limit)."""
    return service_env(redis_url, port, **{**NO_RATE_LIMIT, **extra})


def create_user(env: dict[str, str], email: str, password: str = PASSWORD) -> None:
    result = run_cli(
        "users", "create", "--email", email, "--password-stdin", env=env, stdin=password + "\n"
    )
    assert result.returncode == 0, result.stderr


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(
                (
                    line
                    for line in (entry / "status").read_text().splitlines()
                    if line.startswith("State:")
                ),
                "",
            )
        except OSError:
            continue
        if text in cmdline and "zombie" not in state and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (2nd field) is in parentheses and may hold spaces; ppid follows it.
    return int(stat.rsplit(")", 1)[1].split()[1])


def _children(pid: int) -> list[int]:
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in raw.split()]


def worker_pids(server_pid: int) -> list[int]:
    """The worker processes of a ``serve`` process (multiprocessing spawn children)."""
    found = []
    for child in _children(server_pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.append(child)
    return found


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(inode)
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    return inodes


def wait_for_workers(server: Server, count: int, timeout: float = START_BOUND) -> list[int]:
    """Wait until ``count`` workers each hold a listening socket on the port; their pids."""
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise AssertionError(f"serve exited with {server.process.returncode}")
        pids = worker_pids(server.process.pid) if count > 1 else [server.process.pid]
        listening = _listening_inodes(server.port)
        ready = [pid for pid in pids if _socket_inodes(pid) & listening]
        if len(ready) >= count:
            return ready
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(ready)} of {count} workers listen: {server.stderr()}")
        time.sleep(0.05)


def started(server: Server, workers: int) -> list[int]:
    server.wait_ready()
    return wait_for_workers(server, workers)


def line_mentions(text: str, pid: int, *words: str) -> int:
    """How many lines of ``text`` name ``pid`` and hold every word; a word of digits (a pid, a
    status) counts only as a number of its own, not inside a longer number or a hex id."""
    patterns = [
        re.compile(rf"(?<![\w.]){re.escape(w)}(?![\w.])")
        if w.isdigit()
        else re.compile(re.escape(w))
        for w in (str(pid), *words)
    ]
    return sum(1 for line in text.splitlines() if all(p.search(line) for p in patterns))
