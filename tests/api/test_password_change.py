"""POST /api/v1/auth/password (issue 14): the current password checked as a login's is (counted
toward login throttling, reserved before bcrypt), the new one held to the rules of
``users create``; on success every other session ends, the caller's and the API keys stay.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis as redis_sync

import service.auth.passwords
from tests.support.api import PASSWORD, Api, assert_error, bearer
from tests.support.clock import FakeClock, at, parse_iso

CHANGE = "/api/v1/auth/password"
LOGIN = "/api/v1/auth/login"
SESSION = "/api/v1/auth/session"
EMAIL = "alice@example.com"
NEW = "a brand new passphrase"


async def change(api: Api, token: str, body: Any) -> Any:
    return await api.client.post(CHANGE, json=body, headers=bearer(token))


async def login_status(api: Api, password: str) -> int:
    response = await api.client.post(LOGIN, json={"email": EMAIL, "password": password})
    return response.status


async def status_of(api: Api, token: str) -> int:
    return (await api.client.get(SESSION, headers=bearer(token))).status


@pytest.fixture
def bcrypt_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(which, thread name) of every bcrypt check and hash the service runs."""
    calls: list[tuple[str, str]] = []
    check, hash_ = service.auth.passwords._check_sync, service.auth.passwords.hash_password_sync

    def counted_check(password: str, password_hash: str) -> bool:
        calls.append(("check", threading.current_thread().name))
        return check(password, password_hash)

    def counted_hash(password: str, cost: int) -> str:
        calls.append(("hash", threading.current_thread().name))
        return hash_(password, cost)

    monkeypatch.setattr(service.auth.passwords, "_check_sync", counted_check)
    monkeypatch.setattr(service.auth.passwords, "hash_password_sync", counted_hash)
    return calls


async def test_a_change_ends_every_other_session_and_keeps_the_callers_and_the_keys(
    api: Api, clock: FakeClock, bcrypt_calls: list[tuple[str, str]]
) -> None:
    mine = await api.user_with_session(EMAIL)
    others = [await api.login(EMAIL) for _ in range(2)]
    key = (await api.create_key(mine))["secret_key"]
    bcrypt_calls.clear()

    response = await change(api, mine, {"current_password": PASSWORD, "new_password": NEW})

    assert response.status == 200, await response.text()
    data = (await response.json())["data"]
    assert data["sessions_ended"] == 2
    assert parse_iso(data["changed_at"]) == at(clock)
    # bcrypt ran twice (check the current, hash the new), never on the event loop's thread.
    assert [which for which, _ in bcrypt_calls] == ["check", "hash"]
    assert all(name.startswith("bcrypt") for _, name in bcrypt_calls), bcrypt_calls
    for token in others:
        refused = await api.client.get(SESSION, headers=bearer(token))
        await assert_error(refused, 401, "invalid_session")
    assert await status_of(api, mine) == 200
    assert (await api.files(key=key)).status == 200  # API keys are not touched
    assert await login_status(api, PASSWORD) == 401
    assert await login_status(api, NEW) == 200


async def test_a_wrong_current_password_is_401_and_changes_nothing(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    mine = await api.user_with_session(EMAIL)
    other = await api.login(EMAIL)
    user_id = redis_client.hget("fh:users:by-email", EMAIL)
    stored = redis_client.hget(f"fh:{{{user_id}}}:user", "pw")

    response = await change(api, mine, {"current_password": "not it at all", "new_password": NEW})

    error = await assert_error(response, 401, "invalid_credentials")
    assert "not it at all" not in str(error) and NEW not in str(error)
    assert redis_client.hget(f"fh:{{{user_id}}}:user", "pw") == stored
    assert await status_of(api, mine) == 200  # the caller's session is not ended by the refusal
    assert await status_of(api, other) == 200
    assert await login_status(api, PASSWORD) == 200


async def test_wrong_current_passwords_count_toward_login_throttling(
    make_api, bcrypt_calls: list[tuple[str, str]]
) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(login_failures_per_email=3)
    mine = await api.user_with_session(EMAIL)
    for _ in range(3):
        response = await change(api, mine, {"current_password": "wrong guess", "new_password": NEW})
        await assert_error(response, 401, "invalid_credentials")
    bcrypt_calls.clear()

    # The email's bound is used up: refused before any password work, even the right password,
    # for the change and for login alike.
    response = await change(api, mine, {"current_password": PASSWORD, "new_password": NEW})
    error = await assert_error(response, 429, "login_throttled")
    assert response.headers["Retry-After"] == str(error["details"]["retry_after_seconds"])
    assert await login_status(api, PASSWORD) == 429
    assert bcrypt_calls == []
    assert await status_of(api, mine) == 200


async def test_failed_logins_throttle_the_change_too_and_a_change_clears_the_count(
    make_api,
) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(login_failures_per_email=3)
    mine = await api.user_with_session(EMAIL)
    for _ in range(2):
        assert await login_status(api, "wrong guess") == 401
    response = await change(api, mine, {"current_password": PASSWORD, "new_password": NEW})
    assert response.status == 200, await response.text()
    # Cleared like a login's success: three more failures are needed to lock the email.
    for _ in range(2):
        assert await login_status(api, "wrong guess") == 401
    assert await login_status(api, NEW) == 200


async def test_the_per_address_bound_counts_changes_too(make_api) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(login_failures_per_email=0, login_failures_per_address=2)
    mine = await api.user_with_session(EMAIL)
    for _ in range(2):
        response = await change(api, mine, {"current_password": "wrong guess", "new_password": NEW})
        await assert_error(response, 401, "invalid_credentials")
    response = await change(api, mine, {"current_password": PASSWORD, "new_password": NEW})
    await assert_error(response, 429, "login_throttled")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"current_password": PASSWORD, "new_password": "short"}, "new_password"),
        ({"current_password": PASSWORD, "new_password": "x" * 1025}, "new_password"),
        ({"current_password": PASSWORD, "new_password": ""}, "new_password"),
        ({"current_password": PASSWORD, "new_password": 12345678}, "new_password"),
        ({"current_password": PASSWORD}, "new_password"),
        ({"new_password": NEW}, "current_password"),
        ({"current_password": "x" * 1025, "new_password": NEW}, "current_password"),
        ({"current_password": PASSWORD, "new_password": NEW, "email": EMAIL}, "email"),
    ],
)
async def test_bad_bodies_are_400_before_any_password_work(
    api: Api, bcrypt_calls: list[tuple[str, str]], body: dict[str, Any], field: str
) -> None:
    mine = await api.user_with_session(EMAIL)
    bcrypt_calls.clear()
    error = await assert_error(await change(api, mine, body), 400, "validation_failed")
    assert field in error["details"]
    assert bcrypt_calls == []
    assert await login_status(api, PASSWORD) == 200


