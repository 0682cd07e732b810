"""Hold a rendered NodeConfig to nodeadm's schema (the shared reference's `upstream/nodeconfig.schema.json`, built
from the aws/eks-hybrid and amazon-eks-ami CRDs; provenance in that folder's README).

The project has no JSON Schema library, and the schema uses few keywords, so this checks exactly those: `$ref`
(local), `if`/`then`/`else`, `type`, `properties`, `additionalProperties`, `required`, `const`, `enum`, `items`,
`propertyNames`, and `contentEncoding: base64`. `format` and annotations are not checked. A keyword outside that
set raises, so a new schema cannot pass unchecked.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.charts.rendering import upstream_root

ANNOTATIONS = frozenset({"$schema", "$defs", "title", "description", "format"})
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}


def schema_path() -> Path:
    return upstream_root() / "nodeconfig.schema.json"


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(schema_path().read_text())
    return schema


def problems(document: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """Every way `document` breaks the schema, each with its path; empty when it conforms."""
    root = schema if schema is not None else load_schema()
    return list(_check(document, root, root, "$"))


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[kind])


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str) -> Iterator[str]:
    unknown = set(schema) - ANNOTATIONS - _KEYWORDS
    if unknown:
        raise ValueError(f"{path}: schema keywords this checker does not implement: {sorted(unknown)}")
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        yield from _check(value, target, root, path)
    if "if" in schema:
        branch = "then" if not list(_check(value, schema["if"], root, path)) else "else"
        if branch in schema:
            yield from _check(value, schema[branch], root, path)
    kinds = schema.get("type")
    if kinds is not None:
        allowed = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is(value, k) for k in allowed):
            yield f"{path}: {value!r} is not of type {kinds}"
            return
    if "const" in schema and value != schema["const"]:
        yield f"{path}: {value!r} is not {schema['const']!r}"
    if "enum" in schema and value not in schema["enum"]:
        yield f"{path}: {value!r} is not one of {schema['enum']}"
    if schema.get("contentEncoding") == "base64" and isinstance(value, str):
        try:
            base64.b64decode(value, validate=True)
        except binascii.Error:
            yield f"{path}: {value!r} is not base64"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                yield f"{path}: {key!r} is required"
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if "propertyNames" in schema:
                yield from _check(key, schema["propertyNames"], root, f"{path}.{key} (name)")
            if key in properties:
                yield from _check(item, properties[key], root, f"{path}.{key}")
            elif extra is False:
                yield f"{path}: unknown field {key!r}"
            elif isinstance(extra, dict):
                yield from _check(item, extra, root, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            yield from _check(item, schema["items"], root, f"{path}[{index}]")


_KEYWORDS = frozenset(
    {
        "$ref",
        "if",
        "then",
        "else",
        "type",
        "properties",
        "additionalProperties",
        "required",
        "const",
        "enum",
        "items",
        "propertyNames",
        "contentEncoding",
    }
)
