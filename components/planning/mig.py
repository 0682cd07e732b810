"""Multi-Instance GPU partitions of a pool (pure, no Pulumi): the mig-parted config, the node labels and the
devices each node advertises.

Invariants: a pool's nodes register with `nvidia.com/mig.config=<pool>-<layout hash>` (a changed layout replaces
nodes, never repartitions one); the device plugin runs on a MIG node only in state `success` ([MIGPARTED]); what a
node advertises follows the MIG strategy ([NVDP]). See docs/gpu-sharing.md#how-a-pool-gets-partitioned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from components.planning.pools import GPU_RESOURCE, MIG_CONFIG_LABEL, PoolPlan

#: The label the mig-manager sets while and after it applies a config ([MIGPARTED] pkg/mig/reconfigure).
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STATE_SUCCESS = "success"
#: The node label that keeps the DCGM exporter on a MIG node: the mig-manager sets it to `paused-for-mig-change`
#: while it reconfigures the node (so the DaemonSet controller removes the exporter) and back to `true` once done,
#: unless it reads `false` ([MIGPARTED] pkg/mig/reconfigure `dcgmExporterDeployLabel`, `maybeSetPaused`,
#: `maybeSetTrue`); the GPU Operator's exporter selects it ([GPUOP] assets/state-dcgm-exporter/0800_daemonset.yaml).
DCGM_EXPORTER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.dcgm-exporter"
DEPLOY_ENABLED = "true"
#: The mig-manager's pause value ([MIGPARTED] `maybeSetPaused`) and the one `blueprint verify dcgm --dcgm-level 4`
#: sets, after the same `paused-for-<reason>` pattern, while DCGM's diagnostic needs the node's GPUs to itself.
DEPLOY_PAUSED_FOR_MIG = "paused-for-mig-change"
DEPLOY_PAUSED_FOR_DIAGNOSTIC = "paused-for-diagnostic"
DEPLOY_PAUSED = (DEPLOY_PAUSED_FOR_MIG, DEPLOY_PAUSED_FOR_DIAGNOSTIC)
#: The resource prefix of MIG devices under the `mixed` strategy ([NVDP] README: `nvidia.com/mig-1g.10gb`).
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def mig_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """GPU pools that partition their GPUs, in config order."""
    return [p for p in plans if p.is_gpu and p.pool.device_plugin.mig_devices]


def mig_devices(plan: PoolPlan) -> dict[str, int]:
    """`{profile: instances per GPU}` of the pool, empty when it does not use MIG."""
    return dict(plan.pool.device_plugin.mig_devices or {}) if plan.is_gpu else {}


def mig_parted_config(plans: Iterable[PoolPlan]) -> dict[str, Any]:
    """The mig-parted config file: one named config per MIG pool, named like the pool's `nvidia.com/mig.config`
    label (pool and layout hash, so only the current layouts are in it), partitioning every GPU of the node alike,
    plus `all-disabled` (a node relabelled with it goes back to whole GPUs) ([MIGPARTED]
    deployments/systemd/config-default.yaml shows the format)."""
    configs: dict[str, Any] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for plan in mig_plans(plans):
        configs[plan.labels[MIG_CONFIG_LABEL]] = [
            {"devices": "all", "mig-enabled": True, "mig-devices": mig_devices(plan)}
        ]
    return {"version": "v1", "mig-configs": configs}


def mig_resource(profile: str) -> str:
    """The `mixed`-strategy resource of a profile: `nvidia.com/mig-1g.10gb`."""
    return f"{MIG_RESOURCE_PREFIX}{profile}"


def advertised_resources(plan: PoolPlan, mig_strategy: str) -> dict[str, int]:
    """The GPU resources one node of the pool advertises once the device plugin runs.

    Whole GPUs: `nvidia.com/gpu` = GPUs x time-slicing replicas. A MIG pool under `single`: `nvidia.com/gpu` = MIG
    devices per node x replicas, and under `mixed` one `nvidia.com/mig-<profile>` per profile and no whole GPU.
    """
    replicas = plan.pool.device_plugin.time_slicing_replicas
    devices = mig_devices(plan)
    if not plan.is_gpu:
        return {}
    if not devices:
        return {GPU_RESOURCE: plan.gpus_per_node * replicas}
    if mig_strategy == "mixed":
        return {GPU_RESOURCE: 0} | {
            mig_resource(profile): plan.gpus_per_node * count * replicas for profile, count in sorted(devices.items())
        }
    return {GPU_RESOURCE: plan.gpus_per_node * sum(devices.values()) * replicas}


def advertised_gpus(plan: PoolPlan) -> int:
    """`nvidia.com/gpu` one node of the pool advertises (0 for a `mixed` MIG pool, whose devices have their own
    resource names): what a pod requesting `nvidia.com/gpu` can be given per node."""
    return advertised_resources(plan, plan.mig_strategy).get(GPU_RESOURCE, 0)
