"""Typed application and request keys: how handlers reach the collaborators wired in
``service.app``, and what one request learned about its caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Handler

from service.auth.authenticator import Authenticator
from service.auth.policy import Policy
from service.config import Settings
from service.observability.metrics import Metrics
from service.store.blobs import BlobStore
from service.store.stores import Stores

if TYPE_CHECKING:  # only named in an annotation, so importing this loads no more than before
    from service.api.gateway import GatewayLane

# Every API route is under this prefix.
PREFIX = "/api/v1"

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Stores)
POLICY = web.AppKey("policy", Policy)
AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
# The process's metrics, absent when they are off (``FILEHOST_METRICS=off``).
METRICS = web.AppKey("metrics", Metrics)
# Where uploaded bytes live; set before the application starts to keep them elsewhere (tests).
BLOBS = web.AppKey("blobs", BlobStore)

# Where the secrets key that seals TOTP secrets comes from: ``configured`` (FILEHOST_SECRETS_KEY
# or _FILE), ``generated`` (the data directory's, ``service.config.generated_key``) or ``missing``.
SECRETS_KEY_SOURCE = web.AppKey("secrets_key_source", str)

# The start-up's run finishing the folder deletions earlier runs left cut short
# (``service.auth.removals``), a task beside serving.
REMOVALS_AT_START: web.AppKey[asyncio.Task[None]] = web.AppKey("removals_at_start", asyncio.Task)

# What every request of the application goes through, around its routing (``api.handling``).
REQUEST_HANDLING: web.AppKey[Callable[[Handler], Handler]] = web.AppKey("request_handling")
# The gateway lane (``api.gateway.GatewayLane``), made when the application starts.
GATEWAY_LANE: web.AppKey[GatewayLane] = web.AppKey("gateway_lane")
# The answer to a request no route matched, when it is not the API's: the dashboard's "not
# found" page (``service.dashboard.routes``), or None for the envelope's 404.
NOT_FOUND_PAGE: web.AppKey[Callable[[web.Request], web.StreamResponse | None]] = web.AppKey(
    "not_found_page"
)
# The envelope answer to a request refused before the application saw it: a status the HTTP
# parser refused it with, or an ``HTTPException`` aiohttp raised ahead of the routing.
LOW_LEVEL_REFUSAL: web.AppKey[Callable[[int | web.HTTPException], web.StreamResponse]] = web.AppKey(
    "low_level_refusal"
)
