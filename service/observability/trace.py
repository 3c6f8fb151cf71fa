"""A request's trace: its id, route, client address and what its credential check found, for
its access line, its metrics and the log records made while it is handled; and how a path is
masked before any log line names it.

A request's id is the client's ``X-Request-ID`` when that is 1-128 characters of
``[A-Za-z0-9._:-]`` that look like no credential (so a gateway's id carries through), else a new
uuid4 in hex; it is returned in ``X-Request-ID`` on every response the application answers.
"""

from __future__ import annotations

import os
import random
import re
from contextvars import ContextVar
from time import perf_counter

from multidict import CIMultiDictProxy

from service.domain.records import RateVerdict

REQUEST_ID_HEADER = "X-Request-ID"
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
UNMATCHED_ROUTE = "unmatched"
_MAX_LOGGED_PATH = 1024
# A credential pasted into a path (``DELETE /keys/<secret>``) must not reach the log: anything
# credential-shaped is masked, i.e. ``fhk_``/``fhs_``/``fhm_``/``fhd_`` and what follows, and any
# run of 40 or more letters and digits (a secret without its prefix, a SHA-256 digest). So are the
# other secrets the service shows, as it shows them: a run of 32 or more upper-case base32
# characters (an authenticator app's secret) and four or more groups of four such characters
# joined by ``-`` or a space (a recovery code, ``XXXX-XXXX-XXXX-XXXX``; that secret as the
# dashboard groups it).
# Upper case only, as shown: ids (22 base62 characters), slugs such as ``road-trip-with-mom2``
# and ordinary names stay.
# (The two upper-case shapes share their first four characters: one alternative, not two, so each
# position of a path is tried once fewer.)
_CREDENTIAL_SHAPED = re.compile(
    r"fh[ksmd]_[0-9A-Za-z]*|[0-9A-Za-z]{40,}|[A-Z2-7]{4}(?:[A-Z2-7]{28,}|(?:[- ][A-Z2-7]{4}){3,})"
)
MASK = "[masked]"


def loggable_path(path: str) -> str:
    """The path as the access log shows it: credential-shaped pieces masked, then cut short."""
    return _CREDENTIAL_SHAPED.sub(MASK, path)[:_MAX_LOGGED_PATH]


_IDS_PER_BATCH = 256
# Version 4 and the RFC 4122 variant, in each of a batch's 128-bit ids at once.
_UUID4_CLEAR = sum(
    (~((0xF << 76) | (0xC << 60)) & ((1 << 128) - 1)) << (128 * n) for n in range(_IDS_PER_BATCH)
)
_UUID4_SET = sum(((0x4 << 76) | (0x8 << 60)) << (128 * n) for n in range(_IDS_PER_BATCH))
_spare_request_ids: list[str] = []
# A forked worker must not hand out the ids its parent had made but not used.
os.register_at_fork(after_in_child=_spare_request_ids.clear)


def new_request_id() -> str:
    """A random (version 4) UUID in hex, made without a ``uuid.UUID`` object or a system call.

    Request ids need to be unique, not unpredictable, so ``random`` (seeded from the system's
    entropy in each process, and again after a fork) is enough. They are made 256 at a time, so
    formatting and masking 128-bit numbers is done in bulk: it is on the path of every request
    that brings no id of its own."""
    try:
        return _spare_request_ids.pop()
    except IndexError:
        number = random.getrandbits(128 * _IDS_PER_BATCH) & _UUID4_CLEAR | _UUID4_SET
        # One separator per 16 bytes: ``split`` cuts the hex into the ids, in C.
        _spare_request_ids.extend(number.to_bytes(16 * _IDS_PER_BATCH).hex(" ", 16).split(" "))
        return _spare_request_ids.pop()


def request_id_from(headers: CIMultiDictProxy[str]) -> str:
    """The client's request id when it sent exactly one sane one that does not look like a
    credential (it is logged and echoed), else a fresh one."""
    value = headers.get(REQUEST_ID_HEADER)
    if value is None:
        return new_request_id()
    if (
        _SANE_REQUEST_ID.fullmatch(value)
        and not _CREDENTIAL_SHAPED.search(value)
        and len(headers.getall(REQUEST_ID_HEADER)) == 1
    ):
        return value
    return new_request_id()


class RequestTrace:
    """What one request's handling learned, for its access-log line and its metrics.

    ``credential`` is set when a credential check ran: ``api_key``, ``session``, ``both`` or
    ``none`` (from the headers presented), or ``download_ticket`` (a ticket in a form), with
    ``outcome`` ``"ok"`` or the refusal's code, and for an accepted credential its user's id
    (``user_id``) and, for a key, its id (``key_id``).
    ``rate`` is the accepted credential's take from its rate bucket (for the ``RateLimit``
    fields), ``remote`` the client's address as login throttling sees it. ``store_error``, set
    only when the store failed the request (``service.api.envelope.note_store_error``), is what
    failed, for the metrics; unset otherwise, so the requests that succeed pay nothing for it.
    """

    __slots__ = (
        "auth_seconds",
        "credential",
        "key_id",
        "outcome",
        "rate",
        "remote",
        "request_id",
        "route",
        "started",
        "store_error",
        "user_id",
    )
    store_error: str  # only on a store failure (see above), so no default

    def __init__(self, request_id: str, route: str, remote: str | None = None) -> None:
        self.request_id = request_id
        self.route = route
        self.remote = remote
        self.started = perf_counter()
        self.credential: str | None = None
        self.outcome: str | None = None
        self.user_id: str | None = None
        self.key_id: str | None = None
        self.rate: RateVerdict | None = None
        self.auth_seconds = 0.0


# The trace of the request being handled in this context: set by request_handling (or the
# gateway lane), read by the credential check, the access line and the formatter's request id.
current_trace: ContextVar[RequestTrace | None] = ContextVar("filehost_trace", default=None)