async def test_the_minimum_length_is_the_setting_users_create_uses(make_api) -> None:  # type: ignore[no-untyped-def]
    api = await make_api(password_min_length=30)
    await api.create_user(EMAIL, "p" * 30)
    mine = await api.login(EMAIL, "p" * 30)
    response = await change(api, mine, {"current_password": "p" * 30, "new_password": "n" * 29})
    error = await assert_error(response, 400, "validation_failed")
    assert error["details"] == {"new_password": "must be at least 30 characters"}
    response = await change(api, mine, {"current_password": "p" * 30, "new_password": "n" * 30})
    assert response.status == 200, await response.text()
    assert (await response.json())["data"]["sessions_ended"] == 0


async def test_only_a_session_may_change_the_password(api: Api) -> None:
    mine = await api.user_with_session(EMAIL)
    key = (await api.create_key(mine))["secret_key"]
    body = {"current_password": PASSWORD, "new_password": NEW}
    response = await api.client.post(CHANGE, json=body, headers={"X-API-Key": key})
    await assert_error(response, 403, "session_required")
    await assert_error(await api.client.post(CHANGE, json=body), 401, "credential_missing")
    assert await login_status(api, PASSWORD) == 200


async def test_a_deleted_user_is_never_brought_back_by_a_change(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    from service.app import STORE

    user = await api.create_user(EMAIL)
    await api.app[STORE].users.delete(user.id, EMAIL)
    assert await api.app[STORE].users.set_password(user.id, "$2b$04$whatever") is False
    assert not redis_client.exists(f"fh:{{{user.id}}}:user")


async def test_a_login_checked_against_the_old_password_opens_no_session_after_a_change(
    api: Api, monkeypatch: pytest.MonkeyPatch, redis_client: redis_sync.Redis
) -> None:
    """The change lands while a login with the old password is being checked: the login's
    session is confirmed against the hash it checked, so it fails instead of outliving the
    change's ending of every other session."""
    from service.auth.passwords import PasswordHasher

    mine = await api.user_with_session(EMAIL)
    real_verify = PasswordHasher.verify
    changed = False

    async def verify_then_let_the_change_in(self, password: str, password_hash: str) -> bool:
        nonlocal changed
        ok = await real_verify(self, password, password_hash)
        if not changed:
            changed = True
            body = {"current_password": PASSWORD, "new_password": NEW}
            response = await change(api, mine, body)
            assert response.status == 200, await response.text()
        return ok

    monkeypatch.setattr(PasswordHasher, "verify", verify_then_let_the_change_in)

    late = await api.client.post(LOGIN, json={"email": EMAIL, "password": PASSWORD})

    assert changed
    await assert_error(late, 401, "invalid_credentials")
    user_id = redis_client.hget("fh:users:by-email", EMAIL)
    assert redis_client.zcard(f"fh:{{{user_id}}}:sessions") == 1  # the caller's alone
    assert len(redis_client.keys("fh:session:*")) == 1
    assert await status_of(api, mine) == 200


async def test_a_session_is_confirmed_only_while_the_checked_hash_is_stored(
    api: Api, redis_client: redis_sync.Redis, clock: FakeClock
) -> None:
    from service.app import STORE
    from service.domain.outcomes import AccountGone

    user = await api.create_user(EMAIL)
    store = api.app[STORE]
    now = clock.now_ms()
    with pytest.raises(AccountGone):
        await store.sessions.add(
            "ab" * 32, user.id, now, now + 1000, now + 1000, password_hash="not the stored hash"
        )
    assert not redis_client.exists("fh:session:" + "ab" * 32)
    assert redis_client.zcard(f"fh:{{{user.id}}}:sessions") == 0
    await store.sessions.add(
        "cd" * 32, user.id, now, now + 1000, now + 1000, password_hash=user.password_hash
    )
    assert redis_client.zcard(f"fh:{{{user.id}}}:sessions") == 1
