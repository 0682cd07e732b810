"""Rules on `kind: aws` node pools: instance type, size, capacity, placement, EFA, labels and taints.

Every rule walks the aws pools through `Parsed.aws_pools()`; a pool whose instance type does not resolve is skipped
by the rules that need it (`instance_type_resolves` already reported it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator

from components import catalog, tags
from components.config import EksRepair
from components.errors import Problem
from components.planning.autoscaler_tags import AUTOSCALED_MODES, autoscaler_tags
from components.planning.efa import efa_interfaces
from components.planning.management import choose_management, managed_blockers
from components.planning.node_health import STARTUP_TAINT_PREFIX
from components.planning.pools import (
    ACCELERATOR_LABEL,
    DEVICE_PLUGIN_CONFIG_LABEL,
    EFA_LABEL,
    GPU_PRESENT_LABEL,
    plan_pool,
    pool_zones,
    refreshes,
    wants_efa,
    wants_placement_group,
)
from components.validation.cluster import OWN_TAG_COUNT
from components.validation.network import outside_the_network
from components.validation.parse import Parsed, shown, shown_text

#: Kubernetes supports clusters of at most 5,000 nodes (Kubernetes docs, "Considerations for large clusters"):
#: no pool, and no cluster, may be sized beyond that.
MAX_CLUSTER_NODES = 5000
#: Launch template names allow 128 characters (EC2 CreateLaunchTemplate); Pulumi appends an 8-character suffix.
MAX_POOL_RESOURCE_NAME = 120
#: kubelet refuses `--node-labels` in these namespaces except a few allowed keys (kubelet reference, --node-labels).
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
KUBELET_ALLOWED_LABEL_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")
#: Node labels the stack sets itself (components.planning.pools.node_labels); selectors and policies rely on them.
PROJECT_LABELS = (tags.POOL, tags.ROLE, tags.GPU_MODEL, GPU_PRESENT_LABEL, ACCELERATOR_LABEL, EFA_LABEL,
                  DEVICE_PLUGIN_CONFIG_LABEL)  # fmt: skip
#: Resource group ARNs: `arn:<partition>:resource-groups:<region>:<12-digit account>:group/<name>` (AWS Resource
#: Groups API, Group `GroupArn`; names are 1-300 letters, digits, `.`, `_` and `-`).
RESOURCE_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9._-]{1,300}$")
#: Capacity keys that only a spot pool reads (the mixed instances policy).
SPOT_ONLY_KEYS = {
    "spot_instance_types": "spotInstanceTypes",
    "on_demand_base_capacity": "onDemandBaseCapacity",
    "on_demand_percentage_above_base": "onDemandPercentageAboveBase",
    "spot_allocation_strategy": "spotAllocationStrategy",
}
#: Keys only a `kind: hybrid` pool reads.
HYBRID_ONLY_KEYS = {
    "nodes": "nodes",
    "vcpus_per_node": "vcpusPerNode",
    "network": "network",
    "credentials": "credentials",
    "gpu_runtime": "gpuRuntime",
    "unreachable_toleration_seconds": "unreachableTolerationSeconds",
}
#: What an aws pool has instead of each hybrid-only key: the hint of its refusal.
AWS_POOLS_INSTEAD = {
    "nodes": "aws pools size with `scaling`",
    "vcpusPerNode": "aws pools take it from the instance type",
    "network": "aws pools use the stack's VPC subnets",
    "credentials": "aws pools get credentials from their instance role",
    "gpuRuntime": "aws pools get the NVIDIA runtime from their AMI",
    "unreachableTolerationSeconds": "pods on aws pools keep the default 300 s and are replaced on other nodes",
}


def pool_names_are_unique(p: Parsed) -> Iterator[Problem]:
    """Pool names are unique: they name the Auto Scaling groups, launch templates and the `gpu-clusters/pool`
    label."""
    for name, count in Counter(pool.name for _, pool in p.pools).items():
        if count > 1:
            indexes = [i for i, pool in p.pools if pool.name == name]
            yield Problem(f"nodePools[{indexes[-1]}].name", f"{name!r} is used by {count} pools; names must be unique")


def instance_type_resolves(p: Parsed) -> Iterator[Problem]:
    """An aws pool names an instance type of the catalog, or a GPU model AWS rents plus a GPU count some catalog
    type has (components/catalog/instances.yaml, from the EC2 instance type guide)."""
    for path, pool, instance in p.aws_pools():
        if instance is not None:
            continue
        if pool.instance_type and pool.gpu_model:
            yield Problem(path, "give instanceType or gpuModel (+ gpusPerNode), not both")
        elif pool.instance_type:
            yield Problem(f"{path}.instanceType", _catalog_miss(catalog.instance_type, pool.instance_type))
        elif not pool.gpu_model:
            if path not in p.damaged:
                yield Problem(path, "aws pools need instanceType (e.g. p5.48xlarge) or gpuModel + gpusPerNode")
        elif pool.gpu_model not in catalog.gpu_models():
            yield Problem(f"{path}.gpuModel", _catalog_miss(catalog.gpu_model, pool.gpu_model))
        elif not catalog.is_rented_by_aws(pool.gpu_model):
            alternative = catalog.gpu_model(pool.gpu_model).cloud_alternative
            yield Problem(
                f"{path}.gpuModel",
                f"AWS does not rent {pool.gpu_model} GPUs; run your own {pool.gpu_model} servers as a `kind: hybrid` "
                f"pool, or use {alternative or 'another model'} in the cloud"
                + (" (4x L40S 48 GB)" if pool.gpu_model == "A40" else ""),
            )
        else:
            counts = sorted({t.gpu_count for t in catalog.instance_types_with_gpu(pool.gpu_model)})
            yield Problem(
                f"{path}.gpusPerNode",
                f"no instance type has {pool.gpus_per_node} x {pool.gpu_model}; available counts: {counts}",
            )


def _catalog_miss(lookup: Callable[[str], object], name: str) -> str:
    """The catalog's own "unknown ..., did you mean" message, cut to a sane length."""
    try:
        lookup(name)
    except KeyError as error:
        return shown_text(str(error.args[0]), 300)
    return "unknown"


