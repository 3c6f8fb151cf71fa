"""The application factory: wires settings, the Redis client, the policy objects and the routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator
from functools import partial

from aiohttp import web
from redis.asyncio import Redis
from redis.exceptions import RedisError

from service.api._aiohttp import fast_paths
from service.api.client_address import ClientAddresses
from service.api.context import (
    AUTHENTICATOR,
    GATEWAY_LANE,
    KEY_USAGE,
    LOW_LEVEL_REFUSAL,
    NOT_FOUND_PAGE,
    POLICY,
    REMOVALS_AT_START,
    REQUEST_HANDLING,
    SECRETS_KEY_SOURCE,
    SETTINGS,
)
from service.api.envelope import low_level_refusal
from service.api.gateway import GatewayLane, LaneRoute
from service.api.handling import request_handling
from service.api.headers import RATE_FIELDS
from service.api.provider_http import AiohttpProviderHttp
from service.api.routes.aliases import add_alias_routes
from service.api.routes.archives import add_archive_routes
from service.api.routes.audit import add_audit_routes
from service.api.routes.auth import add_auth_routes
from service.api.routes.download_tickets import add_download_ticket_routes
from service.api.routes.files import FILES_PATH, add_file_routes, first_page_reply
from service.api.routes.folders import add_folder_routes
from service.api.routes.forward_auth import VERIFY_PATH, add_forward_auth_routes, verify_reply
from service.api.routes.keys import add_key_routes
from service.api.routes.mfa import add_mfa_routes
from service.api.routes.oidc import add_oidc_routes
from service.api.routes.openapi import add_openapi_route
from service.api.routes.ops import add_ops
from service.api.routes.public_aliases import PUBLIC_PREFIX, add_public_alias_routes, lane_route
from service.api.routes.sessions import add_session_routes
from service.api.routes.settings import add_settings_routes
from service.api.routes.uploaders import add_uploader_routes
from service.api.routes.uploads import add_upload_routes
from service.api.routes.usage import add_usage_routes
from service.auth.authenticator import Authenticator
from service.auth.key_usage import KeyUsage
from service.auth.passwords import PasswordHasher
from service.auth.policy import Policy, make_policy, upgrade_records
from service.auth.rate_limits import RateLimitFields
from service.background import BackgroundWrites
from service.clock import Clock, SystemClock
from service.config import Settings
from service.config.generated_key import secrets_key_source
from service.dashboard import add_dashboard_routes
from service.domain.records import RateLimit
from service.errors import Code
from service.observability.log_lines import LINES
from service.observability.metrics import Metrics
from service.store.blob_stores import blob_stores_over, open_blob_store
from service.store.protocols.blobs import BlobStore
from service.store.stores import Stores, open_stores
from service.store.topology import connect_redis, connect_store

__all__ = ["connect_redis", "create_app"]  # connect_redis: the CLI's and the tests' client


log = logging.getLogger("service")

# The stores, and where uploaded bytes live: what the application wires its policy to. BLOBS may
# be set before the application starts, to keep the bytes elsewhere (tests).
STORE = web.AppKey("store", Stores)
BLOBS: web.AppKey[BlobStore] = web.AppKey("blobs")

# How often the blob store is swept of what crashed uploads left.
SWEEP_SECONDS = 3600


async def _finish_what_was_cut_short(policy: Policy, stores: Stores) -> None:
    await policy.removals.finish_all()
    await policy.aliases.finish_all()
    await stores.alias_views.forget_stored_cookie_secret()
    await upgrade_records(policy)


async def _sweep_every_hour(policy: Policy, blobs: BlobStore, stopping: asyncio.Event) -> None:
    """What crashed uploads left in the blob store (a temporary file, an incomplete multipart
    upload), removed once it is an hour old, and the bytes of resumable uploads that expired
    unfinished: a minute or two after the start (a moment apart on each worker and instance,
    none of them slowed while it starts), then every hour. A store that can't be reached is
    tried again at the next hour."""
    # Ends on ``stopping`` too, not only on its cancellation: one that lands while a store is
    # written may be lost inside its client, and the stop awaits this loop's end.
    pause = SWEEP_SECONDS / 60 * (1 + random.random())  # noqa: S311 - a jitter
    while not await _stopped_within(stopping, pause):
        pause = SWEEP_SECONDS
        try:
            swept = await blobs.sweep(keep=await policy.uploads.live_file_ids())
            expired = await policy.uploads.sweep()
        except (OSError, RedisError) as error:
            log.warning("could not sweep what failed uploads left: %s", error)
        else:
            if swept or expired:
                log.info(
                    "removed what %d failed upload(s) left in the file storage, and %d "
                    "resumable upload(s) that expired unfinished",
                    swept,
                    expired,
                )


async def _stopped_within(stopping: asyncio.Event, seconds: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
    return stopping.is_set()


def create_app(
    settings: Settings,
    *,
    redis: Redis | None = None,
    clock: Clock | None = None,
) -> web.Application:
    """Build the app. ``redis`` overrides ``settings.redis_url`` (tests); ``clock`` injects time."""
    if redis is None and settings.redis_url is None:
        raise ValueError("create_app needs settings.redis_url or a redis client")
    metrics = Metrics() if settings.metrics_enabled else None
    rate_limit = (
        RateLimit(settings.rate_limit_per_second, settings.rate_limit_burst)
        if settings.rate_limit_per_second > 0
        else None
    )
    rate_fields = RateLimitFields(rate_limit) if rate_limit is not None else None
    # Where each request comes from (trusted proxies applied), for aiohttp's handling and the
    # gateway lane alike: one memory of the peers seen.
    addresses = ClientAddresses(settings.trusted_proxies)
    # No middleware: what every request goes through is the server's wrapper (REQUEST_HANDLING).
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[REQUEST_HANDLING] = request_handling(metrics, rate_fields, addresses)
    app[LOW_LEVEL_REFUSAL] = low_level_refusal
    app[SETTINGS] = settings
    app[SECRETS_KEY_SOURCE] = secrets_key_source(settings)
    app[RATE_FIELDS] = rate_fields
    app[BLOBS] = open_blob_store(settings)
    clock = clock or SystemClock()

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        if redis is None:
            connections = connect_store(
                settings, metrics.redis_command if metrics is not None else None
            )
            client, hot = connections.client, connections.hot
        else:
            connections, client, hot = None, redis, None
        store = open_stores(client, settings.redis_prefix, hot, rate_limit, clock)
        if connections is not None and connections.replica_wait is not None:
            connections.replica_wait.wrap(
                (store.users, store.sessions, store.api_keys, store.mfa, store.mfa_answers)
            )
        background = BackgroundWrites()
        passwords = PasswordHasher(
            settings.bcrypt_cost, settings.login_concurrency, settings.login_queue_max
        )
        # Vanity aliases' passwords on a pool of their own: guessing at one never queues logins.
        # The OpenID provider's requests, with a pool of their own (single sign-on only).
        provider_http = AiohttpProviderHttp() if settings.oidc is not None else None
        alias_passwords = PasswordHasher(
            settings.bcrypt_cost,
            settings.login_concurrency,
            settings.login_queue_max,
            busy=Code.ALIAS_PASSWORD_BUSY,
        )
        app[STORE] = store
        usage = app[KEY_USAGE] = KeyUsage(store.key_usage, clock, settings.key_usage_flush_seconds)
        app[AUTHENTICATOR] = Authenticator(
            store, clock, settings.sessions, background, rate_fields, usage
        )
        app[POLICY] = make_policy(
            store,
            blob_stores_over(app[BLOBS]),
            passwords,
            clock,
            settings,
            login_outcomes=metrics.login if metrics is not None else None,
            alias_passwords=alias_passwords,
            provider_http=provider_http,
        )
        await passwords.warm_up()
        LINES.start_flushing(asyncio.get_running_loop())
        usage.start()
        # Deletions (and aliases' kill switches) cut short by a worker's end are finished by the
        # next start, beside serving.
        removals = asyncio.create_task(_finish_what_was_cut_short(app[POLICY], store))
        app[REMOVALS_AT_START] = removals
        stopping = asyncio.Event()
        sweeping = asyncio.create_task(_sweep_every_hour(app[POLICY], app[BLOBS], stopping))
        yield
        LINES.stop_flushing()
        stopping.set()
        removals.cancel()  # whatever is left is finished at the next start
        sweeping.cancel()
        await asyncio.gather(removals, sweeping, return_exceptions=True)
        # Every request has been answered by now: what they counted is flushed once more.
        await usage.stop()
        await background.drain()
        await app[BLOBS].close()
        passwords.close()
        alias_passwords.close()
        if provider_http is not None:
            await provider_http.close()
        if connections is not None:
            await connections.aclose()

    app.cleanup_ctx.append(lifecycle)

    async def open_gateway_lane(app: web.Application) -> None:
        # The gateway's routes answered from the parsed request (service.api.gateway); its
        # server finds it here once the application has started. It waits for nothing but the
        # pipelined connection's replies, so a store without one (a client given to
        # create_app) has no lane.
        if not app[STORE].lookup.pipelined:
            return
        routes: dict[str, LaneRoute] = {VERIFY_PATH: verify_reply}
        if settings.public_url is not None:  # a file's url is made from it (first_page_reply)
            routes[FILES_PATH] = first_page_reply
        aliases = partial(lane_route, app[POLICY].alias_access)
        app[GATEWAY_LANE] = GatewayLane(
            app, routes, addresses, metrics, rate_fields, (f"{PUBLIC_PREFIX}/", aliases)
        )

    if settings.gateway_lane and fast_paths():
        app.on_startup.append(open_gateway_lane)  # after every cleanup context's start
    add_ops(app, metrics)
    add_auth_routes(app)
    add_oidc_routes(app)
    add_key_routes(app)
    add_uploader_routes(app)
    add_openapi_route(app)
    add_session_routes(app)
    add_mfa_routes(app)
    add_audit_routes(app)
    add_archive_routes(app)
    add_download_ticket_routes(app)
    add_file_routes(app)
    add_upload_routes(app)
    add_folder_routes(app)
    add_settings_routes(app)
    add_usage_routes(app)
    add_alias_routes(app)
    add_public_alias_routes(app)
    add_forward_auth_routes(app)
    app[NOT_FOUND_PAGE] = add_dashboard_routes(app, settings)
    return app
