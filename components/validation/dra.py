"""Rules on `nodePools[].gpuAllocation: dra`, GPUs through NVIDIA's DRA driver: the combinations that cannot work
at chart 25.12.0 on EKS 1.35 keep the device plugin. docs/gpu-sharing.md#gpus-through-dra says why; the sources are
in docs/sources.md ([DRAGPU], [CADRA], [KUEUEDRA])."""

from __future__ import annotations

from collections.abc import Iterator

from components.config import NodePool, QueuesConfig
from components.errors import Problem
from components.planning.autoscaler_tags import AUTOSCALED_MODES
from components.planning.queues import queue_configs
from components.validation.parse import Parsed

KEEP = "or keep `gpuAllocation: device-plugin`"


def _dra_pools(p: Parsed) -> Iterator[tuple[str, int, NodePool]]:
    for index, pool in p.pools:
        if pool.gpu_allocation == "dra":
            yield f"nodePools[{index}]", index, pool


def dra_pools_are_aws_gpu_pools_on_al2023(p: Parsed) -> Iterator[Problem]:
    """DRA allocates GPUs: the pool needs NVIDIA GPUs, and runs on EC2 with the AL2023 NVIDIA AMI. Hybrid servers
    keep the device plugin (the driver hands devices to containers through CDI, which their containerd, the site's,
    is not set up for by this stack); Bottlerocket runs its own bundled device plugin, which the driver must never
    share a node with ([DRAGPU] templates/validation.yaml)."""
    for path, index, pool in _dra_pools(p):
        if pool.kind == "hybrid":
            yield Problem(
                f"{path}.gpuAllocation",
                f"hybrid pool {pool.name} gets its GPUs from the device plugin (the servers' containerd is not set "
                "up for the DRA driver's CDI devices); remove gpuAllocation",
            )
        elif pool.ami_family == "bottlerocket":
            yield Problem(
                f"{path}.gpuAllocation",
                f"pool {pool.name} runs Bottlerocket, whose bundled device plugin serves its GPUs and cannot share "
                f"a node with the DRA driver; set amiFamily: al2023 {KEEP}",
            )
        elif (instance := p.instances.get(index)) is not None and instance.gpu_count == 0:
            yield Problem(
                f"{path}.gpuAllocation",
                f"{instance.name} has no GPUs; remove gpuAllocation or choose a GPU instance type",
            )


def dra_pools_do_not_share_gpus(p: Parsed) -> Iterator[Problem]:
    """MIG partitions and time-slicing are the device plugin's (mig-manager and its per-node config); through the
    DRA driver at 25.12 dynamic MIG and time-slicing settings are alpha feature gates, off by default
    ([DRAGPU] pkg/featuregates), so a DRA pool allocates whole GPUs."""
    for path, _, pool in _dra_pools(p):
        settings = pool.device_plugin
        if settings.mig_devices or settings.time_slicing_replicas > 1:
            yield Problem(
                f"{path}.gpuAllocation",
                f"pool {pool.name} partitions or shares its GPUs (devicePlugin.migDevices or timeSlicingReplicas), "
                f"which only the device plugin does here; remove them to allocate whole GPUs through DRA, {KEEP}",
            )


def dra_pools_keep_a_node_for_cluster_autoscaler(p: Parsed) -> Iterator[Problem]:
    """cluster-autoscaler 1.35 handles DRA (its `--enable-dynamic-resource-allocation` is locked on), but its AWS
    provider builds an empty group's node template with no ResourceSlices ([CADRA] aws_cloud_provider.go
    `TemplateNodeInfo`), so a pod whose GPUs come from a claim never scales a DRA pool up from zero. With one node
    running, it copies that node's slices and scales up as usual: an autoscaled DRA pool keeps `scaling.min` >= 1."""
    for path, _, pool in _dra_pools(p):
        if pool.kind == "aws" and pool.scaling.mode in AUTOSCALED_MODES and pool.scaling.min == 0:
            yield Problem(
                f"{path}.scaling.min",
                f"cluster-autoscaler cannot scale DRA pool {pool.name} up from zero (its AWS node template has no "
                f"ResourceSlices); set scaling.min to at least 1 {KEEP}",
            )


def _kueue_runs(p: Parsed) -> bool:
    """Kueue's switch as the plan resolves it (components.planning.addons.selection), from what parsed."""
    setting = p.addons.kueue.enabled if p.addons is not None else "auto"
    if setting != "auto":
        return setting == "on"
    configured = p.workloads is not None and (p.workloads.queues is not None or p.workloads.training is not None)
    training = any(pool.role == "training" for _, pool in p.pools)
    return configured or training


def dra_pools_are_outside_kueue_queues(p: Parsed) -> Iterator[Problem]:
    """Kueue's quotas count `nvidia.com/gpu`; Kueue 0.19.2 counts resource claims only behind its alpha
    `DynamicResourceAllocation` gate ([KUEUEDRA]), so a job asking for GPUs through a claim would be admitted past
    every quota. A pool a ClusterQueue admits onto keeps the device plugin."""
    if not _kueue_runs(p):
        return
    queues = (p.workloads.queues if p.workloads is not None else None) or QueuesConfig()
    for config in queue_configs(queues):
        for path, _, pool in _dra_pools(p):
            if pool.role != "system" and (config.pools is None or pool.name in config.pools):
                yield Problem(
                    f"{path}.gpuAllocation",
                    f"ClusterQueue {config.name} admits onto pool {pool.name}, and Kueue does not count GPUs taken "
                    f"through claims; leave the pool out of the queue's pools, {KEEP}",
                )


RULES = (
    dra_pools_are_aws_gpu_pools_on_al2023,
    dra_pools_do_not_share_gpus,
    dra_pools_keep_a_node_for_cluster_autoscaler,
    dra_pools_are_outside_kueue_queues,
)
