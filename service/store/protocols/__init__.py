"""What the policy (``service.auth``) asks of the stores: one ``Protocol`` per store (in
``accounts``, ``files``, ``oidc`` and ``blobs``), and ``Stores``, all of them together. The stores
of ``service.store`` implement them (each method's contract is documented there, on the
implementation); the policy sees only these, so it runs on in-memory fakes as well as on Redis, and
knows no key name and no Redis type.

Everything here is a domain value or a builtin: nothing imports Redis."""

from __future__ import annotations

from typing import Protocol

from service.store.protocols.accounts import (
    AccountSettingsStore,
    ApiKeyStore,
    AuditStore,
    BackupStore,
    CounterStore,
    CredentialLookup,
    KeyUsageStore,
    MfaAnswerStore,
    MfaStore,
    SessionStore,
    UserStore,
)
from service.store.protocols.files import (
    AliasEntries,
    AliasStore,
    AliasViews,
    BindingsStore,
    DownloadTicketStore,
    FilesStore,
    FolderRemovalStore,
    FoldersStore,
    UploadStore,
)
from service.store.protocols.oidc import OidcStore

__all__ = [
    "AccountSettingsStore",
    "AliasEntries",
    "AliasStore",
    "AliasViews",
    "ApiKeyStore",
    "AuditStore",
    "BackupStore",
    "BindingsStore",
    "CounterStore",
    "CredentialLookup",
    "DownloadTicketStore",
    "FilesStore",
    "FolderRemovalStore",
    "FoldersStore",
    "KeyUsageStore",
    "MfaAnswerStore",
    "MfaStore",
    "OidcStore",
    "SessionStore",
    "Stores",
    "UploadStore",
    "UserStore",
]


class Stores(Protocol):
    """Every store, as the policy is wired to them (``service.store.stores.Stores``)."""

    @property
    def lookup(self) -> CredentialLookup: ...
    @property
    def users(self) -> UserStore: ...
    @property
    def sessions(self) -> SessionStore: ...
    @property
    def api_keys(self) -> ApiKeyStore: ...
    @property
    def key_usage(self) -> KeyUsageStore: ...
    @property
    def counters(self) -> CounterStore: ...
    @property
    def audit(self) -> AuditStore: ...
    @property
    def files(self) -> FilesStore: ...
    @property
    def backup(self) -> BackupStore: ...
    @property
    def folders(self) -> FoldersStore: ...
    @property
    def folder_removal(self) -> FolderRemovalStore: ...
    @property
    def account_settings(self) -> AccountSettingsStore: ...
    @property
    def aliases(self) -> AliasStore: ...
    @property
    def alias_views(self) -> AliasViews: ...
    @property
    def mfa(self) -> MfaStore: ...
    @property
    def mfa_answers(self) -> MfaAnswerStore: ...
    @property
    def bindings(self) -> BindingsStore: ...
    @property
    def uploads(self) -> UploadStore: ...
    @property
    def oidc(self) -> OidcStore: ...
    @property
    def download_tickets(self) -> DownloadTicketStore: ...

    async def ping(self) -> bool: ...
