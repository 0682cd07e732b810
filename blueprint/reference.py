"""The config reference, generated from the pydantic models so docs and code cannot drift.

`blueprint schema --write` writes the JSON Schema of a stack's config (`schema/stack-config.schema.json`, usable by
editors for completion in stack files) and the README's reference table between two markers; `blueprint schema
--check` fails when either is stale (CI runs it).
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from components.config import SECTIONS, StackConfig

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "schema" / "stack-config.schema.json"
README_PATH = ROOT / "README.md"
START, END = "<!-- config-reference:start -->", "<!-- config-reference:end -->"
PROJECT = "gpu-clusters"


def json_schema() -> dict[str, Any]:
    """JSON Schema of the project keys of a stack file (`gpu-clusters:cluster`, ...), by alias."""
    schema = StackConfig.model_json_schema(by_alias=True)
    properties = schema.pop("properties")
    schema["properties"] = {f"{PROJECT}:{key}": properties[key] for key in SECTIONS}
    schema["required"] = [f"{PROJECT}:cluster"]
    schema["title"] = "gpu-clusters stack config"
    return schema


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return " \\| ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(get_args(annotation)[0])
    if origin in (list, tuple):
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        return f"map of {_type_name(get_args(annotation)[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return ""
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return f"`{json.dumps(value, default=str)}`" if value else ""
    return f"`{value}`"


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, directly, optionally or as list items (`Model`, `Model | None`, `list[Model]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (list, typing.Union, types.UnionType):
        for arg in get_args(annotation):
            found = _nested_model(arg)
            if found:
                return found
    return None


def rows(model: type[BaseModel] = StackConfig, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key path, type, default, description) for every field, depth first, in declaration order."""
    out: list[tuple[str, str, str, str]] = []
    for name, field in model.model_fields.items():
        if model is StackConfig and name == "region":
            continue
        key = field.alias or name
        is_list = get_origin(field.annotation) is list or any(get_origin(a) is list for a in get_args(field.annotation))
        path = f"{prefix}{key}"
        nested = _nested_model(field.annotation)
        text = field.description or (nested.__doc__ or "").split("\n\n")[0] if nested else field.description
        description = " ".join((text or "").split())
        out.append((path, _type_name(field.annotation), _default(field), description))
        if nested is not None:
            out.extend(rows(nested, f"{path}[]." if is_list else f"{path}."))
    return out


def reference_markdown() -> str:
    lines = [
        "| key | type | default | description |",
        "|---|---|---|---|",
    ]
    for path, kind, default, description in rows():
        lines.append(f"| `{path}` | {kind} | {default} | {description.replace('|', '/')} |")
    return "\n".join(lines)


def _readme_with_reference(readme: str) -> str:
    if START not in readme or END not in readme:
        raise ValueError(f"README.md lacks the markers {START} and {END}")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reference_markdown()}\n{END}{tail}"


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def write() -> None:
    SCHEMA_PATH.parent.mkdir(exist_ok=True)
    SCHEMA_PATH.write_text(schema_text())
    README_PATH.write_text(_readme_with_reference(README_PATH.read_text()))


def stale() -> list[str]:
    """The generated files that differ from what the models say now."""
    out = []
    if not SCHEMA_PATH.exists() or SCHEMA_PATH.read_text() != schema_text():
        out.append(str(SCHEMA_PATH.relative_to(ROOT)))
    readme = README_PATH.read_text()
    if _readme_with_reference(readme) != readme:
        out.append(str(README_PATH.relative_to(ROOT)))
    return out
