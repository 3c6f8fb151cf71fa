"""The one place that touches aiohttp's internals: everything here relies on names aiohttp keeps
private and may change in any release. The rest of the service imports only what this package
exports, never its modules.

What it holds: the protocol handler (parser errors and read timeouts answered in the JSON
envelope, and the gateway lane), the server and runner that use it, the fast JSON answer, the
router shortcut, and the reader of an upload's file part. Each is a speed-up or a refusal made
our way. Outside the tested aiohttp versions (``TESTED_AIOHTTP``) the service turns the
speed-ups off with one warning (``fast_paths``); the refusals and read deadlines stay, and an
aiohttp without the names they need is refused at start-up (``unprotected_problem``).

A leaf: it imports nothing of the rest of the service. What it needs of it (what every request
goes through, the envelope's refusal, the gateway lane and the access log that lane writes) the
application hands in, under the keys and through the ``Lane`` protocol defined here. And only
it imports aiohttp's modules beyond the public ones (``tests/unit/test_aiohttp_fence.py``): the
few of their names the rest needs are exported here too.
"""

from __future__ import annotations

from aiohttp.http import RawRequestMessage
from aiohttp.http_exceptions import HttpProcessingError

from service.api._aiohttp import names
from service.api._aiohttp.answer import (
    EMPTY_BODY_STATUSES,
    JSON,
    SERVER_NAME,
    Answer,
    HeaderBlock,
    Reply,
    header_block,
    serialise_head,
)
from service.api._aiohttp.multipart import BodyCutOff, PartBody
from service.api._aiohttp.protocol import Lane
from service.api._aiohttp.request_body import BodyGoesOn, RequestBody
from service.api._aiohttp.routing import PlainRoute, PlainRoutes, use_route
from service.api._aiohttp.runner import (
    GATEWAY_LANE,
    LOW_LEVEL_REFUSAL,
    REQUEST_HANDLING,
    EnvelopeAppRunner,
    EnvelopeServer,
    ListenError,
    UnprotectedAiohttp,
    run_app,
    unprotected_reason,
)


def fast_paths() -> bool:
    """Whether the installed aiohttp is one this package is tested with (``names``)."""
    return names.FAST_PATHS


def unprotected_problem() -> str | None:
    """Why the service cannot serve on the installed aiohttp, if it cannot: it lacks names the
    envelope for refused requests and the read deadlines need (``names.PROTECTION_NAMES``)."""
    missing = names.missing_protection_names()
    return unprotected_reason(missing) if missing else None


__all__ = [
    "EMPTY_BODY_STATUSES",
    "GATEWAY_LANE",
    "JSON",
    "LOW_LEVEL_REFUSAL",
    "REQUEST_HANDLING",
    "SERVER_NAME",
    "Answer",
    "BodyCutOff",
    "BodyGoesOn",
    "EnvelopeAppRunner",
    "EnvelopeServer",
    "HeaderBlock",
    "HttpProcessingError",
    "Lane",
    "ListenError",
    "PartBody",
    "PlainRoute",
    "PlainRoutes",
    "RawRequestMessage",
    "Reply",
    "RequestBody",
    "UnprotectedAiohttp",
    "fast_paths",
    "header_block",
    "run_app",
    "serialise_head",
    "unprotected_problem",
    "use_route",
]
