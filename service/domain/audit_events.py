"""The audit trail's events: the one list of their types, and how one is made.

An event says who (``actor``) did what (``type``) to which credential, file, folder, alias,
passkey or the settings (``target``), when, from which address and User-Agent, and what changed;
never a secret, a token, a digest or a password (``tests/api/test_audit_events.py`` searches every
stored event of a full run for them; ``tests/api/test_mfa_audit.py`` for TOTP secrets and
recovery codes). The store (``service.store.audit``) keeps them per
account, bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from service.domain import credentials

LOGIN_SUCCEEDED = "login.succeeded"
LOGIN_FAILED = "login.failed"
LOGOUT = "logout"
SESSION_ENDED = "session.ended"
PASSWORD_CHANGED = "password.changed"  # noqa: S105 - an event type, not a password
KEY_CREATED = "key.created"
KEY_REVOKED = "key.revoked"
KEY_ROLLED = "key.rolled"
KEY_EDITED = "key.edited"
KEY_DISABLED = "key.disabled"
KEY_ENABLED = "key.enabled"
KEY_REVOKED_AS_LEAKED = "key.revoked_as_leaked"
FILE_UPLOADED = "file.uploaded"
FILE_DELETED = "file.deleted"
FILE_RENAMED = "file.renamed"
FILE_MOVED = "file.moved"
FOLDER_CREATED = "folder.created"
FOLDER_RENAMED = "folder.renamed"
FOLDER_MOVED = "folder.moved"
FOLDER_DELETED = "folder.deleted"
SETTINGS_CHANGED = "settings.changed"
ALIAS_CREATED = "alias.created"
ALIAS_CHANGED = "alias.changed"
ALIAS_DELETED = "alias.deleted"
SESSION_REAUTHENTICATED = "session.reauthenticated"
MFA_TOTP_ENABLED = "mfa.totp_enabled"
MFA_TOTP_DISABLED = "mfa.totp_disabled"
MFA_WEBAUTHN_ADDED = "mfa.webauthn_added"
MFA_WEBAUTHN_REMOVED = "mfa.webauthn_removed"
MFA_RECOVERY_CODES_REGENERATED = "mfa.recovery_codes_regenerated"
MFA_RECOVERY_CODE_USED = "mfa.recovery_code_used"
MFA_RESET = "mfa.reset"
# An identity at the OpenID provider linked to the account, or unlinked from it.
IDENTITY_LINKED = "identity.linked"
IDENTITY_UNLINKED = "identity.unlinked"

EVENT_TYPES = (
    LOGIN_SUCCEEDED,
    LOGIN_FAILED,
    LOGOUT,
    SESSION_ENDED,
    PASSWORD_CHANGED,
    KEY_CREATED,
    KEY_ROLLED,
    KEY_EDITED,
    KEY_DISABLED,
    KEY_ENABLED,
    KEY_REVOKED,
    KEY_REVOKED_AS_LEAKED,
    FILE_UPLOADED,
    FILE_DELETED,
    FILE_RENAMED,
    FILE_MOVED,
    FOLDER_CREATED,
    FOLDER_RENAMED,
    FOLDER_MOVED,
    FOLDER_DELETED,
    SETTINGS_CHANGED,
    ALIAS_CREATED,
    ALIAS_CHANGED,
    ALIAS_DELETED,
    SESSION_REAUTHENTICATED,
    MFA_TOTP_ENABLED,
    MFA_TOTP_DISABLED,
    MFA_WEBAUTHN_ADDED,
    MFA_WEBAUTHN_REMOVED,
    MFA_RECOVERY_CODES_REGENERATED,
    MFA_RECOVERY_CODE_USED,
    MFA_RESET,
    IDENTITY_LINKED,
    IDENTITY_UNLINKED,
)


# A User-Agent is kept (in events and sessions) up to this many characters.
MAX_USER_AGENT_LENGTH = 256


class Origin(NamedTuple):
    """Where a request came from: the acting session's public id, the client's address (as
    login throttling works it out) and its User-Agent (cut to 256 characters); ``device``, the
    acting session's User-Agent as stored with it at login (None: it sent none)."""

    session_id: str | None
    ip: str | None
    user_agent: str | None
    device: str | None = None

    def actor(self) -> dict[str, Any] | None:
        if self.session_id is None:
            return None
        return session_ref(self.session_id, self.device)


