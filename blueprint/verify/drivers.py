"""Check `drivers`: every GPU node runs the NVIDIA driver and CUDA version the catalog pins for its pool's image (the
AL2023 NVIDIA AMI release, `cluster.amiRelease`) or for the on-prem servers (the runbook), read from the API only.

Where a node's versions come from (docs/operations.md, "Driver and runtime versions"):
- GPU feature discovery's node labels ([GFDLABELS]): `nvidia.com/cuda.driver-version.full` and
  `nvidia.com/cuda.runtime-version.full` (the CUDA version the driver supports);
- else the NVIDIA DRA driver's ResourceSlices for the node ([DRAATTRS]): the `driverVersion` and `cudaDriverVersion`
  attributes of its `gpu.nvidia.com` devices (every device must agree).
No label or attribute carries the NVIDIA Container Toolkit's version, and the node's `containerRuntimeVersion` is
containerd's, so the toolkit is reported as not exposed, with its pin, and never judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blueprint.verify.context import Context, node_name
from blueprint.verify.expectations import PoolExpectation
from blueprint.verify.model import Result
from components.catalog.node_software import NodeSoftware, version_matches

CHECK = "drivers"

#: GPU feature discovery's version labels ([GFDLABELS] `newVersionLabeler`).
DRIVER_LABEL = "nvidia.com/cuda.driver-version.full"
CUDA_LABEL = "nvidia.com/cuda.runtime-version.full"
#: The NVIDIA DRA driver's name and its version attributes ([DRAATTRS]).
DRA_DRIVER = "gpu.nvidia.com"
DRIVER_ATTRIBUTE = "driverVersion"
CUDA_ATTRIBUTE = "cudaDriverVersion"
#: Why the toolkit's version is not read (GFD and the DRA driver publish none; the runtime version is containerd's).
TOOLKIT_UNKNOWN = (
    "no node label or device attribute carries the NVIDIA Container Toolkit version "
    "(node status containerRuntimeVersion is containerd's): check `nvidia-ctk --version` on the node"
)
GFD_SOURCE = "GPU feature discovery labels"
DRA_SOURCE = "DRA ResourceSlice attributes"


@dataclass(frozen=True)
class Found:
    """What a node reports, and from where; `conflict` when its DRA devices disagree with each other."""

    driver: str | None
    cuda: str | None
    source: str | None
    conflict: str | None = None


def _slice_versions(slices: list[dict[str, Any]], node: str) -> Found | None:
    """The driver and CUDA versions of the node's `gpu.nvidia.com` devices; None when it has none."""
    drivers: set[str] = set()
    cudas: set[str] = set()
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != DRA_DRIVER or spec.get("nodeName") != node:
            continue
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            for name, into in ((DRIVER_ATTRIBUTE, drivers), (CUDA_ATTRIBUTE, cudas)):
                value = (attributes.get(name) or {}).get("version")
                if value:
                    into.add(str(value))
    if not drivers and not cudas:
        return None
    conflict = "; ".join(
        f"devices disagree on {what}: {', '.join(sorted(values))}"
        for what, values in (("the driver", drivers), ("CUDA", cudas))
        if len(values) > 1
    )
    return Found(
        min(drivers) if len(drivers) == 1 else None,
        min(cudas) if len(cudas) == 1 else None,
        DRA_SOURCE,
        conflict or None,
    )


def found_versions(node: dict[str, Any], slices: list[dict[str, Any]]) -> Found:
    """GFD labels first (they carry the driver as NVML prints it), else the DRA driver's attributes."""
    labels = node.get("metadata", {}).get("labels") or {}
    if DRIVER_LABEL in labels or CUDA_LABEL in labels:
        return Found(labels.get(DRIVER_LABEL), labels.get(CUDA_LABEL), GFD_SOURCE)
    return _slice_versions(slices, node_name(node)) or Found(None, None, None)


def judge(node: str, pool: PoolExpectation, pin: NodeSoftware, found: Found) -> Result:
    """One node's verdict: `fail` on a version other than the pin, or when neither source reports one."""
    target = f"{pool.name}/{node}"
    expected = {
        "driver": pin.nvidia_driver,
        "cuda": pin.cuda,
        "containerToolkit": pin.container_toolkit,
        "pinnedBy": pin.origin,
    }
    measured = {
        "driver": found.driver,
        "cuda": found.cuda,
        "containerToolkit": None,
        "containerToolkitUnknown": TOOLKIT_UNKNOWN,
        "source": found.source,
    }
    if found.source is None:
        detail = (
            f"no driver or CUDA version: no {DRIVER_LABEL} label (GPU feature discovery) and no {DRA_DRIVER} "
            f"ResourceSlice for the node; {pin.origin} pins driver {pin.nvidia_driver}, CUDA {pin.cuda}"
        )
        return Result(CHECK, target, "fail", detail, measured, expected)
    problems = [found.conflict] if found.conflict else []
    for what, have, want in (("driver", found.driver, pin.nvidia_driver), ("CUDA", found.cuda, pin.cuda)):
        if have is None:
            if not found.conflict:
                problems.append(f"no {what} version in the {found.source}")
        elif not version_matches(have, want):
            problems.append(f"{what} {have}, {pin.origin} pins {want}")
    toolkit = f"toolkit not exposed (pinned {pin.container_toolkit})"
    if problems:
        return Result(CHECK, target, "fail", f"{'; '.join(problems)} ({found.source}); {toolkit}", measured, expected)
    detail = f"driver {found.driver}, CUDA {found.cuda} as {pin.origin} pins ({found.source}); {toolkit}"
    return Result(CHECK, target, "pass", detail, measured, expected)


def check(ctx: Context) -> list[Result]:
    results: list[Result] = []
    slices: list[dict[str, Any]] | None = None
    for pool in ctx.expect.pools:
        if not pool.is_gpu:
            continue
        nodes = ctx.pool_nodes(pool)
        if pool.node_software is None:
            results.append(Result(CHECK, pool.name, "skip", pool.node_software_gap or "no pinned driver versions"))
            continue
        if nodes and slices is None:
            slices = ctx.api.list_resource_slices()
        for node in nodes:
            results.append(judge(node_name(node), pool, pool.node_software, found_versions(node, slices or [])))
    return results
