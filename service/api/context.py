"""Typed application and request keys: how handlers reach the collaborators wired in
``service.app``, and what one request learned about its caller."""

from __future__ import annotations

from aiohttp import web

from service.auth.authenticator import Authenticator
from service.auth.policy import Policy
from service.config import Settings
from service.store.blobs import BlobStore
from service.store.stores import Stores

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Stores)
POLICY = web.AppKey("policy", Policy)
AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
# Where uploaded bytes live; set before the application starts to keep them elsewhere (tests).
BLOBS = web.AppKey("blobs", BlobStore)  # type: ignore[type-abstract]