def scaling_bounds_are_consistent(p: Parsed) -> Iterator[Problem]:
    """`min <= desired <= max`, `max >= 1`, at most 5,000 nodes (Kubernetes large-cluster limit), and a
    scale-in threshold below the scale-out one (or the pool would flap)."""
    for path, pool, _ in p.aws_pools():
        s = pool.scaling
        if p.damaged_at(f"{path}.scaling"):
            continue  # a bound that did not parse would be quoted as its default
        if s.min > s.max:
            yield Problem(f"{path}.scaling.min", f"min {s.min} is above max {s.max}; need min <= desired <= max")
        if s.desired is not None and not s.min <= s.desired <= s.max:
            yield Problem(f"{path}.scaling.desired", f"desired {s.desired} is outside min {s.min} .. max {s.max}")
        if s.max == 0:
            yield Problem(f"{path}.scaling.max", "max 0 means the pool can never run a node; set max >= 1")
        if s.max > MAX_CLUSTER_NODES:
            yield Problem(f"{path}.scaling.max", f"{s.max} nodes; Kubernetes supports at most {MAX_CLUSTER_NODES}")
        g = s.gpu_utilization
        if g.scale_in_below_percent >= g.scale_out_above_percent:
            yield Problem(
                f"{path}.scaling.gpuUtilization.scaleInBelowPercent",
                f"{g.scale_in_below_percent}% must be below scaleOutAbovePercent ({g.scale_out_above_percent}%) "
                "or the pool would flap",
            )


