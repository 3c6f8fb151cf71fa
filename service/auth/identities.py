"""An account's identities at the OpenID provider: which account an identity signs in to (its
link first; else, once, an account whose e-mail the provider has verified; else a new account
when sign-up is on), listing them, linking one to the signed-in account (after a step-up) and
unlinking one (after a step-up, never the last way into an account without a password). Each
link and unlink is recorded in the account's audit trail in the step that makes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.auth.audit import AuditTrail
from service.auth.users import is_valid_email, normalise_email
from service.clock import Clock
from service.config import OidcSettings
from service.domain import audit_events as audit
from service.domain import credentials
from service.domain.oidc import Identity, domain_allowed, identity_digest
from service.domain.records import UserRecord
from service.errors import ApiError, Code
from service.store.protocols import OidcStore, UserStore

# A sign-up made by the provider has no password: it is the empty hash, which no password
# matches (``PasswordHasher.verify`` refuses a malformed hash) and whose sessions no password
# change can race.
NO_PASSWORD = ""


def claimed_email(claims: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The ID token's e-mail (normalised; None when it has none or not an address) and whether
    the provider says it verified it (``email_verified`` exactly true)."""
    email = claims.get("email")
    if not isinstance(email, str):
        return None, False
    email = normalise_email(email)
    if not is_valid_email(email):
        return None, False
    return email, claims.get("email_verified") is True


class Identities:
    def __init__(
        self,
        store: OidcStore,
        users: UserStore,
        trail: AuditTrail,
        clock: Clock,
        settings: OidcSettings | None,
    ) -> None:
        self._store = store
        self._users = users
        self._trail = trail
        self._clock = clock
        self._settings = settings

    async def list_identities(self, user_id: str) -> list[Identity]:
        return await self._store.identities(user_id)

    async def account_for(self, claims: Mapping[str, Any], origin: audit.Origin) -> UserRecord:
        """The account a verified ID token signs in to: the one its identity is linked to; else
        the account of its e-mail when the provider verified that e-mail (linked from then on:
        the account follows ``sub``, not the e-mail); else a new account without a password
        when sign-up is on. Refused: a domain not allowed (403 ``sso_domain_not_allowed``), an
        e-mail not verified (403 ``sso_email_unverified``), no match with sign-up off (403
        ``sso_account_not_found``); a refusal that names an account is recorded in its trail
        as a failed login."""
        assert self._settings is not None
        issuer, subject = str(claims["iss"]), str(claims["sub"])
        email, verified = claimed_email(claims)
        digest = identity_digest(issuer, subject)
        linked = await self._store.linked_account(digest)
        known = linked or (await self._users.find_id(email) if email else None)
        if not domain_allowed(email, self._settings.allowed_domains):
            await self._refused(known, origin, "domain_not_allowed")
            raise ApiError(Code.SSO_DOMAIN_NOT_ALLOWED)
        if linked is not None:
            user = await self._users.get(linked)
            if user is not None:
                return user
        if known is not None:
            if not verified:
                await self._refused(known, origin, "email_unverified")
                raise ApiError(Code.SSO_EMAIL_UNVERIFIED)
            user = await self._users.get(known)
            if user is not None:
                await self.link(user.id, issuer, subject, email, origin)
                return user
        if not self._settings.signup:
            raise ApiError(Code.SSO_ACCOUNT_NOT_FOUND)
        if email is None or not verified:
            raise ApiError(Code.SSO_EMAIL_UNVERIFIED)
        user_id = credentials.new_id("usr")
        now = self._clock.now_ms()
        if not await self._users.add(user_id, email, NO_PASSWORD, now):
            raise ApiError(Code.SSO_ACCOUNT_NOT_FOUND)  # the e-mail was taken meanwhile
        await self.link(user_id, issuer, subject, email, origin)
        return UserRecord(user_id, email, NO_PASSWORD, now)

    async def link(
        self,
        user_id: str,
        issuer: str,
        subject: str,
        email: str | None,
        origin: audit.Origin,
    ) -> Identity:
        """Link (issuer, subject) to the account, recorded as ``identity.linked``; linking one
        it holds already is a no-op. 409 ``identity_taken`` when another account holds it."""
        digest = identity_digest(issuer, subject)
        for held in await self._store.identities(user_id):
            if identity_digest(held.issuer, held.subject) == digest:
                return held
        now = self._clock.now_ms()
        identity = Identity(credentials.new_id("idn"), issuer, subject, email, now)
        target = audit.identity_ref(identity.id, issuer, email)
        events = self._trail.batch(
            now, audit.event(audit.IDENTITY_LINKED, now, origin, target=target)
        )
        outcome = await self._store.link(user_id, digest, identity, events)
        if outcome == "taken":
            raise ApiError(Code.IDENTITY_TAKEN)
        if outcome == "gone":
            raise ApiError(Code.ACCOUNT_GONE)
        return identity

    async def unlink(self, user_id: str, identity_id: str, origin: audit.Origin) -> int:
        """Unlink one of the account's identities, recorded as ``identity.unlinked``; 404
        ``identity_not_found`` for an unknown id (another account's included), 409
        ``last_way_in`` for the only identity of an account without a password."""
        if not credentials.is_valid_id(identity_id, "idn"):
            raise ApiError(Code.IDENTITY_NOT_FOUND)
        held = [i for i in await self._store.identities(user_id) if i.id == identity_id]
        if not held:
            raise ApiError(Code.IDENTITY_NOT_FOUND)
        now = self._clock.now_ms()
        target = audit.identity_ref(identity_id, held[0].issuer, held[0].email)
        event = audit.event(audit.IDENTITY_UNLINKED, now, origin, target=target)
        outcome, _ = await self._store.unlink(user_id, identity_id, self._trail.batch(now, event))
        if outcome == "last":
            raise ApiError(Code.LAST_WAY_IN)
        if outcome != "unlinked":
            raise ApiError(Code.IDENTITY_NOT_FOUND)
        return now

    async def linked_account(self, issuer: str, subject: str) -> str | None:
        return await self._store.linked_account(identity_digest(issuer, subject))

    async def _refused(self, user_id: str | None, origin: audit.Origin, reason: str) -> None:
        if user_id is None:
            return
        now = self._clock.now_ms()
        changes = {"via": "oidc", "reason": reason}
        await self._trail.record(
            user_id, now, audit.event(audit.LOGIN_FAILED, now, origin, changes=changes)
        )
