"""NVIDIA's DRA driver for GPUs: the kubelet plugin that publishes the GPUs of `gpuAllocation: dra` pools as
ResourceSlices, and the DeviceClass `gpu.nvidia.com` their workloads' claims name (created by the chart). The values
are computed in `components.planning.addons.dra_driver`."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.addons.helm import helm_release
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.dra_driver import DRA_DRIVER_RELEASE, dra_driver_values
from components.planning.addons.placement import KUBE_SYSTEM
from components.planning.pools import PoolPlan


class NvidiaDraDriver(pulumi.ComponentResource):
    """The driver's release in kube-system, its kubelet plugin on the DRA pools only."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:NvidiaDraDriver", name, None, opts)
        self.values = dra_driver_values(plans)
        self.release: k8s.helm.v3.Release = helm_release(
            name,
            DRA_DRIVER_RELEASE,
            versions.chart("nvidia-dra-driver-gpu"),
            KUBE_SYSTEM,
            self.values,
            context,
            parent=self,
        )
        self.register_outputs({"release": self.release.name})
