"""The table of error codes (``service.errors.Code``) is the one place a code is defined, and what
clients read agrees with it: every code the service names is a row, no raise site spells a code
or a challenge itself, and the OpenAPI document, the errors table of ``docs/api.md``, the
dashboard's JavaScript and the example proxies name only the table's codes, with its statuses."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from redis.exceptions import ConnectionError as RedisConnectionError

from service.api.envelope import as_api_error, low_level_error
from service.auth.sessions import Sessions
from service.domain.principal import CredentialType, Principal
from service.errors import ApiError, Challenge, Code, CorruptRecord

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "service"
ERRORS_MODULE = SERVICE / "errors.py"
DOCUMENT: dict[str, Any] = json.loads((SERVICE / "api" / "openapi.json").read_text())
API_DOCS = ROOT / "docs" / "api.md"
DASHBOARD_JS = SERVICE / "dashboard" / "static" / "js"
# The example proxy configurations that answer clients with JSON envelopes of their own.
DEPLOY_CONFIGS = sorted(
    path
    for path in (ROOT / "deploy").rglob("*")
    if path.is_file() and path.parent.name in ("nginx", "caddy", "traefik")
)
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
VERIFY = "/api/v1/auth/verify"

SENT = {code.value: code.status for code in Code if code.sent}
# Codes no HTTP answer carries: the client that went away (499, only logged and counted), and
# the refusals of the CLI's user commands.
NOT_SENT = {Code.CLIENT_CLOSED_REQUEST, Code.EMAIL_TAKEN, Code.USER_NOT_FOUND}
# Snake-case strings in the dashboard's JavaScript that are not the API's codes: the codes it
# gives failures of its own (no answer, or one without the envelope, a reauthentication the
# user cancelled), audit actor types, the API's name of a second factor's answer, an order
# of the files' list (`sort=created_at`), the fields an alias is made with and the audit
# trail's filters by key and session.
DASHBOARD_NOT_CODES = {
    "created_at",
    "file_id",
    "folder_id",
    "key_id",
    "session_id",
    "network_error",
    "unexpected_response",
    "reauthentication_cancelled",
    "leak_report",
    "api_key",
    "recovery_code",
}
# The codes the example proxies answer with of their own (docs/gateway.md, docs/operating.md):
# the forward-auth gateway's fallback when the service sent no X-Auth-Error, the service
# unreachable, and a 400 it cannot pass on; and a proxy's own failures in front of the service.
GATEWAY_OWN = {
    "unauthorized",
    "auth_unavailable",
    "gateway_misconfigured",
    "service_unavailable",
    "gateway_timeout",
    "uri_too_long",
}


# -- the table -------------------------------------------------------------------------------------


def test_each_row_is_a_code_as_the_document_allows_with_a_status_and_a_message() -> None:
    pattern = DOCUMENT["components"]["schemas"]["Error"]["properties"]["code"]["pattern"]
    assert len(Code) > 40
    for code in Code:
        assert re.fullmatch(pattern, code.value), code
        assert code.name == code.value.upper(), code
        assert Code(code.value) is code
        assert 400 <= code.status <= 599, code
        assert code.message and code.message == code.message.strip(), code
    assert {code for code in Code if not code.sent} == NOT_SENT


def test_every_401_and_nothing_else_carries_its_challenge() -> None:
    for code in Code:
        assert (code.challenge is not None) == (code.status == 401), code
        if code.challenge is not None:
            assert code.headers["WWW-Authenticate"] == code.challenge.value
        assert set(code.headers) <= {"WWW-Authenticate", "Retry-After"}, code
    assert Code.INVALID_API_KEY.challenge is Challenge.API_KEY
    assert Code.INVALID_SESSION.challenge is Challenge.INVALID_TOKEN
    assert Code.CREDENTIAL_MISSING.challenge is Challenge.BEARER


def test_the_headers_of_a_row_are_made_once_and_cannot_be_changed() -> None:
    first, second = ApiError(Code.INVALID_API_KEY), ApiError(Code.INVALID_API_KEY)
    assert first.headers is second.headers is Code.INVALID_API_KEY.headers
    with pytest.raises(TypeError):
        first.headers["X-Auth-Error"] = "invalid_api_key"  # type: ignore[index]
    with pytest.raises(TypeError):
        Challenge.BEARER.headers["WWW-Authenticate"] = "Basic"  # type: ignore[index]


def test_a_raise_site_passes_only_what_varies() -> None:
    plain = ApiError(Code.KEY_NOT_FOUND)
    assert (plain.status, plain.code, plain.message, plain.details) == (
        404,
        "key_not_found",
        "No active API key has this id.",
        None,
    )
    limited = ApiError(
        Code.RATE_LIMITED, "Retry in 3 s.", details={"retry_after_seconds": 3}, headers={"A": "b"}
    )
    assert (limited.status, limited.message, limited.headers) == (429, "Retry in 3 s.", {"A": "b"})
    store = ApiError(Code.STORE_UNAVAILABLE, headers={"X-Auth-Error": "store_unavailable"})
    assert store.headers == {"Retry-After": "1", "X-Auth-Error": "store_unavailable"}
    assert Code.STORE_UNAVAILABLE.headers == {"Retry-After": "1"}
    corrupt = CorruptRecord()
    assert (corrupt.status, corrupt.code) == (503, Code.STORE_UNAVAILABLE)
    assert corrupt.headers == {"Retry-After": "1"}  # as every store_unavailable: documented so


async def test_a_session_ended_during_its_request_is_refused_as_any_refused_token() -> None:
    class Ended:
        async def identity(self, token_digest: str) -> None:
            return None

    sessions = Sessions(Ended(), None, None)  # type: ignore[arg-type]
    principal = Principal("usr_x", CredentialType.SESSION, 0, 0, None, "digest")
    with pytest.raises(ApiError) as refused:
        await sessions.acting_session(principal)
    assert refused.value.code is Code.INVALID_SESSION
    assert refused.value.headers["WWW-Authenticate"] == Challenge.INVALID_TOKEN


# -- what reaches the envelope from elsewhere ------------------------------------------------------


@pytest.mark.parametrize(
    ("exception", "code"),
    [
        (web.HTTPNotFound(), Code.ROUTE_NOT_FOUND),
        (web.HTTPMethodNotAllowed("PUT", ["GET", "POST"]), Code.METHOD_NOT_ALLOWED),
        (web.HTTPRequestTimeout(), Code.REQUEST_TIMEOUT),
        (web.HTTPRequestEntityTooLarge(10, 20), Code.PAYLOAD_TOO_LARGE),
        (web.HTTPExpectationFailed(), Code.EXPECTATION_FAILED),
        (RedisConnectionError(), Code.STORE_UNAVAILABLE),
        (ValueError(), Code.INTERNAL_ERROR),
    ],
)
def test_aiohttp_and_redis_failures_are_answered_with_their_rows(
    exception: Exception, code: Code
) -> None:
    error = as_api_error(exception)
    assert (error.code, error.status) == (code, code.status)
    if isinstance(exception, web.HTTPException):
        assert error.status == exception.status


def test_an_aiohttp_exception_no_row_is_written_for_is_a_500() -> None:
    error = as_api_error(web.HTTPForbidden())
    assert (error.code, error.status) == (Code.INTERNAL_ERROR, 500)


def test_the_parsers_refusals_keep_its_status() -> None:
    assert (low_level_error(400).code, low_level_error(400).status) == (Code.BAD_REQUEST, 400)
    assert low_level_error(400).message == "Malformed HTTP request."
    assert (low_level_error(408).code, low_level_error(408).status) == (Code.REQUEST_TIMEOUT, 408)
    assert (low_level_error(500).code, low_level_error(500).status) == (Code.INTERNAL_ERROR, 500)


# -- the service's source --------------------------------------------------------------------------


def _sources() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(SERVICE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (or other bare string statements)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def test_no_raise_site_spells_a_code_or_a_challenge() -> None:
    spelled = []
    for name, tree in _sources():
        if name in ("service/errors.py", "service/error_rows.py"):  # the table and its rows
            continue
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            where = f"{name}:{getattr(node, 'lineno', '?')}"
            if (
                isinstance(node, ast.keyword)
                and node.arg == "code"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                spelled.append(f"{where} code={node.value.value!r}")
            elif (
                isinstance(node, ast.Call)
                and _called(node) in {"ApiError", "CorruptRecord"}
                and node.args
                and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
            ):
                spelled.append(f"{where} a code written as a string")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and (node.value in SENT or node.value.lower() == "www-authenticate")
            ):
                spelled.append(f"{where} {node.value!r}")
    assert spelled == []


def test_every_code_the_service_names_is_in_the_table() -> None:
    named = set()
    for _, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "Code"
                and node.attr.isupper()
            ):
                named.add(node.attr)
    assert named - set(Code.__members__) == set()
    # And every row is named somewhere: a row nothing raises would be a code no client gets.
    assert set(Code.__members__) - named == set()


# -- the OpenAPI document --------------------------------------------------------------------------


def _resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = DOCUMENT
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def _schema_codes(schema: Any, seen: frozenset[str] = frozenset()) -> set[str]:
    """The codes a schema allows in ``error.code``, through its $refs."""
    if isinstance(schema, dict) and "$ref" in schema:
        if schema["$ref"] in seen:
            return set()
        return _schema_codes(_resolve(schema), seen | {schema["$ref"]})
    codes: set[str] = set()
    if isinstance(schema, dict):
        code = schema.get("properties", {}).get("code")
        if isinstance(code, dict):
            codes.update(code.get("enum", []))
            if "const" in code:
                codes.add(code["const"])
        for value in schema.values():
            codes |= _schema_codes(value, seen)
    elif isinstance(schema, list):
        for value in schema:
            codes |= _schema_codes(value, seen)
    return codes


def _example_codes(node: Any) -> set[str]:
    """The codes of the error envelopes anywhere in the document's examples."""
    codes: set[str] = set()
    if isinstance(node, dict):
        error = node.get("error")
        if node.get("success") is False and isinstance(error, dict) and "code" in error:
            codes.add(error["code"])
        for value in node.values():
            codes |= _example_codes(value)
    elif isinstance(node, list):
        for value in node:
            codes |= _example_codes(value)
    return codes


