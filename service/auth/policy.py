"""Every policy object of the service, made from the stores: what the application, the command
line and the tests wire to. Each object decides for one aggregate and asks its store to record
what it decided."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from service.auth.account_settings import AccountSettings
from service.auth.account_usage import Usage
from service.auth.alias_access import AccessSettings, AliasAccess
from service.auth.aliases import Aliases
from service.auth.api_keys import ApiKeys
from service.auth.archives import Archives
from service.auth.audit import AuditTrail
from service.auth.bulk_files import BulkFiles
from service.auth.download_tickets import DownloadTickets
from service.auth.files import Files
from service.auth.folders import Folders
from service.auth.identities import Identities
from service.auth.leak_reports import LeakReports
from service.auth.login import Login
from service.auth.login_throttle import LoginThrottle
from service.auth.mfa import Factors
from service.auth.oidc import SingleSignOn
from service.auth.oidc_provider import OidcProvider, ProviderHttp
from service.auth.passwords import PasswordHasher
from service.auth.reach import Reach
from service.auth.readiness import Readiness
from service.auth.reauthentication import Reauthentication
from service.auth.removals import Removals
from service.auth.secret_box import derived_key
from service.auth.sessions import Sessions
from service.auth.thumbnails import Thumbnails
from service.auth.uploaders import Uploaders
from service.auth.uploads import ResumableUploads
from service.auth.users import Users
from service.clock import Clock
from service.config import Settings
from service.domain.records import RateLimit
from service.store.protocols import Stores
from service.store.protocols.blobs import BlobStores


@dataclass(frozen=True, slots=True)
class Policy:
    users: Users
    login: Login
    sessions: Sessions
    api_keys: ApiKeys
    leak_reports: LeakReports
    audit: AuditTrail
    files: Files
    thumbnails: Thumbnails
    bulk_files: BulkFiles
    archives: Archives
    folders: Folders
    settings: AccountSettings
    removals: Removals
    factors: Factors
    reauthentication: Reauthentication
    reach: Reach
    aliases: Aliases
    alias_access: AliasAccess
    uploaders: Uploaders
    uploads: ResumableUploads
    readiness: Readiness
    identities: Identities
    sso: SingleSignOn
    download_tickets: DownloadTickets
    usage: Usage


def make_policy(
    stores: Stores,
    blob_stores: BlobStores,
    passwords: PasswordHasher,
    clock: Clock,
    settings: Settings,
    login_outcomes: Callable[[str], None] | None = None,
    alias_passwords: PasswordHasher | None = None,
    provider_http: ProviderHttp | None = None,
) -> Policy:
    """The policy over ``stores``, with uploaded bytes in ``blob_stores``; ``login_outcomes`` is
    told how each login ended (the metrics); ``alias_passwords`` checks the vanity aliases'
    passwords (``passwords``, unless given); ``provider_http`` makes the requests to the OpenID
    provider when single sign-on is configured (none: it is off)."""
    trail = AuditTrail(stores.audit, clock, settings.audit)
    throttle = LoginThrottle(stores.counters, settings.login)
    sessions = Sessions(stores.sessions, clock, trail, settings.reauth_seconds)
    factors = Factors(stores.mfa, sessions, trail, clock, settings.mfa)
    users = Users(stores.users, passwords, throttle, sessions, trail, clock, settings.login)
    blobs = blob_stores.blobs
    account_settings = AccountSettings(stores.account_settings, clock, trail)
    reach = Reach(stores.files, stores.folders, stores.bindings)
    alias_passwords = alias_passwords or passwords
    aliases = Aliases(
        stores.aliases,
        reach,
        account_settings,
        alias_passwords,
        clock,
        trail,
        settings.max_aliases_per_account,
    )
    account_settings.aliases = aliases
    api_keys = ApiKeys(
        stores.api_keys,
        trail,
        clock,
        settings.max_keys_per_account,
        account_settings,
        (
            (settings.rate_limit_per_second, settings.rate_limit_burst)
            if settings.rate_limit_per_second > 0
            else None
        ),
    )
    removals = Removals(stores.folder_removal, blobs, aliases, unbind=api_keys.forget_folders)
    rate = settings.alias_rate_per_second
    alias_access = AliasAccess(
        stores.alias_views,
        stores.files,
        stores.counters,
        reach,
        alias_passwords,
        clock,
        AccessSettings(
            RateLimit(rate, settings.alias_rate_burst) if rate > 0 else None,
            settings.alias_password_failures_per_alias,
            settings.alias_password_failures_per_address,
            settings.alias_password_window_seconds,
            settings.alias_password_failures_per_alias_address,
        ),
        derived_key(settings.mfa.secrets_keys, "alias cookies"),
        derived_key(settings.mfa.secrets_keys, "public etags"),
    )
    files = Files(
        stores.files,
        blob_stores,
        clock,
        settings.max_files_per_account,
        reach,
        removals,
        account_settings,
        trail,
    )
    login = Login(
        stores.users,
        stores.sessions,
        passwords,
        throttle,
        trail,
        clock,
        settings.sessions,
        factors,
        stores.mfa_answers,
        login_outcomes,
        settings.password_login,
    )
    reauthentication = Reauthentication(
        users,
        sessions,
        stores.sessions,
        factors,
        stores.mfa,
        stores.mfa_answers,
        passwords,
        throttle,
        trail,
        clock,
        settings.sessions,
    )
    oidc = settings.oidc
    identities = Identities(stores.oidc, stores.users, trail, clock, oidc)
    provider = (
        OidcProvider(oidc, provider_http, clock)
        if oidc is not None and provider_http is not None
        else None
    )
    sso = SingleSignOn(
        oidc if provider is not None else None,
        provider,
        stores.oidc,
        identities,
        login,
        reauthentication,
        sessions,
        stores.sessions,
        stores.users,
        clock,
        stores.counters,
        settings.password_login,
    )
    archives = Archives(files, reach)
    return Policy(
        users=users,
        login=login,
        sessions=sessions,
        api_keys=api_keys,
        leak_reports=LeakReports(stores.api_keys, stores.counters, trail, clock),
        audit=trail,
        files=files,
        thumbnails=Thumbnails(files, blobs),
        bulk_files=BulkFiles(files, reach),
        archives=archives,
        folders=Folders(
            stores.folders,
            reach,
            removals,
            clock,
            trail,
            settings.max_folders_per_account,
            settings.max_folder_depth,
        ),
        settings=account_settings,
        removals=removals,
        factors=factors,
        reauthentication=reauthentication,
        reach=reach,
        aliases=aliases,
        alias_access=alias_access,
        uploaders=Uploaders(api_keys, reach),
        uploads=ResumableUploads(
            stores.uploads, blob_stores.partials, blobs, files, clock, settings.uploads
        ),
        readiness=Readiness(stores, blobs),
        identities=identities,
        sso=sso,
        download_tickets=DownloadTickets(
            stores.download_tickets, stores.lookup, reach, archives, clock
        ),
        usage=Usage(stores.files, stores.folders, stores.aliases, api_keys),
    )


async def upgrade_records(policy: Policy) -> None:
    """The upgrades of records an earlier release wrote, each done once per deployment (marked
    done in the store): ``serve`` runs them as it starts, and ``restore`` once its records are
    in, since a ``serve`` already running ran them over none."""
    users = await policy.users.list_users()
    await policy.api_keys.upgrade_uploader_keys([user.id for user in users])
