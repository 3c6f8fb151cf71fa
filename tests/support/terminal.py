"""The command line run on a terminal of its own (a pseudo-terminal from the standard ``pty``
module), as a person at a keyboard runs it: for prompts, confirmations and passwords typed
without echo.

The command is the child of ``pty.fork``, so the terminal is its controlling terminal (what
``getpass`` opens as ``/dev/tty``) and its standard input, output and error. Everything it writes
is read back as one text, as a terminal would show it (with ``\\r\\n`` line ends).
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
from collections.abc import Iterator

from tests.support.paths import REPO_ROOT

# How long a prompt or the command's end may take to come: bounds a test that went wrong.
WAIT_SECONDS = 60.0


class Terminal:
    """One ``python -m service …`` on a pseudo-terminal: ``expect`` what it shows, ``type`` a
    line, ``wait`` for its exit status."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.shown = ""
        pid, fd = pty.fork()
        if pid == 0:  # pragma: no cover - the child: becomes the command
            try:
                os.chdir(REPO_ROOT)
                command = [sys.executable, "-m", "service", *args]
                os.execve(sys.executable, command, env)  # noqa: S606 - the command under test
            finally:
                os._exit(127)
        self.pid, self._fd = pid, fd
        self.status: int | None = None

    def _read(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False once the command closed it."""
        ready, _, _ = select.select([self._fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            data = os.read(self._fd, 4096)
        except OSError:  # EIO: every process holding the terminal is gone
            return False
        if not data:
            return False
        self.shown += data.decode(errors="replace")
        return True

    def expect(self, text: str) -> str:
        """Wait until the terminal shows ``text``; what it showed so far."""
        deadline = time.monotonic() + WAIT_SECONDS
        while text not in self.shown:
            if time.monotonic() > deadline or not self._read(deadline):
                raise AssertionError(f"the terminal never showed {text!r}: {self.shown!r}")
        return self.shown

    def type(self, line: str) -> None:
        os.write(self._fd, line.encode() + b"\n")

    def wait(self) -> int:
        """Read to the end and return the exit status."""
        deadline = time.monotonic() + WAIT_SECONDS
        while self._read(deadline):
            if time.monotonic() > deadline:
                raise AssertionError(f"the command did not end: {self.shown!r}")
        _, status = os.waitpid(self.pid, 0)
        self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def close(self) -> None:
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        os.close(self._fd)


@contextlib.contextmanager
def on_a_terminal(*args: str, env: dict[str, str]) -> Iterator[Terminal]:
    terminal = Terminal(list(args), env)
    try:
        yield terminal
    finally:
        terminal.close()
