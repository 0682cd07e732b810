"""The Pulumi program: read the stack config, validate it, build the cluster, export what users need.

`__main__.py` calls `main()` under `pulumi up`; `blueprint plan` and the tests call the same `main()` under mocks.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.config import SECTIONS, StackConfig
from components.gpu_cluster import GpuCluster
from components.validation import validate

DEFAULT_REGION = "us-east-1"


def read_config() -> StackConfig:
    """Every section of the stack config, validated; raises ConfigError listing every problem."""
    cfg = pulumi.Config()
    raw: dict[str, Any] = {}
    for section in SECTIONS:
        value = cfg.get(section)
        if value is not None:
            raw[section] = cfg.get_object(section)
    region = pulumi.Config("aws").get("region") or DEFAULT_REGION
    return validate(raw, region=region)


def main() -> GpuCluster:
    spec = read_config()
    cluster = GpuCluster(spec.cluster.name, spec, stack=pulumi.get_stack())
    for name, value in cluster.exports().items():
        pulumi.export(name, value)
    return cluster
