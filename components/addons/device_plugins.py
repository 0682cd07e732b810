"""Device plugins: what makes GPUs (`nvidia.com/gpu`) and EFA devices (`vpc.amazonaws.com/efa`) schedulable.

The EKS-optimized AL2023 NVIDIA and EFA-capable AMIs ship drivers but no device plugins ([EKSUG]
ml-eks-optimized-ami, device-management-efa, aws-gpu-facts.md §2 and §5a): without these releases a GPU node joins
the cluster and advertises zero GPUs. The values are computed in `components.planning.addons.device_plugins`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import config
from components.addons.helm import ChartAddon, helm_release
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.device_plugins import (
    EFA_DEVICE_PLUGIN_RELEASE,
    NVIDIA_DEVICE_PLUGIN_RELEASE,
    NVIDIA_DEVICE_PLUGIN_RUNTIME_CLASS_RELEASE,
    efa_device_plugin_values,
    nvidia_device_plugin_values,
)
from components.planning.addons.placement import KUBE_SYSTEM
from components.planning.gpu_runtime import NVIDIA_RUNTIME_CLASS, NVIDIA_RUNTIME_HANDLER, runtime_class_plans
from components.planning.pools import PoolPlan


def nvidia_runtime_class(name: str, context: ClusterContext, parent: pulumi.Resource) -> k8s.node.v1.RuntimeClass:
    """The `nvidia` RuntimeClass: pods naming it run under containerd's `nvidia` handler, which `nvidia-ctk` adds
    on hybrid servers (`components.planning.gpu_runtime`) and the EKS NVIDIA AMIs have. Releases whose pods name it
    wait for it: the API server refuses a pod whose RuntimeClass does not exist."""
    return k8s.node.v1.RuntimeClass(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=NVIDIA_RUNTIME_CLASS),
        handler=NVIDIA_RUNTIME_HANDLER,
        opts=pulumi.ResourceOptions(
            provider=context.k8s_provider, parent=parent, depends_on=list(context.kubernetes_ready)
        ),
    )


class NvidiaDevicePlugin(pulumi.ComponentResource):
    """NVIDIA k8s-device-plugin on every GPU node (cloud and hybrid), with MIG strategy and per-pool time-slicing;
    a second release with `runtimeClassName: nvidia` on the hybrid pools that need it (`runtime_class`)."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        settings: config.NvidiaDevicePlugin,
        plans: Sequence[PoolPlan],
        runtime_class: k8s.node.v1.RuntimeClass | None = None,
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
            context,
            parent=self,
        )
        self.runtime_class_values: dict[str, Any] | None = None
        self.runtime_class_release: k8s.helm.v3.Release | None = None
        if runtime_class is not None and runtime_class_plans(plans):
            self.runtime_class_values = nvidia_device_plugin_values(settings, plans, runtime_class=True)
            self.runtime_class_release = helm_release(
                f"{name}-runtime-class",
                NVIDIA_DEVICE_PLUGIN_RUNTIME_CLASS_RELEASE,
                versions.chart("nvidia-device-plugin"),
                KUBE_SYSTEM,
                self.runtime_class_values,
                context,
                parent=self,
                depends_on=[runtime_class],
            )
        self.register_outputs({"release": self.release.name})


class EfaDevicePlugin(ChartAddon):
    """AWS EFA device plugin on the nodes whose launch template wires EFA interfaces.

    Pinned at or above v0.5.10: older plugins count NVLink `ibp*` devices as EFA and break NCCL (peers.md #8); the
    catalog refuses a lower pin when it loads.
    """

    TYPE = "gpu-clusters:index:EfaDevicePlugin"
    RELEASE = EFA_DEVICE_PLUGIN_RELEASE
    CHART = "aws-efa-k8s-device-plugin"
    NAMESPACE = KUBE_SYSTEM
    PLANNED_VALUES = efa_device_plugin_values
