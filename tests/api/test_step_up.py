"""Step-up: sensitive operations need the session to have authenticated within
``FILEHOST_REAUTH_SECONDS`` (403 ``reauthentication_required``, nothing done; ending another
session by id is one, ending the caller's own is not), and
``POST /auth/reauthenticate`` answers a new token replacing the caller's; a reauthentication
racing a logout leaves no session."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.api.context import POLICY
from service.config.readers import secret_keys
from service.domain import credentials
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock
from tests.support.folders import folder
from tests.support.mfa import (
    PUBLIC_URL,
    SECRETS_KEY,
    code_for,
    enable_totp,
    reauthenticate,
    reauthenticated,
)

EMAIL = "alice@example.com"
STALE = 601  # seconds: past the default FILEHOST_REAUTH_SECONDS (600)


@pytest.fixture
async def mfa_api(make_api) -> Api:  # type: ignore[no-untyped-def]
    return await make_api(
        secrets_key=secret_keys("FILEHOST_SECRETS_KEY", SECRETS_KEY), public_url=PUBLIC_URL
    )


async def keys_of(api: Api, token: str) -> list[dict[str, Any]]:
    response = await api.client.get("/api/v1/keys", headers=bearer(token))
    return (await response.json())["data"]["keys"]


async def key_from_ten(api: Api, token: str) -> dict[str, Any]:
    """A key that may read files and folders from 10.0.0.0/8 only."""
    key = await api.create_key(token, permissions=["files.read", "folders.read"])
    response = await api.client.patch(
        f"/api/v1/keys/{key['id']}", json={"allowed_ips": ["10.0.0.0/8"]}, headers=bearer(token)
    )
    assert response.status == 200, await response.text()
    return key


SENSITIVE = [
    ("POST", "/api/v1/keys", {"name": "ci", "permissions": ["files.read"]}),
    ("POST", "/api/v1/keys/{key}/roll", None),
    ("PATCH", "/api/v1/keys/{key}", {"permissions": ["files.read", "folders.read", "files.write"]}),
    ("PATCH", "/api/v1/keys/{key}", {"allowed_ips": []}),
    ("PATCH", "/api/v1/keys/{key}", {"allowed_ips": ["10.0.0.0/8", "192.0.2.0/24"]}),
    ("PATCH", "/api/v1/keys/{key}", {"expires_days": 3650}),
    ("PATCH", "/api/v1/keys/{key}", {"rate_limit": {"per_second": 1000, "burst": 10}}),
    ("POST", "/api/v1/uploaders", {"kind": "sharex", "name": "laptop", "alias": True}),
    (
        "POST",
        "/api/v1/auth/password",
        {"current_password": "correct horse battery staple", "new_password": "a new password"},
    ),
    ("DELETE", "/api/v1/auth/sessions", None),
    ("POST", "/api/v1/auth/mfa/totp", None),
    ("POST", "/api/v1/auth/mfa/totp/confirm", {"code": "123456"}),
    ("DELETE", "/api/v1/auth/mfa/totp", None),
    ("POST", "/api/v1/auth/mfa/recovery-codes", None),
    ("POST", "/api/v1/auth/mfa/webauthn/options", None),
    ("POST", "/api/v1/auth/mfa/webauthn", {"name": "key", "credential": {}}),
    ("DELETE", "/api/v1/auth/mfa/webauthn/pk_0000000000000000000000", None),
]


@pytest.mark.parametrize(("method", "path", "body"), SENSITIVE)
async def test_a_sensitive_operation_from_a_stale_session_is_403_and_does_nothing(
    mfa_api: Api, clock: FakeClock, method: str, path: str, body: Any
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    key = await key_from_ten(mfa_api, token)
    await mfa_api.login(EMAIL)  # another session, for DELETE /auth/sessions
    before = await keys_of(mfa_api, token)
    clock.advance(seconds=STALE)
    response = await mfa_api.client.request(
        method, path.replace("{key}", key["id"]), json=body, headers=bearer(token)
    )
    error = await assert_error(response, 403, "reauthentication_required")
    assert error["details"]["max_age_seconds"] == 600
    assert await keys_of(mfa_api, token) == before
    sessions = await mfa_api.client.get("/api/v1/auth/sessions", headers=bearer(token))
    assert len((await sessions.json())["data"]["sessions"]) == 2
    assert await mfa_api.login(EMAIL)  # the password did not change


NOT_SENSITIVE = [
    ("PATCH", "/api/v1/keys/{key}", {"name": "renamed"}),
    ("PATCH", "/api/v1/keys/{key}", {"permissions": ["files.read"]}),
    ("PATCH", "/api/v1/keys/{key}", {"enabled": False}),
    ("PATCH", "/api/v1/keys/{key}", {"allowed_ips": ["10.1.0.0/16"]}),
    ("PATCH", "/api/v1/keys/{key}", {"rate_limit": {"per_second": 5, "burst": 10}}),
    ("PATCH", "/api/v1/keys/{key}", {"expires_days": 1}),
    ("DELETE", "/api/v1/keys/{key}", None),
    ("GET", "/api/v1/auth/mfa", None),
    ("POST", "/api/v1/auth/logout", None),
]


@pytest.mark.parametrize(("method", "path", "body"), NOT_SENSITIVE)
async def test_narrowing_revoking_reading_and_logging_out_need_no_step_up(
    mfa_api: Api, clock: FakeClock, method: str, path: str, body: Any
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    key = await key_from_ten(mfa_api, token)
    clock.advance(seconds=STALE)
    response = await mfa_api.client.request(
        method, path.replace("{key}", key["id"]), json=body, headers=bearer(token)
    )
    assert response.status == 200, await response.text()


async def session_ids(api: Api, token: str) -> tuple[str, list[str]]:
    """The caller's session id and the others', from the list."""
    response = await api.client.get("/api/v1/auth/sessions", headers=bearer(token))
    listed = (await response.json())["data"]["sessions"]
    [mine] = [view["id"] for view in listed if view["current"]]
    return mine, [view["id"] for view in listed if not view["current"]]


async def test_ending_another_session_by_id_from_a_stale_session_needs_a_step_up(
    mfa_api: Api, clock: FakeClock
) -> None:
    """Else a stale (or stolen) session ends every other one by one, the list naming them."""
    token = await mfa_api.user_with_session(EMAIL)
    other = await mfa_api.login(EMAIL)
    _, [others] = await session_ids(mfa_api, token)
    clock.advance(seconds=STALE)
    url = f"/api/v1/auth/sessions/{others}"
    error = await assert_error(
        await mfa_api.client.delete(url, headers=bearer(token)), 403, "reauthentication_required"
    )
    assert error["details"]["max_age_seconds"] == 600
    assert (await mfa_api.client.get("/api/v1/auth/session", headers=bearer(other))).status == 200
    events = await mfa_api.client.get("/api/v1/audit-events", headers=bearer(token))
    kinds = [event["type"] for event in (await events.json())["data"]["events"]]
    assert "session.ended" not in kinds
    fresh = await reauthenticated(mfa_api, token)
    response = await mfa_api.client.delete(url, headers=bearer(fresh))
    assert response.status == 200, await response.text()
    assert (await mfa_api.client.get("/api/v1/auth/session", headers=bearer(other))).status == 401


async def test_a_stale_session_ends_itself_by_id_without_a_step_up(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    await mfa_api.login(EMAIL)
    mine, _ = await session_ids(mfa_api, token)
    clock.advance(seconds=STALE)
    response = await mfa_api.client.delete(f"/api/v1/auth/sessions/{mine}", headers=bearer(token))
    assert response.status == 200, await response.text()
    response = await mfa_api.client.get("/api/v1/auth/session", headers=bearer(token))
    await assert_error(response, 401, "invalid_session")


async def test_reauthenticating_answers_a_new_token_and_the_old_one_is_refused(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    listed = await mfa_api.client.get("/api/v1/auth/sessions", headers=bearer(token))
    [before] = (await listed.json())["data"]["sessions"]
    clock.advance(seconds=STALE)
    session = await mfa_api.client.get("/api/v1/auth/session", headers=bearer(token))
    assert (await session.json())["data"]["authenticated_recently"] is False
    response = await reauthenticate(mfa_api, token)
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert set(data) == {"token", "expires_at", "absolute_expires_at", "authenticated_at", "aal"}
    assert data["token"] != token and data["aal"] == 1
    await assert_error(
        await mfa_api.client.get("/api/v1/auth/session", headers=bearer(token)),
        401,
        "invalid_session",
    )
    fresh = data["token"]
    assert (await mfa_api.create_key(fresh))["id"]
    listed = await mfa_api.client.get("/api/v1/auth/sessions", headers=bearer(fresh))
    [after] = (await listed.json())["data"]["sessions"]
    assert after["id"] == before["id"] and after["created_at"] == before["created_at"]
    assert after["authenticated_at"] == data["authenticated_at"] != before["authenticated_at"]
    events = await mfa_api.client.get("/api/v1/audit-events", headers=bearer(fresh))
    kinds = [event["type"] for event in (await events.json())["data"]["events"]]
    assert "session.reauthenticated" in kinds


async def test_a_wrong_password_is_401_counted_and_leaves_the_session(
    make_api, clock: FakeClock
) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(login_failures_per_email=2, login_failures_per_address=1000)
    token = await api.user_with_session(EMAIL)
    for _ in range(2):
        response = await reauthenticate(api, token, password="not the password")
        await assert_error(response, 401, "invalid_credentials")
    response = await api.client.get("/api/v1/auth/session", headers=bearer(token))
    assert response.status == 200
    await assert_error(await reauthenticate(api, token), 429, "login_throttled")


async def test_an_account_with_a_factor_reauthenticates_with_it_once(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    secret, codes = await enable_totp(mfa_api, token, clock)
    response = await reauthenticate(mfa_api, token)
    body = await assert_error(response, 400, "validation_failed")
    assert "code" in body["details"]
    code = code_for(secret, clock)
    response = await reauthenticate(mfa_api, token, code=code)
    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert data["aal"] == 2
    await assert_error(
        await reauthenticate(mfa_api, data["token"], code=code), 401, "mfa_code_invalid"
    )
    fresh = await reauthenticated(mfa_api, data["token"], recovery_code=codes[0])
    assert fresh


async def test_a_reauthentication_racing_a_logout_leaves_no_session(
    mfa_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    store = mfa_api.app[POLICY].reauthentication._store
    opened: list[str] = []
    real_add = store.add

    async def add_after_a_logout(digest: str, user_id: str, *args: Any, **kwargs: Any) -> None:
        # The logout lands between the old session's end and the new one's opening: what a
        # logout does when it read the old session just before the reauthentication began.
        await store.remove(credentials.digest(token), user_id)
        opened.append(digest)
        await real_add(digest, user_id, *args, **kwargs)

    monkeypatch.setattr(store, "add", add_after_a_logout)
    response = await reauthenticate(mfa_api, token)
    await assert_error(response, 401, "invalid_session")
    assert opened, "the replacement was never opened"
    monkeypatch.undo()
    listed = await mfa_api.app[POLICY].sessions.list_sessions(
        (await mfa_api.app[POLICY].users.find_user(EMAIL)).id
    )
    assert listed == []


async def test_reauthentications_and_logouts_at_once_never_leave_a_session_after_a_logout(
    mfa_api: Api,
) -> None:
    await mfa_api.create_user(EMAIL)
    for _ in range(10):
        token = await mfa_api.login(EMAIL)
        reauth, logout = await asyncio.gather(
            reauthenticate(mfa_api, token),
            mfa_api.client.post("/api/v1/auth/logout", headers=bearer(token)),
        )
        if logout.status == 200 and reauth.status == 200:
            fresh = (await reauth.json())["data"]["token"]
            response = await mfa_api.client.get("/api/v1/auth/session", headers=bearer(fresh))
            assert response.status == 401
        if reauth.status == 200:
            fresh = (await reauth.json())["data"]["token"]
            await mfa_api.client.post("/api/v1/auth/logout", headers=bearer(fresh))


async def test_enabling_a_disabled_key_or_lifting_its_own_rate_needs_a_step_up(
    mfa_api: Api, clock: FakeClock
) -> None:
    """Held back as a precaution, a key is not let loose again by a stale session; held back
    further, it is."""
    token = await mfa_api.user_with_session(EMAIL)
    key = await mfa_api.create_key(token, permissions=["files.read"])
    url = f"/api/v1/keys/{key['id']}"
    slow = {"enabled": False, "rate_limit": {"per_second": 2, "burst": 5}}
    response = await mfa_api.client.patch(url, json=slow, headers=bearer(token))
    assert response.status == 200, await response.text()
    before = await keys_of(mfa_api, token)
    clock.advance(seconds=STALE)
    for widening in (
        {"enabled": True},
        {"rate_limit": None},  # the deployment's: 100 per second
        {"rate_limit": {"per_second": 2, "burst": 6}},
        {"name": "renamed", "enabled": True},
    ):
        response = await mfa_api.client.patch(url, json=widening, headers=bearer(token))
        await assert_error(response, 403, "reauthentication_required")
    assert await keys_of(mfa_api, token) == before
    for narrowing in ({"enabled": False}, {"rate_limit": {"per_second": 1, "burst": 5}}):
        response = await mfa_api.client.patch(url, json=narrowing, headers=bearer(token))
        assert response.status == 200, await response.text()
    fresh = await reauthenticated(mfa_api, token)
    response = await mfa_api.client.patch(url, json={"enabled": True}, headers=bearer(fresh))
    assert (await response.json())["data"]["enabled"] is True


async def test_unbinding_a_key_from_its_folders_or_adding_one_needs_a_step_up(
    mfa_api: Api, clock: FakeClock
) -> None:
    token = await mfa_api.user_with_session(EMAIL)
    first, second, third = [
        (await folder(mfa_api, name, token=token))["id"] for name in ("a", "b", "c")
    ]
    key = await mfa_api.create_key(token, permissions=["files.read"], folder_ids=[first, second])
    clock.advance(seconds=STALE)
    url = f"/api/v1/keys/{key['id']}"
    for widening in ({"folder_ids": None}, {"folder_ids": [first, third]}):
        response = await mfa_api.client.patch(url, json=widening, headers=bearer(token))
        await assert_error(response, 403, "reauthentication_required")
    narrowed = await mfa_api.client.patch(url, json={"folder_ids": [first]}, headers=bearer(token))
    assert narrowed.status == 200, await narrowed.text()
