"""The service's OpenAPI document, and JSON Schema validators for its parts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.support.paths import REPO_ROOT

DOCUMENT_PATH = REPO_ROOT / "service" / "api" / "openapi.json"
DOCUMENT: dict[str, Any] = json.loads(DOCUMENT_PATH.read_text())
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}

_REGISTRY = Registry().with_resource(
    "urn:filehost:openapi", Resource(contents=DOCUMENT, specification=DRAFT202012)
)


def validator(pointer: str) -> Draft202012Validator:
    """A JSON Schema validator for ``#/<pointer>`` of the document, with its $refs resolved."""
    return Draft202012Validator({"$ref": f"urn:filehost:openapi#{pointer}"}, registry=_REGISTRY)


def resolve(node: Any) -> Any:
    """``node`` with its ``$ref`` followed, through as many as there are."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = DOCUMENT
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) for every operation of the document."""
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield method.upper(), path, operation
