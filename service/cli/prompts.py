"""What the commands other than ``serve`` ask people and how they refuse: a password read from
standard input or a no-echo prompt, a yes/no question, counts in words."""

from __future__ import annotations

import getpass
import sys


class Refused(Exception):
    """A command that stops with a message of its own and an exit status (1 or 2)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def read_password() -> str:
    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat it: ") != password:
            raise Refused("the two passwords differ; nothing was changed")
        return password
    line = sys.stdin.readline()
    return line.removesuffix("\n").removesuffix("\r")


def confirmed(question: str) -> bool:
    print(question, end=" ", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def counted(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"
