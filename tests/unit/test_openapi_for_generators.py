"""The OpenAPI document in the shapes client generators read, checked in milliseconds: the rules
whose breach made openapi-python-client drop schemas or send an upload as text. The generators
themselves run in ``tests/system/test_generated_clients.py``; these catch the usual breaches
without them.

- every array says what its items are (a union holding an array without ``items`` made
  openapi-python-client drop ``Error`` and every schema built on it);
- every binary value (a multipart file part, a download) is ``type: string, format: binary``:
  OpenAPI 3.1's ``contentMediaType`` alone is not read by generators, which then send the text of
  a Python object instead of the file;
- every body leads with a media type generators know (a response only ``*/*`` is skipped);
- operation ids become readable, distinct method names (``upload_file``, ``createKey``), and
  each operation has one declared tag (the module a Python client puts it in);
- a server entry, relative to wherever the document is served.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator
from typing import Any

from tests.support.openapi import DOCUMENT, operations, resolve

JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
# Keywords whose values are data, not schemas: an example may well hold a field named "type".
VALUES = {"example", "examples", "enum", "const", "default"}
# What openapi-python-client and openapi-typescript + openapi-fetch build a request from.
REQUEST_MEDIA_TYPES = {
    "application/json",
    "multipart/form-data",
    "application/x-www-form-urlencoded",
    "application/octet-stream",
}
# lowerCamelCase words, each a capital and lower case letters or digits: ``listAuditEvents``.
# Runs of capitals (``getURL``) are split differently by different generators.
OPERATION_ID = re.compile(r"[a-z][a-z0-9]*(?:[A-Z][a-z0-9]+)*")


def schemas(node: Any = DOCUMENT, where: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    """(JSON pointer, schema) for every schema in the document, nested ones included: any object
    whose ``type`` is JSON Schema's (a security scheme's ``type`` is not)."""
    if isinstance(node, dict):
        kind = node.get("type")
        if (isinstance(kind, str) and kind in JSON_TYPES) or (
            isinstance(kind, list) and set(kind) <= JSON_TYPES
        ):
            yield where, node
        for name, value in node.items():
            if name not in VALUES:
                yield from schemas(value, f"{where}/{name}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from schemas(value, f"{where}/{index}")


def types_of(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    return set(kind) if isinstance(kind, list) else {kind}


def is_binary(media_type: str) -> bool:
    """A media type whose bytes are not JSON or text (``*/*`` included: it may be anything)."""
    return not (
        media_type in ("application/json", "multipart/form-data")
        or media_type.endswith("+json")
        or media_type.startswith("text/")
        or media_type == "application/x-www-form-urlencoded"
    )


def bodies() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, media type, media type object) for every request and response body."""
    for method, path, operation in operations():
        request = resolve(operation.get("requestBody", {}))
        for media_type, content in request.get("content", {}).items():
            yield f"{method} {path}", media_type, content
        for status, response in operation["responses"].items():
            for media_type, content in resolve(response).get("content", {}).items():
                yield f"{method} {path} {status}", media_type, content


def snake_case(operation_id: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


def test_the_walk_finds_the_schemas_these_rules_are_about() -> None:
    found = dict(schemas())
    assert "#/components/schemas/Error/properties/details" in found
    assert "#/components/schemas/UploadRequest/properties/file" in found
    assert "#/components/securitySchemes/ApiKey" not in found
    assert len(found) > 150


def test_every_array_says_what_its_items_are() -> None:
    untyped = [
        where
        for where, schema in schemas()
        if "array" in types_of(schema) and "items" not in schema and "prefixItems" not in schema
    ]
    assert untyped == []


def test_every_binary_value_is_a_string_of_format_binary() -> None:
    """A schema with a ``contentMediaType`` (a multipart file part), and the schema of every body
    that is not JSON or text, is ``type: string`` with ``format: binary``."""
    binary = {where: schema for where, schema in schemas() if "contentMediaType" in schema}
    for where, media_type, content in bodies():
        if is_binary(media_type):
            binary[f"{where} {media_type}"] = resolve(content["schema"])
    assert "#/components/schemas/UploadRequest/properties/file" in binary
    assert "GET /api/v1/files/{file_id}/content 200 application/octet-stream" in binary
    for where, schema in binary.items():
        assert schema["type"] == "string" and schema.get("format") == "binary", where


def test_every_body_leads_with_a_media_type_generators_read() -> None:
    """Generators take the first media type they know and skip a body that has none: a
    download is ``application/octet-stream`` first, then ``*/*`` for the stored types."""
    for method, path, operation in operations():
        request = resolve(operation.get("requestBody", {}))
        for media_type in request.get("content", {}):
            assert media_type in REQUEST_MEDIA_TYPES, (method, path, media_type)
        for status, response in operation["responses"].items():
            content = resolve(response).get("content")
            if not content:
                continue
            first = next(iter(content))
            readable = (
                first in ("application/json", "application/octet-stream")
                or first.endswith("+json")
                or first.startswith("text/")
            )
            assert readable, (method, path, status, first)


def test_every_operation_id_makes_a_readable_method_name_of_its_own() -> None:
    ids = [operation.get("operationId", "") for _m, _p, operation in operations()]
    assert [i for i in ids if not OPERATION_ID.fullmatch(i)] == []
    names = [snake_case(i) for i in ids]
    assert len(names) == len(set(names)), "two operations become one method name"
    assert [n for n in names if keyword.iskeyword(n)] == []
    assert {"create_key", "upload_file", "download_file", "list_files", "login"} <= set(names)


def test_every_operation_has_one_declared_tag() -> None:
    declared = {tag["name"] for tag in DOCUMENT["tags"]}
    for method, path, operation in operations():
        tags = operation.get("tags", [])
        assert len(tags) == 1 and tags[0] in declared, (method, path, tags)


def test_the_server_is_relative_to_where_the_document_is_served() -> None:
    """The service cannot know the public origin a proxy gives it: ``/`` is right wherever the
    document was fetched from, and every path carries its own ``/api/v1``."""
    assert [server["url"] for server in DOCUMENT["servers"]] == ["/"]
    assert all(path.startswith("/") for path in DOCUMENT["paths"])