def cluster_size_is_bounded(p: Parsed) -> Iterator[Problem]:
    """All pools together stay within 5,000 nodes (Kubernetes docs, "Considerations for large clusters"). A pool
    already over the limit on its own is reported there, once, not again as the total."""
    sizes = [pool.scaling.max if pool.kind == "aws" else (pool.nodes or 0) for _, pool in p.pools]
    total = sum(sizes)
    if total > MAX_CLUSTER_NODES and max(sizes) <= MAX_CLUSTER_NODES:
        yield Problem("nodePools", f"the pools add up to {total} nodes; Kubernetes supports {MAX_CLUSTER_NODES}")


def gpu_utilization_scaling_is_workable(p: Parsed) -> Iterator[Problem]:
    """A `gpu-utilization` pool has GPUs and a serving workload whose replicas the rule scales (cluster-autoscaler
    then sizes the pool for them); its rule is refused in the other modes, where nothing reads it. The GPU
    utilization comes from the DCGM exporter on the Prometheus path, which `serving_workloads_are_wired` requires."""
    workloads_damaged = any(d == "workloads" or d.startswith("workloads.") for d in p.damaged)
    served = None if p.workloads is None or workloads_damaged else {w.pool for w in p.workloads.serving}
    for path, pool, instance in p.aws_pools():
        if pool.scaling.mode != "gpu-utilization":
            if "gpu_utilization" in pool.scaling.model_fields_set:
                yield Problem(f"{path}.scaling.gpuUtilization", "only read with mode: gpu-utilization; remove it")
            continue
        if instance is not None and not instance.is_gpu:
            yield Problem(f"{path}.scaling.mode", "gpu-utilization scaling needs GPUs; use cluster-autoscaler or fixed")
        elif served is not None and pool.name not in served:
            yield Problem(
                f"{path}.scaling.mode",
                f"gpu-utilization scales the replicas of the serving workloads on the pool, and {pool.name} has "
                f"none; add a workloads.serving entry with pool: {pool.name}, or use mode cluster-autoscaler",
            )


def efa_settings_fit_the_type(p: Parsed) -> Iterator[Problem]:
    """`efa: on` needs a type with EFA (EC2 user guide, EFA supported instance types); `efaLayout` is read only
    when the pool wires EFA."""
    for path, pool, instance in p.aws_pools():
        if instance is None:
            continue
        if pool.efa == "on" and not instance.efa_supported:
            yield Problem(
                f"{path}.efa",
                f"{instance.name} has no EFA; types with EFA: {', '.join(catalog.efa_instance_type_names())}",
            )
        elif "efa_layout" in pool.model_fields_set and not wants_efa(pool, instance):
            yield Problem(f"{path}.efaLayout", f"the pool wires no EFA ({instance.name}, efa: {pool.efa}); remove it")


def efa_layout_fits_the_cards(p: Parsed) -> Iterator[Problem]:
    """The `efa` layout puts an EFA device on network card 0, so it needs a type whose card 0 carries EFA (EC2 user
    guide, EFA with multiple network cards; p6-b300's card 0 does not); `efa-only` fits every EFA type."""
    for path, pool, instance in p.aws_pools():
        if instance is None or not instance.efa_supported or not wants_efa(pool, instance):
            continue
        try:
            efa_interfaces(instance, pool.efa_layout)
        except ValueError as error:
            yield Problem(f"{path}.efaLayout", f"{error}; use efaLayout: efa-only")


def system_pools_use_cpu_types(p: Parsed) -> Iterator[Problem]:
    """System pools run CoreDNS and controllers on CPU types, never on GPUs billed by the hour."""
    for path, pool, instance in p.aws_pools():
        if pool.role == "system" and instance is not None and instance.is_gpu:
            yield Problem(
                f"{path}.instanceType", "system pools run CoreDNS and controllers: use a CPU type (m7i.xlarge)"
            )


def spot_settings_only_on_spot(p: Parsed) -> Iterator[Problem]:
    """Extra instance types, the on-demand base and percentage and the allocation strategy shape a spot pool's
    mixed instances policy; on any other capacity type nothing reads them."""
    for path, pool, _ in p.aws_pools():
        c = pool.capacity
        if c.type == "spot" or p.damaged_at(f"{path}.capacity.type"):
            continue
        for field, key in SPOT_ONLY_KEYS.items():
            if field in c.model_fields_set:
                combined = " (spot and capacity blocks cannot be combined)" if c.type == "capacity-block" else ""
                yield Problem(f"{path}.capacity.{key}", f"only spot pools read it, not {c.type} pools{combined}")


