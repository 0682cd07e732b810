"""Rules on `nodePools[].gpuAllocation: dra`, GPUs through NVIDIA's DRA driver: the combinations that cannot work
at chart 25.12.0 on EKS 1.35 keep the device plugin. docs/gpu-sharing.md#gpus-through-dra says why; the sources are
in docs/sources.md ([DRAGPU], [CADRA], [KUEUEDRA])."""

from __future__ import annotations

from collections.abc import Iterator

from components.config import AddonsConfig, NodePool
from components.errors import Problem
from components.planning.addons.selection import kueue_runs
from components.planning.autoscaler_tags import AUTOSCALED_MODES
from components.planning.dra import dra_plans
from components.validation.namespaces import _plans
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


def dra_pools_are_outside_kueue_queues(p: Parsed) -> Iterator[Problem]:
    """Kueue's quotas count `nvidia.com/gpu`; Kueue 0.19.2 counts resource claims only behind its alpha
    `DynamicResourceAllocation` gate ([KUEUEDRA]), so a job asking for GPUs through a claim would be admitted past
    every quota. The default queues leave DRA pools out (components.planning.queues `queue_pools`); a ClusterQueue
    that names one in its `pools` is refused."""
    plans = _plans(p)
    if plans is None or p.workloads is None or p.workloads.queues is None:
        return
    if not kueue_runs(p.addons or AddonsConfig(), plans, p.workloads):
        return
    dra = {plan.name for plan in dra_plans(plans)}
    for i, config in enumerate(p.workloads.queues.cluster_queues):
        for j, name in enumerate(config.pools or []):
            if name in dra:
                yield Problem(
                    f"workloads.queues.clusterQueues[{i}].pools[{j}]",
                    f"pool {name} allocates its GPUs through DRA, which Kueue does not count; leave it out of "
                    f"ClusterQueue {config.name}'s pools, or keep `gpuAllocation: device-plugin` on it",
                )


RULES = (
    dra_pools_are_aws_gpu_pools_on_al2023,
    dra_pools_do_not_share_gpus,
    dra_pools_keep_a_node_for_cluster_autoscaler,
    dra_pools_are_outside_kueue_queues,
)