def session_ref(session_id: str, device: str | None) -> dict[str, Any]:
    """A session as an actor or a target: its public id and its device, the User-Agent stored
    with it at login, as it was then (it can't change; None when it sent none). Events recorded
    before the device was named have no ``device``."""
    return {"type": "session", "session_id": session_id, "device": device}


# Where a change comes from when its caller names nothing (the command line, the tests).
NO_ORIGIN = Origin(None, None, None)


def cli_actor() -> dict[str, Any]:
    """Who acted from the command line: an operator's ``users set-password`` or
    ``users reset-mfa``."""
    return {"type": "cli"}


def leak_report_actor(ip: str | None) -> dict[str, Any]:
    """Who revoked a key reported leaked (``POST /keys/leaked``, which takes no credential):
    the report, from the client's address."""
    return {"type": "leak_report", "ip": ip}


def api_key_actor(key_id: str, name: str | None, key_prefix: str | None) -> dict[str, Any]:
    """Who acted with an API key: the key, with its name and prefix as they were then (it may be
    renamed, rolled or revoked later); both None when the key was revoked meanwhile."""
    return {"type": "api_key", "key_id": key_id, "name": name, "key_prefix": key_prefix}


def key_target(key_id: str, name: str, key_prefix: str) -> dict[str, Any]:
    """An API key acted on, in the shape of ``api_key_actor``: its id, and its name and prefix
    as they were when the event happened, so the trail still names it once it is renamed,
    rolled or revoked. Events recorded before names were kept have only ``key_id``."""
    return api_key_actor(key_id, name, key_prefix)


def file_target(file_id: str, name: str, size: int) -> dict[str, Any]:
    """A hosted file acted on: its id, display name and size in bytes."""
    return {"type": "file", "file_id": file_id, "name": name, "size": size}


def folder_target(folder_id: str, name: str) -> dict[str, Any]:
    """A folder acted on: its id and name (its name before a rename)."""
    return {"type": "folder", "folder_id": folder_id, "name": name}


def alias_target(alias_id: str | None, slug: str, target_id: str) -> dict[str, Any]:
    """A vanity alias acted on: its id (None only for one whose entry a deletion cut short had
    already removed), its slug (before a change of it) and what it is an alias of."""
    return {"type": "alias", "alias_id": alias_id, "slug": slug, "target_id": target_id}


def passkey_target(passkey_id: str, name: str) -> dict[str, Any]:
    """A passkey (a WebAuthn credential) added, removed or used: its id and the name its owner
    gave it; never its credential id or public key."""
    return {"type": "passkey", "passkey_id": passkey_id, "name": name}


def identity_ref(identity_id: str, provider: str, email: str | None) -> dict[str, Any]:
    """An identity at the OpenID provider: its id, the provider (issuer) and the e-mail it had
    when linked; never its subject."""
    return {"type": "identity", "identity_id": identity_id, "provider": provider, "email": email}


def settings_target() -> dict[str, Any]:
    """The account's settings, as a whole."""
    return {"type": "settings"}


def event(
    kind: str,
    at: int,
    origin: Origin,
    *,
    actor: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One event, as stored and as served (``at`` in ms here; the API shows it ISO 8601)."""
    assert kind in EVENT_TYPES, kind
    return {
        "id": credentials.new_id("evt"),
        "at": at,
        "type": kind,
        "actor": actor if actor is not None else origin.actor(),
        "ip": origin.ip,
        "user_agent": origin.user_agent,
        "target": target,
        "changes": changes,
    }


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventPage:
    events: list[StoredEvent]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class EventBatch:
    """Events to record together: their time, the trail's bounds, and each event's JSON."""

    at: int  # ms
    retention_ms: int
    max_events: int
    events: tuple[dict[str, Any], ...]
