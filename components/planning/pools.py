"""Everything derived about a node pool, computed once from its config and the catalog.

Components (launch templates, Auto Scaling groups, device plugins, hybrid node configs), the plan summary and the
policies all read a `PoolPlan` instead of re-deriving "does this pool use EFA?" or "which AZ?" on their own.
Functions here assume a validated `StackConfig`; `components.validation` reuses the small helpers
(`resolve_instance`, `wants_efa`, ...) so a rule and the build can never disagree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from components import catalog, tags
from components.catalog import InstanceType
from components.config import ClusterConfig, NetworkConfig, NodePool, StackConfig, Taint
from components.planning import max_pods
from components.planning.drain import hook_timeout_seconds
from components.planning.efa import NetworkInterface, efa_device_count, efa_interfaces
from components.planning.management import Management, choose_management
from components.planning.node_health import STARTUP_TAINT_KEY
from components.planning.reservations import reservation_zone, scale_in_time

#: The extended resource the NVIDIA device plugin advertises (time-slicing keeps the name, `renameByDefault: false`,
#: so pod specs that ask for it work unchanged on shared GPUs, [NVDP] facts §8); also the key of the GPU taint.
GPU_RESOURCE = "nvidia.com/gpu"
#: The taint GPU pools get unless they say otherwise: only pods that tolerate it (GPU workloads, device plugins)
#: land on GPU nodes, so no stray controller burns $55/hour.
DEFAULT_GPU_TAINT = Taint(key=GPU_RESOURCE, value="true", effect="NoSchedule")
#: The taint system pools get unless they say otherwise: the system pool is for cluster add-ons, which all tolerate
#: `CriticalAddonsOnly` (components.planning.addons.placement.CRITICAL_ADDONS_ONLY), so user pods without a GPU
#: request do not crowd out CoreDNS and the controllers. The key is the one EKS's own add-ons and the NVIDIA, EFA and
#: FSx charts tolerate by default (https://github.com/aws/containers-roadmap/issues/1389 for CoreDNS,
#: [EKSCH] and [NVDP] facts §8).
DEFAULT_SYSTEM_TAINT = Taint(key="CriticalAddonsOnly", value="true", effect="NoSchedule")
#: The taint a gated GPU node registers with and keeps until its health check passes (docs/operations.md, "The
#: health loop"). cluster-autoscaler 1.35 treats a taint under `startup-taint.cluster-autoscaler.kubernetes.io/` as a
#: startup taint: the node counts as not ready, so no second scale-up starts for the pods waiting on it, and the
#: taint is stripped from node templates ([CASTARTUP] utils/taints/taints.go `StartupTaintPrefix`,
#: `IsStartupTaint`, `FilterOutNodesWithStartupTaints`, `SanitizeTaints`).
STARTUP_TAINT = Taint(key=STARTUP_TAINT_KEY, value="true", effect="NoSchedule")
#: cluster-autoscaler's AWS GPU label ([CA] in aws-gpu-facts.md §6): set at kubelet start so the autoscaler knows a
#: node has GPUs before the device plugin advertises them (no repeated scale-ups).
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
#: The label the NVIDIA device plugin chart's default affinity matches without node-feature-discovery ([NVDP] §8);
#: nodeadm sets it by itself only from Kubernetes 1.35 ([AMI] §5b), so we always set it.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
#: Per-node config selector of the NVIDIA device plugin ([NVDP] §8: `nvidia.com/device-plugin.config=<name>`).
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
EFA_LABEL = f"{tags.PREFIX}/efa"
#: The label NVIDIA's k8s-mig-manager watches: the name of the mig-parted config to apply to the node's GPUs
#: ([MIGPARTED] cmd/nvidia-mig-manager; components.planning.mig). Set on MIG pools to `mig_config_name`.
MIG_CONFIG_LABEL = "nvidia.com/mig.config"


@dataclass(frozen=True)
class PoolPlan:
    pool: NodePool
    #: The instance type of an `aws` pool (None for hybrid pools).
    instance: InstanceType | None
    #: Every instance type the pool may launch, primary first (spot pools add same-shape types).
    instance_types: tuple[str, ...]
    gpu_model: str | None
    gpus_per_node: int
    efa: bool
    interfaces: tuple[NetworkInterface, ...]
    availability_zones: tuple[str, ...]
    placement_group: bool
    local_storage: str | None
    #: The taints work must tolerate to run on the pool's nodes once they are admitted.
    taints: tuple[Taint, ...]
    labels: dict[str, str]
    instance_refresh: bool
    min_nodes: int
    max_nodes: int
    initial_nodes: int
    #: The release of the pool's AMI family it boots (`cluster.amiRelease` / `bottlerocketRelease`); None for
    #: hybrid pools, which bring their own OS.
    ami_release: str | None = None
    #: Capacity-block pools: when a scheduled action sets the group to zero, so every node drains before EC2
    #: reclaims the block (components.planning.reservations).
    scale_to_zero_at: datetime | None = None
    #: How the pool's nodes reach the stack's FSx for Lustre file system, `efa` or `tcp`
    #: (components.planning.lustre_clients); None when they do not mount it.
    lustre_client: Literal["efa", "tcp"] | None = None
    #: The device plugin's MIG strategy (`addons.nvidiaDevicePlugin.migStrategy`): how the pool's MIG devices are
    #: advertised (components.planning.mig.advertised_resources).
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    #: cluster-autoscaler's GPU scale-down threshold for this pool's group, when a serving workload runs on it
    #: (`components.planning.serving_autoscaling.with_serving_scale_down`); None keeps the global setting.
    scale_down_gpu_utilization: float | None = None
    #: How the pool's instances are run: an EKS managed node group with node auto repair, or a self-managed Auto
    #: Scaling group (components.planning.management). Hybrid pools are `self-managed` (they have no group).
    management: Management = "self-managed"
    #: Taints the nodes register with on top of `taints` and lose once admitted: the health gate's startup taint on
    #: a gated GPU pool (`health_gated`). Node agents tolerate them; work does not.
    startup_taints: tuple[Taint, ...] = ()

    @property
    def registration_taints(self) -> tuple[Taint, ...]:
        """The kubelet's `--register-with-taints`: the pool's taints, then its startup taints."""
        return (*self.taints, *self.startup_taints)

    @property
    def health_gated(self) -> bool:
        return bool(self.startup_taints)

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def role(self) -> str:
        return self.pool.role

    @property
    def kind(self) -> str:
        return self.pool.kind

    @property
    def capacity_type(self) -> str:
        return self.pool.capacity.type

    @property
    def is_gpu(self) -> bool:
        return self.gpus_per_node > 0

    @property
    def efa_devices(self) -> int:
        return efa_device_count(list(self.interfaces))

    @property
    def max_efa_devices(self) -> int:
        return self.instance.max_efa_interfaces if self.instance else 0

    @property
    def max_pods(self) -> int | None:
        """The kubelet's maxPods on an `aws` pool: what the VPC CNI can address (components.planning.max_pods).

        None on hybrid pools, whose pod addresses come from Cilium and the remote pod network, not the VPC CNI.
        """
        return max_pods.max_pods(self.instance, self.interfaces) if self.instance else None

    @property
    def fabric_gbps(self) -> float:
        """EFA fabric bandwidth per node: the type's network bandwidth when its EFA devices are wired, else 0."""
        return self.instance.network_gbps if (self.instance and self.efa) else 0.0


