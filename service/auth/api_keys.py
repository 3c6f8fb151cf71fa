"""API keys as policy sees them: creating one (its secret generated here and returned once),
listing, editing, rolling to a new secret with a grace for the old one, and revoking. Each change
is recorded in the account's audit trail in the step that makes it (revocation: just before).
Secrets reach the store only as digests.

A key may be bound to folders (``folder_ids``): what that lets it reach is decided by
``service.auth.reach``; here, only that every folder it is bound to is a live folder of the
account when it is bound (checked in the step that writes the key), and that deleting a folder
takes it out of its keys' folders (``forget_folders``, run by the deletion's removal)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service.auth.account_settings import AccountSettings
from service.auth.audit import DAY_MS, AuditTrail
from service.clock import Clock
from service.domain import audit_events as audit
from service.domain import credentials, key_widening
from service.domain.audit_events import EventBatch
from service.domain.outcomes import AccountGone, FolderNotLive, KeyChanged
from service.domain.permissions import to_mask, to_names
from service.domain.records import KeyChanges, KeyRecord
from service.errors import ApiError, Code
from service.store.protocols import ApiKeyStore

MAX_GRACE_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True, slots=True)
class CreatedKey:
    record: KeyRecord
    secret: str


@dataclass(frozen=True, slots=True)
class KeyEdit:
    """What ``PATCH /keys/{id}`` asks to change (validated in shape); None leaves a field as it
    is. ``allowed_ips`` holds canonical networks, empty for anywhere; ``rate_limit`` (per second,
    burst) is set when ``sets_rate_limit``, None for the deployment's; ``folder_ids`` when
    ``sets_folder_ids``, None for the whole account."""

    name: str | None = None
    permissions: list[str] | None = None
    expires_days: int | None = None
    enabled: bool | None = None
    allowed_ips: tuple[str, ...] | None = None
    sets_rate_limit: bool = False
    rate_limit: tuple[int, int] | None = None
    sets_folder_ids: bool = False
    folder_ids: tuple[str, ...] | None = None  # set when ``sets_folder_ids``; None: the account


def _no_folder() -> ApiError:
    """A folder a key was to be bound to is not one of the account's live folders."""
    return ApiError(Code.FOLDER_NOT_FOUND, details={"field": "folder_ids"})


def _check_folders(folder_ids: tuple[str, ...] | None) -> None:
    """404 for an id that cannot be a folder's; whether each is one of the account's live
    folders is checked in the step that binds the key to it."""
    if folder_ids is not None and not all(
        credentials.is_valid_id(folder_id, "fld") for folder_id in folder_ids
    ):
        raise _no_folder()


def _edited_fields(before: KeyRecord, after: KeyRecord) -> dict[str, Any]:
    """The fields an edit changed, with their new values as the API shows them (the expiry in
    ms, shown ISO 8601 by the audit endpoint); never a secret."""
    edited: dict[str, Any] = {}
    if after.name != before.name:
        edited["name"] = after.name
    if after.permissions != before.permissions:
        edited["permissions"] = to_names(after.permissions)
        # What the edit gave and took, so that the trail reads as a change, not a new list.
        edited["permissions_added"] = to_names(after.permissions & ~before.permissions)
        edited["permissions_removed"] = to_names(before.permissions & ~after.permissions)
    if after.expires_at != before.expires_at:
        edited["expires_at"] = after.expires_at
    if after.allowed_ips != before.allowed_ips:
        edited["allowed_ips"] = list(after.allowed_ips)
    if after.rate_limit != before.rate_limit:
        edited["rate_limit"] = (
            None
            if after.rate_limit is None
            else {"per_second": after.rate_limit[0], "burst": after.rate_limit[1]}
        )
    if after.folder_ids != before.folder_ids:
        edited["folder_ids"] = None if after.folder_ids is None else list(after.folder_ids)
    if after.uploader != before.uploader:
        edited["uploader"] = after.uploader
    return edited


