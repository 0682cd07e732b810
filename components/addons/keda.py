"""KEDA: scales each serving workload's replicas on its GPU utilization (`components.workloads` creates the
ScaledObjects). Why KEDA, and where its pods run: `components.planning.addons.keda`."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.addons.helm import helm_release
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.keda import KEDA_NAMESPACE, KEDA_RELEASE, keda_values
from components.planning.pools import PoolPlan


class Keda(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:Keda", name, None, opts)
        self.release: k8s.helm.v3.Release = helm_release(
            name,
            KEDA_RELEASE,
            versions.chart("keda"),
            KEDA_NAMESPACE,
            keda_values(plans),
            context,
            parent=self,
        )
        self.register_outputs({"release": self.release.name})
