"""The pack's view of an offline plan: `PolicyResource`s built from plan records as the analyzer builds them.

`blueprint check` and the policy tests both judge plan records; both turn them into policy resources here, so what
the tests exercise is what the check runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions
from pulumi_policy.proxy import unknown_checking_proxy


def record_options(record: Mapping[str, Any]) -> PolicyResourceOptions:
    """A record's resource options (protect, ignoreChanges, parent) as the analyzer passes them."""
    options = record.get("options") or {}
    return PolicyResourceOptions(
        bool(options.get("protect", False)),
        list(options.get("ignoreChanges") or []),
        None,
        [],
        PolicyCustomTimeouts(0, 0, 0),
        [],
        record.get("parent"),
    )


def record_properties(record: Mapping[str, Any]) -> Any:
    """A record's inputs, with its `id` when it has one, wrapped as the SDK wraps them."""
    outputs = dict(record.get("inputs") or {})
    if record.get("id") is not None:
        outputs.setdefault("id", record["id"])
    return unknown_checking_proxy(outputs)


def policy_resources(records: Sequence[Mapping[str, Any]]) -> list[PolicyResource]:
    """`PolicyResource`s as the analyzer builds them for `AnalyzeStack`: parents and dependencies as objects.

    Dependencies are the record's `dependsOn` and `dependencies`; property dependencies are kept per property.
    The proxy copies the containers it wraps, so the records stay untouched without a deep copy.
    """
    built: dict[str, PolicyResource] = {}
    for record in records:
        built[record["urn"]] = PolicyResource(
            record["type"],
            record_properties(record),
            record["urn"],
            record["name"],
            record_options(record),
            None,
            None,
            [],
            {},
        )
    for record in records:
        resource = built[record["urn"]]
        parent = record.get("parent")
        resource.parent = built.get(parent) if parent else None
        options = record.get("options") or {}
        for urn in dict.fromkeys([*(options.get("dependsOn") or []), *(record.get("dependencies") or [])]):
            if urn in built:
                resource.dependencies.append(built[urn])
        for prop, urns in (record.get("propertyDependencies") or {}).items():
            resource.property_dependencies[prop] = [built[u] for u in urns if u in built]
    return list(built.values())
