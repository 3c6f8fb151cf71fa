"""The one place that touches aiohttp's internals: everything here relies on names aiohttp keeps
private and may change in any release. The rest of the service imports only what this package
exports, never its modules.

What it holds: the protocol handler (parser errors and read timeouts answered in the JSON
envelope, and the gateway lane), the server and runner that use it, the fast JSON answer, the
router shortcut, and the reader of an upload's file part. Each is a speed-up or a refusal made
our way; outside the tested aiohttp versions (``TESTED_AIOHTTP``) the service turns them off with
one warning and serves through aiohttp's documented path (``fast_paths``).
"""

from __future__ import annotations

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
from service.api._aiohttp.multipart import PartBody
from service.api._aiohttp.request_body import BodyGoesOn, RequestBody
from service.api._aiohttp.routing import PlainRoute, PlainRoutes, use_route
from service.api._aiohttp.runner import EnvelopeAppRunner, EnvelopeServer, ListenError, run_app


def fast_paths() -> bool:
    """Whether the installed aiohttp is one this package is tested with (``names``)."""
    return names.FAST_PATHS


__all__ = [
    "EMPTY_BODY_STATUSES",
    "JSON",
    "SERVER_NAME",
    "Answer",
    "BodyGoesOn",
    "EnvelopeAppRunner",
    "EnvelopeServer",
    "HeaderBlock",
    "ListenError",
    "PartBody",
    "PlainRoute",
    "PlainRoutes",
    "Reply",
    "RequestBody",
    "fast_paths",
    "header_block",
    "run_app",
    "serialise_head",
    "use_route",
]
