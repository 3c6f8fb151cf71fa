"""Every store of the service over one Redis client: what the application wires its policy to.

Each aggregate has its own store (``users``, ``sessions``, ``api_keys`` with ``key_usage``: what
each key is doing, ``audit``, ``files``, ``folders`` with ``folder_removal``, ``account_settings``,
``aliases`` with ``alias_views``, the public side's, ``bindings``: what a key bound to folders
reaches, ``mfa`` with ``mfa_answers``: the second factors, ``oidc``: single sign-on's trips to the
provider and linked identities, ``download_tickets``: a session's tickets to download one file
or folder for a minute), ``lookup`` is the per-request read of a credential, ``counters``
the windowed counts of login attempts and leak reports, and ``backup`` the copy of every record a
backup takes. All share one map of key names (``service.store.keys``)."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from service.clock import Clock, SystemClock
from service.domain.records import RateLimit
from service.store.account_settings import AccountSettingsStore
from service.store.alias_views import AliasViews
from service.store.aliases import AliasStore
from service.store.api_keys import ApiKeyStore
from service.store.audit import AuditStore
from service.store.backup import BackupStore
from service.store.bindings import BindingsStore
from service.store.counters import CounterStore
from service.store.download_tickets import DownloadTicketStore
from service.store.files import FilesStore
from service.store.folder_removal import FolderRemovalStore
from service.store.folders import FoldersStore
from service.store.key_usage import KeyUsageStore
from service.store.keys import RedisKeys
from service.store.lookup import CredentialLookup
from service.store.mfa import MfaStore
from service.store.mfa_answers import MfaAnswerStore
from service.store.oidc import OidcStore
from service.store.pipelined import PipelinedRedis
from service.store.sessions import SessionStore
from service.store.uploads import UploadStore
from service.store.users import UserStore


@dataclass(frozen=True, slots=True)
class Stores:
    redis: Redis
    keys: RedisKeys
    lookup: CredentialLookup
    users: UserStore
    sessions: SessionStore
    api_keys: ApiKeyStore
    key_usage: KeyUsageStore
    counters: CounterStore
    audit: AuditStore
    files: FilesStore
    backup: BackupStore
    folders: FoldersStore
    folder_removal: FolderRemovalStore
    account_settings: AccountSettingsStore
    aliases: AliasStore
    alias_views: AliasViews
    mfa: MfaStore
    mfa_answers: MfaAnswerStore
    bindings: BindingsStore
    uploads: UploadStore
    oidc: OidcStore
    download_tickets: DownloadTicketStore

    async def ping(self) -> bool:
        return bool(await self.redis.ping())


def open_stores(
    redis: Redis,
    prefix: str,
    hot: PipelinedRedis | None = None,
    rate_limit: RateLimit | None = None,
    clock: Clock | None = None,
) -> Stores:
    """The stores over ``redis``; the per-request reads (a credential's lookup, a page of files)
    go through ``hot``, the worker's auto-pipelined connection, when given."""
    keys = RedisKeys(prefix)
    audit = AuditStore(redis, keys)
    aliases = AliasStore(redis, keys)
    key_usage = KeyUsageStore(redis, keys)
    return Stores(
        redis=redis,
        keys=keys,
        lookup=CredentialLookup(redis, keys, hot, rate_limit),
        users=UserStore(redis, keys, aliases, key_usage),
        sessions=SessionStore(redis, keys, clock or SystemClock()),
        api_keys=ApiKeyStore(redis, keys, audit, key_usage),
        key_usage=key_usage,
        counters=CounterStore(redis, keys),
        audit=audit,
        files=FilesStore(redis, keys, hot),
        backup=BackupStore(redis, keys),
        folders=FoldersStore(redis, keys),
        folder_removal=FolderRemovalStore(redis, keys),
        account_settings=AccountSettingsStore(redis, keys),
        aliases=aliases,
        alias_views=AliasViews(redis, keys, hot),
        mfa=MfaStore(redis, keys),
        mfa_answers=MfaAnswerStore(redis, keys),
        bindings=BindingsStore(redis, keys, hot),
        uploads=UploadStore(redis, keys),
        oidc=OidcStore(redis, keys),
        download_tickets=DownloadTicketStore(redis, keys),
    )
