"""What ``serve`` tells its operator as it starts and as it stops: the start-up banner (where
the dashboard and the API are, the public URL when one is set, the store, the workers, how to
make a user, what second factors rest on) and the one line at shutdown (what stopped it and how
long draining the requests in flight and closing took)."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

from service.config import Settings

log = logging.getLogger("service")


@dataclasses.dataclass(frozen=True, slots=True)
class Banner:
    """What the start-up line tells whoever started ``serve``: the store it uses, the workers,
    and the command that creates a user (``command``: how ``serve`` itself was started); then
    what second factors rest on here (``notes``), and what a deployment must still set."""

    store: str
    workers: int
    command: str
    notes: tuple[str, ...] = ()
    public_url: str | None = None  # FILEHOST_PUBLIC_URL: where people reach it, when set

    def log(self, host: str, port: int) -> None:
        # A loopback address is shown as localhost: a page there is a passkeys' relying party,
        # an address never is.
        shown = "localhost" if host in _SHOWN_AS_LOCALHOST else host
        if ":" in shown:
            shown = f"[{shown}]"
        local = f"http://{shown}:{port}/"
        # The address people use, when one is configured; this machine's otherwise.
        url = local if self.public_url is None else self.public_url.rstrip("/") + "/"
        listening = "" if self.public_url is None else f"listening on {local}, "
        create_user = f"{self.command} users create --email you@example.com --password-stdin"
        log.info(
            "serving the dashboard at %s and the API at %sapi/v1 (%s%d worker%s, %s); create a "
            "user with: %s",
            url,
            url,
            listening,
            self.workers,
            "" if self.workers == 1 else "s",
            self.store,
            create_user,
            extra={
                "fields": {
                    "dashboard": url,
                    "api": f"{url}api/v1",
                    "listening": f"{shown}:{port}",
                    "public_url": self.public_url,
                    "workers": self.workers,
                    "store": self.store,
                    "create_user": create_user,
                }
            },
        )
        for note in self.notes:
            log.info(note.replace("{dashboard}", url))


_SHOWN_AS_LOCALHOST = ("", "0.0.0.0", "::", "127.0.0.1", "::1", "localhost")  # noqa: S104


def second_factor_notes(settings: Settings, generated_key: Path | None) -> tuple[str, ...]:
    """What the start-up tells of second factors: where the secrets key comes from, and that
    passkeys need ``FILEHOST_PUBLIC_URL`` anywhere but this machine's own browser."""
    notes = []
    if generated_key is not None:
        notes.append(
            f"second factors: TOTP secrets are sealed with the key generated in {generated_key} "
            "(mode 0600, in no backup: keep a copy of it apart from them); several instances "
            "must share one key: set FILEHOST_SECRETS_KEY_FILE to the same key on each "
            "(docs/operating.md, The secrets key)"
        )
    if settings.public_url is None:
        notes.append(
            "second factors: FILEHOST_PUBLIC_URL is not set, so passkeys work only in a browser "
            "on this machine at {dashboard}; a deployment sets it to the address people use "
            "(docs/configuration.md)"
        )
    return tuple(notes)


class Shutdown:
    """When and why the service began to stop (the first cause counts: a signal's name, or what
    stopped it), for the line that says so once it has stopped."""

    def __init__(self) -> None:
        self.cause: str | None = None
        self._began = 0.0

    def begin(self, cause: str) -> None:
        if self.cause is None:
            self.cause = cause
            self._began = time.monotonic()

    def log_stopped(self, what: str | None = None) -> None:
        """The line at shutdown (none when nothing began it: it never started). ``what``:
        what drained, when not just this process (serve's workers)."""
        if self.cause is None:
            return
        seconds = time.monotonic() - self._began
        drained = f"draining {what}" if what else "draining"
        log.info(
            "stopped (%s): %s took %.2f s",
            self.cause,
            drained,
            seconds,
            extra={"fields": {"cause": self.cause, "drain_seconds": round(seconds, 3)}},
        )
