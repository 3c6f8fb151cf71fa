"""The aiohttp releases this package is tested with, and every private aiohttp name it uses.

``FAST_PATHS`` says whether the installed aiohttp is one of them and has every name: then the
service serves through all of this package; else, with one warning (``warn_if_off``), without
its speed-ups (the gateway lane, the fast answers, the router shortcut, the upload reader),
through aiohttp's router, ``web.Response`` and multipart reader.

The protections are never given up that way: the protocol handler's JSON envelope for requests
aiohttp's parser refuses (aiohttp's own answer and log line quote the offending bytes, a
credential among them) and its header and body read deadlines (aiohttp has none). They need the
names of ``PROTECTION_NAMES``; an aiohttp without every one of them is refused at start-up
(``missing_protection_names``), whatever its version. ``tests/unit/test_aiohttp_fence.py``
checks every name on the installed aiohttp, the range against ``pyproject.toml``, and that the
production wiring has the fast paths on.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any

import aiohttp

log = logging.getLogger("service.api")

# The versions tested: at least the first, below the second (the next minor release may change
# any of the names below). 3.14.4 is the first with the parser's pause and resume used here.
TESTED_AIOHTTP = ("3.14.4", "3.15")

# Private names used, by the aiohttp class (or module) that has them.
PRIVATE_NAMES: dict[str, tuple[str, ...]] = {
    "aiohttp.web_protocol.RequestHandler": (
        "_buffer_paused",
        "_close",
        "_force_close",
        "_handler_waiter",
        "_keepalive_handle",
        "_keepalive_timeout",
        "_lingering_time",
        "_logging_enabled",
        "_loop",
        "_manager",
        "_max_msg_queue_size",
        "_message_tail",
        "_messages",
        "_next_keepalive_close_time",
        "_parser",
        "_pause_reading_for_buffer",
        "_paused",
        "_payload_parser",
        "_process_keepalive",
        "_read_bufsize",
        "_reading_paused",
        "_request_count",
        "_request_in_progress",
        "_upgraded",
        "_waiter",
    ),
    "aiohttp.web_protocol": ("_ErrInfo",),
    "aiohttp.http_parser": ("HttpRequestParserPy",),
    "aiohttp.http_parser.HttpRequestParser": ("feed_data", "message_consumed"),
    "aiohttp.web_response.StreamResponse": (
        "_chunked",
        "_compression",
        "_cookies",
        "_eof_sent",
        "_headers",
        "_keep_alive",
        "_must_be_empty_body",
        "_payload_writer",
        "_reason",
        "_req",
        "_status",
    ),
    "aiohttp.web_response.Response": (
        "_body",
        "_compressed_body",
        "_zlib_executor",
        "_zlib_executor_size",
    ),
    "aiohttp.web_request.BaseRequest": ("_payload_writer", "_prepare_hook"),
    "aiohttp.web_request.Request": ("_match_info",),
    "aiohttp.http_writer.StreamWriter": ("_headers_buf", "_headers_written"),
    "aiohttp.web_server.Server": ("_kwargs", "_loop"),
    "aiohttp.web_runner.AppRunner": ("_make_server",),
    "aiohttp.helpers": ("rfc822_formatted_time",),
    "aiohttp.multipart.BodyPartReader": ("_at_eof", "_boundary", "_content", "_length"),
    "aiohttp.streams.StreamReader": ("unread_data",),
}


# The names the protections need (the protocol handler without its lane, the server and runner
# that make it): a subset of PRIVATE_NAMES.
PROTECTION_NAMES: dict[str, tuple[str, ...]] = {
    "aiohttp.web_protocol.RequestHandler": (
        "_close",
        "_force_close",
        "_lingering_time",
        "_loop",
        "_messages",
        "_request_count",
        "_request_in_progress",
        "_upgraded",
        "_waiter",
    ),
    "aiohttp.web_protocol": ("_ErrInfo",),
    "aiohttp.web_server.Server": ("_kwargs", "_loop"),
    "aiohttp.web_runner.AppRunner": ("_make_server",),
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def _has(owner: object, name: str) -> bool:
    """Whether ``owner`` (a module or a class) has ``name``: as an attribute, a slot, or an
    attribute its class's own methods set (``self.<name> = ...``: the name is among those their
    code stores or loads, which its compiled code lists without the source being read)."""
    if hasattr(owner, name):
        return True
    if not inspect.isclass(owner):
        return False
    for cls in owner.__mro__:
        if name in (getattr(cls, "__slots__", ()) or ()):
            return True
        for member in vars(cls).values():
            code = getattr(member, "__code__", None)
            if code is not None and name in code.co_names:
                return True
    return False


def _resolve(path: str) -> object | None:
    module_name, _, attribute = path.rpartition(".")
    for candidate, rest in ((path, None), (module_name, attribute)):
        try:
            module = importlib.import_module(candidate)
        except ImportError:
            continue
        return module if rest is None else getattr(module, rest, None)
    return None


def private(path: str) -> Any:
    """A private aiohttp module-level name, or None when the installed aiohttp lacks it (then
    ``FAST_PATHS`` is off and nothing uses it): imported this way, never at the top of a
    module, so that such an aiohttp fails no import. ``Any``: a function, a class, whatever
    aiohttp has under that name, used as aiohttp uses it."""
    module_name, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), name, None)
    except ImportError:
        return None


def missing_names(wanted: dict[str, tuple[str, ...]] = PRIVATE_NAMES) -> list[str]:
    """Every name of ``wanted`` the installed aiohttp lacks, as ``owner.name``."""
    missing = []
    for path, names in wanted.items():
        owner = _resolve(path)
        for name in names:
            if owner is None or not _has(owner, name):
                missing.append(f"{path}.{name}")
    return missing


def _fast_paths() -> bool:
    installed = _version(aiohttp.__version__)
    low, high = (_version(bound) for bound in TESTED_AIOHTTP)
    return low <= installed < high and not missing_names()


FAST_PATHS = _fast_paths()
_warned = False


def missing_protection_names() -> list[str]:
    """The names of ``PROTECTION_NAMES`` the installed aiohttp lacks: the service refuses to
    serve on it when there is any."""
    return missing_names(PROTECTION_NAMES)


def warn_if_off() -> None:
    """Say once, when the service starts serving, that the fast paths are off and why."""
    global _warned
    if FAST_PATHS or _warned:
        return
    _warned = True
    log.warning(
        "aiohttp %s is not among the tested releases (>=%s,<%s) or lacks private names this "
        "service's speed-ups rely on: serving without the gateway lane, the fast answers, the "
        "router shortcut and the upload reader (the JSON envelope for requests aiohttp's "
        "parser refuses and the read deadlines stay)",
        aiohttp.__version__,
        *TESTED_AIOHTTP,
    )
