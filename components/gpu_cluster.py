"""The whole cluster as one component: network, EKS, node pools, storage, add-ons, hybrid nodes.

This module only composes. Every decision is made earlier (config validation, the pure planning functions) or
inside the component that owns it; this file passes a validated spec and the `ClusterContext` along, in the order
AWS needs things to exist.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components import tags
from components.config import StackConfig
from components.planning.pools import PoolPlan, plan_pools


class GpuCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: StackConfig, stack: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-clusters:index:GpuCluster", name, None, opts)
        self.spec = spec
        self.stack = stack
        self.tags = tags.cluster_tags(spec.cluster.name, stack, spec.cluster.tags)
        self.pool_plans: list[PoolPlan] = plan_pools(spec)
        self._exports: dict[str, Any] = {
            "clusterName": spec.cluster.name,
            "region": spec.region,
            "nodePools": [p.name for p in self.pool_plans],
        }
        child = pulumi.ResourceOptions(parent=self)
        del child  # each section below builds its components with `pulumi.ResourceOptions(parent=self)`

        # -- cluster core (issue 3): network, EKS control plane, identities, managed add-ons, Kubernetes provider
        # -- node pools (issue 4)
        # -- storage (issue 5)
        # -- add-ons (issue 6)
        # -- hybrid nodes (issue 7)

        self.register_outputs({})

    def exports(self) -> dict[str, Any]:
        """Stack outputs: what operators and CI need after `pulumi up` (kubeconfig as a secret)."""
        return dict(self._exports)
