"""The Pulumi program: read the stack config, validate it, build the cluster, export what users need.

`__main__.py` calls `main()` under `pulumi up`; `blueprint plan` and the tests call the same `main()` under mocks.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
from pulumi.runtime.config import CONFIG, get_config_env

from components.config import StackConfig
from components.errors import ConfigError
from components.gpu_cluster import GpuCluster
from components.planning.stack_plan import plan_stack
from components.validation import validate_config
from components.validation.offerings import account_zone_problems


def all_config() -> dict[str, Any]:
    """Every config key of the stack, fully qualified (`gpu-clusters:cluster`, `aws:region`), as the CLI set them.

    The engine hands the program the whole stack config (the SDK keeps it in `pulumi.runtime.config`), so keys no
    section reads, such as a misspelt `gpu-clusters:nodepools`, are visible here and refused by validation.
    """
    return {**get_config_env(), **CONFIG.get()}


def read_config() -> StackConfig:
    """Every section of the stack config, validated; raises ConfigError listing every problem."""
    return validate_config(all_config(), project=pulumi.get_project())


def check_account_zones(spec: StackConfig) -> None:
    """`network.availabilityZoneIds` against this account's mapping (one DescribeAvailabilityZones), before anything
    is registered; ConfigError with each wrong entry's key path. Nothing to check without IDs."""
    if not spec.network.availability_zone_ids:
        return
    answer = aws.get_availability_zones()
    problems = account_zone_problems(spec.network, spec.region, dict(zip(answer.names, answer.zone_ids, strict=True)))
    if problems:
        raise ConfigError(problems)


def main() -> GpuCluster:
    spec = read_config()
    check_account_zones(spec)
    cluster = GpuCluster(spec.cluster.name, stack_plan=plan_stack(spec), stack=pulumi.get_stack())
    for name, value in cluster.exports().items():
        pulumi.export(name, value)
    return cluster