def resolve_instance(pool: NodePool) -> InstanceType | None:
    """The pool's instance type: named, or the cheapest type with the asked GPU model and count."""
    if pool.kind != "aws":
        return None
    if pool.instance_type:
        return catalog.instance_type(pool.instance_type)
    if pool.gpu_model:
        matches = catalog.instance_types_with_gpu(pool.gpu_model, pool.gpus_per_node)
        return matches[0] if matches else None
    return None


def wants_efa(pool: NodePool, instance: InstanceType | None) -> bool:
    """`auto` wires EFA on training pools whose type has it; inference and system pools need no fabric."""
    if instance is None or pool.efa == "off":
        return False
    if pool.efa == "on":
        return True
    return instance.efa_supported and pool.role == "training"


def pool_zones(pool: NodePool, network: NetworkConfig, efa: bool) -> tuple[str, ...]:
    """A reservation's pool launches in the reservation's AZ (components.planning.reservations); EFA does not cross
    AZs ([EFAD], ParallelCluster efa-v3 in §2): EFA pools default to the first AZ."""
    if pool.kind != "aws":
        return ()
    reserved = reservation_zone(pool)
    if reserved:
        return (reserved,)
    if pool.placement.availability_zones:
        return tuple(pool.placement.availability_zones)
    zones = network.zones
    return tuple(zones[:1]) if efa else tuple(zones)


def wants_placement_group(pool: NodePool, efa: bool) -> bool:
    """Cluster placement group for EFA pools, but not for capacity blocks or reservations by default.

    AWS already places reserved capacity; forcing a placement group on top fails with
    InsufficientInstanceCapacity (terraform-aws-eks #3730, eksctl #7949; ParallelCluster disables it with
    capacity blocks, aws-gpu-facts.md §2).
    """
    choice = pool.placement.placement_group
    if choice != "auto":
        return choice == "on"
    return efa and pool.capacity.type not in ("capacity-block", "reservation")


