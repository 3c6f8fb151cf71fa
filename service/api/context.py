"""Typed application and request keys: how handlers reach the collaborators wired in
``service.app``, and what one request learned about its caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from service.auth.authenticator import Authenticator
from service.auth.policy import Policy
from service.config import Settings
from service.observability.metrics import Metrics

# Every API route is under this prefix.
PREFIX = "/api/v1"

SETTINGS = web.AppKey("settings", Settings)
POLICY = web.AppKey("policy", Policy)
AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
# The process's metrics, absent when they are off (``FILEHOST_METRICS=off``).
METRICS = web.AppKey("metrics", Metrics)

# Where the secrets key that seals TOTP secrets comes from: ``configured`` (FILEHOST_SECRETS_KEY
# or _FILE), ``generated`` (the data directory's, ``service.config.generated_key``) or ``missing``.
SECRETS_KEY_SOURCE = web.AppKey("secrets_key_source", str)

# The start-up's run finishing the folder deletions earlier runs left cut short
# (``service.auth.removals``), a task beside serving.
REMOVALS_AT_START = web.AppKey("removals_at_start", asyncio.Task)  # type: ignore[type-abstract]

# What every request of the application goes through, around its routing (``api.handling``).
REQUEST_HANDLING = web.AppKey("request_handling", Callable[[Handler], Handler])  # type: ignore[arg-type]
# The gateway lane (``api.gateway.GatewayLane``), made when the application starts.
GATEWAY_LANE = web.AppKey("gateway_lane", Any)  # type: ignore[arg-type]
# The answer to a request no route matched, when it is not the API's: the dashboard's "not
# found" page (``service.dashboard.routes``), or None for the envelope's 404.
NOT_FOUND_PAGE = web.AppKey(
    "not_found_page",
    Callable[[web.Request], web.StreamResponse | None],  # type: ignore[arg-type]
)
# The envelope answer to a request refused before the application saw it: a status the HTTP
# parser refused it with, or an ``HTTPException`` aiohttp raised ahead of the routing.
LOW_LEVEL_REFUSAL = web.AppKey(
    "low_level_refusal",
    Callable[[int | web.HTTPException], web.StreamResponse],  # type: ignore[arg-type]
)
