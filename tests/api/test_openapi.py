"""The OpenAPI document (``service/api/openapi.json``, served at ``GET /api/v1/openapi.json``):
valid OpenAPI 3.1, in step with the router both ways, with the envelope on every response, and
agreeing with what the service actually does where schemathesis cannot look (the unrouted 404,
405 and 417, the HTTP parser's 400, the request fields ``validation.py`` knows, the error codes
the code raises).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_spec

from service.app import create_app
from service.config import Settings
from tests.support.api import Api, EnvelopeTestServer, bearer
from tests.support.files import uploaded
from tests.support.folders import folder
from tests.support.openapi import DOCUMENT, DOCUMENT_PATH, operations, resolve, validator
from tests.support.raw_http import exchange, parse_responses

ROOT = Path(__file__).resolve().parents[2]
# Routes outside /api/v1 that belong in the document when they exist (the probes, and the public
# side of vanity aliases); everything else outside /api/v1 (the dashboard's pages and assets)
# does not.
ROOT_ROUTES = {
    "/healthz",
    "/readyz",
    "/metrics",
    "/a/{slug}",
    "/a/{slug}/thumbnail",
    "/a/{slug}/{item_id}",
    "/a/{slug}/archive",
}
# Codes the service defines that no HTTP request can get: CLI-only refusals, and the defaults of
# the base classes in service/errors.py that every raise overrides.
NOT_HTTP_CODES = {
    "client_closed_request",  # the client is gone: logged and counted as 499, never sent
    "email_taken",
    "user_not_found",
    "unauthorized",
    "forbidden",
    "not_found",
    "conflict",
    "service_unavailable",
}


def routed_operations(settings: Settings) -> set[tuple[str, str]]:
    app = create_app(settings)
    found = set()
    handlers = {(route.method, route.resource): route.handler for route in app.router.routes()}
    for route in app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if not (path.startswith("/api/v1/") or path in ROOT_ROUTES):
            continue
        if route.method == "HEAD" and handlers.get(("GET", route.resource)) is route.handler:
            continue  # a GET's own HEAD
        found.add((route.method, re.sub(r"\{(\w+):[^}]*\}", r"{\1}", path)))
    return found


# -- the document itself -----------------------------------------------------------------------


def test_the_document_is_valid_openapi_3_1() -> None:
    assert DOCUMENT["openapi"].startswith("3.1.")
    validate_spec(DOCUMENT)


def test_every_ref_resolves_including_those_in_extensions() -> None:
    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                yield node["$ref"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    found = list(refs(DOCUMENT))
    assert len(found) > 50
    for ref in found:
        assert ref.startswith("#/"), ref
        assert resolve({"$ref": ref}) is not None, ref


def test_every_path_has_an_operation_id_unique_in_the_document() -> None:
    ids = [operation["operationId"] for _m, _p, operation in operations()]
    assert len(ids) == len(set(ids))


def test_the_package_ships_the_document() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    assert "openapi.json" in package_data["service.api"]


# -- in step with the router -------------------------------------------------------------------


def test_every_route_is_documented_and_every_documented_operation_is_routed(
    settings: Settings,
) -> None:
    routed = routed_operations(settings)
    documented = {(method, path) for method, path, _op in operations()}
    assert routed - documented == set(), "routes missing from service/api/openapi.json"
    assert documented - routed == set(), "documented operations that no route serves"


def test_path_parameters_are_declared_for_every_templated_path() -> None:
    for method, path, operation in operations():
        declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
        assert declared == set(re.findall(r"\{(\w+)\}", path)), (method, path)


# -- the envelope on every response ------------------------------------------------------------


# Successes that are not the API's JSON envelope: the document itself, forward-auth's empty 200
# (its answer is in headers), a file's bytes (an alias's too, or its folder's page), thumbnails,
# ZIP archives, a download ticket's download, and the operator endpoints a probe or Prometheus
# reads.
NOT_ENVELOPED = {
    "/api/v1/openapi.json",
    "/api/v1/auth/verify",
    "/api/v1/files/{file_id}/content",
    "/api/v1/files/{file_id}/thumbnail",
    "/api/v1/files/archive",
    "/api/v1/folders/{folder_id}/archive",
    "/api/v1/downloads",
    "/a/{slug}",
    "/a/{slug}/{item_id}",
    "/a/{slug}/thumbnail",
    "/a/{slug}/archive",
    "/healthz",
    "/readyz",
    "/metrics",
}


def test_every_success_is_the_success_envelope_and_every_refusal_the_error_envelope() -> None:
    envelope_ref = "#/components/schemas/ErrorEnvelope"
    for method, path, operation in operations():
        for status, response in operation["responses"].items():
            if status.startswith("2") and path in NOT_ENVELOPED:
                continue
            # Found, See Other, Not Modified, No Content, and a HEAD's success: no body at all (a
            # HEAD's refusal documents the envelope its headers describe).
            if status in ("204", "302", "303", "304") or (method == "HEAD" and status == "200"):
                assert "content" not in resolve(response), (method, path)
                continue
            schema = resolve(resolve(response)["content"]["application/json"]["schema"])
            if status.startswith("2"):
                assert schema["properties"]["success"] == {"const": True}, (method, path, status)
                assert schema["additionalProperties"] is False
            else:
                assert {"$ref": envelope_ref} in schema["allOf"], (method, path, status)


def test_each_credential_kind_and_its_refusals_are_documented_where_accepted() -> None:
    for method, path, operation in operations():
        schemes = {name for requirement in operation["security"] for name in requirement}
        responses = operation["responses"]
        if not schemes:
            continue
        assert {"400", "401", "500", "503"} <= set(responses), (method, path)
        assert "WWW-Authenticate" in resolve(responses["401"])["headers"], (method, path)
        assert resolve(responses["503"])["headers"]["Retry-After"], (method, path)
        if schemes == {"SessionToken"}:  # an API key there is 403 session_required
            # ... and a sensitive operation also 403 reauthentication_required (step-up).
            assert responses["403"] in (
                {"$ref": "#/components/responses/SessionRequired"},
                {"$ref": "#/components/responses/StepUpForbidden"},
            )


def test_every_operation_that_reads_a_body_documents_413_415_and_refuses_unknown_fields() -> None:
    for method, path, operation in operations():
        if "requestBody" not in operation:
            continue
        assert {"400", "413", "415"} <= set(operation["responses"]), (method, path)
        [(media, body)] = operation["requestBody"]["content"].items()
        if media == "application/octet-stream":  # a resumable upload's bytes, as they are
            continue
        schema = resolve(body["schema"])  # JSON, or an upload's multipart
        assert schema["additionalProperties"] is False, (method, path)


# -- agreeing with the service -----------------------------------------------------------------


async def test_the_document_is_served_as_is_without_a_credential(api: Api) -> None:
    response = await api.client.get("/api/v1/openapi.json")
    assert response.status == 200
    assert response.content_type == "application/json"
    assert await response.read() == DOCUMENT_PATH.read_bytes()
    assert response.headers["Cache-Control"] == "no-store"
    schema = "/paths/~1api~1v1~1openapi.json/get/responses/200/content/application~1json/schema"
    validator(schema).validate(await response.json())


BODY_PATHS = {
    ("POST", "/api/v1/auth/login"): {
        "email": "alice@example.com",
        "password": "correct horse battery staple",
    },
    ("POST", "/api/v1/keys"): {
        "name": "ci",
        "permissions": ["files.read"],
        "expires_days": 30,
        "folder_ids": None,
    },
    ("POST", "/api/v1/keys/leaked"): {"secrets": ["fhk_found-somewhere"]},
    ("PATCH", "/api/v1/keys/{key_id}"): {
        "name": "ci",
        "permissions": ["files.read"],
        "expires_days": 30,
        "enabled": False,
        "allowed_ips": ["192.0.2.0/24"],
        "rate_limit": {"per_second": 5, "burst": 10},
        "folder_ids": None,
    },
    ("POST", "/api/v1/keys/{key_id}/roll"): {"grace_seconds": 60},
    ("POST", "/api/v1/uploaders"): {
        "kind": "sharex",
        "name": "laptop",
        "folder_id": None,
        "alias": True,
        "expires_days": 365,
    },
    ("POST", "/api/v1/folders"): {"name": "Invoices", "parent_id": None},
    ("PATCH", "/api/v1/folders/{folder_id}"): {"name": "Receipts", "parent_id": None},
    ("PATCH", "/api/v1/files/{file_id}"): {"name": "report.pdf", "folder_id": None},
    ("POST", "/api/v1/files/bulk"): {
        "action": "move",
        "ids": ["fil_0000000000000000000000"],
        "folder_id": None,
    },
    ("PATCH", "/api/v1/settings"): {
        "default_key_expires_days": 30,
        "default_folder_id": None,
        "default_alias_expires_in_seconds": 3600,
        "default_alias_max_views": 10,
        "public_aliases_enabled": False,
    },
}


@pytest.mark.parametrize(("method", "path"), BODY_PATHS)
async def test_documented_request_fields_are_exactly_the_fields_the_service_knows(
    api: Api, method: str, path: str
) -> None:
    operation = DOCUMENT["paths"][path][method.lower()]
    schema = resolve(operation["requestBody"]["content"]["application/json"]["schema"])
    body = BODY_PATHS[(method, path)]
    assert set(body) == set(schema["properties"])
    token = await api.user_with_session()
    headers = bearer(token) if operation["security"] else {}
    url = path
    if "{key_id}" in path:
        url = path.replace("{key_id}", (await api.create_key(token))["id"])
    if "{folder_id}" in path:
        url = path.replace("{folder_id}", (await folder(api, "a folder", token=token))["id"])
    if "{file_id}" in path:
        url = path.replace("{file_id}", (await uploaded(api, b"a file", token=token))["id"])

    # Required fields missing and an undocumented one: exactly those are named.
    refused = await api.client.request(method, url, json={"undocumented": 1}, headers=headers)
    assert refused.status == 400, await refused.text()
    details = (await refused.json())["error"]["details"]
    assert set(details) == set(schema.get("required", [])) | {"undocumented"}

    # Every documented field, optional ones included, is accepted.
    accepted = await api.client.request(method, url, json=body, headers=headers)
    assert accepted.status in (200, 201, 202), await accepted.text()
    validator_path = re.sub("/", "~1", path)
    status = str(accepted.status)
    response_schema = (
        f"/paths/{validator_path}/{method.lower()}/responses/{status}/content/application~1json"
    )
    assert not list(validator(f"{response_schema}/schema").iter_errors(await accepted.json()))


async def test_unrouted_refusals_match_their_documented_schemas(
    aiohttp_client: Any, settings: Settings
) -> None:
    client = await aiohttp_client(EnvelopeTestServer(create_app(settings)))
    unrouted = DOCUMENT["x-unrouted-responses"]

    def check(status: int, body: Any, headers: Any) -> None:
        response = resolve(unrouted[str(status)])
        pointer = resolve(response["content"]["application/json"]["schema"])
        name = next(n for n, s in DOCUMENT["components"]["schemas"].items() if s is pointer)
        errors = list(validator(f"/components/schemas/{name}").iter_errors(body))
        assert not errors, (status, body, errors)
        for header_name, header in response.get("headers", {}).items():
            value = headers.get(header_name)
            assert value is not None, header_name
            Draft202012Validator(resolve(header)["schema"]).validate(value)

    not_found = await client.get("/api/v1/no-such-thing")
    check(404, await not_found.json(), not_found.headers)
    wrong_method = await client.patch("/api/v1/files")
    check(405, await wrong_method.json(), wrong_method.headers)
    expectation = await client.get("/api/v1/files", headers={"Expect": "something-else"})
    check(417, await expectation.json(), expectation.headers)
    [malformed] = parse_responses(await exchange(client.port, b"NOT HTTP AT ALL\r\n\r\n"))
    check(400, malformed.json(), {k: v[0] for k, v in malformed.headers.items()})


def documented_codes() -> set[str]:
    codes: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            code = node.get("properties", {}).get("code")
            if isinstance(code, dict):
                codes.update(code.get("enum", []))
                if "const" in code:
                    codes.add(code["const"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(DOCUMENT["components"]["schemas"])
    return codes


def raised_codes() -> set[str]:
    codes = set()
    for source in (ROOT / "service").rglob("*.py"):
        text = source.read_text()
        # code="x" / code = "x" / code: str = "x", and the authenticator's _…_refusal("x", …)
        codes.update(re.findall(r"""\bcode(?:\s*:\s*str)?\s*=\s*["']([a-z_]+)["']""", text))
        codes.update(re.findall(r"""_refusal\(\s*["']([a-z_]+)["']""", text))
    return codes


def test_every_error_code_the_service_raises_is_documented_and_no_other() -> None:
    raised = raised_codes() - NOT_HTTP_CODES
    documented = documented_codes()
    assert {"store_unavailable", "session_required", "route_not_found"} <= raised
    # expectation_failed and request_timeout come from aiohttp's HTTPExpectationFailed and
    # HTTPRequestTimeout (the envelope derives their codes from the reason).
    derived = {"expectation_failed", "request_timeout"}
    assert raised - documented == set(), "codes missing from service/api/openapi.json"
    assert documented - raised - derived == set(), "documented codes never raised"


async def test_every_401_carries_www_authenticate_even_account_gone(
    api: Api, redis_client: redis_sync.Redis
) -> None:
    user = await api.create_user("alice@example.com")
    token = await api.login("alice@example.com")
    redis_client.delete(f"fh:{{{user.id}}}:user")  # the user vanished mid-session
    response = await api.client.get("/api/v1/auth/session", headers=bearer(token))
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "account_gone"
    assert "WWW-Authenticate" in response.headers
