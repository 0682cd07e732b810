"""The generated references, so docs and code cannot drift.

`blueprint schema --write` writes the JSON Schema of a stack's config (`schema/stack-config.schema.json`, usable by
editors for completion in stack files), the config reference table of `docs/configuration.md` (from the pydantic
models), the policy table of `docs/policies.md` (from the policy pack's metadata), the catalog's source list in
`docs/sources.md` (from the catalog YAML) and the shipped stacks' figures in `README.md` and `docs/stacks.md` (from
their offline plans, `blueprint.stack_figures`), each between two markers; `blueprint schema --check` fails when any
of them is stale (CI runs it).
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import os
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticUndefined, core_schema

from blueprint.citation_links import link_citations
from components.config import SECTIONS, StackConfig

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "schema" / "stack-config.schema.json"
CONFIG_DOC_PATH = ROOT / "docs" / "configuration.md"
POLICY_DOC_PATH = ROOT / "docs" / "policies.md"
SOURCES_DOC_PATH = ROOT / "docs" / "sources.md"
CONFIG_MARKER, POLICY_MARKER, SOURCES_MARKER = "config-reference", "policy-reference", "catalog-sources"
PROJECT = "gpu-clusters"


@functools.cache
def _module_attribute_docs(module: str) -> dict[str, dict[str, str]]:
    """Class name -> attribute -> its docstring: the string literal right after an annotated attribute in the class
    body (PEP 257's attribute docstrings), cleaned with `inspect.cleandoc`, read from the module's source."""
    found: dict[str, dict[str, str]] = {}
    source = inspect.getsource(sys.modules[module])
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        docs = found.setdefault(node.name, {})
        for before, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(before, ast.AnnAssign)
                and isinstance(before.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[before.target.id] = inspect.cleandoc(after.value.value)
    return found


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """A model's field descriptions: a field's own `description`, else its attribute docstring (a base class's for
    an inherited field). The models do not ask pydantic for the docstrings (`use_attribute_docstrings`): that reads
    and tokenizes their source in every process that imports them, for text only these references show."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            docs.update(_module_attribute_docs(cls.__module__).get(cls.__name__, {}))
    return {
        name: field.description or docs[name]
        for name, field in model.model_fields.items()
        if field.description or name in docs
    }


def _models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """`model` and every model its fields hold, at any depth (in lists, maps, unions), each once."""
    seen: set[type[BaseModel]] = set()
    pending: list[Any] = [model]
    while pending:
        annotation = pending.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in seen:
                seen.add(annotation)
                yield annotation
                pending.extend(f.annotation for f in annotation.model_fields.values())
        else:
            pending.extend(get_args(annotation))


class _SectionDefaults(GenerateJsonSchema):
    """Shows the default of a section a config model builds with `default_factory=TheModel` (the config models do,
    so that pydantic need not deep-copy a shared default instance on every validation) as the section's defaults,
    as it shows a plain default; pydantic leaves factories out of a schema unless told (`get_default_value`)."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if isinstance(factory, type) and issubclass(factory, BaseModel):
            return factory()
        return super().get_default_value(schema)


def json_schema() -> dict[str, Any]:
    """JSON Schema of the project keys of a stack file (`gpu-clusters:cluster`, ...), by alias."""
    schema = StackConfig.model_json_schema(by_alias=True, schema_generator=_SectionDefaults)
    definitions = schema.get("$defs", {})
    for model in _models(StackConfig):
        target = schema if model is StackConfig else definitions[model.__name__]
        for name, text in field_docs(model).items():
            target["properties"][model.model_fields[name].alias or name].setdefault("description", text)
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
    if isinstance(value, bool):
        return f"`{json.dumps(value)}`"  # as a stack file spells it: `true`, not `True`
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
    docs = field_docs(model)
    for name, field in model.model_fields.items():
        if model is StackConfig and name == "region":
            continue
        key = field.alias or name
        is_list = get_origin(field.annotation) is list or any(get_origin(a) is list for a in get_args(field.annotation))
        path = f"{prefix}{key}"
        nested = _nested_model(field.annotation)
        text = docs.get(name) or (nested.__doc__ or "").split("\n\n")[0] if nested else docs.get(name)
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


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def with_generated(text: str, marker: str, generated: str) -> str:
    """`text` with the part between the `marker` comments replaced by `generated`."""
    start, end = _markers(marker)
    if start not in text or end not in text:
        raise ValueError(f"the document lacks the markers {start} and {end}")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{generated}\n{end}{tail}"


#: The offline plan of a shipped stack by name (`blueprint plan --stack NAME --format json`).
PlanOf = Callable[[str], Mapping[str, Any]]


def _plan_shipped(stack: str) -> Mapping[str, Any]:
    from blueprint.plan.plan import make_plan  # imports the SDK and plans: only when needed

    return make_plan(stack)


def _generated_documents(plan_of: PlanOf | None = None) -> list[tuple[Path, str, str]]:
    """(document, marker, generated text) for every generated part of the docs. `plan_of` plans a shipped stack
    (default: `make_plan`; the tests hand over the session's plans)."""
    from blueprint.hybrid_egress_table import EGRESS_MARKER, EGRESS_STACK, OPERATIONS_DOC_PATH, egress_markdown
    from blueprint.plan.runner import list_stacks
    from blueprint.policy_reference import policy_markdown  # imports the policy SDK: only when needed
    from blueprint.source_reference import sources_markdown
    from blueprint.stack_figures import generated_parts

    plan = plan_of or _plan_shipped
    return [
        (CONFIG_DOC_PATH, CONFIG_MARKER, link_citations(reference_markdown(), "sources.md")),
        (POLICY_DOC_PATH, POLICY_MARKER, link_citations(policy_markdown(), "sources.md")),
        (SOURCES_DOC_PATH, SOURCES_MARKER, link_citations(sources_markdown(), "")),
        *generated_parts(list_stacks(), plan),
        (OPERATIONS_DOC_PATH, EGRESS_MARKER, egress_markdown(plan(EGRESS_STACK))),
    ]


def sources_href(document: Path) -> str:
    """How a link in `document` (README.md or docs/*.md) spells the path to docs/sources.md ("" inside it)."""
    sources = ROOT / "docs" / "sources.md"
    return "" if document == sources else os.path.relpath(sources, document.parent)


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def write(plan_of: PlanOf | None = None) -> None:
    SCHEMA_PATH.parent.mkdir(exist_ok=True)
    SCHEMA_PATH.write_text(schema_text())
    for path, marker, generated in _generated_documents(plan_of):
        path.write_text(with_generated(path.read_text(), marker, generated))


def _shown(path: Path) -> str:
    """`path` as a message names it: relative to the checkout when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def stale(plan_of: PlanOf | None = None) -> list[str]:
    """The generated files that differ from what the models, the policy pack and the stacks' plans say now, each
    once."""
    out = []
    if not SCHEMA_PATH.exists() or SCHEMA_PATH.read_text() != schema_text():
        out.append(_shown(SCHEMA_PATH))
    for path, marker, generated in _generated_documents(plan_of):
        text = path.read_text()
        if with_generated(text, marker, generated) != text and _shown(path) not in out:
            out.append(_shown(path))
    return out
