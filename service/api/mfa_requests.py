"""The fields of second-factor requests: enrolment (a code, a passkey's name and credential), a
login's second step, a reauthentication. Like ``validation``: every problem is a 400
``validation_failed`` naming each field and why, and nothing a client sent is echoed back (a code
is a secret).

A malformed answer (a code that isn't 6 digits, a recovery code that isn't 16 base32 characters,
a passkey's assertion that isn't an object) is refused here, before anything is counted: it can't
be right, so it can't be a guess.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from aiohttp import web

from service.api.validation import _refuse_unknown_fields
from service.auth.mfa import MAX_PASSKEY_NAME_LENGTH, Answer
from service.auth.users import MAX_PASSWORD_LENGTH
from service.domain import recovery_codes, totp
from service.errors import ApiError, Code

# ``localhost`` and the names below it (RFC 6761: always this machine), with a port.
_LOCALHOST = re.compile(r"(?:[a-z0-9-]{1,63}\.){0,8}localhost(?::[0-9]{1,5})?", re.IGNORECASE)


def loopback_origin(request: web.Request) -> str | None:
    """The request's own origin when it is a ``localhost`` page reached over loopback (the
    peer is 127.0.0.0/8 or ::1, the Host ``localhost`` or a name below it): where passkeys
    work without ``FILEHOST_PUBLIC_URL`` (``Factors.passkeys_at``), as on the machine
    ``scripts/run`` serves. None for anything else: an address is no relying party, and a
    name reached through a proxy is the operator's to configure."""
    try:
        if request.remote is None or not ipaddress.ip_address(request.remote).is_loopback:
            return None
    except ValueError:  # a Unix socket's peer
        return None
    host = request.headers.get("Host", "")
    if not _LOCALHOST.fullmatch(host):
        return None
    return f"{request.scheme}://{host.lower()}"


# Longer than any token or assertion a client has a reason to send (an assertion's JSON is a few
# hundred bytes; the body limit bounds the rest).
_MAX_TOKEN_LENGTH = 200
_ANSWER_FIELDS = ("code", "recovery_code", "webauthn")


def _refuse(problems: dict[str, Any]) -> None:
    if problems:
        raise ApiError(Code.VALIDATION_FAILED, details=problems)


def _code(value: Any) -> str | None:
    """A TOTP code as typed (spaces allowed between the digits), or None when it can't be one."""
    if not isinstance(value, str):
        return None
    code = value.replace(" ", "")
    return code if totp.is_code(code) else None


_CODE_PROBLEM = f"must be the {totp.DIGITS} digits the authenticator app shows"
_RECOVERY_PROBLEM = (
    f"must be one of the recovery codes: {recovery_codes.LENGTH} letters and digits, "
    "hyphens allowed"
)


def parse_code(body: dict[str, Any]) -> str:
    """``POST /auth/mfa/totp/confirm``: ``code``."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("code",), problems)
    code = _code(body.get("code"))
    if code is None:
        problems["code"] = _CODE_PROBLEM
    _refuse(problems)
    assert code is not None
    return code


def _answer(body: dict[str, Any], problems: dict[str, Any], required: bool) -> Answer | None:
    given = [field for field in _ANSWER_FIELDS if field in body]
    if len(given) > 1:
        for field in given:
            problems[field] = "give one of code, recovery_code and webauthn, not several"
        return None
    if not given:
        if required:
            problems["code"] = "is required (or recovery_code, or webauthn)"
        return None
    field = given[0]
    value = body[field]
    if field == "code":
        code = _code(value)
        if code is None:
            problems["code"] = _CODE_PROBLEM
        return Answer(code=code)
    if field == "recovery_code":
        normalised = recovery_codes.normalise(value) if isinstance(value, str) else None
        if normalised is None:
            problems["recovery_code"] = _RECOVERY_PROBLEM
        return Answer(recovery_code=normalised)
    if not isinstance(value, dict):
        problems["webauthn"] = "must be the passkey's assertion (PublicKeyCredential as JSON)"
    return Answer(webauthn=value if isinstance(value, dict) else None)


def _mfa_token(body: dict[str, Any], problems: dict[str, Any]) -> str:
    token = body.get("mfa_token")
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN_LENGTH:
        problems["mfa_token"] = "is required: the mfa_token of the login's first step"  # noqa: S105
        return ""
    return token


def parse_second_step(body: dict[str, Any]) -> tuple[str, Answer]:
    """``POST /auth/login/mfa``: ``mfa_token`` and one of ``code``, ``recovery_code``,
    ``webauthn``."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("mfa_token", *_ANSWER_FIELDS), problems)
    token = _mfa_token(body, problems)
    answer = _answer(body, problems, required=True)
    _refuse(problems)
    assert answer is not None
    return token, answer


def parse_mfa_token(body: dict[str, Any]) -> str:
    """``POST /auth/login/mfa/webauthn-options``: ``mfa_token``."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("mfa_token",), problems)
    token = _mfa_token(body, problems)
    _refuse(problems)
    return token


def parse_reauthenticate(body: dict[str, Any]) -> tuple[str, Answer | None]:
    """``POST /auth/reauthenticate``: ``password``, and one of ``code``, ``recovery_code``,
    ``webauthn`` when the account has a second factor."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("password", *_ANSWER_FIELDS), problems)
    password = body.get("password")
    if not isinstance(password, str) or not password:
        problems["password"] = "is required and must be a non-empty string"  # noqa: S105
    elif len(password) > MAX_PASSWORD_LENGTH:
        problems["password"] = f"must be at most {MAX_PASSWORD_LENGTH} characters"
    answer = _answer(body, problems, required=False)
    _refuse(problems)
    assert isinstance(password, str)
    return password, answer


def parse_new_passkey(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``POST /auth/mfa/webauthn``: ``name`` (1 to 100 characters, no control characters) and
    ``credential``, the browser's ``PublicKeyCredential`` as JSON."""
    problems: dict[str, Any] = {}
    _refuse_unknown_fields(body, ("name", "credential"), problems)
    name = body.get("name")
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name) > MAX_PASSKEY_NAME_LENGTH
        or any(ord(char) < 32 or ord(char) == 127 for char in name)
    ):
        problems["name"] = (
            f"is required: 1 to {MAX_PASSKEY_NAME_LENGTH} characters, no control characters"
        )
    credential = body.get("credential")
    if not isinstance(credential, dict):
        problems["credential"] = "is required: the new PublicKeyCredential as JSON"
    _refuse(problems)
    assert isinstance(name, str) and isinstance(credential, dict)
    return name.strip(), credential
