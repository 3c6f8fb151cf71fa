"""An account's platform settings as policy sees them: read with their defaults, changed all or
nothing (an unknown name, a wrong type or a value out of bounds refuses the whole change), each
change recorded as ``settings.changed`` with what it changed, in the step that makes it; and
the values other policies act on (``default_key_expires_days`` for ``POST /keys``,
``default_folder_id`` for uploads; the alias settings for aliases).

A change of ``public_aliases_enabled`` is carried to every alias of the account before the
answer (``service.auth.aliases``: the public path reads it from each alias's entry).
"""

from __future__ import annotations

from typing import Any, Protocol

from service.auth.audit import AuditTrail
from service.clock import Clock
from service.domain import account_settings as outcomes
from service.domain import account_settings as table
from service.domain import audit_events as audit
from service.errors import ApiError, Code, CorruptRecord
from service.store.protocols import AccountSettingsStore

# Changes overtaken this many times in a row by others of the same account give up.
ATTEMPTS = 8
Actor = dict[str, Any] | None


def _values(stored: dict[str, str]) -> dict[str, Any]:
    try:
        return table.decode(stored)
    except ValueError:
        raise CorruptRecord() from None


class Switch(Protocol):
    """What follows a change of ``public_aliases_enabled`` (``service.auth.aliases``): noted
    before it is made, then carried to every alias of the account."""

    async def expect_switch(self, user_id: str) -> None: ...

    async def switch(self, user_id: str) -> None: ...

    async def switch_if_pending(self, user_id: str) -> None: ...


class AccountSettings:
    def __init__(self, store: AccountSettingsStore, clock: Clock, trail: AuditTrail) -> None:
        self._store = store
        self._clock = clock
        self._trail = trail
        self.aliases: Switch | None = None  # set once the aliases' policy is made

    async def read(self, user_id: str) -> dict[str, Any]:
        """Every setting with its value (its default when never changed)."""
        return _values(await self._store.read(user_id))

    async def change(
        self,
        user_id: str,
        changes: dict[str, Any],
        origin: audit.Origin = audit.NO_ORIGIN,
        actor: Actor = None,
    ) -> dict[str, Any]:
        """Set the named settings; every setting's value after. 400 ``validation_failed``
        naming each setting that cannot take its value (a default folder that is not one of
        the account's live folders included), changing nothing. Recorded as one
        ``settings.changed`` with the new value of each setting that changed; a change that
        changes nothing records nothing."""
        problems = table.problems_of(changes)
        if problems:
            raise ApiError(Code.VALIDATION_FAILED, details=problems)
        for _ in range(ATTEMPTS):
            stored = await self._store.read(user_id)
            before = _values(stored)
            changed = {name: value for name, value in changes.items() if before[name] != value}
            if not changed:
                if self.aliases is not None and "public_aliases_enabled" in changes:
                    # The same value again: a change whose answer failed is finished now.
                    await self.aliases.switch_if_pending(user_id)
                return before
            now = self._clock.now_ms()
            events = self._trail.batch(
                now,
                audit.event(
                    audit.SETTINGS_CHANGED,
                    now,
                    origin,
                    actor=actor,
                    target=audit.settings_target(),
                    changes=changed,
                ),
            )
            encoded = {name: table.encode(name, value) for name, value in changed.items()}
            switching = self.aliases if "public_aliases_enabled" in changed else None
            if switching is not None:
                await switching.expect_switch(user_id)
            outcome = await self._store.change(user_id, stored, encoded, table.NAMES, events)
            if outcome == outcomes.DONE:
                if switching is not None:
                    await switching.switch(user_id)
                return {**before, **changed}
            if outcome == outcomes.ACCOUNT_GONE:
                raise ApiError(Code.ACCOUNT_GONE)
            if outcome == outcomes.FOLDER_GONE:
                rule = table.BY_NAME["default_folder_id"].rule
                raise ApiError(Code.VALIDATION_FAILED, details={"default_folder_id": rule})
        raise ApiError(Code.SETTINGS_BUSY)

    async def default_folder(self, user_id: str) -> str | None:
        """Where an upload without a folder goes: the default folder, None for the top."""
        folder_id: str | None = (await self.read(user_id))["default_folder_id"]
        return folder_id

    async def default_key_expires_days(self, user_id: str) -> int:
        """A new key's lifetime when ``POST /keys`` names none."""
        days = (await self.read(user_id))["default_key_expires_days"]
        return table.KEY_EXPIRES_DAYS_DEFAULT if days is None else days