def spot_types_match_the_shape(p: Parsed) -> Iterator[Problem]:
    """A spot pool's extra types exist and have the primary type's GPU shape (so pods fit every node), its EFA
    cards (the launch template wires the primary's cards), and an on-demand base within `scaling.max`."""
    for path, pool, instance in p.aws_pools():
        c = pool.capacity
        if c.type != "spot" or instance is None:
            continue
        for j, name in enumerate(c.spot_instance_types):
            where = f"{path}.capacity.spotInstanceTypes[{j}]"
            other = catalog.instance_types().get(name)
            if other is None:
                yield Problem(where, _catalog_miss(catalog.instance_type, name))
            elif other.gpu_shape != instance.gpu_shape:
                same = [t.name for t in catalog.instance_types().values()
                        if t.gpu_shape == instance.gpu_shape and t.name != instance.name]  # fmt: skip
                yield Problem(
                    where,
                    f"{name} ({_shape(other)}) differs from {instance.name} ({_shape(instance)}); a spot pool mixes "
                    f"only one GPU shape so pods fit every node; same shape: {', '.join(same) or 'none in catalog'}",
                )
            elif wants_efa(pool, instance) and not set(instance.efa_cards) <= set(other.efa_cards):
                yield Problem(
                    where,
                    f"{name} lacks EFA cards {instance.name} has; the launch template wires the primary type's "
                    "network cards and EC2 rejects a NetworkCardIndex the type does not have",
                )
        if c.on_demand_base_capacity > pool.scaling.max:
            yield Problem(
                f"{path}.capacity.onDemandBaseCapacity",
                f"{c.on_demand_base_capacity} exceeds scaling.max {pool.scaling.max}",
            )


def autoscaled_spot_types_match_cpu_and_memory(p: Parsed) -> Iterator[Problem]:
    """A spot pool cluster-autoscaler resizes mixes only types with the primary type's vCPUs and memory:
    cluster-autoscaler builds one node template per Auto Scaling group from its first instance type, so a larger
    type's capacity is never counted and a smaller one is over-counted ([CASAWS]: a mixed instances policy needs the
    same CPU and memory in every type)."""
    for path, pool, instance in p.aws_pools():
        c = pool.capacity
        # every pool in an autoscaled mode carries the autoscaler's tags (min == max too), which the pack checks
        autoscaled = pool.scaling.mode in AUTOSCALED_MODES
        if c.type != "spot" or instance is None or not autoscaled:
            continue
        for j, name in enumerate(c.spot_instance_types):
            other = catalog.instance_types().get(name)
            if other is None or other.gpu_shape != instance.gpu_shape:
                continue  # spot_types_match_the_shape says why
            if (other.vcpu, other.memory_gib) != (instance.vcpu, instance.memory_gib):
                same = [t.name for t in catalog.instance_types().values()
                        if t.name != instance.name and t.gpu_shape == instance.gpu_shape
                        and (t.vcpu, t.memory_gib) == (instance.vcpu, instance.memory_gib)]  # fmt: skip
                yield Problem(
                    f"{path}.capacity.spotInstanceTypes[{j}]",
                    f"{name} ({other.vcpu} vCPU, {other.memory_gib:g} GiB) differs from {instance.name} "
                    f"({instance.vcpu} vCPU, {instance.memory_gib:g} GiB); cluster-autoscaler sizes every node of "
                    f"the group as {instance.name}, so its types need the same vCPUs and memory "
                    f"(same: {', '.join(same) or 'none in catalog'}; or scaling.mode fixed)",
                )


def _shape(t: catalog.InstanceType) -> str:
    return f"{t.gpu_count} x {t.gpu_model} {t.gpu_memory_gib:g} GiB" if t.is_gpu else "no GPU"


