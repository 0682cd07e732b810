"""The Pulumi program: read the stack config, validate it, build the cluster, export what users need.

`__main__.py` calls `main()` under `pulumi up`; `blueprint plan` and the tests call the same `main()` under mocks.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env

from components.config import StackConfig
from components.gpu_cluster import GpuCluster
from components.planning.stack_plan import plan_stack
from components.validation import validate_config


def all_config() -> dict[str, Any]:
    """Every config key of the stack, fully qualified (`gpu-clusters:cluster`, `aws:region`), as the CLI set them.

    The engine hands the program the whole stack config (the SDK keeps it in `pulumi.runtime.config`), so keys no
    section reads, such as a misspelt `gpu-clusters:nodepools`, are visible here and refused by validation.
    """
    return {**get_config_env(), **CONFIG.get()}


def read_config() -> StackConfig:
    """Every section of the stack config, validated; raises ConfigError listing every problem."""
    return validate_config(all_config(), project=pulumi.get_project())


def main() -> GpuCluster:
    spec = read_config()
    cluster = GpuCluster(spec.cluster.name, stack_plan=plan_stack(spec), stack=pulumi.get_stack())
    for name, value in cluster.exports().items():
        pulumi.export(name, value)
    return cluster