def _error_responses() -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(where, status, response) for every documented refusal, the unrouted ones included."""
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                for status, response in operation["responses"].items():
                    if int(status) >= 400:
                        yield f"{method.upper()} {path}", int(status), _resolve(response)
    for status, response in DOCUMENT["x-unrouted-responses"].items():
        yield "unrouted", int(status), _resolve(response)


def _response_codes(response: dict[str, Any]) -> set[str]:
    codes = set()
    for media in response.get("content", {}).values():
        codes |= _schema_codes(media.get("schema", {})) | _example_codes(media)
    return codes


def test_every_code_the_document_names_is_in_the_table_and_every_sent_one_is_documented() -> None:
    documented = _schema_codes(DOCUMENT["components"]) | _example_codes(DOCUMENT)
    for _, _, response in _error_responses():
        documented |= _response_codes(response)
    assert documented - set(SENT) == set(), "codes in openapi.json that the table lacks"
    assert set(SENT) - documented == set(), "codes of the table missing from openapi.json"


def test_every_documented_refusal_has_its_codes_status_and_headers() -> None:
    wrong = []
    for where, status, response in _error_responses():
        headers = {name.lower() for name in response.get("headers", {})}
        for value in sorted(_response_codes(response)):
            code = Code(value)
            # /auth/verify answers a 400 of the credential check 401: nginx passes only 401/403.
            rewrapped = where == f"GET {VERIFY}" and status == 401 and code.status == 400
            # Confirming a TOTP enrolment with a wrong code is no failed authentication: 400,
            # without a challenge (the spec's contract for the dashboard).
            restated = (where, status, value) == (
                "POST /api/v1/auth/mfa/totp/confirm",
                400,
                "mfa_code_invalid",
            )
            if code.status != status and not rewrapped and not restated:
                wrong.append(f"{where} {status}: {value} is {code.status} in the table")
            if (
                (code.challenge is not None and not restated) or rewrapped
            ) and "www-authenticate" not in headers:
                wrong.append(f"{where} {status}: {value} without WWW-Authenticate")
            if "Retry-After" in code.headers and "retry-after" not in headers:
                wrong.append(f"{where} {status}: {value} without Retry-After")
    assert wrong == []


def test_the_documents_challenge_and_messages_are_the_tables() -> None:
    header = DOCUMENT["components"]["headers"]["WWW-Authenticate"]["schema"]
    for challenge in Challenge:
        assert re.match(header["pattern"], challenge.value), challenge
    for schema in DOCUMENT["components"]["schemas"].values():
        error = schema.get("properties", {}).get("error", {}).get("properties", {})
        if "const" in error.get("message", {}):
            assert Code(error["code"]["const"]).message == error["message"]["const"]


# -- docs/api.md, the dashboard and the example gateway --------------------------------------------


def test_the_errors_table_of_the_api_docs_is_the_tables_sent_codes() -> None:
    section = API_DOCS.read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, int] = {}
    for line in section.splitlines():
        if re.match(r"\|\s*\d{3}\s*\|", line):
            status, codes, _ = (cell.strip() for cell in line.strip().strip("|").split("|", 2))
            for code in re.findall(r"`([a-z_]+)`", codes):
                assert code not in documented, f"{code} is in docs/api.md twice"
                documented[code] = int(status)
    assert documented == SENT


def test_every_code_the_dashboard_names_is_in_the_table() -> None:
    named = set()
    for path in DASHBOARD_JS.rglob("*.js"):
        named |= set(re.findall(r"""["'`]([a-z]+(?:_[a-z0-9]+)+)["'`]""", path.read_text()))
    assert {"credential_missing", "session_expired", "file_not_found"} <= named
    assert named - DASHBOARD_NOT_CODES - set(SENT) == set()
    assert DASHBOARD_NOT_CODES.isdisjoint(SENT)


def test_the_example_proxies_answer_with_the_tables_codes_and_messages_or_their_own() -> None:
    named = {path.relative_to(ROOT).as_posix() for path in DEPLOY_CONFIGS}
    assert {"deploy/nginx/forward-auth.conf", "deploy/caddy/Caddyfile"} <= named
    envelopes: set[tuple[str, str]] = set()
    for path in DEPLOY_CONFIGS:
        envelopes |= set(re.findall(r'"code":"([a-z_]+)","message":"([^"]*)"', path.read_text()))
    fallbacks = re.findall(
        r'^\s*""\s+"([a-z_]+)";',
        (ROOT / "deploy" / "nginx" / "forward-auth.conf").read_text(),
        re.MULTILINE,
    )
    codes = {code for code, _ in envelopes}
    assert {"route_not_found", "rate_limited", "auth_unavailable", "payload_too_large"} <= codes
    assert codes - set(SENT) <= GATEWAY_OWN
    assert fallbacks == ["unauthorized"]
    for code, message in envelopes:
        if code not in GATEWAY_OWN:
            assert Code(code).message == message, code
    assert GATEWAY_OWN.isdisjoint(SENT)
