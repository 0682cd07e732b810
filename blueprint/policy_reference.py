"""The policy table of `docs/policies.md`, generated from the pack's own policy objects.

Names, kinds, default levels, descriptions and parameters all come from `policies.pack.POLICIES` (which takes them
from the rules' docstrings and `policies/policy-config.json`), so the documented pack is the pack that runs.
"""

from __future__ import annotations

import json
from typing import Any

from pulumi_policy import Policy, StackValidationPolicy

from policies.pack import POLICIES


def _parameters(policy: Policy) -> str:
    """`name` (default): meaning, for each config parameter of the policy."""
    if policy.config_schema is None:
        return ""
    out = []
    for name, spec in policy.config_schema.properties.items():
        default = f" ({_value(spec['default'])})" if "default" in spec else ""
        out.append(f"`{name}`{default}: {spec.get('description', '')}")
    return "<br>".join(out)


def _value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return json.dumps(value)


def policy_markdown() -> str:
    lines = [
        "| policy | kind | default level | what it checks | parameters (default) |",
        "|---|---|---|---|---|",
    ]
    for policy in POLICIES:
        kind = "stack" if isinstance(policy, StackValidationPolicy) else "resource"
        level = policy.enforcement_level.value if policy.enforcement_level else ""
        cells = [f"`{policy.name}`", kind, level, policy.description or "", _parameters(policy)]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)