class ApiKeys:
    def __init__(
        self,
        store: ApiKeyStore,
        trail: AuditTrail,
        clock: Clock,
        max_keys: int,
        settings: AccountSettings,
        deployment_rate: tuple[float, int] | None = None,
    ) -> None:
        """``deployment_rate``: (per second, burst) of a key without a rate of its own, None
        when no rate is limited; an edit that raises a key's rate above it widens the key."""
        self._store = store
        self._trail = trail
        self._clock = clock
        self._max_keys = max_keys
        self._settings = settings
        self._deployment_rate = deployment_rate

    async def create_key(
        self,
        user_id: str,
        name: str,
        permissions: list[str],
        expires_days: int | None = None,
        origin: audit.Origin = audit.NO_ORIGIN,
        folder_ids: tuple[str, ...] | None = None,
        uploader: str | None = None,
    ) -> CreatedKey:
        """Create a key living ``expires_days`` (None: the account's
        ``default_key_expires_days``, else 90), bound to ``folder_ids`` (None: the whole
        account; 404 ``folder_not_found`` naming the field when one is not a live folder of
        the account), upload-only when made for an ``uploader`` (whose kind it keeps);
        recorded as ``key.created`` (its name, permissions and expiry, its folders when bound,
        and the kind of ``uploader`` it was made for) in the step that confirms it."""
        _check_folders(folder_ids)
        if expires_days is None:
            expires_days = await self._settings.default_key_expires_days(user_id)
        secret = credentials.generate_api_key()
        now = self._clock.now_ms()
        record = KeyRecord(
            id=credentials.new_id("key"),
            name=name,
            key_prefix=credentials.display_prefix(secret),
            permissions=to_mask(permissions),
            created_at=now,
            expires_at=now + expires_days * DAY_MS,
            last_used_at=None,
            folder_ids=folder_ids,
            uploader=uploader,
        )
        limit = self._max_keys
        created: dict[str, Any] = {
            "name": name,
            "permissions": list(permissions),
            "expires_at": record.expires_at,
        }
        if folder_ids is not None:
            created["folder_ids"] = list(folder_ids)
        if uploader is not None:
            created["uploader"] = uploader
        events = self._trail.batch(
            now,
            audit.event(
                audit.KEY_CREATED,
                now,
                origin,
                target=audit.key_target(record.id, name, record.key_prefix),
                changes=created,
            ),
        )
        try:
            added = await self._store.add(
                user_id=user_id,
                key_id=record.id,
                secret_digest=credentials.digest(secret),
                name=record.name,
                key_prefix=record.key_prefix,
                permissions=record.permissions,
                created_at=record.created_at,
                expires_at=record.expires_at,
                max_active=limit,
                events=events,
                folder_ids=folder_ids,
                uploader=uploader,
            )
        except AccountGone:
            # The session was checked, then its user deleted before the key was made.
            raise ApiError(Code.ACCOUNT_GONE) from None
        except FolderNotLive:
            raise _no_folder() from None
        if not added:
            raise ApiError(
                Code.KEY_LIMIT_REACHED,
                f"This account already has the maximum of {limit} active API keys. "
                "Revoke one before creating another.",
                details={"limit": limit},
            )
        return CreatedKey(record, secret)

    async def actor(self, user_id: str, key_id: str) -> dict[str, Any]:
        """The key as the audit trail names who acted with it: its id, and its name and prefix
        as they are now (None when the key was revoked meanwhile)."""
        described = await self._store.describe(user_id, key_id)
        name, prefix = described if described is not None else (None, None)
        return audit.api_key_actor(key_id, name, prefix)

    async def list_keys(self, user_id: str) -> list[KeyRecord]:
        return await self._store.list(user_id, self._clock.now_ms())

    async def edit_key(
        self,
        user_id: str,
        key_id: str,
        edit: KeyEdit,
        origin: audit.Origin = audit.NO_ORIGIN,
        require_recent: Callable[[], None] | None = None,
    ) -> KeyRecord:
        """Change one of the user's active keys; 404 for an unknown id or another account's
        key. In force from the next request on every worker (``ApiKeyStore.edit``).
        Recorded in the step that makes it: ``key.edited`` with the changed fields and their
        new values (``folder_ids`` included), ``key.disabled`` / ``key.enabled`` when that
        changed; nothing when nothing changed. A folder it binds the key to that is not a live
        folder of the account is 404 ``folder_not_found`` naming ``folder_ids``. An edit that
        widens the key (``key_widening``) calls ``require_recent`` first, against the key as it
        is when written, which raises to refuse it (the step-up)."""
        if not credentials.is_valid_id(key_id, "key"):
            raise ApiError(Code.KEY_NOT_FOUND)
        _check_folders(edit.folder_ids)
        now = self._clock.now_ms()
        changes = KeyChanges(
            name=edit.name,
            permissions=to_mask(edit.permissions) if edit.permissions is not None else None,
            expires_at=now + edit.expires_days * DAY_MS if edit.expires_days is not None else None,
            enabled=edit.enabled,
            allowed_ips=edit.allowed_ips,
            sets_rate_limit=edit.sets_rate_limit,
            rate_limit=edit.rate_limit,
            sets_folder_ids=edit.sets_folder_ids,
            folder_ids=edit.folder_ids,
        )

        def events_for(before: KeyRecord, after: KeyRecord) -> EventBatch | None:
            if require_recent is not None and key_widening.widens(
                before, after, self._deployment_rate
            ):
                require_recent()  # raises before anything is written
            # Named as it was until this edit: a new name is among the changes.
            target = audit.key_target(key_id, before.name, before.key_prefix)
            events = []
            edited = _edited_fields(before, after)
            if edited:
                events.append(
                    audit.event(audit.KEY_EDITED, now, origin, target=target, changes=edited)
                )
            if after.enabled != before.enabled:
                kind = audit.KEY_ENABLED if after.enabled else audit.KEY_DISABLED
                events.append(audit.event(kind, now, origin, target=target))
            return self._trail.batch(now, *events) if events else None

        try:
            record = await self._store.edit(user_id, key_id, now, changes, events_for)
        except AccountGone:
            raise ApiError(Code.ACCOUNT_GONE) from None
        except FolderNotLive:
            raise _no_folder() from None
        except KeyChanged:
            raise ApiError(Code.KEY_BUSY) from None
        if record is None:
            raise ApiError(Code.KEY_NOT_FOUND)
        return record

    async def upgrade_uploader_keys(self, user_ids: list[str]) -> None:
        """``mark_earlier_uploader_keys`` for every account, once per deployment: a start-up
        step, noted as done only when every account was visited (so one cut short runs again
        at the next start)."""
        if await self._store.uploader_keys_marked():
            return
        for user_id in user_ids:
            await self.mark_earlier_uploader_keys(user_id)
        await self._store.note_uploader_keys_marked()

    async def mark_earlier_uploader_keys(self, user_id: str) -> int:
        """Make upload-only the account's live keys that an uploader configuration made before
        keys carried that mark, found by their ``key.created`` event (``changes.uploader``);
        each change recorded as ``key.edited`` with ``changes.uploader``. How many live keys
        it found. A key whose event has left the trail is not found (``docs/operating.md``)."""
        now = self._clock.now_ms()
        marked = 0
        for event in await self._trail.matching(user_id, audit.KEY_CREATED, '"uploader"'):
            key_id = (event.get("target") or {}).get("key_id")
            kind = (event.get("changes") or {}).get("uploader")
            if not isinstance(key_id, str) or not isinstance(kind, str):
                continue

            def events_for(before: KeyRecord, after: KeyRecord) -> EventBatch:
                target = audit.key_target(before.id, before.name, before.key_prefix)
                changes = _edited_fields(before, after)
                return self._trail.batch(
                    now,
                    audit.event(
                        audit.KEY_EDITED, now, audit.NO_ORIGIN, target=target, changes=changes
                    ),
                )

            try:
                edited = await self._store.edit(
                    user_id, key_id, now, KeyChanges(uploader=kind), events_for
                )
            except (AccountGone, KeyChanged):
                continue
            marked += edited is not None
        return marked

    async def forget_folders(self, user_id: str, folder_ids: list[str]) -> None:
        """Take these deleted folders out of the folders of every key of the account bound to
        them (in force from the next request, like any change of a key); each such key's
        change recorded as ``key.edited`` with its ``folder_ids`` as they now are. A key left
        bound to none is refused everything rather than widened (``service.auth.reach``)."""
        now = self._clock.now_ms()

        def events_for(key_id: str, before: KeyRecord, after: KeyRecord) -> EventBatch | None:
            edited = _edited_fields(before, after)
            return self._trail.batch(
                now,
                audit.event(
                    audit.KEY_EDITED,
                    now,
                    audit.NO_ORIGIN,
                    target={"key_id": key_id},
                    changes=edited,
                ),
            )

        await self._store.unbind(user_id, set(folder_ids), now, events_for)

    async def roll_key(
        self,
        user_id: str,
        key_id: str,
        grace_seconds: int,
        origin: audit.Origin = audit.NO_ORIGIN,
    ) -> CreatedKey:
        """Give one of the user's active keys a new secret, returned here once; the current
        secret keeps working for ``grace_seconds`` (0: refused from now on), and a secret still
        in the grace of an earlier roll is refused from now on. Id, name, permissions, expiry
        and settings stay. 404 for an unknown id or another account's key. Recorded as
        ``key.rolled`` (the grace, and when the previous secret stops working) in the step
        that makes it."""
        if not credentials.is_valid_id(key_id, "key"):
            raise ApiError(Code.KEY_NOT_FOUND)
        if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
            raise ApiError(
                Code.VALIDATION_FAILED,
                details={"grace_seconds": f"must be a whole number from 0 to {MAX_GRACE_SECONDS}"},
            )
        # Every secret of a key has its entry in one Redis Cluster slot, that of the bucket its
        # secrets share, so that one script reads either and takes from that bucket.
        slot = await self._store.new_secret_slot(user_id, key_id)
        if slot is None:
            raise ApiError(Code.KEY_NOT_FOUND)
        entry_slot = self._store.entry_slot
        secret = await asyncio.to_thread(
            credentials.generate_api_key_where,
            lambda candidate: entry_slot(credentials.digest(candidate)) == slot,
        )
        now = self._clock.now_ms()

        def events_for(before: KeyRecord, after: KeyRecord) -> EventBatch:
            # Named by the prefix it had until this roll; the new one is among the changes.
            return self._trail.batch(
                now,
                audit.event(
                    audit.KEY_ROLLED,
                    now,
                    origin,
                    target=audit.key_target(key_id, before.name, before.key_prefix),
                    changes={
                        "grace_seconds": grace_seconds,
                        "previous_secret_expires_at": after.previous_secret_expires_at,
                        "key_prefix": after.key_prefix,
                    },
                ),
            )

        try:
            record = await self._store.roll(
                user_id,
                key_id,
                secret_digest=credentials.digest(secret),
                key_prefix=credentials.display_prefix(secret),
                previous_until=now + grace_seconds * 1000,
                now=now,
                events_for=events_for,
            )
        except AccountGone:
            raise ApiError(Code.ACCOUNT_GONE) from None
        except KeyChanged:
            raise ApiError(Code.KEY_BUSY) from None
        if record is None:
            raise ApiError(Code.KEY_NOT_FOUND)
        return CreatedKey(record, secret)

    async def revoke_key(
        self,
        user_id: str,
        key_id: str,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: dict[str, Any] | None = None,
    ) -> int:
        """Revoke one of the user's keys; 404 for an unknown id or another account's key.
        Recorded as ``key.revoked`` (by ``actor`` when given: the command line) once the key is
        found active, before it is removed."""
        now = self._clock.now_ms()

        def events_for(record: KeyRecord) -> EventBatch:
            target = audit.key_target(key_id, record.name, record.key_prefix)
            return self._trail.batch(
                now, audit.event(audit.KEY_REVOKED, now, origin, actor=actor, target=target)
            )

        try:
            revoked = credentials.is_valid_id(key_id, "key") and await self._store.revoke(
                user_id, key_id, now, events_for
            )
        except KeyChanged:
            raise ApiError(Code.KEY_BUSY) from None
        if not revoked:
            raise ApiError(Code.KEY_NOT_FOUND)
        return now
