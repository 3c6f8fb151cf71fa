"""An account's second factors as policy sees them: enrolling and removing TOTP, recovery codes
and passkeys; checking an answer to a second-factor question (a login's second step, a
reauthentication); an operator's reset.

Every change is recorded in the audit trail in the step that makes it (``mfa.*``), moves the
factors' generation (so a login racing it opens no session, ``service.store.mfa``) and then ends
every other session of the account: whoever held one must prove the new state of the account.
TOTP secrets are sealed with the operator's key before they reach the store and opened only to
check a code (``service.auth.secret_box``); recovery codes reach it only as digests. Never logs or
records a code, a secret or a recovery code.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import segno

from service.auth.audit import AuditTrail
from service.auth.passkeys import PasskeyRefused, Passkeys, new_challenge
from service.auth.secret_box import SecretBox, SecretUnreadable
from service.auth.sessions import Sessions
from service.clock import Clock
from service.config import MfaSettings
from service.domain import audit_events as audit
from service.domain import credentials, recovery_codes, totp
from service.domain.factors import MfaState, Passkey
from service.domain.principal import Principal
from service.domain.records import UserRecord
from service.errors import ApiError, Code
from service.store.protocols import MfaStore

PENDING_TOTP_MS = 10 * 60_000
CHALLENGE_MS = 5 * 60_000
MAX_PASSKEYS = 10
MAX_PASSKEY_NAME_LENGTH = 100


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer to a second-factor question: exactly one of a TOTP code, a recovery code
    (normalised, ``recovery_codes.normalise``) or a passkey's assertion (its JSON form)."""

    code: str | None = None
    recovery_code: str | None = None
    webauthn: dict[str, Any] | None = None

    @property
    def method(self) -> str:
        if self.code is not None:
            return "totp"
        return "recovery_code" if self.recovery_code is not None else "webauthn"


@dataclass(frozen=True, slots=True)
class TotpEnrollment:
    secret: str  # base32, shown once, for typing into an app
    uri: str  # otpauth://, what the QR code holds
    expires_at: int
    qr_svg: str  # the URI as a QR code: an SVG document a page inserts as it is


@dataclass(frozen=True, slots=True)
class Enabled:
    at: int
    recovery_codes: list[str]
    sessions_ended: int


def methods(state: MfaState) -> list[str]:
    """How the account can answer a second-factor question, in the order a page offers them."""
    found = []
    if state.totp_sealed is not None:
        found.append("totp")
    if state.passkeys:
        found.append("webauthn")
    if state.recovery_codes_left:
        found.append("recovery_code")
    return found


def _totp_context(user_id: str) -> str:
    return f"totp:{user_id}"


def _unavailable(message: str) -> ApiError:
    return ApiError(Code.MFA_UNAVAILABLE, message)


def _not_configured(message: str, setting: str) -> ApiError:
    return ApiError(Code.MFA_NOT_CONFIGURED, message, details={"setting": setting})


# The most loopback origins whose relying party a worker remembers.
_LOOPBACK_ORIGINS_KEPT = 16


