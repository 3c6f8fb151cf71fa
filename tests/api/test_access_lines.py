"""The access line names who made an accepted request: the user's id for a session and for an API
key (with the key's id), the same whether the gateway lane or aiohttp's handling answered it, and
for a download by a ticket; a refused or credential-less request names nobody, and no line holds
a secret."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from service.api.access_log import AccessLogger
from service.api.context import SETTINGS
from service.api.routes.download_tickets import DOWNLOADS_PATH as DOWNLOADS
from service.api.routes.download_tickets import FORM_TYPE
from service.api.routes.download_tickets import TICKETS_PATH as DOWNLOAD_TICKETS
from service.app import create_app
from service.config import Settings
from service.observability.log_lines import LineBuffer
from tests.support.api import Api, EnvelopeTestServer, bearer
from tests.support.files import uploaded
from tests.support.lane import LANE_PUBLIC_URL, count_lane_answers

FILES = "/api/v1/files"
VERIFY = "/api/v1/auth/verify"
SESSION = "/api/v1/auth/session"


@asynccontextmanager
async def logging_to(
    log_file: Path,
    settings: Settings,
    clock: Any,
    aiohttp_client: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Any]:
    """A client of the service made with ``settings``, its access lines written to
    ``log_file`` through the service's own line buffer (for both ways a request is answered),
    flushed when the block ends."""
    with log_file.open("wb") as output:
        lines = LineBuffer(output.fileno())
        monkeypatch.setattr("service.api.gateway.LINES", lines)
        monkeypatch.setattr("service.api.access_log.LINES", lines)
        caplog.set_level(logging.INFO, logger="aiohttp.access")
        server = EnvelopeTestServer(create_app(settings, clock=clock))
        await server.start_server(access_log_class=AccessLogger)
        yield await aiohttp_client(server)
        lines.flush()


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "no lane"])
async def test_session_and_key_requests_log_their_user(
    make_api: Any,
    aiohttp_client: Any,
    clock: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    lane: bool,
) -> None:
    api = await make_api()
    user = await api.create_user("logged@example.com")
    token = await api.login("logged@example.com")
    key = await api.create_key(token, permissions=["files.read"])
    answered_in_lane = count_lane_answers(monkeypatch)
    log_file = tmp_path / "access.log"
    settings = replace(api.app[SETTINGS], gateway_lane=lane, public_url=LANE_PUBLIC_URL)
    async with logging_to(log_file, settings, clock, aiohttp_client, caplog, monkeypatch) as client:
        gateway = {"X-Required-Permission": "files.read"}
        sent = [
            (FILES, bearer(token)),
            (FILES, {"X-API-Key": key["secret_key"]}),
            (FILES, bearer(key["secret_key"])),
            (VERIFY, {**bearer(token), **gateway}),
            (VERIFY, {"X-API-Key": key["secret_key"], **gateway}),
            (SESSION, bearer(token)),
            (FILES, {"X-API-Key": "fhk_not-a-key"}),
            (FILES, {}),
        ]
        for path, headers in sent:
            response = await client.get(path, headers=headers)
            await response.read()

    assert answered_in_lane == ([FILES, FILES, FILES, VERIFY, VERIFY, FILES, FILES] if lane else [])
    logged = [orjson.loads(line) for line in log_file.read_bytes().splitlines()]
    who = [(e["route"], e["credential"], e["user_id"], e["key_id"], e["auth"]) for e in logged]
    assert who == [
        (FILES, "session", user.id, None, "ok"),
        (FILES, "api_key", user.id, key["id"], "ok"),
        (FILES, "api_key", user.id, key["id"], "ok"),
        (VERIFY, "session", user.id, None, "ok"),
        (VERIFY, "api_key", user.id, key["id"], "ok"),
        (SESSION, "session", user.id, None, "ok"),
        (FILES, "api_key", None, None, "invalid_api_key"),
        (FILES, "none", None, None, "credential_missing"),
    ]
    text = log_file.read_text()
    assert token not in text and key["secret_key"] not in text


async def test_a_download_by_ticket_logs_the_ticket_as_its_credential_never_the_ticket(
    make_api: Any,
    aiohttp_client: Any,
    clock: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    api = await make_api(data_dir=tmp_path / "data")
    user = await api.create_user("ticket@example.com")
    token = await api.login("ticket@example.com")
    log_file = tmp_path / "access.log"
    async with logging_to(
        log_file, api.app[SETTINGS], clock, aiohttp_client, caplog, monkeypatch
    ) as client:
        stored = await uploaded(Api(client, client.server.app), b"bytes", token=token)
        taken = await client.post(
            DOWNLOAD_TICKETS, json={"file_id": stored["id"]}, headers=bearer(token)
        )
        ticket = (await taken.json())["data"]["ticket"]
        for sent in (ticket, ticket[:-1] + "x"):
            response = await client.post(
                DOWNLOADS, data=f"ticket={sent}", headers={"Content-Type": FORM_TYPE}
            )
            await response.read()

    logged = [orjson.loads(line) for line in log_file.read_bytes().splitlines()]
    downloads = [e for e in logged if e["route"] == DOWNLOADS]
    who = [(e["status"], e["credential"], e["user_id"], e["auth"]) for e in downloads]
    assert who == [
        (200, "download_ticket", user.id, None),
        (404, "download_ticket", None, None),
    ]
    assert ticket[4:] not in log_file.read_text()
