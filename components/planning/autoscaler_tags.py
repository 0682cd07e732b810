"""Auto Scaling group tags that let cluster-autoscaler find a pool and scale it up from zero ([CA], facts §6).

Invariants: a pool in `cluster-autoscaler` or `gpu-utilization` mode carries the discovery tags and a node-template
tag for each of its labels, taints and extended resources (GPUs, EFA devices, huge pages, pods); a `fixed` pool
carries none. Why and sources: docs/design-notes.md#scale-from-zero-the-node-template-tags; the user view:
docs/node-pools.md#scaling-and-scale-from-zero.
"""

from __future__ import annotations

from collections import Counter

from components.planning.dra import allocates_through_dra
from components.planning.hugepages import HUGEPAGES_RESOURCE, hugepages, hugepages_quantity
from components.planning.mig import advertised_resources
from components.planning.pools import PoolPlan

#: Auto-discovery: `--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,
#: k8s.io/cluster-autoscaler/<cluster>` matches ASGs carrying both keys ([CA] §6).
ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
OWNER_TAG_PREFIX = "k8s.io/cluster-autoscaler/"
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
#: cluster-autoscaler reads a node group's taints from the tags under this prefix when scaling from zero ([CA]).
TAINT_TAG_PREFIX = f"{NODE_TEMPLATE}/taint/"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
EPHEMERAL_STORAGE_RESOURCE = "ephemeral-storage"
PODS_RESOURCE = "pods"
AUTOSCALED_MODE = "cluster-autoscaler"
#: A per-group override of `--scale-down-gpu-utilization-threshold` ([CA] `cloudprovider/aws/README.md`, "ASG labels
#: can specify autoscaling options"; `aws_manager.go` `optionsTagsPrefix`).
SCALE_DOWN_GPU_THRESHOLD_TAG = (
    "k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledowngpuutilizationthreshold"
)
#: Modes whose pools cluster-autoscaler resizes: on pending pods alone, or on the replicas a serving autoscaler adds.
AUTOSCALED_MODES = (AUTOSCALED_MODE, "gpu-utilization")


def discovery_tags(cluster_name: str) -> dict[str, str]:
    """The two tags cluster-autoscaler's auto-discovery matches for this cluster."""
    return {ENABLED_TAG: "true", f"{OWNER_TAG_PREFIX}{cluster_name}": "owned"}


def ephemeral_storage(plan: PoolPlan) -> str:
    """The node's `ephemeral-storage` capacity as a Kubernetes quantity.

    With nodeadm RAID0 the kubelet directory lives on one array of every instance-store disk, so the capacity is
    their sum; RAID10 mirrors, halving it ([AMI] setup-local-disks, facts §5b). Otherwise (no strategy, or `Mount`,
    which mounts disks separately and leaves kubelet on the root volume) it is the root volume. Catalog NVMe sizes
    are decimal GB (`G`), root volumes GiB (`Gi`).
    """
    instance = plan.instance
    if instance is not None and instance.local_nvme_count > 0:
        if plan.local_storage == "RAID0":
            return f"{instance.local_nvme_total_gb}G"
        if plan.local_storage == "RAID10":
            return f"{instance.local_nvme_total_gb // 2}G"
    return f"{plan.pool.root_volume_gib}Gi"


def node_template_tags(plan: PoolPlan) -> dict[str, str]:
    """Scale-from-zero template: every kubelet label, every taint with its effect, GPUs (or a MIG pool's devices),
    EFA devices, huge pages, disk and pods: each resource as the node's kubelet will report it. A MIG pool's
    template says what the node advertises once partitioned: under `single` its MIG devices as `nvidia.com/gpu`, so a
    pod asking for one scales the pool from zero ([CA] README, `resources/<name>` tags).

    The taint tag holds `value:Effect` per key ([CA] aws_manager.go requires the effect suffix), so one key can
    carry only one taint; two taints with the same key would silently lose one, hence the error.
    """
    duplicated = sorted(key for key, count in Counter(t.key for t in plan.taints).items() if count > 1)
    if duplicated:
        raise ValueError(
            f"pool {plan.name}: taint key(s) {', '.join(duplicated)} appear more than once; cluster-autoscaler "
            "node-template tags hold one taint per key"
        )
    tags = {f"{NODE_TEMPLATE}/label/{key}": value for key, value in sorted(plan.labels.items())}
    for taint in plan.taints:
        tags[f"{TAINT_TAG_PREFIX}{taint.key}"] = f"{taint.value}:{taint.effect}"
    # a DRA pool's GPUs are devices of its ResourceSlices, not a resource of the node (no scale from zero there)
    gpus = {} if allocates_through_dra(plan) else advertised_resources(plan, plan.mig_strategy)
    for resource, count in gpus.items():
        tags[f"{NODE_TEMPLATE}/resources/{resource}"] = str(count)
    if plan.efa_devices > 0:
        tags[f"{NODE_TEMPLATE}/resources/{EFA_RESOURCE}"] = str(plan.efa_devices)
    if hugepages(plan) > 0:
        tags[f"{NODE_TEMPLATE}/resources/{HUGEPAGES_RESOURCE}"] = hugepages_quantity(plan)
    tags[f"{NODE_TEMPLATE}/resources/{EPHEMERAL_STORAGE_RESOURCE}"] = ephemeral_storage(plan)
    if plan.max_pods is not None:
        tags[f"{NODE_TEMPLATE}/resources/{PODS_RESOURCE}"] = str(plan.max_pods)
    return tags


def autoscaler_tags(cluster_name: str, plan: PoolPlan) -> dict[str, str]:
    """Discovery and node-template tags for a pool cluster-autoscaler resizes; nothing for a `fixed` pool."""
    if plan.pool.scaling.mode not in AUTOSCALED_MODES:
        return {}
    tags = {**discovery_tags(cluster_name), **node_template_tags(plan)}
    if plan.scale_down_gpu_utilization is not None:
        tags[SCALE_DOWN_GPU_THRESHOLD_TAG] = str(plan.scale_down_gpu_utilization)
    return tags
