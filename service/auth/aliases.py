"""Vanity aliases as their owner sees them: creating one of a file or folder (with the account's
defaults for what the request leaves out), reading, listing newest first, changing (slug,
expiry, view limit, password, enabled) and deleting them, within the bound of aliases per
account; deleting those of removed files and folders (``Removals.purge``); and bringing the
entries in line with the account's ``public_aliases_enabled``.

Every operation receives the caller's ``Principal`` and asks ``service.auth.reach`` for the
target it makes an alias of, and whether it reaches an alias (its target); another account's
alias, and one being deleted, answer exactly like an unknown id: 404 ``alias_not_found``.

Each change is recorded in the account's audit trail (``alias.created``, ``alias.changed``,
``alias.deleted``) in the account's script of the step that admits it: how the steps of a
change over the alias's entry and its account's index are ordered, and why, is
``service.store.aliases``. A password is hashed with bcrypt, off the event loop, and never
kept, logged or answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, replace
from typing import Any

from service.auth.account_settings import AccountSettings
from service.auth.audit import AuditTrail
from service.auth.passwords import PasswordHasher
from service.auth.reach import Reach
from service.clock import Clock
from service.domain import audit_events as audit
from service.domain.aliases import (
    PENDING_MS,
    Listed,
    generate_slug,
    index_member,
    new_alias_id,
    slug_key,
)
from service.domain.audit_events import EventBatch
from service.domain.cursors import encode_alias_cursor
from service.domain.principal import Principal
from service.domain.records import UNSET, AliasPage, AliasRecord, Unset
from service.errors import ApiError, Code
from service.store.protocols import AliasStore

log = logging.getLogger("service.auth.aliases")

Actor = dict[str, Any] | None
# A change overtaken this many times in a row by others of the same alias gives up.
ATTEMPTS = 8
# Slugs the service picks, tried in turn should one be taken.
SLUG_DRAWS = 3


@dataclass(frozen=True, slots=True)
class AliasChanges:
    """What ``PATCH /aliases/{id}`` sets; ``UNSET`` (or None for ``slug``/``enabled``) leaves a
    field as it is. ``expires_in_seconds`` counts from the change; None there and in
    ``max_views`` and ``password`` removes the bound or the password."""

    slug: str | None = None
    expires_in_seconds: int | Unset | None = UNSET
    max_views: int | Unset | None = UNSET
    password: str | Unset | None = UNSET
    enabled: bool | None = None


def _target_missing(kind: str, field: str) -> ApiError:
    code = Code.FOLDER_NOT_FOUND if kind == "folder" else Code.FILE_NOT_FOUND
    return ApiError(code, details={"field": field})


class Aliases:
    def __init__(
        self,
        store: AliasStore,
        reach: Reach,
        settings: AccountSettings,
        passwords: PasswordHasher,
        clock: Clock,
        trail: AuditTrail,
        max_aliases: int,
    ) -> None:
        self._store = store
        self._entries = store.entries
        self._reach = reach
        self._settings = settings
        self._passwords = passwords
        self._clock = clock
        self._trail = trail
        self.max_aliases = max_aliases

    def _limit_reached(self) -> ApiError:
        return ApiError(
            Code.ALIAS_LIMIT_REACHED,
            f"This account holds the maximum of {self.max_aliases} aliases. Delete one before "
            "creating another.",
            details={"max_aliases": self.max_aliases},
        )

    def _event(
        self,
        kind: str,
        at: int,
        record: AliasRecord,
        origin: audit.Origin,
        actor: Actor,
        changes: dict[str, Any] | None = None,
    ) -> EventBatch:
        return self._trail.batch(
            at,
            audit.event(
                kind,
                at,
                origin,
                actor=actor,
                target=audit.alias_target(record.id, record.slug, record.target_id),
                changes=changes or None,
            ),
        )

    async def check_room(self, principal: Principal) -> None:
        """409 ``alias_limit_reached`` when the account holds its maximum of aliases: checked
        before an upload that asks for one (and again, atomically, when it is made)."""
        if await self._store.count(principal.user_id) >= self.max_aliases:
            raise self._limit_reached()

    # -- creating ------------------------------------------------------------------------------

    async def create(
        self,
        principal: Principal,
        kind: str,
        target_id: str,
        field: str,
        *,
        slug: str | None = None,
        expires_in_seconds: int | Unset | None = UNSET,
        max_views: int | Unset | None = UNSET,
        password: str | None = None,
        enabled: bool = True,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> AliasRecord:
        """A new alias of the principal's file or folder (``kind``; ``target_id`` from the
        request's ``field``), under ``slug`` (checked by the caller) or one the service picks.
        What is left ``UNSET`` takes the account's default. 409 ``alias_taken`` when the slug
        is an alias's, ignoring case; recorded as ``alias.created``."""
        user_id = principal.user_id
        await self._reach.alias_target(principal, kind, target_id, field)
        defaults = await self._settings.read(user_id)
        expires: int | None = (
            defaults["default_alias_expires_in_seconds"]
            if isinstance(expires_in_seconds, Unset)
            else expires_in_seconds
        )
        views: int | None = (
            defaults["default_alias_max_views"] if isinstance(max_views, Unset) else max_views
        )
        password_hash = None if password is None else await self._passwords.hash(password)
        for _ in range(1 if slug is not None else SLUG_DRAWS):
            now = self._clock.now_ms()
            record = AliasRecord(
                id=new_alias_id(now),
                slug=slug or generate_slug(),
                target_id=target_id,
                created_at=now,
                expires_at=None if expires is None else now + expires * 1000,
                max_views=views,
                password_protected=password_hash is not None,
                enabled=enabled,
            )
            made = await self._create(user_id, record, password_hash, kind, field, origin, actor)
            if made:
                return record
        raise ApiError(Code.ALIAS_TAKEN)

    async def _create(
        self,
        user_id: str,
        record: AliasRecord,
        password_hash: str | None,
        kind: str,
        field: str,
        origin: audit.Origin,
        actor: Actor,
    ) -> bool:
        """The steps of ``service.store.aliases``'s creation; False when the slug is taken."""
        now = record.created_at
        changes = {
            "expires_at": record.expires_at,
            "max_views": record.max_views,
            "password_protected": record.password_protected,
            "enabled": record.enabled,
        }
        events = self._event(audit.ALIAS_CREATED, now, record, origin, actor, changes)
        value = index_member(record.target_id, record.slug)
        outcome, off = await self._store.add(user_id, record, self.max_aliases, now, events)
        if outcome == -1:
            raise ApiError(Code.ACCOUNT_GONE)
        if outcome == -2:
            raise self._limit_reached()
        if outcome == -3:
            raise _target_missing(kind, field)
        try:
            claimed = await self._store.claim(user_id, record, password_hash, off)
        except BaseException:
            # The entry may have been written before the failure: neither it nor its member
            # outlives a creation that did not answer.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._undo(user_id, record, value, events))
            raise
        if not claimed:
            await self._store.remove_members(user_id, [(value, now)], retract=events)
            return False
        there, now_off = await self._store.confirm(user_id, value, now)
        if there != 1:  # deleted with its target or its account meanwhile
            await self._entries.delete(record.slug, user_id, record.id)
            raise ApiError(Code.ACCOUNT_GONE) if there == -1 else _target_missing(kind, field)
        if now_off != off:
            await self._entries.change(record.slug, record.id, {"k": "1" if now_off else None})
        return True

    async def _undo(
        self, user_id: str, record: AliasRecord, value: str, events: EventBatch
    ) -> None:
        await self._entries.delete(record.slug, user_id, record.id)
        await self._store.remove_members(user_id, [(value, record.created_at)], retract=events)

    # -- reading -------------------------------------------------------------------------------

    async def _find(self, principal: Principal, alias_id: str) -> Listed:
        listed = await self._store.find(principal.user_id, alias_id)
        if listed is None or listed.entry is None:
            raise ApiError(Code.ALIAS_NOT_FOUND)
        await self._reach.alias(principal, listed.entry.record)
        return listed

    async def get(self, principal: Principal, alias_id: str) -> AliasRecord:
        """One of the principal's aliases; 404 ``alias_not_found`` for any other id."""
        listed = await self._find(principal, alias_id)
        assert listed.entry is not None
        return listed.entry.record

    async def page(
        self,
        principal: Principal,
        limit: int,
        after: tuple[int, str] | None,
        target_id: str | None = None,
    ) -> AliasPage:
        """A page of the account's aliases the principal reaches, newest first; with
        ``target_id``, only those of that file or folder (none for an id the account does not
        hold). A member of the index met without its entry, and not written by a change under
        way, is what a change cut short left: it is taken out."""
        user_id = principal.user_id
        if target_id is None:
            listed, last = await self._store.page(user_id, limit, after)
        else:
            listed, last = await self._store.page_of_target(user_id, target_id, limit, after)
        records: list[AliasRecord] = []
        seen: set[str] = set()
        stray: list[Listed] = []
        for item in listed:
            entry = item.entry
            if entry is None or entry.user_id != user_id:
                stray.append(item)
            elif entry.record.id not in seen:  # a slug being changed: listed under both
                seen.add(entry.record.id)
                records.append(entry.record)
        if stray:
            await self._tidy(user_id, stray)
        records = await self._reach.aliases(principal, records)
        return AliasPage(records, None if last is None else encode_alias_cursor(*last))

    async def _tidy(self, user_id: str, stray: list[Listed]) -> None:
        now = self._clock.now_ms()
        since = await self._store.pending_since(user_id, [item.value for item in stray])
        left = [
            (item.value, item.score)
            for item, noted in zip(stray, since, strict=True)
            if noted is None or now - noted > PENDING_MS
        ]
        if left:
            await self._store.remove_members(user_id, left)

    # -- changing ------------------------------------------------------------------------------

    async def change(
        self,
        principal: Principal,
        alias_id: str,
        changes: AliasChanges,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> AliasRecord:
        """Change one of the principal's aliases; the alias as it now is. A new slug must be
        free (409 ``alias_taken``); ``expires_in_seconds`` counts from now. Recorded as one
        ``alias.changed`` with each field that changed (``password_changed`` for a new
        password, never the password), nothing when nothing changed."""
        password_hash: str | Unset | None = UNSET
        if isinstance(changes.password, str):
            password_hash = await self._passwords.hash(changes.password)
        elif changes.password is None:
            password_hash = None
        for _ in range(ATTEMPTS):
            listed = await self._find(principal, alias_id)
            assert listed.entry is not None
            before = listed.entry.record
            now = self._clock.now_ms()
            after, fields, changed = self._changed(before, changes, password_hash, now)
            if not changed:
                return before
            events = self._event(audit.ALIAS_CHANGED, now, before, origin, actor, changed)
            if after.slug == before.slug:
                done = await self._change_fields(principal, listed, fields, now, events)
            else:
                done = await self._change_slug(principal, listed, after, fields, now, events)
            if done:
                return after
        raise ApiError(Code.ALIAS_BUSY)

    @staticmethod
    def _changed(
        before: AliasRecord,
        changes: AliasChanges,
        password_hash: str | Unset | None,
        now: int,
    ) -> tuple[AliasRecord, dict[str, str | None], dict[str, Any]]:
        """The alias after ``changes``, the entry's fields to set (None: remove), and what the
        audit event says changed."""
        after = before
        fields: dict[str, str | None] = {}
        changed: dict[str, Any] = {}
        if changes.slug is not None and changes.slug != before.slug:
            after = replace(after, slug=changes.slug)
            changed["slug"] = changes.slug
        if not isinstance(changes.expires_in_seconds, Unset):
            seconds = changes.expires_in_seconds
            expires_at = None if seconds is None else now + seconds * 1000
            after = replace(after, expires_at=expires_at)
            fields["e"] = None if expires_at is None else str(expires_at)
            if expires_at != before.expires_at:
                changed["expires_at"] = expires_at
        if not isinstance(changes.max_views, Unset) and changes.max_views != before.max_views:
            after = replace(after, max_views=changes.max_views)
            fields["m"] = None if changes.max_views is None else str(changes.max_views)
            changed["max_views"] = changes.max_views
        if not isinstance(password_hash, Unset):
            protected = password_hash is not None
            if protected or before.password_protected:
                fields["p"] = password_hash
                after = replace(after, password_protected=protected)
                if protected != before.password_protected:
                    changed["password_protected"] = protected
                else:
                    changed["password_changed"] = True
        if changes.enabled is not None and changes.enabled != before.enabled:
            after = replace(after, enabled=changes.enabled)
            fields["x"] = None if changes.enabled else "1"
            if changes.enabled:
                fields["z"] = None  # a slug change cut short had left it so
            changed["enabled"] = changes.enabled
        return after, fields, changed

    async def _change_fields(
        self,
        principal: Principal,
        listed: Listed,
        fields: dict[str, str | None],
        now: int,
        events: EventBatch,
    ) -> bool:
        """A change that keeps the slug: the event where the member is, then the entry."""
        assert listed.entry is not None
        record = listed.entry.record
        user_id = principal.user_id
        if not await self._store.admit(user_id, listed.value, listed.score, None, now, events):
            return False  # deleted or changed meanwhile: read again
        if not await self._entries.change(record.slug, record.id, fields):
            await self._store.remove_members(user_id, [], retract=events)
            return False
        return True

    async def _change_slug(
        self,
        principal: Principal,
        listed: Listed,
        after: AliasRecord,
        fields: dict[str, str | None],
        now: int,
        events: EventBatch,
    ) -> bool:
        """A change of slug (see ``service.store.aliases``): the new member beside the old,
        with the event; the entry stopped and copied under the new slug (with the other
        changes), if free; the old entry and member removed. A slug that differs only in case
        keeps its entry."""
        assert listed.entry is not None
        before = listed.entry.record
        user_id = principal.user_id
        new_value = index_member(after.target_id, after.slug)
        if not await self._store.admit(user_id, listed.value, listed.score, new_value, now, events):
            return False
        if slug_key(after.slug) == slug_key(before.slug):
            if fields:
                await self._entries.change(before.slug, before.id, fields)
        else:
            stored = await self._entries.freeze(before.slug, before.id)
            if stored is None:  # changed meanwhile: read it again
                await self._store.remove_members(
                    user_id, [(new_value, listed.score)], retract=events
                )
                return False
            stored.pop("z", None)
            for field, value in fields.items():
                if value is None:
                    stored.pop(field, None)
                else:
                    stored[field] = value
            if not await self._entries.claim(after.slug, stored):
                await self._entries.change(before.slug, before.id, {"z": None})
                await self._store.remove_members(
                    user_id, [(new_value, listed.score)], retract=events
                )
                raise ApiError(Code.ALIAS_TAKEN)
            await self._entries.delete(before.slug, user_id, before.id)
        there, off = await self._store.confirm(user_id, new_value, listed.score)
        await self._store.remove_members(user_id, [(listed.value, listed.score)])
        if there != 1:  # deleted with its target or its account meanwhile
            await self._entries.delete(after.slug, user_id, after.id)
            raise ApiError(Code.ALIAS_NOT_FOUND)
        await self._entries.change(after.slug, after.id, {"k": "1" if off else None})
        return True

    async def delete(
        self,
        principal: Principal,
        alias_id: str,
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> int:
        """Delete one of the principal's aliases (its entry, then its member with the event
        ``alias.deleted``); when it was deleted."""
        listed = await self._find(principal, alias_id)
        assert listed.entry is not None
        record = listed.entry.record
        deleted_at = self._clock.now_ms()
        gone = await self._entries.delete(record.slug, principal.user_id, record.id)
        events = self._event(audit.ALIAS_DELETED, deleted_at, record, origin, actor)
        await self._store.remove_members(
            principal.user_id, [(listed.value, listed.score)], events if gone else None
        )
        if not gone:  # deleted meanwhile
            raise ApiError(Code.ALIAS_NOT_FOUND)
        return deleted_at

    # -- what other changes bring about ----------------------------------------------------------

    async def remove_targets(self, user_id: str, target_ids: list[str]) -> None:
        """Delete the aliases of these removed files and folders: their entries, then their
        members with an ``alias.deleted`` each (``reason``: ``target_deleted``). Raises when
        the store fails, so that the removal is tried again (``Removals``)."""
        listed = await self._store.members_of(user_id, target_ids)
        if not listed:
            return
        now = self._clock.now_ms()
        events = []
        for item in listed:
            target_id, _, slug = item.value.partition(":")
            entry = item.entry
            mine = entry is not None and entry.user_id == user_id
            # Whichever alias of the account's holds the slug, if its target is this one.
            await self._entries.delete(slug, user_id, target_id=target_id)
            events.append(
                audit.event(
                    audit.ALIAS_DELETED,
                    now,
                    audit.NO_ORIGIN,
                    target=audit.alias_target(
                        entry.record.id if mine and entry is not None else None, slug, target_id
                    ),
                    changes={"reason": "target_deleted"},
                )
            )
        batch = self._trail.batch(now, *events)
        await self._store.remove_members(
            user_id, [(item.value, item.score) for item in listed], batch
        )

    async def expect_switch(self, user_id: str) -> None:
        """Before the account's ``public_aliases_enabled`` changes: note that its entries may
        not carry it, so that a walk cut short is finished at the next start."""
        await self._store.expect_switch(user_id)

    async def switch(self, user_id: str) -> None:
        """Bring every entry of the account's aliases in line with its
        ``public_aliases_enabled``, walking again while the setting changed during a walk."""
        while True:
            off = await self._store.switch_setting(user_id)
            await self._store.switch_all(user_id, off)
            if await self._store.switch_setting(user_id) == off:
                break
        await self._store.switched(user_id)

    async def switch_if_pending(self, user_id: str) -> None:
        """``switch``, when a change of the setting may not have reached every entry."""
        if await self._store.switch_pending(user_id):
            await self.switch(user_id)

    async def finish_all(self) -> None:
        """Finish the walks cut short (at start-up). A failure is logged and left for the next
        start."""
        try:
            accounts = await self._store.switching()
        except Exception as error:
            log.warning("could not look for alias switches to finish: %s", type(error).__name__)
            return
        for user_id in accounts:
            try:
                await self.switch(user_id)
            except Exception as error:
                log.warning("could not finish an alias switch: %s", type(error).__name__)