class Factors:
    def __init__(
        self,
        store: MfaStore,
        sessions: Sessions,
        trail: AuditTrail,
        clock: Clock,
        settings: MfaSettings,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._trail = trail
        self._clock = clock
        self.box = SecretBox(tuple(settings.secrets_keys))
        self._configured = Passkeys(settings.public_url) if settings.public_url else None
        self._at_loopback: dict[str, Passkeys] = {}
        host = urlsplit(settings.public_url).hostname if settings.public_url else None
        self._issuer = host or "filehost"

    # -- reading ------------------------------------------------------------------------------

    async def state(self, user_id: str) -> MfaState:
        return await self._store.state(user_id)

    @property
    def totp_available(self) -> bool:
        return self.box.available

    def passkeys_at(self, loopback_origin: str | None) -> Passkeys | None:
        """The relying party passkeys are made and used with: the one of
        ``FILEHOST_PUBLIC_URL``, else, without it, the request's own origin when it is a
        ``localhost`` page reached over loopback (``loopback_origin``, worked out by the HTTP
        layer); None when there is neither."""
        if self._configured is not None:
            return self._configured
        if loopback_origin is None:
            return None
        found = self._at_loopback.get(loopback_origin)
        if found is None:
            if len(self._at_loopback) >= _LOOPBACK_ORIGINS_KEPT:
                self._at_loopback.clear()
            found = self._at_loopback[loopback_origin] = Passkeys(loopback_origin)
        return found

    def _require_passkeys(self, loopback_origin: str | None) -> Passkeys:
        found = self.passkeys_at(loopback_origin)
        if found is None:
            raise _not_configured(
                "Passkeys need the address people reach this service at: the operator sets "
                "FILEHOST_PUBLIC_URL (or, on this machine, open the dashboard at "
                "http://localhost:<port>/).",
                "FILEHOST_PUBLIC_URL",
            )
        return found

    # -- TOTP ---------------------------------------------------------------------------------

    async def start_totp(self, user: UserRecord) -> TotpEnrollment:
        """A pending enrolment (10 minutes) replacing any earlier one; 409 when TOTP is
        enabled, 409 ``mfa_not_configured`` when no key can seal its secret."""
        if not self.box.available:
            raise _not_configured(
                "TOTP needs the operator's secrets key (FILEHOST_SECRETS_KEY).",
                "FILEHOST_SECRETS_KEY",
            )
        secret = totp.new_secret()
        expires = self._clock.now_ms() + PENDING_TOTP_MS
        sealed = self.box.seal(secret, _totp_context(user.id))
        started = await self._store.start_totp(user.id, sealed, expires)
        if started == 0:
            raise ApiError(Code.ACCOUNT_GONE)
        if started == 2:
            raise ApiError(Code.TOTP_ALREADY_ENABLED)
        uri = totp.provisioning_uri(secret, user.email, self._issuer)
        return TotpEnrollment(secret, uri, expires, _qr_svg(uri))

    async def _pending_secret(self, user: UserRecord) -> tuple[str, str]:
        """(secret, sealed) of the pending enrolment; 404 when there is none."""
        sealed = await self._store.pending_totp(user.id, self._clock.now_ms())
        if sealed is None:
            raise ApiError(Code.TOTP_ENROLLMENT_NOT_FOUND)
        return self._open(sealed, user.id), sealed

    def _open(self, sealed: str, user_id: str) -> str:
        try:
            return self.box.open(sealed, _totp_context(user_id))
        except SecretUnreadable:
            raise _unavailable(
                "The TOTP secret can't be read with the configured secrets keys."
            ) from None

    async def confirm_totp(
        self, principal: Principal, user: UserRecord, code: str, origin: audit.Origin
    ) -> Enabled:
        """Enable the pending enrolment with a code of its secret (400 ``mfa_code_invalid``
        otherwise), with 10 new recovery codes, shown here once; every other session ends."""
        secret, sealed = await self._pending_secret(user)
        now = self._clock.now_ms()
        step = totp.matching_step(secret, code, now)
        if step is None:
            raise ApiError(Code.MFA_CODE_INVALID, status=400)
        codes = recovery_codes.generate()
        digests = [recovery_codes.digest(user.id, recovery_codes.normalise(c) or "") for c in codes]
        events = self._trail.batch(now, audit.event(audit.MFA_TOTP_ENABLED, now, origin))
        done = await self._store.enable_totp(user.id, sealed, now, step, digests, events)
        if done == -1:
            raise ApiError(Code.ACCOUNT_GONE)
        if done == 2:
            raise ApiError(Code.TOTP_ALREADY_ENABLED)
        if done == 0:  # replaced or expired since it was read
            raise ApiError(Code.TOTP_ENROLLMENT_NOT_FOUND)
        ended = await self._sessions.end_other_sessions(principal, origin=None)
        return Enabled(now, codes, ended)

    async def disable_totp(self, principal: Principal, origin: audit.Origin) -> tuple[int, int]:
        """Disable TOTP (404 when it is not enabled); the recovery codes go with the last
        factor. Every other session ends: (when, how many)."""
        now = self._clock.now_ms()
        events = self._trail.batch(now, audit.event(audit.MFA_TOTP_DISABLED, now, origin))
        if not await self._store.disable_totp(principal.user_id, events):
            raise ApiError(Code.TOTP_NOT_ENABLED)
        return now, await self._sessions.end_other_sessions(principal, origin=None)

    # -- recovery codes -----------------------------------------------------------------------

    async def regenerate_recovery_codes(
        self, principal: Principal, origin: audit.Origin
    ) -> tuple[list[str], int]:
        """10 new codes, shown here once; the old ones die. 409 without a factor. Every other
        session ends."""
        user_id = principal.user_id
        codes = recovery_codes.generate()
        digests = [recovery_codes.digest(user_id, recovery_codes.normalise(c) or "") for c in codes]
        now = self._clock.now_ms()
        events = self._trail.batch(
            now, audit.event(audit.MFA_RECOVERY_CODES_REGENERATED, now, origin)
        )
        if not await self._store.replace_recovery_codes(user_id, digests, events):
            raise ApiError(Code.MFA_NOT_ENABLED)
        return codes, await self._sessions.end_other_sessions(principal, origin=None)

    # -- passkeys -----------------------------------------------------------------------------

    async def passkey_options(
        self, user: UserRecord, session_id: str, loopback_origin: str | None
    ) -> dict[str, Any]:
        """The creation options for a new passkey (for the relying party ``passkeys_at``
        gives); their challenge is kept 5 minutes for this session's ``add_passkey``."""
        passkeys = self._require_passkeys(loopback_origin)
        state = await self._store.state(user.id)
        if len(state.passkeys) >= MAX_PASSKEYS:
            raise _passkey_limit()
        challenge = new_challenge()
        now = self._clock.now_ms()
        await self._store.set_challenge(
            user.id, f"register:{session_id}", challenge, now, now + CHALLENGE_MS
        )
        return passkeys.registration_options(user.id, user.email, state.passkeys, challenge)

    async def add_passkey(
        self,
        principal: Principal,
        session_id: str,
        name: str,
        credential: dict[str, Any],
        origin: audit.Origin,
        loopback_origin: str | None,
    ) -> tuple[Passkey, int]:
        """Verify a registration against this session's last challenge (taken: one try) and
        keep the passkey; 400 ``passkey_invalid`` saying why when it doesn't verify. Every other
        session ends."""
        passkeys = self._require_passkeys(loopback_origin)
        now = self._clock.now_ms()
        challenge = await self._store.take_challenge(
            principal.user_id, f"register:{session_id}", now
        )
        if challenge is None:
            raise _passkey_invalid("no registration was started, or it expired")
        try:
            credential_id, public_key, count, transports = passkeys.verify_registration(
                credential, challenge
            )
        except PasskeyRefused as refused:
            raise _passkey_invalid(refused.reason) from None
        passkey = Passkey(
            credentials.new_id("pk"), name, credential_id, public_key, now, transports, count, None
        )
        event = audit.event(
            audit.MFA_WEBAUTHN_ADDED, now, origin, target=audit.passkey_target(passkey.id, name)
        )
        added = await self._store.add_passkey(
            principal.user_id, passkey, MAX_PASSKEYS, self._trail.batch(now, event)
        )
        if added == -1:
            raise ApiError(Code.ACCOUNT_GONE)
        if added == 2:
            raise _passkey_limit()
        if added == 3:
            raise _passkey_invalid("this authenticator is registered already")
        return passkey, await self._sessions.end_other_sessions(principal, origin=None)

    async def remove_passkey(
        self, principal: Principal, passkey_id: str, origin: audit.Origin
    ) -> tuple[int, int]:
        """Remove one of the account's passkeys (404 otherwise); the recovery codes go with
        the last factor. Every other session ends: (when, how many)."""
        state = await self._store.state(principal.user_id)
        found = next((p for p in state.passkeys if p.id == passkey_id), None)
        if found is None:
            raise ApiError(Code.PASSKEY_NOT_FOUND)
        now = self._clock.now_ms()
        event = audit.event(
            audit.MFA_WEBAUTHN_REMOVED,
            now,
            origin,
            target=audit.passkey_target(found.id, found.name),
        )
        if not await self._store.remove_passkey(
            principal.user_id, passkey_id, self._trail.batch(now, event)
        ):
            raise ApiError(Code.PASSKEY_NOT_FOUND)  # removed meanwhile
        return now, await self._sessions.end_other_sessions(principal, origin=None)

    # -- answering ----------------------------------------------------------------------------

    def assertion_options(
        self, state: MfaState, challenge: str, loopback_origin: str | None
    ) -> dict[str, Any]:
        return self._require_passkeys(loopback_origin).assertion_options(state.passkeys, challenge)

    def claim(
        self,
        user_id: str,
        state: MfaState,
        answer: Answer,
        challenge: str | None,
        loopback_origin: str | None,
    ) -> tuple[str, str, int, int]:
        """What the store claims for ``answer`` (``service.store.mfa``'s ``_CLAIM``): the
        checks that need no store (a code against the secret, an assertion's signature) are
        made here, and a failed one claims nothing. An answer of a kind the account has no
        factor for is wrong like any other."""
        now = self._clock.now_ms()
        if answer.code is not None:
            if state.totp_sealed is None:
                return ("totp", "", 0, 0)
            secret = self._open(state.totp_sealed, user_id)
            step = totp.matching_step(secret, answer.code, now)
            return ("totp", state.totp_sealed, step or 0, 0)
        if answer.recovery_code is not None:
            return ("recovery", recovery_codes.digest(user_id, answer.recovery_code), 0, 0)
        if not state.passkeys or challenge is None or answer.webauthn is None:
            return ("passkey", "", -1, now)
        try:
            verified = self._require_passkeys(loopback_origin).verify_assertion(
                answer.webauthn, challenge, state.passkeys
            )
        except PasskeyRefused:
            return ("passkey", "", -1, now)
        return ("passkey", verified.passkey_id, verified.sign_count, now)

    # -- the operator -------------------------------------------------------------------------

    async def reset(self, user_id: str) -> tuple[bool, int]:
        """Remove every factor, recovery code and pending enrolment, recorded as ``mfa.reset``
        by the command line, then end every session; (whether there was any, sessions ended)."""
        now = self._clock.now_ms()
        event = audit.event(audit.MFA_RESET, now, audit.NO_ORIGIN, actor=audit.cli_actor())
        had = await self._store.reset(user_id, self._trail.batch(now, event))
        return had, await self._sessions.end_all_sessions(user_id)

    async def reseal(self, user_id: str) -> tuple[int, int]:
        """Seal the account's TOTP secrets again with the first key: (sealed again, already
        sealed with it). ``SecretUnreadable`` when no configured key opens one."""
        resealed = current = 0
        for key, field, sealed in await self._store.sealed_secrets(user_id):
            again = self.box.rotate(sealed, _totp_context(user_id))
            if again is None:
                current += 1
            elif await self._store.reseal(key, field, sealed, again):
                resealed += 1
        return resealed, current


def _qr_svg(uri: str) -> str:
    """The QR code as an SVG document: no script, no style attribute, no ``data:`` URL, so a
    page under a strict Content-Security-Policy can insert it as it is."""
    buffer = io.BytesIO()
    segno.make(uri, error="m").save(
        buffer, kind="svg", scale=4, border=4, xmldecl=False, svgns=True, title="TOTP QR code"
    )
    return buffer.getvalue().decode("utf-8")


def _passkey_invalid(reason: str) -> ApiError:
    return ApiError(
        Code.PASSKEY_INVALID,
        f"The passkey's registration could not be verified: {reason}.",
        details={"reason": reason},
    )


def _passkey_limit() -> ApiError:
    return ApiError(
        Code.PASSKEY_LIMIT_REACHED,
        f"This account has the maximum of {MAX_PASSKEYS} passkeys. Remove one before adding "
        "another.",
        details={"limit": MAX_PASSKEYS},
    )
