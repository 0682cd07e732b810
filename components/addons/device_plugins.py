"""Device plugins: what makes GPUs (`nvidia.com/gpu`) and EFA devices (`vpc.amazonaws.com/efa`) schedulable.

The EKS-optimized AL2023 NVIDIA and EFA-capable AMIs ship drivers but no device plugins ([EKSUG]
ml-eks-optimized-ami, device-management-efa, aws-gpu-facts.md §2 and §5a): without these releases a GPU node joins
the cluster and advertises zero GPUs. The values are computed in `components.planning.addons.device_plugins`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components import config
from components.addons.helm import helm_release
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.device_plugins import (
    EFA_DEVICE_PLUGIN_RELEASE,
    NVIDIA_DEVICE_PLUGIN_RELEASE,
    efa_device_plugin_values,
    nvidia_device_plugin_values,
)
from components.planning.addons.placement import KUBE_SYSTEM
from components.planning.pools import PoolPlan


class NvidiaDevicePlugin(pulumi.ComponentResource):
    """NVIDIA k8s-device-plugin on every GPU node (cloud and hybrid), with MIG strategy and per-pool time-slicing."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        settings: config.NvidiaDevicePlugin,
        plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:NvidiaDevicePlugin", name, None, opts)
        self.values = nvidia_device_plugin_values(settings, plans)
        self.release: k8s.helm.v3.Release = helm_release(
            name,
            NVIDIA_DEVICE_PLUGIN_RELEASE,
            versions.chart("nvidia-device-plugin"),
            KUBE_SYSTEM,
            self.values,
            ctx,
            parent=self,
        )
        self.register_outputs({"release": self.release.name})


class EfaDevicePlugin(pulumi.ComponentResource):
    """AWS EFA device plugin on the nodes whose launch template wires EFA interfaces.

    Pinned at or above v0.5.10: older plugins count NVLink `ibp*` devices as EFA and break NCCL (peers.md #8); the
    catalog refuses a lower pin when it loads.
    """

    def __init__(
        self, name: str, ctx: ClusterContext, plans: Sequence[PoolPlan], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-clusters:index:EfaDevicePlugin", name, None, opts)
        self.values = efa_device_plugin_values(plans)
        self.release: k8s.helm.v3.Release = helm_release(
            name,
            EFA_DEVICE_PLUGIN_RELEASE,
            versions.chart("aws-efa-k8s-device-plugin"),
            KUBE_SYSTEM,
            self.values,
            ctx,
            parent=self,
        )
        self.register_outputs({"release": self.release.name})