def default_taints(pool: NodePool, gpus: int) -> tuple[Taint, ...]:
    """The pool's own taints, else the GPU taint on GPU pools and the CriticalAddonsOnly taint on system pools."""
    if pool.taints is not None:
        return tuple(pool.taints)
    if gpus > 0:
        return (DEFAULT_GPU_TAINT,)
    return (DEFAULT_SYSTEM_TAINT,) if pool.role == "system" else ()


def gated(pool: NodePool, gpus: int, health_loop: bool) -> bool:
    """Whether the pool's nodes pass the health gate: GPU pools with `healthGate.enabled` while the health loop runs,
    except MIG pools, whose GPUs DCGM's diagnostic cannot test ([MIGLIMITS])."""
    return health_loop and gpus > 0 and pool.health_gate.enabled and not pool.device_plugin.mig_devices


def local_storage_strategy(pool: NodePool, instance: InstanceType | None) -> str | None:
    """nodeadm `instance.localStorage.strategy`: RAID0 by default on training pools with instance-store NVMe."""
    if pool.local_storage == "none":
        return None
    if pool.local_storage is not None:
        return pool.local_storage
    if instance is not None and instance.local_nvme_count > 0 and pool.role == "training":
        return "RAID0"
    return None


def mig_config_name(pool_name: str, mig_devices: Mapping[str, int]) -> str:
    """The pool's mig-parted config name and `nvidia.com/mig.config` label value: `<pool>-<8 hex of the layout>`.

    The layout is part of the name so a node's label only ever names the layout it was built for. The mig-manager
    re-reads the label whenever it restarts (image bump, eviction, reboot: [MIGMGR] cmd/nvidia-mig-manager, the
    node informer's add handler) and applies the named config unless it is already in place; were the name only the
    pool's, a changed layout would be applied to nodes still running pods. A new layout is a new label, hence new
    user data, so the pool's nodes are replaced instead; an old node's name is no longer in the file, and the manager
    then refuses it (`mig-parted assert --valid-config` fails, state `failed`) without touching the GPUs ([MIGMGR]
    pkg/mig/reconfigure). Pool names are at most 32 characters, so the value stays within a label's 63."""
    layout = json.dumps(sorted(mig_devices.items()), separators=(",", ":"))
    return f"{pool_name}-{hashlib.sha256(layout.encode()).hexdigest()[:8]}"


def node_labels(pool: NodePool, gpu_model: str | None, gpus: int, efa: bool) -> dict[str, str]:
    """kubelet `--node-labels`: the user's labels, then ours (ours win: selectors and policies rely on them)."""
    labels = dict(pool.labels)
    labels[tags.POOL] = pool.name
    labels[tags.ROLE] = pool.role
    if gpus > 0 and gpu_model:
        labels[GPU_PRESENT_LABEL] = "true"
        labels[ACCELERATOR_LABEL] = f"nvidia-{gpu_model.lower()}"
        labels[tags.GPU_MODEL] = gpu_model
        if pool.device_plugin.time_slicing_replicas > 1:
            labels[DEVICE_PLUGIN_CONFIG_LABEL] = pool.name
        if pool.device_plugin.mig_devices:
            labels[MIG_CONFIG_LABEL] = mig_config_name(pool.name, pool.device_plugin.mig_devices)
    if efa:
        labels[EFA_LABEL] = "true"
    return labels


def image_release(pool: NodePool, cluster: ClusterConfig) -> str | None:
    """The release of the pool's AMI family the stack pins (docs/operations.md, "Upgrading node images")."""
    if pool.kind != "aws":
        return None
    return cluster.ami_release if pool.ami_family == "al2023" else cluster.bottlerocket_release


def refreshes(pool: NodePool) -> bool:
    """Whether launch template changes roll out by instance refresh: as configured, else everywhere but training
    pools (a refresh would kill running jobs)."""
    enabled = pool.instance_refresh.enabled
    return pool.role != "training" if enabled is None else enabled


def refresh_healthy_percentages(pool: NodePool) -> tuple[int, int]:
    """(minimum, maximum) healthy percentages of the pool's instance refresh. Every pool that refreshes launches
    before it terminates unless configured otherwise (100/200: a 2-node pool gains 2 new nodes, then drains the old
    ones), so CoreDNS and the controllers always have Ready nodes to move to and an inference pool keeps serving
    with all its GPUs. AWS's own defaults (90 and no maximum, i.e. 100) terminate first: with a maximum of 100 a
    node can only be replaced after it leaves, so a 2-node inference pool serves on one node per batch (EC2 Auto
    Scaling RefreshPreferences `MinHealthyPercentage`, `MaxHealthyPercentage`,
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_RefreshPreferences.html). The derived maximum stays
    within AWS's bounds: at most 200 and at most 100 above the minimum."""
    refresh = pool.instance_refresh
    low = 100 if refresh.min_healthy_percentage is None else refresh.min_healthy_percentage
    high = refresh.max_healthy_percentage
    if high is None:
        high = min(200, low + 100)
    return low, high


