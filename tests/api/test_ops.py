"""The operator's endpoints (``/healthz``, ``/readyz``, ``/metrics``) and the request id, on an
in-process app (one process: the metrics live in the app's own registry, fresh per test)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from service.api.headers import prepare_streamed
from service.api.routes.ops import METRICS
from service.app import create_app
from service.domain.credentials import generate_api_key, generate_session_token
from service.observability.metrics import CONTENT_TYPE, DURATION_BUCKETS, Metrics
from service.observability.trace import RequestTrace
from tests.support.api import Api, assert_error, bearer, serve_app
from tests.support.metrics import samples, value
from tests.support.redis import RedisServer

HEX32 = re.compile(r"[0-9a-f]{32}")


async def scrape(api: Api) -> str:
    response = await api.client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == CONTENT_TYPE
    return await response.text()


# -- /healthz and /readyz ------------------------------------------------------------------------


async def test_healthz_and_readyz_when_all_is_well(api: Api) -> None:
    for path in ("/healthz", "/readyz"):
        response = await api.client.get(path)
        assert response.status == 200
        assert await response.json() == {"status": "ok"}
        assert HEX32.fullmatch(response.headers["X-Request-ID"])


async def test_store_down_fails_readiness_only_and_recovers(
    api: Api, redis_server: RedisServer
) -> None:
    redis_server.stop()
    try:
        health = await api.client.get("/healthz")
        started = time.monotonic()
        ready = await api.client.get("/readyz")
        elapsed = time.monotonic() - started
    finally:
        redis_server.start()

    assert health.status == 200  # no Redis call: the process is up
    error = await assert_error(ready, 503, "store_unavailable")
    assert error["details"] == {"dependency": "redis"}  # which dependency is not ready
    assert ready.headers["Retry-After"] == "1"
    assert ready.headers["X-Request-ID"]
    assert elapsed < 2
    assert (await api.client.get("/readyz")).status == 200


@pytest.fixture
def silent_store() -> Iterator[str]:
    """A TCP port that accepts connections and never answers: a hung Redis."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"


async def test_readyz_gives_up_after_the_configured_timeout(
    make_api: Any, silent_store: str
) -> None:
    api = await make_api(redis_url=silent_store, redis_timeout_seconds=0.3)

    started = time.monotonic()
    response = await api.client.get("/readyz")
    elapsed = time.monotonic() - started

    await assert_error(response, 503, "store_unavailable")
    assert 0.25 < elapsed < 1.5


# -- /metrics ------------------------------------------------------------------------------------


async def test_metrics_count_requests_by_route_template_and_auth_outcomes(api: Api) -> None:
    token = await api.user_with_session()  # POST /auth/login, no credential check
    reader = await api.create_key(token, permissions=["files.read"])  # session check: ok
    writer = await api.create_key(token, permissions=["folders.read"])  # session check: ok
    for _ in range(3):
        assert (await api.files(key=reader["secret_key"])).status == 200
    assert (await api.files()).status == 401
    assert (await api.files()).status == 401
    assert (await api.files(key="fhk_not-a-key")).status == 401
    assert (await api.files(key=writer["secret_key"])).status == 403
    assert (await api.files(token=token)).status == 200
    both = await api.client.get(
        "/api/v1/files", headers={"X-API-Key": reader["secret_key"], **bearer(token)}
    )
    assert both.status == 400
    revoke = await api.client.delete("/api/v1/keys/key_unknown?x=1", headers=bearer(token))
    assert revoke.status == 404
    assert (await api.client.get("/no/such/path-12345?q=secret")).status == 404
    assert (await api.client.request("PROPFIND", "/api/v1/files")).status == 405
    verify = await api.client.get(
        "/api/v1/auth/verify",
        headers={"X-API-Key": reader["secret_key"], "X-Required-Permission": "files.write"},
    )
    assert verify.status == 403

    text = await scrape(api)
    requests = "filehost_http_requests_total"
    assert value(text, requests, route="/api/v1/auth/login", method="POST", status="200") == 1
    assert value(text, requests, route="/api/v1/keys", method="POST", status="201") == 2
    assert value(text, requests, route="/api/v1/files", method="GET", status="200") == 4
    assert value(text, requests, route="/api/v1/files", method="GET", status="401") == 3
    assert value(text, requests, route="/api/v1/files", method="GET", status="403") == 1
    assert value(text, requests, route="/api/v1/files", method="GET", status="400") == 1
    keys_route = "/api/v1/keys/{key_id}"
    assert value(text, requests, route=keys_route, method="DELETE", status="404") == 1
    assert value(text, requests, route="unmatched", method="GET", status="404") == 1
    assert value(text, requests, route="unmatched", method="other", status="405") == 1
    assert value(text, requests, route="/api/v1/auth/verify", method="GET", status="403") == 1
    assert value(text, requests, route="/metrics", method="GET", status="200") == 0  # not yet
    assert "path-12345" not in text and "secret" not in text and "key_unknown" not in text
    assert sum(v for (name, _), v in samples(text).items() if name == requests) == 16

    checks = "filehost_auth_checks_total"
    assert value(text, checks, credential="session", outcome="ok") == 4  # 2 keys, files, revoke
    assert value(text, checks, credential="api_key", outcome="ok") == 3
    assert value(text, checks, credential="none", outcome="credential_missing") == 2
    assert value(text, checks, credential="api_key", outcome="invalid_api_key") == 1
    assert value(text, checks, credential="api_key", outcome="insufficient_permission") == 2
    assert value(text, checks, credential="both", outcome="ambiguous_credentials") == 1
    assert sum(v for (name, _), v in samples(text).items() if name == checks) == 13

    seconds = "filehost_auth_check_duration_seconds"
    assert value(text, f"{seconds}_count", credential="api_key") == 6
    assert value(text, f"{seconds}_count", credential="session") == 4
    assert value(text, f"{seconds}_bucket", credential="api_key", le="+Inf") == 6
    assert 0 < value(text, f"{seconds}_sum", credential="api_key") < 6
    durations = "filehost_http_request_duration_seconds"
    assert value(text, f"{durations}_count", route="/api/v1/files") == 9
    assert value(text, "filehost_login_in_flight") == 0

    again = await scrape(api)
    assert value(again, requests, route="/metrics", method="GET", status="200") == 1


