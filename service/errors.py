"""Every refusal a client can see, in one table, and the one exception that carries them.

``Code`` is the table: one row per error code, with the status it is answered with, the message a
client reads unless the raise site says more, and the ``WWW-Authenticate`` challenge it carries
(every 401 has one, RFC 9110). A raise site names its row and passes only what varies, a
message with a figure in it, ``details``, a header of the moment such as ``Retry-After``::

    raise ApiError(Code.KEY_NOT_FOUND)
    raise ApiError(Code.KEY_LIMIT_REACHED, f"... {limit} ...", details={"limit": limit})

``service.api.envelope`` turns an ``ApiError`` into the JSON error envelope in one place, and
aiohttp's own HTTP exceptions into their rows. Messages are written for clients and never contain
a credential. ``tests/unit/test_error_codes.py`` holds the OpenAPI document, ``docs/api.md`` and
the dashboard to this table.

    Exception
    └── ApiError              a refusal: its Code, status, message, details and headers
        └── CorruptRecord     a stored record could not be read (503, as the store unreachable)

    Code, the table, by status
    ├── 400  the request's body or fields, its credential headers, a gateway's headers
    ├── 401  the credential is missing or refused: each with its Challenge
    ├── 403  the credential may not do this
    ├── 404  nothing is here
    ├── 405  408  413  415  416  417  how the request was sent
    ├── 409  the account's or the key's state is in the way
    ├── 429  too many requests: Retry-After says when to try again
    ├── 499  the client went away: logged and counted, never sent
    ├── 500  a bug
    └── 503  the store or the login queue: Retry-After
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum, unique
from types import MappingProxyType
from typing import Any

from service.error_rows import Challenge as Challenge
from service.error_rows import Row as _Row


@unique
class Code(StrEnum):
    """The table of error codes. A member is the code itself (a ``str``, as sent and logged);
    ``status``, ``message`` and ``headers`` (its challenge and fixed ``Retry-After``, made once
    and never changed) are what every refusal with it has unless its raise site says more. Each
    row spells its code in full, so that a code read in an answer or a log line greps to here."""

    status: int
    message: str
    challenge: Challenge | None
    headers: Mapping[str, str]
    sent: bool

    def __new__(cls, row: _Row) -> Code:
        member = str.__new__(cls, row.code)
        member._value_ = row.code
        member.status = row.status
        member.message = row.message
        member.challenge = row.challenge
        # Not named ``headers``: mypy takes a name assigned in an enum's body for one of its
        # members, and the member's attribute for a final one.
        fixed = dict(row.challenge.headers) if row.challenge is not None else {}
        if row.retry_after is not None:
            fixed["Retry-After"] = str(row.retry_after)
        member.headers = MappingProxyType(fixed)
        member.sent = row.sent
        return member

    # -- 400: the request --------------------------------------------------------------------
    BAD_REQUEST = _Row(400, code="bad_request", message="Malformed HTTP request.")
    VALIDATION_FAILED = _Row(400, code="validation_failed", message="Some fields are invalid.")
    MALFORMED_JSON = _Row(400, code="malformed_json", message="The request body is not valid JSON.")
    BODY_NOT_OBJECT = _Row(
        400, code="body_not_object", message="The request body must be a JSON object."
    )
    AMBIGUOUS_CREDENTIALS = _Row(
        400,
        code="ambiguous_credentials",
        message="Send either X-API-Key or Authorization, not both.",
    )
    DUPLICATE_HEADER = _Row(
        400, code="duplicate_header", message="A header was sent more than once."
    )
    # Forward-auth: the gateway's own headers say too little or too much.
    UNKNOWN_PERMISSION = _Row(
        400,
        code="unknown_permission",
        message="X-Required-Permission must be one of the permission names.",
    )
    PERMISSION_UNSPECIFIED = _Row(
        400,
        code="permission_unspecified",
        message="Send X-Required-Permission, or the original request's method and URI.",
    )
    INCOMPLETE_ORIGINAL_REQUEST = _Row(
        400,
        code="incomplete_original_request",
        message="The original request needs both its method and its URI.",
    )
    AMBIGUOUS_ORIGINAL_REQUEST = _Row(
        400,
        code="ambiguous_original_request",
        message="Send X-Original-Method/URI or X-Forwarded-Method/Uri, not both.",
    )
    # A passkey's registration that doesn't verify: another origin or relying party, a stale or
    # unknown challenge, a malformed credential. ``details.reason`` says which.
    PASSKEY_INVALID = _Row(
        400, code="passkey_invalid", message="The passkey's registration could not be verified."
    )
    # More ids in one request than a bulk operation or an archive of a selection takes.
    TOO_MANY_IDS = _Row(
        400, code="too_many_ids", message="The request names more ids than it may at once."
    )

    SSO_STATE_INVALID = _Row(400, code="sso_state_invalid", message="Start signing in again.")
    SSO_BROWSER_MISMATCH = _Row(400, code="sso_browser_mismatch", message="Another browser's.")
    SSO_PROVIDER_REFUSED = _Row(
        400, code="sso_provider_refused", message="The identity provider did not sign you in."
    )
    SSO_CODE_REJECTED = _Row(400, code="sso_code_rejected", message="The provider refused it.")
    SSO_TOKEN_MALFORMED = _Row(
        400, code="sso_token_malformed", message="The identity provider's token is malformed."
    )
    SSO_TOKEN_ALGORITHM_REFUSED = _Row(
        400, code="sso_token_algorithm_refused", message="The token's algorithm is refused."
    )
    SSO_TOKEN_SIGNATURE_INVALID = _Row(
        400, code="sso_token_signature_invalid", message="The token's signature is not valid."
    )
    SSO_TOKEN_ISSUER_INVALID = _Row(
        400, code="sso_token_issuer_invalid", message="The token names another issuer."
    )
    SSO_TOKEN_AUDIENCE_INVALID = _Row(
        400, code="sso_token_audience_invalid", message="The token is not meant for this service."
    )
    SSO_TOKEN_EXPIRED = _Row(
        400, code="sso_token_expired", message="The token has expired or is not yet valid."
    )
    SSO_TOKEN_NONCE_INVALID = _Row(
        400, code="sso_token_nonce_invalid", message="The token belongs to another sign-in."
    )

    SSO_LOGOUT_TOKEN_INVALID = _Row(
        400, code="sso_logout_token_invalid", message="The logout token is not valid."
    )
    # -- 401: the credential -----------------------------------------------------------------
    CREDENTIAL_MISSING = _Row(
        401,
        code="credential_missing",
        message="Send an API key in X-API-Key or a session token in Authorization: Bearer.",
        challenge=Challenge.BEARER,
    )
    UNSUPPORTED_AUTH_SCHEME = _Row(
        401,
        code="unsupported_auth_scheme",
        message="Only the Bearer scheme is accepted in the Authorization header.",
        challenge=Challenge.BEARER,
    )
    INVALID_API_KEY = _Row(
        401,
        code="invalid_api_key",
        message="The API key is not valid.",
        challenge=Challenge.API_KEY,
    )
    API_KEY_EXPIRED = _Row(
        401, code="api_key_expired", message="The API key has expired.", challenge=Challenge.API_KEY
    )
    API_KEY_REVOKED = _Row(
        401, code="api_key_revoked", message="The API key was revoked.", challenge=Challenge.API_KEY
    )
    # A rolled-out secret past its grace: the key itself works, with its newer secret.
    API_KEY_REPLACED = _Row(
        401,
        code="api_key_replaced",
        message="This API key secret was replaced by a newer one when the key was rolled, "
        "and its grace period is over.",
        challenge=Challenge.API_KEY,
    )
    API_KEY_DISABLED = _Row(
        401,
        code="api_key_disabled",
        message="The API key is disabled.",
        challenge=Challenge.API_KEY,
    )
    INVALID_SESSION = _Row(
        401,
        code="invalid_session",
        message="The session token is not valid.",
        challenge=Challenge.INVALID_TOKEN,
    )
    SESSION_EXPIRED = _Row(
        401,
        code="session_expired",
        message="The session has expired. Log in again.",
        challenge=Challenge.INVALID_TOKEN,
    )
    INVALID_CREDENTIALS = _Row(
        401,
        code="invalid_credentials",
        message="The email or password is incorrect.",
        challenge=Challenge.BEARER,
    )
    # A wrong, reused or expired second factor (a TOTP code, a recovery code, a passkey's
    # assertion); 400 when an enrolment is confirmed with a wrong code.
    MFA_CODE_INVALID = _Row(
        401,
        code="mfa_code_invalid",
        message="The code is wrong, expired or already used.",
        challenge=Challenge.BEARER,
    )
    # The second step of a login with an unknown, expired or spent mfa_token.
    MFA_TOKEN_INVALID = _Row(
        401,
        code="mfa_token_invalid",
        message="The login's second step has expired or had too many wrong answers. Log in again.",
        challenge=Challenge.BEARER,
    )
    SSO_LOGIN_CODE_INVALID = _Row(
        401, code="sso_login_code_invalid", message="Sign in again.", challenge=Challenge.BEARER
    )
    # The credential outlived its account (deleted between the check and the change).
    ACCOUNT_GONE = _Row(
        401,
        code="account_gone",
        message="The credential's account no longer exists.",
        challenge=Challenge.BEARER,
    )

    # A vanity alias with a password, asked for without it or with another.
    ALIAS_PASSWORD_REQUIRED = _Row(
        401,
        code="alias_password_required",
        message="This link needs its password: send it in X-Alias-Password.",
        challenge=Challenge.ALIAS_PASSWORD,
    )
    ALIAS_PASSWORD_INVALID = _Row(
        401,
        code="alias_password_invalid",
        message="The password of this link is not correct.",
        challenge=Challenge.ALIAS_PASSWORD,
    )

    # -- 403: the credential may not do this -------------------------------------------------
    INSUFFICIENT_PERMISSION = _Row(
        403,
        code="insufficient_permission",
        message="This API key lacks a permission this request needs.",
    )
    SESSION_REQUIRED = _Row(
        403,
        code="session_required",
        message="This endpoint accepts only a session token (Authorization: Bearer), "
        "not an API key.",
    )
    IP_NOT_ALLOWED = _Row(
        403,
        code="ip_not_allowed",
        message="This API key may not be used from the address of this request.",
    )
    NO_PERMISSION_MAPPING = _Row(
        403,
        code="no_permission_mapping",
        message="No permission is mapped to the original request.",
    )
    SSO_EMAIL_UNVERIFIED = _Row(
        403, code="sso_email_unverified", message="The provider has not verified this e-mail."
    )
    SSO_DOMAIN_NOT_ALLOWED = _Row(
        403, code="sso_domain_not_allowed", message="This e-mail domain may not sign in here."
    )
    SSO_ACCOUNT_NOT_FOUND = _Row(
        403, code="sso_account_not_found", message="No account matches this identity."
    )
    SSO_IDENTITY_MISMATCH = _Row(
        403, code="sso_identity_mismatch", message="This identity is not this account's."
    )
    PASSWORD_LOGIN_DISABLED = _Row(
        403, code="password_login_disabled", message="Password login is off: use single sign-on."
    )
    # A sensitive operation from a session whose last authentication is too old.
    REAUTHENTICATION_REQUIRED = _Row(
        403,
        code="reauthentication_required",
        message="This operation needs a recent authentication: POST /api/v1/auth/reauthenticate "
        "first.",
    )

    # -- 404: nothing is here ----------------------------------------------------------------
    ROUTE_NOT_FOUND = _Row(404, code="route_not_found", message="No such endpoint.")
    KEY_NOT_FOUND = _Row(404, code="key_not_found", message="No active API key has this id.")
    SESSION_NOT_FOUND = _Row(
        404, code="session_not_found", message="No live session of this account has this id."
    )
    # An unknown file id, or another account's file: the two are never told apart.
    FILE_NOT_FOUND = _Row(404, code="file_not_found", message="No such file.")
    # The same for folders: unknown, another account's, or being deleted.
    FOLDER_NOT_FOUND = _Row(404, code="folder_not_found", message="No such folder.")
    # Every unusable vanity alias (unknown, expired, disabled, deleted, used up, switched off
    # by its account) and an API's unknown or another account's alias id: never told apart.
    ALIAS_NOT_FOUND = _Row(404, code="alias_not_found", message="No such alias.")
    # A file of the caller's that has no thumbnail: not a raster image, or one that could not
    # be decoded within the bounds (corrupt, a decompression bomb, too large).
    THUMBNAIL_NOT_FOUND = _Row(
        404, code="thumbnail_not_found", message="This file has no thumbnail."
    )
    # Unknown, malformed, ended, another file's, or its session is over: never told apart.
    DOWNLOAD_TICKET_NOT_FOUND = _Row(
        404,
        code="download_ticket_not_found",
        message="This download ticket is not valid (tickets last a minute, and end with the "
        "session that took them). Take another.",
    )
    TOTP_ENROLLMENT_NOT_FOUND = _Row(
        404,
        code="totp_enrollment_not_found",
        message="No TOTP enrolment is pending (none was started, or it expired). Start again.",
    )
    TOTP_NOT_ENABLED = _Row(404, code="totp_not_enabled", message="TOTP is not enabled.")
    # A resumable upload: unknown, another account's, expired, or terminated.
    UPLOAD_NOT_FOUND = _Row(404, code="upload_not_found", message="No such upload.")
    PASSKEY_NOT_FOUND = _Row(
        404, code="passkey_not_found", message="This account has no passkey with this id."
    )
    IDENTITY_NOT_FOUND = _Row(404, code="identity_not_found", message="No such identity.")
    USER_NOT_FOUND = _Row(404, code="user_not_found", message="No user has this email.", sent=False)

    # -- 405 to 417: how the request was sent ------------------------------------------------
    METHOD_NOT_ALLOWED = _Row(
        405, code="method_not_allowed", message="This method is not allowed here."
    )
    # aiohttp's reason phrase, as these two have always said.
    REQUEST_TIMEOUT = _Row(408, code="request_timeout", message="Request Timeout")
    PAYLOAD_TOO_LARGE = _Row(
        413, code="payload_too_large", message="The request body is too large."
    )
    UNSUPPORTED_MEDIA_TYPE = _Row(
        415,
        code="unsupported_media_type",
        message="The request body must be JSON (Content-Type: application/json).",
    )
    RANGE_NOT_SATISFIABLE = _Row(
        416, code="range_not_satisfiable", message="The requested range is not within the file."
    )
    EXPECTATION_FAILED = _Row(417, code="expectation_failed", message="Expectation Failed")
    # tus: a request without ``Tus-Resumable: 1.0.0`` (answered with ``Tus-Version``).
    TUS_VERSION_UNSUPPORTED = _Row(
        412,
        code="tus_version_unsupported",
        message="Send Tus-Resumable: 1.0.0, the one version of tus this service speaks.",
    )
    # tus: a PATCH whose bytes do not match its Upload-Checksum (nothing of them kept).
    UPLOAD_CHECKSUM_MISMATCH = _Row(
        460,
        code="upload_checksum_mismatch",
        message="The bytes do not match Upload-Checksum; none of them were kept.",
    )

    # -- 409: the state is in the way --------------------------------------------------------
    KEY_LIMIT_REACHED = _Row(
        409,
        code="key_limit_reached",
        message="This account already has the maximum of active API keys. "
        "Revoke one before creating another.",
    )
    # A factor the operator has not configured what it needs for (the secrets key for TOTP, the
    # public URL for passkeys away from localhost): the message names the setting.
    MFA_NOT_CONFIGURED = _Row(
        409,
        code="mfa_not_configured",
        message="This second factor needs a setting the operator has not made.",
    )
    KEY_BUSY = _Row(
        409,
        code="key_busy",
        message="Other requests are changing this key at the same time. Retry.",
    )
    FILE_LIMIT_REACHED = _Row(
        409,
        code="file_limit_reached",
        message="This account holds the maximum number of files. Delete one before uploading.",
    )
    FILE_BUSY = _Row(
        409,
        code="file_busy",
        message="Other requests are changing this file at the same time. Retry.",
    )
    FOLDER_NAME_TAKEN = _Row(
        409,
        code="folder_name_taken",
        message="A folder with this name, ignoring case, is already there.",
    )
    FOLDER_CYCLE = _Row(
        409,
        code="folder_cycle",
        message="A folder cannot be moved into itself or into a folder inside it.",
    )
    FOLDER_NOT_EMPTY = _Row(
        409,
        code="folder_not_empty",
        message="The folder holds files or folders. Delete them first, or ask for recursive=true.",
    )
    FOLDER_TOO_DEEP = _Row(409, code="folder_too_deep", message="Folders may not nest this deep.")
    FOLDER_LIMIT_REACHED = _Row(
        409,
        code="folder_limit_reached",
        message="This account holds the maximum number of folders. Delete one before "
        "creating another.",
    )
    FOLDER_BUSY = _Row(
        409,
        code="folder_busy",
        message="Other requests are changing this folder at the same time. Retry.",
    )
    SETTINGS_BUSY = _Row(
        409,
        code="settings_busy",
        message="Other requests are changing this account's settings at the same time. Retry.",
    )
    ALIAS_TAKEN = _Row(
        409,
        code="alias_taken",
        message="This slug, ignoring case, is already an alias's. Choose another.",
    )
    ALIAS_LIMIT_REACHED = _Row(
        409,
        code="alias_limit_reached",
        message="This account holds the maximum number of aliases. Delete one before "
        "creating another.",
    )
    ALIAS_BUSY = _Row(
        409,
        code="alias_busy",
        message="Other requests are changing this alias at the same time. Retry.",
    )
    IDENTITY_TAKEN = _Row(409, code="identity_taken", message="Another account has it.")
    LAST_WAY_IN = _Row(409, code="last_way_in", message="It is the account's last way in.")
    TOTP_ALREADY_ENABLED = _Row(
        409,
        code="totp_already_enabled",
        message="TOTP is already enabled. Disable it before enrolling again.",
    )
    MFA_NOT_ENABLED = _Row(
        409,
        code="mfa_not_enabled",
        message="This account has no second factor: recovery codes need one.",
    )
    PASSKEY_LIMIT_REACHED = _Row(
        409,
        code="passkey_limit_reached",
        message="This account has the maximum of passkeys. Remove one before adding another.",
    )
    # tus: a PATCH from an offset other than the upload's (details.offset: the upload's).
    UPLOAD_OFFSET_MISMATCH = _Row(
        409,
        code="upload_offset_mismatch",
        message="The upload is at another offset: ask it with HEAD and send from there.",
    )
    UPLOAD_IN_PROGRESS = _Row(
        409,
        code="upload_in_progress",
        message="Another request is writing to this upload now. Retry from its offset.",
    )
    UPLOAD_LIMIT_REACHED = _Row(
        409,
        code="upload_limit_reached",
        message="This account has the maximum of uploads in progress, or of the bytes they "
        "hold. Finish or terminate one first: GET /api/v1/uploads lists them.",
    )
    ARCHIVE_TOO_LARGE = _Row(
        409,
        code="archive_too_large",
        message="The archive would hold more files than one archive may.",
    )
    EMAIL_TAKEN = _Row(
        409, code="email_taken", message="A user with this email already exists.", sent=False
    )

    # -- 429: too many requests --------------------------------------------------------------
    RATE_LIMITED = _Row(
        429,
        code="rate_limited",
        message="Too many requests. Retry after the time in the Retry-After header.",
    )
    LOGIN_THROTTLED = _Row(
        429,
        code="login_throttled",
        message="Too many failed logins. Retry after the time in the Retry-After header.",
    )
    LEAK_REPORTS_THROTTLED = _Row(
        429,
        code="leak_reports_throttled",
        message="Too many leak reports from this address. "
        "Retry after the time in the Retry-After header.",
    )

    ALIAS_PASSWORD_THROTTLED = _Row(
        429,
        code="alias_password_throttled",
        message="Too many wrong passwords for this link or from this address. "
        "Retry after the time in the Retry-After header.",
    )

    # -- 499, 500, 503 -----------------------------------------------------------------------
    # nginx's 499: the client went away before its request was read. Never sent (nobody is
    # there to read it), but logged and counted so it is not mistaken for a server error.
    CLIENT_CLOSED_REQUEST = _Row(
        499,
        code="client_closed_request",
        message="The client closed the connection before its request was read.",
        sent=False,
    )
    INTERNAL_ERROR = _Row(
        500, code="internal_error", message="The server could not handle this request."
    )
    # The files' filesystem is full (or the service's quota on it used up): nothing was stored.
    STORAGE_FULL = _Row(
        507, code="storage_full", message="The server has no room to store this file now."
    )
    # The credential store cannot be reached: every protected request is refused (fail closed).
    STORE_UNAVAILABLE = _Row(
        503,
        code="store_unavailable",
        message="The credential store is unreachable. Retry shortly.",
        retry_after=1,
    )
    STORAGE_UNAVAILABLE = _Row(
        503,
        code="storage_unavailable",
        message="The file storage can't be reached. Retry shortly.",
        retry_after=5,
    )
    ALIAS_PASSWORD_BUSY = _Row(
        503,
        code="alias_password_busy",
        message="Too many link passwords are being checked. Retry shortly.",
        retry_after=1,
    )
    # A stored TOTP secret can't be decrypted with the configured keys (they changed).
    MFA_UNAVAILABLE = _Row(
        503, code="mfa_unavailable", message="This second factor is not available on this service."
    )
    SSO_UNAVAILABLE = _Row(
        503, code="sso_unavailable", message="The identity provider is unreachable.", retry_after=30
    )
    LOGIN_BUSY = _Row(
        503,
        code="login_busy",
        message="Too many logins are in progress. Retry shortly.",
        retry_after=1,
    )


class ApiError(Exception):
    """A refusal: its row of the table (``code``), with what this one says beyond the row.

    ``message`` replaces the row's; ``headers`` are added to the row's; ``status`` replaces the
    row's where a route answers a code otherwise (forward-auth's 401 for a 400, a status of
    aiohttp's parser). Nothing is built per refusal beyond what the raise site passes."""

    def __init__(
        self,
        code: Code,
        message: str | None = None,
        *,
        details: Any = None,
        headers: Mapping[str, str] | None = None,
        status: int | None = None,
    ) -> None:
        self.code = code
        self.status = code.status if status is None else status
        self.message = message = message or code.message
        self.details = details
        base = code.headers
        if status is not None and status != 401 and code.challenge is not None:
            # A challenge belongs to a 401 only (a 401 row answered otherwise leaves it out).
            base = {k: v for k, v in base.items() if k != "WWW-Authenticate"}
        if headers is None:
            self.headers = base
        else:
            self.headers = {**base, **headers} if base else headers
        # What Exception.__init__ would do, without the call: the hot path raises these.
        self.args = (message,)


class CorruptRecord(ApiError):
    """A stored record could not be read: refuse rather than guess (fail closed), answered as
    the store being unavailable, which a client cannot tell from it and retries alike."""

    def __init__(self) -> None:
        super().__init__(
            Code.STORE_UNAVAILABLE, "The credential store returned unreadable data. Retry shortly."
        )