def plan_pool(
    pool: NodePool,
    network: NetworkConfig,
    ami_release: str | None = None,
    drain_timeout_seconds: int | None = None,
    mig_strategy: Literal["none", "single", "mixed"] = "none",
    health_loop: bool = False,
) -> PoolPlan:
    """The pool's plan. `ami_release` is the pinned release of its image family (`image_release`); a Capacity
    Block's scale-to-zero moment needs the handler's drain timeout (`addons.nodeTerminationHandler`); what its MIG
    devices advertise needs the device plugin's MIG strategy; the health gate needs the health loop
    (`addons.nodeHealth.enabled`)."""
    instance = resolve_instance(pool)
    rolls_out = refreshes(pool)
    efa = wants_efa(pool, instance)
    interfaces = tuple(efa_interfaces(instance, pool.efa_layout)) if (efa and instance) else ()
    if instance is not None:
        gpu_model, gpus = instance.gpu_model, instance.gpu_count
        types = tuple(dict.fromkeys([instance.name, *pool.capacity.spot_instance_types]))
    else:
        gpu_model, gpus = pool.gpu_model, pool.gpus_per_node or 0
        types = ()
    if pool.kind == "hybrid":
        count = pool.nodes or 0
        low, high, initial = count, count, count
    else:
        low, high, initial = pool.scaling.min, pool.scaling.max, pool.scaling.initial
    return PoolPlan(
        pool=pool,
        instance=instance,
        instance_types=types,
        gpu_model=gpu_model,
        gpus_per_node=gpus,
        efa=efa,
        interfaces=interfaces,
        availability_zones=pool_zones(pool, network, efa),
        placement_group=wants_placement_group(pool, efa),
        local_storage=local_storage_strategy(pool, instance),
        taints=default_taints(pool, gpus),
        labels=node_labels(pool, gpu_model, gpus, efa),
        instance_refresh=rolls_out,
        min_nodes=low,
        max_nodes=high,
        initial_nodes=initial,
        ami_release=ami_release,
        scale_to_zero_at=_scale_to_zero_at(pool, drain_timeout_seconds),
        mig_strategy=mig_strategy,
        management=choose_management(pool, rolls_out),
        startup_taints=(STARTUP_TAINT,) if gated(pool, gpus, health_loop) else (),
    )


def _scale_to_zero_at(pool: NodePool, drain_timeout_seconds: int | None) -> datetime | None:
    end = pool.capacity.end_time
    if pool.kind != "aws" or pool.capacity.type != "capacity-block" or end is None or drain_timeout_seconds is None:
        return None
    return scale_in_time(end, hook_timeout_seconds(drain_timeout_seconds))


#: The system pool a stack gets when it names none: CoreDNS and the controllers need CPU nodes off the GPUs.
DEFAULT_SYSTEM_POOL: dict[str, object] = {
    "name": "system",
    "role": "system",
    "instanceType": "m7i.xlarge",
    "scaling": {"min": 2, "desired": 2, "max": 3, "mode": "fixed"},
}


def default_system_pool(pools: Sequence[NodePool]) -> NodePool | None:
    """The pool to add when none of `pools` is a system pool, else None. The config rules judge it with the
    others (`components.validation.parse`)."""
    if any(pool.role == "system" for pool in pools):
        return None
    return NodePool.model_validate(DEFAULT_SYSTEM_POOL)


def with_default_system_pool(pools: Sequence[NodePool]) -> list[NodePool]:
    """The stack's pools, the default system pool last when it names none."""
    added = default_system_pool(pools)
    return [*pools, added] if added is not None else list(pools)


def plan_each_pool(spec: StackConfig) -> list[PoolPlan]:
    """Every pool's own plan, in config order. Which pools mount Lustre and the serving workloads' scale-down
    thresholds are later steps of `components.planning.stack_plan.plan_pools`."""
    drain = spec.addons.node_termination_handler.drain_timeout_seconds
    mig = spec.addons.nvidia_device_plugin.mig_strategy
    loop = spec.addons.node_health.enabled
    return [
        plan_pool(pool, spec.network, image_release(pool, spec.cluster), drain, mig, loop)
        for pool in with_default_system_pool(spec.node_pools)
    ]
