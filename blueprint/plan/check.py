"""`blueprint check`: the policy pack over the offline plan, without the Pulumi CLI.

Invariant: it runs the very policy objects `pulumi preview --policy-pack policies` serves, through the argument types
the policy SDK builds, and resolves enforcement levels and parameters as the CLI does, so a stack that passes here
passes the preview's policy check as far as the plan's inputs match. How:
docs/design-notes.md#blueprint-check-as-the-preview-runs-the-pack.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyResource,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from policies.pack import BY_NAME, CONFIG_FILE, POLICIES, RESOURCE_TYPES, schema_defaults
from policies.plan_records import policy_resources, record_options

Violation = dict[str, str]
Format = Literal["table", "json", "markdown"]
LEVELS = {level.value for level in EnforcementLevel}


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    """A policy config file (`--policy-pack-config` format); None reads the pack's shipped policy-config.json.

    Raises ValueError on names no policy has (the CLI ignores them silently; a typo should not pass) and on
    enforcement levels that do not exist.
    """
    file = Path(path) if path is not None else CONFIG_FILE
    try:
        loaded = json.loads(file.read_text())
    except ValueError as error:  # not JSON, or not UTF-8
        raise ValueError(f"{file}: not a JSON policy config: {error}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{file}: a policy config is a JSON object of policy name -> level or settings")
    validate_config(loaded, source=str(file))
    return loaded


def load_plan(path: str | Path) -> dict[str, Any]:
    """A saved plan (`blueprint plan --format json`): a JSON object whose
    `resources` are records with a string `urn`, `type` and `name` and object `inputs` and `options` where present.

    Raises ValueError naming every problem with its path (`resources[3].urn: ...`), OSError when unreadable.
    """
    file = Path(path)
    try:
        plan = json.loads(file.read_text())
    except ValueError as error:  # not JSON, or not UTF-8
        raise ValueError(f"{file}: not a JSON plan: {error}") from None
    resources = plan.get("resources") if isinstance(plan, dict) else None
    if not isinstance(resources, list):
        raise ValueError(f"{file}: expected a plan object with a `resources` list (`blueprint plan --format json`)")
    problems = []
    for i, record in enumerate(resources):
        if not isinstance(record, dict):
            problems.append(f"resources[{i}]: expected an object")
            continue
        for key in ("urn", "type", "name"):
            if not isinstance(record.get(key), str) or not record[key]:
                problems.append(f"resources[{i}].{key}: expected a non-empty string")
        for key in ("inputs", "options"):
            if record.get(key) is not None and not isinstance(record[key], dict):
                problems.append(f"resources[{i}].{key}: expected an object")
    if problems:
        raise ValueError(f"{file}: " + "; ".join(problems))
    return plan


def validate_config(config: Mapping[str, Any], source: str = "policy config") -> None:
    problems = []
    for name, entry in config.items():
        if name != "all" and name not in BY_NAME:
            problems.append(f"unknown policy '{name}' (policies: {', '.join(sorted(BY_NAME))})")
            continue
        level = (
            entry if isinstance(entry, str) else entry.get("enforcementLevel") if isinstance(entry, Mapping) else None
        )
        if level is not None and level not in LEVELS:
            problems.append(f"{name}: enforcement level '{level}' is not one of {sorted(LEVELS)}")
        if not isinstance(entry, str | Mapping):
            problems.append(f"{name}: expected a level or an object, got {entry!r}")
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))


def _level_of(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping):
        level = entry.get("enforcementLevel")
        return str(level) if level is not None else None
    return None


def effective(policy: Policy, config: Mapping[str, Any]) -> tuple[EnforcementLevel, dict[str, Any]]:
    """A policy's level and parameters under `config`, in the CLI's order: policy default, `all`, the policy's entry.

    REMEDIATE reports as MANDATORY for validate-only and stack policies (pulumi-testing-notes §2.1).
    """
    level = policy.enforcement_level or EnforcementLevel.ADVISORY
    for entry in (config.get("all"), config.get(policy.name)):
        named = _level_of(entry)
        if named:
            level = EnforcementLevel(named)
    if level == EnforcementLevel.REMEDIATE:
        level = EnforcementLevel.MANDATORY
    params = schema_defaults(policy)
    entry = config.get(policy.name)
    if isinstance(entry, Mapping):
        params.update({k: v for k, v in entry.items() if k != "enforcementLevel"})
    return level, params


def check(resources: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None) -> list[Violation]:
    """Every violation of the policy pack in a plan's resource records, mandatory ones first.

    `config` is a policy config as `load_config` returns it; None means the shipped policy-config.json. Each
    violation is `{"policy", "level", "urn", "resource", "message"}`; a stack-wide one has an empty urn.
    """
    config = load_config(None) if config is None else config
    validate_config(config)
    names = {r["urn"]: r["name"] for r in resources}
    found: list[Violation] = []

    def collect(policy: Policy, level: EnforcementLevel, default_urn: str) -> Any:
        def report(message: str, urn: str | None = None) -> None:
            where = urn or default_urn
            found.append(
                {
                    "policy": policy.name,
                    "level": level.value,
                    "urn": where,
                    "resource": names.get(where, ""),
                    "message": message,
                }
            )

        return report

    def cannot_run(policy: Policy, urn: str, error: UnknownValueError) -> None:
        # What the analyzer does with an unknown value: an advisory note instead of a verdict.
        found.append(
            {
                "policy": policy.name,
                "level": "advisory",
                "urn": urn,
                "resource": names.get(urn, ""),
                "message": f"can't run policy '{policy.name}' during preview: {error.message}",
            }
        )

    # Built once and shared by every policy (rules only read them): each record's inputs behind the unknown-checking
    # proxy (which copies the containers it wraps) and options, and the stack's resources for the stack policies.
    props = [unknown_checking_proxy(dict(record.get("inputs") or {})) for record in resources]
    options = [record_options(record) for record in resources]
    stack_resources: list[PolicyResource] | None = None
    # A resource policy passes over the types it does not judge: each one runs only on the records of its types
    # (`RESOURCE_TYPES`), in plan order, instead of on every record.
    of_type: dict[str, list[int]] = defaultdict(list)
    for i, record in enumerate(resources):
        of_type[record["type"]].append(i)

    for policy in POLICIES:
        level, params = effective(policy, config)
        if level == EnforcementLevel.DISABLED:
            continue
        if isinstance(policy, ResourceValidationPolicy):
            types = RESOURCE_TYPES.get(policy.name)
            judged = range(len(resources)) if types is None else sorted(i for t in types for i in of_type.get(t, ()))
            for i in judged:
                record = resources[i]
                args = ResourceValidationArgs(
                    record["type"],
                    props[i],
                    record["urn"],
                    record["name"],
                    options[i],
                    None,
                    dict(params),
                )
                try:
                    policy.validate(args, collect(policy, level, record["urn"]))
                except UnknownValueError as e:
                    cannot_run(policy, record["urn"], e)
        elif isinstance(policy, StackValidationPolicy):
            if stack_resources is None:
                stack_resources = policy_resources(resources)
            stack_args = StackValidationArgs(stack_resources, dict(params))
            try:
                policy.validate(stack_args, collect(policy, level, ""))
            except UnknownValueError as e:
                cannot_run(policy, "", e)
    order = {"mandatory": 0, "advisory": 1}
    return sorted(found, key=lambda v: (order.get(v["level"], 2), v["policy"], v["urn"], v["message"]))


def has_mandatory(violations: Iterable[Mapping[str, str]]) -> bool:
    """`blueprint check` exits 1 when this is true."""
    return any(v["level"] == "mandatory" for v in violations)


def format_violations(violations: Sequence[Mapping[str, str]], fmt: Format = "table", width: int = 120) -> str:
    """Violations as a plain-text table `width` columns wide (long cells wrap), JSON, or a Markdown table (for a
    pull-request comment)."""
    if fmt == "json":
        return json.dumps(list(violations), indent=2)
    rows = [(v["level"], v["policy"], v.get("resource") or "(stack)", v["message"]) for v in violations]
    mandatory = sum(1 for v in violations if v["level"] == "mandatory")
    summary = f"{len(violations)} policy violation(s), {mandatory} mandatory"
    if fmt == "markdown":
        if not rows:
            return "No policy violations."
        cell = lambda text: text.replace("|", "\\|").replace("\n", " ")  # noqa: E731
        lines = [f"**{summary}**", "", "| level | policy | resource | message |", "| --- | --- | --- | --- |"]
        lines += [f"| {' | '.join(cell(c) for c in row)} |" for row in rows]
        return "\n".join(lines)
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}: table, json or markdown")
    if not rows:
        return "No policy violations."
    from rich.console import Console  # only a table needs rich
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style=None)
    for header in ("LEVEL", "POLICY", "RESOURCE", "MESSAGE"):
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(Text(c) for c in row))
    text = io.StringIO()
    Console(file=text, width=width, color_system=None).print(table)
    return "\n".join([*(line.rstrip() for line in text.getvalue().splitlines()), "", summary])
