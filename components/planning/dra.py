"""GPUs through Dynamic Resource Allocation (pure, no Pulumi): which pools allocate through NVIDIA's DRA driver for
GPUs, and the ResourceClaimTemplate and pod fields a workload on such a pool asks for its GPUs with.

A pool has exactly one allocator: `gpuAllocation: device-plugin` (default) pools advertise `nvidia.com/gpu` through
the device plugin, `dra` pools publish their GPUs as ResourceSlices of the driver `gpu.nvidia.com` and the device
plugin keeps off them. Sources ([DRAGPU], [K8SDRA]) and the limits: docs/gpu-sharing.md#gpus-through-dra.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from components.planning.pools import PoolPlan

#: The DRA API group/version the stack writes: GA since Kubernetes 1.34 ([K8SDRA]).
RESOURCE_API_VERSION = "resource.k8s.io/v1"
#: The DeviceClass of whole GPUs, which the driver's chart creates itself ([DRAGPU] templates/deviceclass-gpu.yaml).
GPU_DEVICE_CLASS = "gpu.nvidia.com"
#: The pod-level claim name and the request inside the template, the same for every workload.
GPU_CLAIM = "gpus"
GPU_REQUEST = "gpus"


def allocates_through_dra(plan: PoolPlan) -> bool:
    return plan.is_gpu and plan.pool.gpu_allocation == "dra"


def dra_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """GPU pools whose GPUs are allocated through the DRA driver (the device plugin keeps off their nodes)."""
    return [p for p in plans if allocates_through_dra(p)]


def claim_template_name(workload: str) -> str:
    """The ResourceClaimTemplate of a workload's pods: `<workload>-gpus`."""
    return f"{workload}-{GPU_CLAIM}"


def claim_template_spec(gpus: int) -> dict[str, Any]:
    """`ResourceClaimTemplate.spec` (a ResourceClaimTemplateSpec, whose `spec` is each claim's): exactly `gpus`
    devices of the `gpu.nvidia.com` class, one claim per pod (resource.k8s.io/v1 `ExactDeviceRequest`, [K8SDRA])."""
    request = {"deviceClassName": GPU_DEVICE_CLASS, "allocationMode": "ExactCount", "count": gpus}
    return {"spec": {"devices": {"requests": [{"name": GPU_REQUEST, "exactly": request}]}}}


def pod_claims(template: str) -> list[dict[str, str]]:
    """The pod's `resourceClaims`: one claim made from `template` for each pod, deleted with it."""
    return [{"name": GPU_CLAIM, "resourceClaimTemplateName": template}]


def container_claims() -> list[dict[str, str]]:
    """The container's `resources.claims`: the GPUs of the pod's claim."""
    return [{"name": GPU_CLAIM}]