def reservations_are_targeted(p: Parsed) -> Iterator[Problem]:
    """Capacity blocks name their `cr-` id and exist only for the types AWS offers as Capacity Blocks for ML;
    reservation pools name an id or a resource group; on-demand and spot pools name neither."""
    for path, pool, instance in p.aws_pools():
        c, cpath = pool.capacity, f"{path}.capacity"
        if c.type == "capacity-block":
            if not c.reservation_id:
                yield Problem(f"{cpath}.reservationId", "a capacity-block pool needs the Capacity Block id (cr-...)")
            if c.reservation_resource_group_arn:
                yield Problem(f"{cpath}.reservationResourceGroupArn", "capacity blocks are targeted by reservationId")
            offered = catalog.capacity_block_types()
            if instance is not None and instance.name not in offered:
                yield Problem(
                    f"{cpath}.type",
                    f"AWS offers no Capacity Blocks of {instance.name} (EC2 Capacity Blocks for ML: "
                    f"{', '.join(sorted(offered))})",
                )
        given = c.reservation_id or c.reservation_resource_group_arn or f"{cpath}.reservationId" in p.damaged
        if c.type == "reservation" and not given:
            yield Problem(
                f"{cpath}.reservationId",
                "a reservation pool needs reservationId (cr-...) or reservationResourceGroupArn",
            )
        if c.type in ("on-demand", "spot") and (c.reservation_id or c.reservation_resource_group_arn):
            yield Problem(
                f"{cpath}.reservationId", f"reservations are for capacity-block or reservation pools, not {c.type}"
            )


def reservation_group_arn_has_its_shape(p: Parsed) -> Iterator[Problem]:
    """`reservationResourceGroupArn` is a resource group ARN (AWS Resource Groups API, GroupArn)."""
    for path, pool, _ in p.aws_pools():
        arn = pool.capacity.reservation_resource_group_arn
        if arn is not None and not RESOURCE_GROUP_ARN.match(arn):
            yield Problem(
                f"{path}.capacity.reservationResourceGroupArn",
                f"{shown(arn)} is not a resource group ARN (arn:aws:resource-groups:us-east-1:123456789012:group/gpus)",
            )


def placement_fits_the_network(p: Parsed) -> Iterator[Problem]:
    """A pool's AZs are the network's; an EFA pool and a cluster placement group live in one AZ (EFA traffic does
    not cross AZs, AWS EFA docs)."""
    if p.network is None:
        return
    for path, pool, instance in p.aws_pools():
        efa = wants_efa(pool, instance)
        zones = pool_zones(pool, p.network, efa)
        for j, zone in enumerate(pool.placement.availability_zones or []):
            if zone not in p.zones and not p.damaged_at("network.availabilityZones", "network.existingVpc"):
                yield Problem(f"{path}.placement.availabilityZones[{j}]", outside_the_network(p, zone))
        if efa and len(zones) > 1:
            yield Problem(
                f"{path}.placement.availabilityZones",
                f"EFA traffic does not cross AZs (AWS EFA docs); pin this EFA pool to one AZ, e.g. [{zones[0]}]",
            )
        elif wants_placement_group(pool, efa) and len(zones) > 1:
            yield Problem(
                f"{path}.placement.placementGroup",
                "a cluster placement group lives in one AZ; pin the pool to one AZ or set placementGroup: off",
            )


def local_storage_needs_disks(p: Parsed) -> Iterator[Problem]:
    """A local storage strategy needs instance-store NVMe, RAID10 at least 4 disks (nodeadm), and Bottlerocket
    offers RAID0 only."""
    for path, pool, instance in p.aws_pools():
        strategy = pool.local_storage
        if strategy in (None, "none") or instance is None:
            continue
        if instance.local_nvme_count == 0:
            yield Problem(f"{path}.localStorage", f"{instance.name} has no instance-store NVMe; remove localStorage")
        elif strategy == "RAID10" and instance.local_nvme_count < 4:
            yield Problem(
                f"{path}.localStorage",
                f"RAID10 needs at least 4 disks; {instance.name} has {instance.local_nvme_count} (nodeadm)",
            )
        if pool.ami_family == "bottlerocket" and strategy in ("RAID10", "Mount"):
            yield Problem(f"{path}.localStorage", "Bottlerocket offers RAID0 ephemeral storage only; use RAID0 or none")


