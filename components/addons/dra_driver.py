"""NVIDIA's DRA driver for GPUs: the kubelet plugin that publishes the GPUs of `gpuAllocation: dra` pools as
ResourceSlices, and the DeviceClass `gpu.nvidia.com` their workloads' claims name (created by the chart). The values
are computed in `components.planning.addons.dra_driver`."""

from __future__ import annotations

from components.addons.helm import ChartAddon
from components.planning.addons.dra_driver import DRA_DRIVER_RELEASE, dra_driver_values
from components.planning.addons.placement import KUBE_SYSTEM


class NvidiaDraDriver(ChartAddon):
    """The driver's release in kube-system, its kubelet plugin on the DRA pools only."""

    TYPE = "gpu-clusters:index:NvidiaDraDriver"
    RELEASE = DRA_DRIVER_RELEASE
    CHART = "nvidia-dra-driver-gpu"
    NAMESPACE = KUBE_SYSTEM
    PLANNED_VALUES = dra_driver_values
