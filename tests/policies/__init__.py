"""Helpers that call the pack's policies exactly as the policy SDK does at run time.

The analyzer builds `ResourceValidationArgs` / `StackValidationArgs` / `PolicyResource` with properties wrapped in
`unknown_checking_proxy` (pulumi-testing-notes §2.3); these helpers do the same, so a rule that only works on
plain dicts (say, `isinstance(x, list)`) fails here as it would under `pulumi preview`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies import plan_records
from policies.pack import BY_NAME

Link = Literal["dependencies", "ids", "property-dependencies"]


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:test::gpu-clusters::{type_}::{name}"


def options(protect: bool = False, parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent)


def resource_args(
    type_: str,
    props: Mapping[str, Any],
    name: str = "res",
    config: Mapping[str, Any] | None = None,
    protect: bool = False,
    provider_default_tags: Mapping[str, str] | None = None,
) -> ResourceValidationArgs:
    provider = None
    if provider_default_tags is not None:
        provider = PolicyProviderResource(
            "pulumi:providers:aws",
            unknown_checking_proxy({"defaultTags": {"tags": dict(provider_default_tags)}}),
            urn("pulumi:providers:aws", "default"),
            "default",
        )
    return ResourceValidationArgs(
        type_,
        unknown_checking_proxy(copy.deepcopy(dict(props))),
        urn(type_, name),
        name,
        options(protect),
        provider,
        dict(config) if config is not None else None,
    )


def validate(policy: str, args: ResourceValidationArgs) -> list[str]:
    """The messages a resource policy reports for one resource."""
    found: list[str] = []
    resource_policy = BY_NAME[policy]
    assert isinstance(resource_policy, ResourceValidationPolicy), f"{policy} is not a resource policy"

    def report(message: str, urn: str | None = None) -> None:
        found.append(message)

    resource_policy.validate(args, report)
    return found


def policy_resources(records: Sequence[Mapping[str, Any]], link: Link = "dependencies") -> list[PolicyResource]:
    """`PolicyResource`s from plan records (through the pack's own `policies.plan_records`), linked one way only.

    `dependencies`: as the offline plan records them (every resource a record consumed, no ids);
    `ids`: each resource's props carry its `id`, as stack outputs do; `property-dependencies`: as the engine
    reports them, with every id unknown (a preview of a new stack: reading one raises `UnknownValueError`).
    """
    return plan_records.policy_resources([linked(r, link, {r["id"] for r in records if "id" in r}) for r in records])


def linked(record: Mapping[str, Any], link: Link, ids: set[str]) -> dict[str, Any]:
    """`record` with only the references `link` names left on it. A shallow copy with its own options: the record's
    values are only read (`policy_resources`' proxies copy what they wrap)."""
    out = dict(record)
    options = out["options"] = dict(out["options"])
    property_deps = out.pop("propertyDependencies", {})
    out.pop("dependencies", None)
    if link != "ids":
        out.pop("id", None)
    if link != "dependencies":
        options["dependsOn"] = []
    if link == "property-dependencies":
        out["inputs"] = unknown_ids(out["inputs"], ids)
        out["propertyDependencies"] = property_deps
        out["dependencies"] = [u for urns in property_deps.values() for u in urns]
    return out


def validate_stack(
    policy: str,
    records: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any] | None = None,
    link: Link = "dependencies",
) -> list[tuple[str, str]]:
    """(resource name or "" for the stack, message) for each violation a stack policy reports."""
    names = {r["urn"]: r["name"] for r in records}
    found: list[tuple[str, str]] = []
    args = StackValidationArgs(policy_resources(records, link), dict(config) if config is not None else None)
    stack_policy = BY_NAME[policy]
    assert isinstance(stack_policy, StackValidationPolicy), f"{policy} is not a stack policy"

    def report(message: str, urn: str | None = None) -> None:
        found.append((names.get(urn or "", ""), message))

    stack_policy.validate(args, report)
    return found


def unknown_ids(value: Any, ids: set[str]) -> Any:
    """`value` with every string that is a resource id replaced by the SDK's unknown-string sentinel."""
    if isinstance(value, dict):
        return {k: unknown_ids(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [unknown_ids(v, ids) for v in value]
    return UNKNOWN_STRING_VALUE if isinstance(value, str) and value in ids else value