def hybrid_keys_not_on_aws_pools(p: Parsed) -> Iterator[Problem]:
    """`nodes`, `network`, `credentials` and `gpuRuntime` belong to hybrid pools (on-prem servers); an aws pool
    sizes with `scaling`, gets credentials from its instance role and the NVIDIA runtime from its AMI."""
    for path, pool, _ in p.aws_pools():
        for field, key in HYBRID_ONLY_KEYS.items():
            if field in pool.model_fields_set:
                yield Problem(f"{path}.{key}", f"only hybrid pools (kind: hybrid) read it; {AWS_POOLS_INSTEAD[key]}")


def device_plugin_settings_need_gpus(p: Parsed) -> Iterator[Problem]:
    """Time-slicing shares GPUs; on a pool without GPUs nothing reads `devicePlugin`."""
    for path, pool, instance in p.aws_pools():
        if instance is not None and not instance.is_gpu and "device_plugin" in pool.model_fields_set:
            yield Problem(f"{path}.devicePlugin", f"{instance.name} has no GPUs; remove devicePlugin")


def labels_are_allowed(p: Parsed) -> Iterator[Problem]:
    """Labels stay out of kubelet's reserved `kubernetes.io`/`k8s.io` namespaces (kubelet --node-labels) and never
    set a label the stack sets itself (`gpu-clusters/pool`, `nvidia.com/gpu.present`, ...)."""
    for index, pool in p.pools:
        for key in pool.labels:
            where = f"nodePools[{index}].labels.{shown_text(key)}"
            domain = key.split("/")[0] if "/" in key else ""
            reserved = any(domain == d or domain.endswith("." + d) for d in RESERVED_LABEL_DOMAINS)
            if key in PROJECT_LABELS or key.startswith(f"{tags.PREFIX}/"):
                yield Problem(where, "the stack sets this label itself (selectors and policies rely on it)")
            elif reserved and not key.startswith(KUBELET_ALLOWED_LABEL_PREFIXES):
                yield Problem(where, "kubelet refuses labels under kubernetes.io / k8s.io; use your domain")


def taints_are_distinct(p: Parsed) -> Iterator[Problem]:
    """No two taints share key and effect (the Kubernetes API refuses them); with cluster-autoscaler a key appears
    once (its node-template tag holds one value:effect per key)."""
    for index, pool in p.pools:
        pairs = Counter((t.key, t.effect) for t in pool.taints or [])
        keys = Counter(t.key for t in pool.taints or [])
        for (key, effect), count in pairs.items():
            if count > 1:
                yield Problem(f"nodePools[{index}].taints", f"{key}:{effect} appears {count} times")
        for key, count in keys.items():
            autoscaled = pool.kind == "aws" and pool.scaling.mode == "cluster-autoscaler"
            if count > 1 and autoscaled and all(n == 1 for (k, _), n in pairs.items() if k == key):
                yield Problem(
                    f"nodePools[{index}].taints",
                    f"{key} appears {count} times; cluster-autoscaler's node-template tag holds one value:Effect per "
                    "key",
                )


def startup_taints_are_the_gates(p: Parsed) -> Iterator[Problem]:
    """A pool's own taints stay on its nodes; the startup-taint prefix is cluster-autoscaler's for taints a node loses
    once admitted ([CASTARTUP]), which only the health gate removes. One set by hand would never go, or would be
    doubled by the gate's."""
    for index, pool in p.pools:
        for t_index, taint in enumerate(pool.taints or []):
            if taint.key.startswith(STARTUP_TAINT_PREFIX):
                yield Problem(
                    f"nodePools[{index}].taints[{t_index}].key",
                    f"{taint.key} is a cluster-autoscaler startup taint, which nothing but the health gate removes; "
                    "leave it out (the gate adds its own while `healthGate.enabled` is on)",
                )