async def test_redis_latency_histogram_counts_every_hot_path_command(api: Api) -> None:
    token = await api.user_with_session()
    key = (await api.create_key(token))["secret_key"]
    before = samples(await scrape(api)).get(
        ("filehost_redis_command_duration_seconds_count", frozenset()), 0.0
    )
    for _ in range(5):
        assert (await api.files(key=key)).status == 200  # a lookup and the files read each
    after = samples(await scrape(api))

    count = after[("filehost_redis_command_duration_seconds_count", frozenset())]
    assert count - before == 10
    slowest = after[("filehost_redis_command_duration_seconds_bucket", frozenset({("le", "+Inf")}))]
    assert slowest == count
    assert 0 < after[("filehost_redis_command_duration_seconds_sum", frozenset())] < 10


async def test_login_in_flight_counts_logins_being_handled(make_api: Any) -> None:
    api = await make_api(bcrypt_cost=10)  # about 50 ms of bcrypt: time to scrape meanwhile
    await api.create_user("queue@example.com")

    logins = [asyncio.ensure_future(api.login("queue@example.com")) for _ in range(2)]
    seen = []
    while not all(login.done() for login in logins):
        seen.append(value(await scrape(api), "filehost_login_in_flight"))
        await asyncio.sleep(0.005)
    await asyncio.gather(*logins)

    assert max(seen) == 2
    assert value(await scrape(api), "filehost_login_in_flight") == 0


def test_batched_histogram_writes_equal_observe() -> None:
    """service.observability.metrics adds pre-bucketed counts through prometheus-client
    internals; this is the check that the result is exactly what ``observe`` gives, boundaries
    included."""
    observed = [0.0, 0.0004, 0.0005, 0.0006, 0.005, 0.0051, 0.3, 2.5, 5.0, 7.5, 120.0]
    metrics = Metrics()
    for index, seconds in enumerate(observed):  # requests of two kinds, each with its check
        status, outcome = (200, "ok") if index % 2 else (401, "invalid_api_key")
        trace = RequestTrace("request", "/api/v1/files")
        trace.credential, trace.outcome, trace.auth_seconds = "api_key", outcome, seconds
        trace.started = 0.0  # so that the duration is exactly the one given, boundaries included
        metrics.answered(trace, "GET", status, seconds * 2)
    metrics.flush()
    registry = CollectorRegistry()
    reference_checks = Histogram(
        "filehost_auth_check_duration_seconds",
        "reference",
        ("credential",),
        buckets=DURATION_BUCKETS,
        registry=registry,
    )
    reference_requests = Histogram(
        "filehost_http_request_duration_seconds",
        "reference",
        ("route",),
        buckets=DURATION_BUCKETS,
        registry=registry,
    )
    for seconds in observed:
        reference_checks.labels("api_key").observe(seconds)
        reference_requests.labels("/api/v1/files").observe(seconds * 2)

    def histogram_samples(registry: CollectorRegistry) -> dict[Any, float]:
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in registry.collect()
            if family.name
            in ("filehost_auth_check_duration_seconds", "filehost_http_request_duration_seconds")
            for sample in family.samples
            if not sample.name.endswith("_created")
        }

    ours = histogram_samples(metrics.registry)
    assert ours == histogram_samples(registry)
    assert ours[("filehost_auth_check_duration_seconds_count", (("credential", "api_key"),))] == 11
    assert (
        ours[("filehost_http_request_duration_seconds_count", (("route", "/api/v1/files"),))] == 11
    )
    counted = samples(generate_latest(metrics.registry).decode())
    route = ("route", "/api/v1/files"), ("method", "GET")
    assert counted[("filehost_http_requests_total", frozenset({*route, ("status", "200")}))] == 5
    assert counted[("filehost_http_requests_total", frozenset({*route, ("status", "401")}))] == 6
    check = ("credential", "api_key")
    assert counted[("filehost_auth_checks_total", frozenset({check, ("outcome", "ok")}))] == 5
    rejected = frozenset({check, ("outcome", "invalid_api_key")})
    assert counted[("filehost_auth_checks_total", rejected)] == 6


