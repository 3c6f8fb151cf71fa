"""What the policy asks of the stores of accounts, credentials and their records: users,
sessions, keys and the per-request lookup, counters, the audit trail, second factors, account
settings and backups."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from service.domain.audit_events import EventBatch, EventPage
from service.domain.backup import Record, Snapshot
from service.domain.factors import LoginStep, MfaState, Passkey
from service.domain.key_usage import KeyUsageRecord, KeyUseCount
from service.domain.records import (
    ApiKeyEntry,
    FileRecord,
    KeyChanges,
    KeyRecord,
    RateLimit,
    SessionEntry,
    SessionRecord,
    SessionStanding,
    SignInVia,
    UserRecord,
)


class UserStore(Protocol):
    async def add(self, user_id: str, email: str, password_hash: str, now: int) -> bool: ...

    async def set_password(
        self, user_id: str, password_hash: str, events: EventBatch | None = None
    ) -> bool: ...

    async def find_id(self, email: str) -> str | None: ...

    async def get(self, user_id: str) -> UserRecord | None: ...

    async def list(self) -> list[UserRecord]: ...

    async def delete(self, user_id: str, email: str) -> None: ...


class SessionStore(Protocol):
    async def add(
        self,
        token_digest: str,
        user_id: str,
        created_at: int,
        idle_deadline: int,
        absolute_deadline: int,
        public_id: str | None = None,
        ip: str | None = None,
        user_agent: str | None = None,
        password_hash: str | None = None,
        events: EventBatch | None = None,
        factors: int | None = None,
        aal: int = 1,
        authenticated_at: int | None = None,
        via: SignInVia | None = None,
    ) -> None: ...

    async def renew(self, token_digest: str, idle_deadline: int, expire_at: int) -> None: ...

    async def identity(self, token_digest: str) -> tuple[str, str | None] | None: ...

    async def standing(self, token_digest: str) -> SessionStanding | None: ...

    async def remove(self, token_digest: str, user_id: str) -> bool: ...

    async def begin_replacement(self, old_digest: str, new_digest: str) -> bool: ...

    async def finish_replacement(self, user_id: str, old_digest: str, new_digest: str) -> bool: ...

    async def list(self, user_id: str, now: int) -> list[SessionRecord]: ...

    async def abandon_replacement(self, user_id: str, old_digest: str) -> None: ...

    async def remove_many(self, user_id: str, token_digests: builtins.list[str]) -> int: ...


class ApiKeyStore(Protocol):
    async def uploader_keys_marked(self) -> bool: ...

    async def note_uploader_keys_marked(self) -> None: ...

    async def add(
        self,
        *,
        user_id: str,
        key_id: str,
        secret_digest: str,
        name: str,
        key_prefix: str,
        permissions: int,
        created_at: int,
        expires_at: int,
        max_active: int,
        events: EventBatch | None = None,
        folder_ids: tuple[str, ...] | None = None,
        uploader: str | None = None,
    ) -> bool: ...

    async def list(self, user_id: str, now: int) -> list[KeyRecord]: ...

    async def edit(
        self,
        user_id: str,
        key_id: str,
        now: int,
        changes: KeyChanges,
        events_for: Callable[[KeyRecord, KeyRecord], EventBatch | None],
    ) -> KeyRecord | None: ...

    async def unbind(
        self,
        user_id: str,
        folder_ids: set[str],
        now: int,
        events_for: Callable[[str, KeyRecord, KeyRecord], EventBatch | None],
    ) -> None: ...

    def entry_slot(self, secret_digest: str) -> int: ...

    async def new_secret_slot(self, user_id: str, key_id: str) -> int | None: ...

    async def rewrite_entries(self, user_id: str, key_id: str, now: int) -> None: ...

    async def roll(
        self,
        user_id: str,
        key_id: str,
        *,
        secret_digest: str,
        key_prefix: str,
        previous_until: int,
        now: int,
        events_for: Callable[[KeyRecord, KeyRecord], EventBatch | None],
    ) -> KeyRecord | None: ...

    async def revoke(
        self,
        user_id: str,
        key_id: str,
        now: int,
        events_for: Callable[[KeyRecord], EventBatch] | None = None,
        reason: str = ...,
    ) -> bool: ...

    async def find_live(
        self, secret_digests: builtins.list[str], now: int
    ) -> builtins.list[tuple[str, str]]: ...

    async def describe(self, user_id: str, key_id: str) -> tuple[str, str] | None: ...

    async def touch(self, user_id: str, key_id: str, used_at: int) -> None: ...


class KeyUsageStore(Protocol):
    async def add(self, counts: Mapping[str, Iterable[KeyUseCount]], now: int) -> None: ...

    async def read(
        self, user_id: str, key_id: str, days: builtins.list[str]
    ) -> KeyUsageRecord | None: ...

    async def forget(self, user_id: str, key_ids: Iterable[str], now: int) -> None: ...


class CredentialLookup(Protocol):
    @property
    def pipelined(self) -> bool: ...

    @property
    def rate_limit(self) -> RateLimit | None: ...

    async def find_api_key(
        self,
        secret_digest: str,
        now_ms: int = 0,
        take: int = 1,
        give_back: int = 0,
        give_back_interval_us: int = 0,
        client: bytes = b"",
    ) -> ApiKeyEntry | None: ...

    async def find_session(
        self, token_digest: str, now_ms: int = 0, take: int = 1, give_back: int = 0
    ) -> SessionEntry | None: ...


class CounterStore(Protocol):
    def login_failures_by_email(self, email_digest: str) -> str: ...

    def login_failures_by_address(self, address: str) -> str: ...

    def leak_reports_by_address(self, address: str) -> str: ...
    def sso_starts_by_address(self, address: str) -> str: ...

    def alias_guesses_by_alias_address(self, alias_id: str, address: str) -> str: ...

    def alias_guesses_by_alias(self, alias_id: str) -> str: ...

    def alias_guesses_by_address(self, address: str) -> str: ...

    async def reserve(self, counters: list[tuple[str, int]], window_ms: int) -> list[int]: ...

    async def reserve_one(self, counter: str, limit: int, window_ms: int) -> int: ...

    async def release(self, counters: list[str]) -> None: ...

    async def clear(self, counter: str) -> None: ...


class AuditStore(Protocol):
    async def record(self, user_id: str, batch: EventBatch) -> None: ...

    async def matching(self, user_id: str, kind: str, containing: str) -> list[dict[str, Any]]: ...

    async def page(
        self,
        user_id: str,
        limit: int,
        before: int | None,
        kind: str | None,
        since: int,
        holding: dict[str, str] | None = None,
    ) -> EventPage: ...


class BackupStore(Protocol):
    @property
    def prefix(self) -> str: ...

    async def snapshot(
        self,
        write: Callable[[Record], None],
        while_paused: Callable[[list[FileRecord]], Awaitable[None]],
        max_pause_ms: int,
        monotonic: Callable[[], float] = ...,
    ) -> Snapshot: ...

    async def held(self, limit: int = 1) -> list[str]: ...

    async def mark_backing_up(self, lasting_ms: int) -> None: ...

    async def done_backing_up(self) -> None: ...

    async def restoring(self) -> str | None: ...

    async def begin_restore(self, backup_id: str) -> None: ...

    async def forget_upgrades(self) -> None: ...

    async def end_restore(self) -> None: ...

    async def restore(
        self,
        records: Iterable[Record],
        now: int,
        replace: bool = False,
        keep_sessions: bool = True,
    ) -> tuple[int, int, int]: ...


class MfaStore(Protocol):
    async def state(self, user_id: str) -> MfaState: ...

    async def start_totp(self, user_id: str, sealed: str, expires: int) -> int: ...

    async def pending_totp(self, user_id: str, now: int) -> str | None: ...

    async def enable_totp(
        self, user_id: str, sealed: str, now: int, step: int, codes: list[str], events: EventBatch
    ) -> int: ...

    async def disable_totp(self, user_id: str, events: EventBatch) -> bool: ...

    async def replace_recovery_codes(
        self, user_id: str, codes: list[str], events: EventBatch
    ) -> bool: ...

    async def add_passkey(
        self, user_id: str, passkey: Passkey, most: int, events: EventBatch
    ) -> int: ...

    async def remove_passkey(self, user_id: str, passkey_id: str, events: EventBatch) -> bool: ...

    async def set_challenge(
        self, user_id: str, purpose: str, challenge: str, now: int, expires: int
    ) -> None: ...

    async def take_challenge(self, user_id: str, purpose: str, now: int) -> str | None: ...

    async def reset(self, user_id: str, events: EventBatch) -> bool: ...

    async def sealed_secrets(self, user_id: str) -> list[tuple[str, str, str]]: ...

    async def reseal(self, key: str, field: str, read: str, sealed: str) -> bool: ...


class MfaAnswerStore(Protocol):
    async def add_login(
        self, user_id: str, digest: str, step: LoginStep, now: int, most: int
    ) -> bool: ...

    async def login_step(self, user_id: str, digest: str) -> LoginStep | None: ...

    async def set_login_challenge(
        self, user_id: str, digest: str, now: int, challenge: str
    ) -> bool: ...

    async def answer_login(
        self,
        user_id: str,
        digest: str,
        now: int,
        most: int,
        claim: Sequence[str | int],
        events: EventBatch | None = None,
    ) -> tuple[int, LoginStep | int | None]: ...

    async def claim(
        self, user_id: str, claim: Sequence[str | int], events: EventBatch | None = None
    ) -> bool: ...


class AccountSettingsStore(Protocol):
    async def read(self, user_id: str) -> dict[str, str]: ...

    async def change(
        self,
        user_id: str,
        read: dict[str, str],
        changes: dict[str, str | None],
        names: tuple[str, ...],
        events: EventBatch | None = None,
    ) -> int: ...