def group_tags_fit(p: Parsed) -> Iterator[Problem]:
    """An Auto Scaling group holds at most 50 tags (EC2 Auto Scaling quotas): the cluster's tags, the pool's own and,
    in cluster-autoscaler mode, one node-template tag per label, taint and resource (components.node_pool.asg_tags);
    the stack's own are counted at their most (OWN_TAG_COUNT)."""
    if p.cluster is None or p.network is None or len(p.cluster.tags) + OWN_TAG_COUNT > tags.MAX_TAGS:
        return  # too many cluster tags already: tags_fit_aws_limits says so
    for path, pool, instance in p.aws_pools():
        if instance is None:
            continue
        try:
            template = autoscaler_tags(p.cluster.name, plan_pool(pool, p.network))
        except ValueError:
            continue  # the pool's own problem (an EFA layout, a taint key twice) is reported by its rule
        count = len(p.cluster.tags) + OWN_TAG_COUNT + len(template)
        if count > tags.MAX_TAGS:
            yield Problem(
                f"{path}.labels",
                f"the pool's Auto Scaling group would carry up to {count} tags (cluster tags, the stack's own and one "
                f"cluster-autoscaler node-template tag per label and taint); EC2 Auto Scaling allows {tags.MAX_TAGS}",
            )


def resource_names_fit(p: Parsed) -> Iterator[Problem]:
    """Cluster name + pool name fit a launch template name (128 characters, EC2 CreateLaunchTemplate, less the
    8 Pulumi appends)."""
    if p.cluster is None:
        return
    for index, pool in p.pools:
        if len(p.cluster.name) + 1 + len(pool.name) > MAX_POOL_RESOURCE_NAME:
            yield Problem(
                f"nodePools[{index}].name", f"cluster name + pool name exceed {MAX_POOL_RESOURCE_NAME} characters"
            )


#: Instance refresh settings that only a refreshing pool reads.
REFRESH_SETTINGS = {
    "min_healthy_percentage": "minHealthyPercentage",
    "max_healthy_percentage": "maxHealthyPercentage",
    "instance_warmup_seconds": "instanceWarmupSeconds",
    "skip_matching": "skipMatching",
}


def refresh_settings_need_a_refresh(p: Parsed) -> Iterator[Problem]:
    """Instance refresh settings apply only to a pool that refreshes: `instanceRefresh.enabled: true`, or left out
    on a system or inference pool (training pools never refresh unless asked: a refresh kills running jobs)."""
    for path, pool, _ in p.aws_pools():
        if refreshes(pool):
            continue
        why = "enabled: false" if pool.instance_refresh.enabled is False else "a training pool"
        for field, key in REFRESH_SETTINGS.items():
            if field in pool.instance_refresh.model_fields_set:
                yield Problem(
                    f"{path}.instanceRefresh.{key}",
                    f"the pool never refreshes ({why}); set instanceRefresh.enabled: true or remove it",
                )


def imds_hop_limit_has_a_reason(p: Parsed) -> Iterator[Problem]:
    """An IMDS hop limit above 1 lets pods on the pod network reach the instance metadata service and the node role's
    credentials, so it carries its reason (`imdsHopLimitReason`, the launch template's justification tag, see
    docs/security.md); a reason beside hop limit 1 justifies nothing and is refused."""
    for path, pool, _ in p.aws_pools():
        if pool.imds_hop_limit > 1 and pool.imds_hop_limit_reason is None:
            yield Problem(
                f"{path}.imdsHopLimitReason",
                f"imdsHopLimit {pool.imds_hop_limit} lets pods reach the node role's credentials: say which pod needs "
                "instance metadata from the pod network, or keep imdsHopLimit 1",
            )
        if pool.imds_hop_limit == 1 and pool.imds_hop_limit_reason is not None:
            yield Problem(f"{path}.imdsHopLimitReason", "only with imdsHopLimit above 1; remove it")