async def test_metrics_can_be_switched_off(make_api: Any) -> None:
    api = await make_api(metrics_enabled=False)

    assert METRICS not in api.app
    await assert_error(await api.client.get("/metrics"), 404, "route_not_found")
    response = await api.files(key=generate_api_key())
    await assert_error(response, 401, "invalid_api_key")
    assert HEX32.fullmatch(response.headers["X-Request-ID"])


# -- X-Request-ID --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_id",
    ["abc", "gw-7f3a9c.2026-11-23T10:40:00Z", "a1-" * 42 + "xy", "0", "A.b_c:d-e"],
)
async def test_a_sane_request_id_is_echoed(api: Api, request_id: str) -> None:
    for response in (
        await api.client.get("/healthz", headers={"X-Request-ID": request_id}),
        await api.client.get("/api/v1/files", headers={"X-Request-ID": request_id}),  # 401
        await api.client.get("/nowhere", headers={"X-Request-ID": request_id}),  # 404
        await api.client.post("/healthz", headers={"X-Request-ID": request_id}),  # 405
    ):
        assert response.status in (200, 401, 404, 405)
        assert response.headers.getall("X-Request-ID") == [request_id]


@pytest.mark.parametrize(
    "request_id",
    ["a" * 129, "two words", "a/b", "<script>", "caf\u00e9", "id;drop", "%41", "a\tb"],
)
async def test_an_insane_request_id_is_replaced(api: Api, request_id: str) -> None:
    response = await api.client.get(
        "/api/v1/files", headers={"X-Request-ID": request_id.encode("utf-8").decode("latin-1")}
    )

    await assert_error(response, 401, "credential_missing")
    assert HEX32.fullmatch(response.headers["X-Request-ID"])


@pytest.mark.parametrize(
    "request_id",
    [
        generate_api_key(),
        generate_session_token(),
        "gw-" + generate_api_key()[4:],  # a secret without its prefix
        "fhk_short",
        "x" * 40,  # a run as long as a secret's or a digest's
    ],
    ids=["api-key", "session-token", "unprefixed-secret", "key-prefix", "long-run"],
)
async def test_a_credential_shaped_request_id_is_replaced_not_echoed(
    api: Api, request_id: str
) -> None:
    """The id is logged and echoed: a client pasting a secret there must not see it in either."""
    response = await api.client.get("/healthz", headers={"X-Request-ID": request_id})

    assert response.status == 200
    assert HEX32.fullmatch(response.headers["X-Request-ID"])


async def test_request_ids_are_generated_fresh_and_a_repeated_header_is_not_trusted(
    api: Api,
) -> None:
    generated = {(await api.client.get("/healthz")).headers["X-Request-ID"] for _ in range(5)}
    repeated = await api.client.get(
        "/healthz", headers=[("X-Request-ID", "first"), ("X-Request-ID", "second")]
    )

    assert len(generated) == 5 and all(HEX32.fullmatch(rid) for rid in generated)
    assert {uuid.UUID(hex=rid).version for rid in generated} == {4}
    assert HEX32.fullmatch(repeated.headers["X-Request-ID"])


async def test_a_streamed_answer_carries_the_request_id_too(
    aiohttp_client: Any, settings: Any
) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await prepare_streamed(request, response)  # headers go out here, before the middleware
        await response.write(b"chunk")
        return response

    app = create_app(settings)
    app.router.add_get("/test-stream", stream)
    client = await serve_app(aiohttp_client, app)

    response = await client.get("/test-stream", headers={"X-Request-ID": "stream-1"})

    assert await response.read() == b"chunk"
    assert response.headers["X-Request-ID"] == "stream-1"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")


async def test_a_handler_that_streams_without_the_standard_headers_is_logged_as_a_bug(
    aiohttp_client: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)  # not prepare_streamed: the headers are gone already
        await response.write(b"chunk")
        return response

    app = create_app(settings)
    app.router.add_get("/test-stream", stream)
    client = await serve_app(aiohttp_client, app)

    response = await client.get("/test-stream")

    assert await response.read() == b"chunk"
    assert "/test-stream answered without the standard headers" in caplog.text
