"""The account's settings (``GET``/``PATCH /settings``): every setting with its default, a change
all or nothing with each bad value named, each default bounded as the field it stands in for
(a value stored before that bound reading as the bound), what the settings change (a new key's
lifetime, an upload's folder, a new alias's lifetime), a deleted default folder resetting its
setting, who may read and change them, and the change recorded in the audit trail with what
changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync

from tests.support.aliases import alias, create_alias, listed
from tests.support.api import Api, assert_error, bearer
from tests.support.clock import FakeClock, parse_iso
from tests.support.files import uploaded
from tests.support.folders import SETTINGS, folder, patch, settings_of
from tests.support.keys import audit_events
from tests.support.openapi import validator

TEN_YEARS = 3650 * 86_400  # seconds: the longest an alias may live
DEFAULTS = {
    "default_key_expires_days": None,
    "default_folder_id": None,
    "default_alias_expires_in_seconds": None,
    "default_alias_max_views": None,
    "public_aliases_enabled": True,
}


@pytest.fixture
async def api(make_api: Any, tmp_path: Path) -> Api:
    return await make_api(data_dir=tmp_path)


async def change(api: Api, token: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await patch(api, SETTINGS, body, token)
    assert response.status == 200, await response.text()
    answer = await response.json()
    validator("/components/schemas/SettingsEnvelope").validate(answer)
    return answer["data"]


async def test_every_setting_starts_at_its_default_and_nothing_is_stored(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    assert await settings_of(api, token) == DEFAULTS
    assert not redis_client.exists(f"fh:{{{user.id}}}:settings")


async def test_any_subset_changes_and_the_answer_holds_every_setting(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    inbox = await folder(api, "inbox", token=token)
    everything = {
        "default_key_expires_days": 3650,
        "default_folder_id": inbox["id"],
        "default_alias_expires_in_seconds": 60,
        "default_alias_max_views": 1,
        "public_aliases_enabled": False,
    }
    assert await change(api, token, everything) == everything
    assert await settings_of(api, token) == everything
    partly = await change(api, token, {"default_alias_max_views": None})
    assert partly == {**everything, "default_alias_max_views": None}
    back = await change(api, token, DEFAULTS)
    assert back == DEFAULTS
    # Back at their defaults, the settings hold nothing in the store.
    assert not redis_client.exists(f"fh:{{{user.id}}}:settings")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"theme": "dark"}, {"theme"}),
        ({"default_key_expires_days": 0}, {"default_key_expires_days"}),
        ({"default_key_expires_days": 3651}, {"default_key_expires_days"}),
        ({"default_key_expires_days": "30"}, {"default_key_expires_days"}),
        ({"default_key_expires_days": 30.0}, {"default_key_expires_days"}),
        ({"default_key_expires_days": True}, {"default_key_expires_days"}),
        ({"default_alias_expires_in_seconds": 59}, {"default_alias_expires_in_seconds"}),
        ({"default_alias_expires_in_seconds": 315_360_001}, {"default_alias_expires_in_seconds"}),
        ({"default_alias_expires_in_seconds": 10**12}, {"default_alias_expires_in_seconds"}),
        ({"default_alias_max_views": 0}, {"default_alias_max_views"}),
        ({"default_alias_max_views": 2**60}, {"default_alias_max_views"}),
        ({"public_aliases_enabled": None}, {"public_aliases_enabled"}),
        ({"public_aliases_enabled": 1}, {"public_aliases_enabled"}),
        ({"default_folder_id": 7}, {"default_folder_id"}),
        ({"default_folder_id": "fld_0000000000000000000000"}, {"default_folder_id"}),
        ({"default_folder_id": "inbox"}, {"default_folder_id"}),
        (
            {"default_key_expires_days": 30, "default_alias_max_views": -1, "x": 1},
            {"default_alias_max_views", "x"},
        ),
    ],
)
async def test_a_bad_value_is_named_and_nothing_changes(
    api: Api, body: dict[str, Any], named: set[str]
) -> None:
    token = await api.user_with_session()
    response = await patch(api, SETTINGS, body, token)
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) == named
    assert await settings_of(api, token) == DEFAULTS


async def test_another_accounts_folder_is_not_a_default_folder(api: Api) -> None:
    alice = await api.user_with_session("alice@example.com")
    bob = await api.user_with_session("bob@example.com")
    hers = await folder(api, "hers", token=alice)
    response = await patch(
        api, SETTINGS, {"default_folder_id": hers["id"], "default_key_expires_days": 5}, bob
    )
    error = await assert_error(response, 400, "validation_failed")
    assert set(error["details"]) == {"default_folder_id"}
    assert await settings_of(api, bob) == DEFAULTS


async def test_the_default_key_lifetime_applies_when_post_keys_names_none(
    api: Api, clock: FakeClock
) -> None:
    token = await api.user_with_session()
    unset = await api.create_key(token)
    assert (parse_iso(unset["expires_at"]) - parse_iso(unset["created_at"])).days == 90
    await change(api, token, {"default_key_expires_days": 7})
    defaulted = await api.create_key(token)
    assert (parse_iso(defaulted["expires_at"]) - parse_iso(defaulted["created_at"])).days == 7
    named = await api.create_key(token, expires_days=30)
    assert (parse_iso(named["expires_at"]) - parse_iso(named["created_at"])).days == 30


async def test_the_default_alias_lifetime_is_bounded_as_an_aliases_own_lifetime_is(
    api: Api,
) -> None:
    token = await api.user_with_session()
    file = await uploaded(api, b"x", token=token)
    await change(api, token, {"default_alias_expires_in_seconds": TEN_YEARS})
    made = await alias(api, {"file_id": file["id"]}, token=token)
    assert (parse_iso(made["expires_at"]) - parse_iso(made["created_at"])).days == 3650
    beyond = await patch(api, SETTINGS, {"default_alias_expires_in_seconds": TEN_YEARS + 1}, token)
    error = await assert_error(beyond, 400, "validation_failed")
    assert error["details"] == {
        "default_alias_expires_in_seconds": "must be a whole number from 60 to 315360000, or null"
    }
    # The same bound as the field the setting stands in for.
    explicit = await create_alias(
        api, {"file_id": file["id"], "expires_in_seconds": TEN_YEARS + 1}, token=token
    )
    error = await assert_error(explicit, 400, "validation_failed")
    assert set(error["details"]) == {"expires_in_seconds"}


@pytest.mark.parametrize(
    ("name", "stored", "read"),
    [
        ("default_key_expires_days", "100000", 3650),
        ("default_alias_expires_in_seconds", "1000000000000", TEN_YEARS),
        ("default_alias_max_views", str(2**60), 2**53),
    ],
)
async def test_a_setting_stored_past_its_bound_reads_as_the_bound(
    api: Api, redis_client: redis_sync.Redis, name: str, stored: str, read: int
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    redis_client.hset(f"fh:{{{user.id}}}:settings", name, stored)
    assert await settings_of(api, token) == {**DEFAULTS, name: read}


async def test_a_default_alias_lifetime_stored_past_its_bound_makes_aliases_of_ten_years(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    file = await uploaded(api, b"x", token=token)
    settings = f"fh:{{{user.id}}}:settings"
    redis_client.hset(settings, "default_alias_expires_in_seconds", "1000000000000")
    made = await alias(api, {"file_id": file["id"]}, token=token)
    assert (parse_iso(made["expires_at"]) - parse_iso(made["created_at"])).days == 3650
    assert await listed(api, token=token) == [made]


async def test_the_default_folder_receives_uploads_until_it_is_deleted(api: Api) -> None:
    token = await api.user_with_session()
    outer = await folder(api, "outer", token=token)
    inbox = await folder(api, "inbox", outer["id"], token=token)
    await change(api, token, {"default_folder_id": inbox["id"]})
    assert (await uploaded(api, b"x", token=token))["folder_id"] == inbox["id"]
    # Deleting a folder above it deletes it too: the setting goes back to null in that step.
    deleted = await api.client.delete(
        f"/api/v1/folders/{outer['id']}?recursive=true", headers=bearer(token)
    )
    assert deleted.status == 200
    assert (await settings_of(api, token))["default_folder_id"] is None
    assert (await uploaded(api, b"y", token=token))["folder_id"] is None


async def test_deleting_another_folder_leaves_the_default_alone(api: Api) -> None:
    token = await api.user_with_session()
    inbox = await folder(api, "inbox", token=token)
    other = await folder(api, "other", token=token)
    await change(api, token, {"default_folder_id": inbox["id"]})
    await api.client.delete(f"/api/v1/folders/{other['id']}", headers=bearer(token))
    assert (await settings_of(api, token))["default_folder_id"] == inbox["id"]


async def test_reading_and_changing_take_their_permissions(api: Api) -> None:
    token = await api.user_with_session()
    reader = (await api.create_key(token, permissions=["settings.read"]))["secret_key"]
    writer = (await api.create_key(token, permissions=["settings.write"]))["secret_key"]
    response = await api.client.get(SETTINGS, headers={"X-API-Key": reader})
    assert response.status == 200
    refused = await patch(api, SETTINGS, {"public_aliases_enabled": False}, key=reader)
    error = await assert_error(refused, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": "settings.write"}
    changed = await patch(api, SETTINGS, {"public_aliases_enabled": False}, key=writer)
    assert changed.status == 200
    refused = await api.client.get(SETTINGS, headers={"X-API-Key": writer})
    error = await assert_error(refused, 403, "insufficient_permission")
    assert error["details"] == {"required_permission": "settings.read"}


async def test_a_change_is_recorded_with_what_it_changed_and_no_change_records_nothing(
    api: Api,
) -> None:
    token = await api.user_with_session()
    key = await api.create_key(token, name="settings bot", permissions=["settings.write"])
    await change(api, token, {"default_alias_max_views": 10, "public_aliases_enabled": True})
    changed = await patch(
        api, SETTINGS, {"default_alias_max_views": 10}, key=key["secret_key"]
    )  # the same value: no change
    assert changed.status == 200
    events = await audit_events(api, token, "settings.changed")
    assert len(events) == 1
    validator("/components/schemas/AuditEvent").validate(events[0])
    assert events[0]["target"] == {"type": "settings"}
    assert events[0]["changes"] == {"default_alias_max_views": 10}
    assert events[0]["actor"]["type"] == "session"
    await patch(api, SETTINGS, {"public_aliases_enabled": False}, key=key["secret_key"])
    latest = (await audit_events(api, token, "settings.changed"))[0]
    assert latest["changes"] == {"public_aliases_enabled": False}
    assert latest["actor"]["type"] == "api_key" and latest["actor"]["key_id"] == key["id"]