#: EKS node auto repair's limits, each a count or a percentage, never both (EKS API `NodeRepairConfig`).
REPAIR_LIMITS = (("max_parallel", "maxParallel"), ("max_unhealthy", "maxUnhealthy"))


def managed_pools_can_be_managed(p: Parsed) -> Iterator[Problem]:
    """`management: managed` on a pool using a feature an EKS managed node group cannot carry: each such setting
    once, with what would work (components.planning.management)."""
    for path, pool, _ in p.aws_pools():
        if pool.management != "managed":
            continue
        for blocker in managed_blockers(pool, refreshes(pool)):
            yield Problem(f"{path}.{blocker.path}", f"with management: managed, {blocker.message}")


def pool_repair_fits(p: Parsed) -> Iterator[Problem]:
    """Each pool's `repair` holds only what its kind reads: `eks` (EKS node auto repair) on managed pools, which
    self-managed and hybrid pools do not have; `maxPerHour` (the health loop's replacements) on `aws` pools, since
    on-prem servers are never replaced. Each EKS limit is a count or a percentage, one of the two."""
    for path, pool, _ in p.aws_pools():
        repair = pool.repair
        if "eks" in repair.model_fields_set and choose_management(pool, refreshes(pool)) != "managed":
            why = "management: self-managed" if pool.management == "self-managed" else "it stays self-managed"
            yield Problem(
                f"{path}.repair.eks",
                f"only managed pools have EKS node auto repair ({why}; `blueprint plan` shows why; the health loop "
                "repairs this pool, capped by repair.maxPerHour); remove it or make the pool management: managed",
            )
            continue
        yield from _eks_repair_fits(f"{path}.repair.eks", repair.eks)
    for path, pool in p.hybrid_pools():
        if "eks" in pool.repair.model_fields_set:
            yield Problem(
                f"{path}.repair.eks",
                "EKS node auto repair acts on managed node groups, not on-prem servers: remove it (the health loop "
                "cordons, drains and alerts)",
            )
        if "max_per_hour" in pool.repair.model_fields_set:
            yield Problem(
                f"{path}.repair.maxPerHour",
                "on-prem servers are never replaced, so there is no replacement to cap: remove it (the health loop "
                'cordons, drains and alerts; docs/operations.md, "Repair")',
            )


def _eks_repair_fits(path: str, repair: EksRepair) -> Iterator[Problem]:
    for field, key in REPAIR_LIMITS:
        limit = getattr(repair, field)
        if limit is not None and (limit.count is None) == (limit.percentage is None):
            yield Problem(f"{path}.{key}", "give count or percentage, one of the two (e.g. {count: 1})")
    seen: set[tuple[str, str]] = set()
    for index, override in enumerate(repair.overrides):
        pair = (override.condition, override.reason)
        if pair in seen:
            yield Problem(
                f"{path}.overrides[{index}]",
                f"{override.condition}/{override.reason} has an override already; one per condition and reason",
            )
        seen.add(pair)


RULES = (
    pool_names_are_unique,
    instance_type_resolves,
    scaling_bounds_are_consistent,
    cluster_size_is_bounded,
    gpu_utilization_scaling_is_workable,
    efa_settings_fit_the_type,
    efa_layout_fits_the_cards,
    system_pools_use_cpu_types,
    spot_settings_only_on_spot,
    spot_types_match_the_shape,
    autoscaled_spot_types_match_cpu_and_memory,
    reservations_are_targeted,
    reservation_group_arn_has_its_shape,
    placement_fits_the_network,
    local_storage_needs_disks,
    hybrid_keys_not_on_aws_pools,
    device_plugin_settings_need_gpus,
    labels_are_allowed,
    taints_are_distinct,
    startup_taints_are_the_gates,
    resource_names_fit,
    group_tags_fit,
    refresh_settings_need_a_refresh,
    imds_hop_limit_has_a_reason,
    managed_pools_can_be_managed,
    pool_repair_fits,
)
