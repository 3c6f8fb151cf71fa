"""The service's OpenAPI document, and JSON Schema validators for its parts."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.support.paths import REPO_ROOT

DOCUMENT_PATH = REPO_ROOT / "service" / "api" / "openapi.json"
DOCUMENT: dict[str, Any] = json.loads(DOCUMENT_PATH.read_text())

_REGISTRY = Registry().with_resource(
    "urn:filehost:openapi", Resource(contents=DOCUMENT, specification=DRAFT202012)
)


def validator(pointer: str) -> Draft202012Validator:
    """A JSON Schema validator for ``#/<pointer>`` of the document, with its $refs resolved."""
    return Draft202012Validator({"$ref": f"urn:filehost:openapi#{pointer}"}, registry=_REGISTRY)
