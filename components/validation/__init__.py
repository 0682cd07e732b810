"""Turn a stack's config into a `StackConfig`, or report every problem with it at once.

Two passes. First each section is parsed on its own (`parse`), so one typo never hides the problems elsewhere. Then
every rule of `registry.RULES` runs over whatever parsed; a rule whose inputs failed to parse stays silent (its
inputs already have an error). Every problem reads `path.to.key: what is wrong, what would be valid`, and every rule
names the limit it enforces and where that limit comes from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from components.config import SECTIONS, AddonsConfig, StackConfig, StorageConfig, WorkloadsConfig
from components.errors import ConfigError, Problem
from components.validation.parse import Parsed, pool_labels, with_pool_names
from components.validation.registry import RULES

#: The region when a stack names none (the AWS provider would otherwise use the environment's).
DEFAULT_REGION = "us-east-1"


def validate(raw: Mapping[str, Any], region: str, config_keys: Mapping[str, Any] | None = None) -> StackConfig:
    """The validated stack from its sections (`{"cluster": {...}, ...}`), or ConfigError with every problem."""
    parsed = Parsed.from_raw(raw, region, config_keys=config_keys or {})
    problems = list(parsed.problems)
    for rule in RULES:
        problems.extend(rule(parsed))
    if problems:
        labels = pool_labels(raw.get("nodePools"), parsed)
        raise ConfigError([with_pool_names(problem, labels) for problem in problems])
    assert parsed.cluster is not None and parsed.network is not None  # no problems: every section parsed
    return StackConfig(
        region=region,
        cluster=parsed.cluster,
        network=parsed.network,
        # The pools the file holds: the default system pool is the plan's (`components.planning.pools`).
        node_pools=[pool for _, pool in parsed.pools if pool is not parsed.default_pool],
        storage=parsed.storage or StorageConfig(),
        addons=parsed.addons or AddonsConfig(),
        workloads=parsed.workloads or WorkloadsConfig(),
    )


def validate_config(config: Mapping[str, Any], project: str) -> StackConfig:
    """The validated stack from the whole Pulumi config (`{"gpu-clusters:cluster": "<json>", "aws:region": ...}`).

    The Pulumi CLI hands the program objects as JSON text; a value that is not JSON stays the text it is, so the
    section's own check says what it should have been.
    """
    raw = {section: decode(config[f"{project}:{section}"]) for section in SECTIONS if f"{project}:{section}" in config}
    region = config.get("aws:region", DEFAULT_REGION)
    return validate(raw, region=region if isinstance(region, str) else str(region), config_keys=config)


def decode(value: Any) -> Any:
    """A config value as the program reads it: JSON text decoded (no NaN or infinity), anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


__all__ = ["RULES", "ConfigError", "Problem", "decode", "validate", "validate_config"]
