"""Helm values of NVIDIA's DRA driver for GPUs (pure, no Pulumi): its kubelet plugin on the `gpuAllocation: dra`
pools only, publishing their GPUs as devices of the DeviceClass `gpu.nvidia.com` that the chart creates.

Source: [DRAGPU] NVIDIA/k8s-dra-driver-gpu chart 25.12.0; why and the limits: docs/gpu-sharing.md#gpus-through-dra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components import tags
from components.planning.addons.placement import NODE_CRITICAL, node_affinity, tolerations_for
from components.planning.dra import dra_plans
from components.planning.pools import GPU_PRESENT_LABEL, PoolPlan

#: The Helm release (and the chart's name prefix of its DaemonSet, `<release>-kubelet-plugin`).
DRA_DRIVER_RELEASE = "nvidia-dra-driver-gpu"
#: Where the EKS NVIDIA AMIs install the driver: on the host, so the driver root is `/` ([DRAGPU] `nvidiaDriverRoot`).
HOST_DRIVER_ROOT = "/"


def dra_driver_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Values of the driver's release.

    - `resources.gpus.enabled` with `gpuResourcesEnabledOverride: true`: the chart refuses to render GPU allocation
      without the override, since the driver and the device plugin must never serve the same node
      ([DRAGPU] templates/validation.yaml); the device plugin's affinity keeps off every DRA pool
      (`components.planning.addons.device_plugins`), and this kubelet plugin lands only on them.
    - `resources.computeDomains.enabled: false`: ComputeDomains are Multi-Node NVLink (GB200 IMEX), which no pool
      of the catalog has; it also drops the controller Deployment, whose default affinity asks for control-plane
      nodes, which EKS never shows.
    - the chart picks the highest `resource.k8s.io` version the API server serves: the GA `v1` on Kubernetes 1.35
      ([K8SDRA]), which the DeviceClass it creates is written in (tests/charts/test_dra_driver.py).
    - feature gates stay the chart's defaults: dynamic MIG, time-slicing and MPS settings are alpha and off at 25.12
      ([DRAGPU] pkg/featuregates), and validation keeps MIG and time-slicing pools on the device plugin.
    - tolerations: every taint of the DRA pools, the startup taint included (the plugin must run for a node's
      GPUs to be checked); the chart tolerates nothing by default.
    """
    pools = dra_plans(plans)
    affinity = node_affinity(GPU_PRESENT_LABEL, ["true"])
    term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    term["matchExpressions"].append({"key": tags.POOL, "operator": "In", "values": sorted(p.name for p in pools)})
    return {
        "nvidiaDriverRoot": HOST_DRIVER_ROOT,
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {
            "priorityClassName": NODE_CRITICAL,
            "affinity": affinity,
            "tolerations": tolerations_for(pools, critical_addons=False),
        },
    }
