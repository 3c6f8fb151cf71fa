"""Typed application and request keys: how handlers reach the collaborators wired in
``service.app``, and what one request learned about its caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

# What the server takes from the application: what every request goes through, the answer to a
# request refused before the application saw it, the gateway lane. The server's package defines
# them (it imports nothing of the service), and handlers find them here with the rest.
from service.api._aiohttp import GATEWAY_LANE as GATEWAY_LANE
from service.api._aiohttp import LOW_LEVEL_REFUSAL as LOW_LEVEL_REFUSAL
from service.api._aiohttp import REQUEST_HANDLING as REQUEST_HANDLING
from service.auth.authenticator import Authenticator
from service.auth.key_usage import KeyUsage
from service.auth.policy import Policy
from service.config import Settings
from service.observability.metrics import Metrics

# Every API route is under this prefix.
PREFIX = "/api/v1"

SETTINGS = web.AppKey("settings", Settings)
POLICY = web.AppKey("policy", Policy)
AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
# What each key is doing: this worker's counts, flushed every second (``service.auth.key_usage``).
KEY_USAGE = web.AppKey("key_usage", KeyUsage)
# The process's metrics, absent when they are off (``FILEHOST_METRICS=off``).
METRICS = web.AppKey("metrics", Metrics)

# Where the secrets key that seals TOTP secrets comes from: ``configured`` (FILEHOST_SECRETS_KEY
# or _FILE), ``generated`` (the data directory's, ``service.config.generated_key``) or ``missing``.
SECRETS_KEY_SOURCE = web.AppKey("secrets_key_source", str)

# The start-up's run finishing the folder deletions earlier runs left cut short
# (``service.auth.removals``), a task beside serving.
REMOVALS_AT_START: web.AppKey[asyncio.Task[None]] = web.AppKey("removals_at_start", asyncio.Task)
# The answer to a request no route matched, when it is not the API's: the dashboard's "not
# found" page (``service.dashboard.routes``), or None for the envelope's 404.
NOT_FOUND_PAGE: web.AppKey[Callable[[web.Request], web.StreamResponse | None]] = web.AppKey(
    "not_found_page"
)
