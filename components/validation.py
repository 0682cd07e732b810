"""Turn a stack's raw config into a `StackConfig`, or report every problem with it at once.

Two passes. First each section is parsed on its own (and each node pool on its own), so one typo never hides the
problems elsewhere. Then the cross-field rules run over whatever parsed; a rule whose inputs failed to parse stays
silent (its inputs already have an error). Every problem reads `path.to.key: what is wrong, what would be valid`,
and every rule that rejects a config names the limit it enforces and where that limit comes from.
"""

from __future__ import annotations

import copy as copy_module
import re
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from typing import Any

from pydantic import BaseModel, ValidationError

from components import catalog
from components.catalog import versions
from components.config import (
    SECTIONS,
    AddonsConfig,
    ClusterConfig,
    LustreConfig,
    NetworkConfig,
    NfsConfig,
    NodePool,
    StackConfig,
    StorageConfig,
)
from components.errors import ConfigError, Problem
from components.planning import lustre as lustre_rules
from components.planning.hybrid import cilium_node_blocks
from components.planning.pools import pool_zones, resolve_instance, wants_efa, wants_placement_group
from components.planning.subnets import subnet_layout

#: AWS regions look like `us-east-1`, `ap-southeast-2`, `us-gov-west-1`.
REGION_PATTERN = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
#: EKS accepts a service CIDR inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, between /24 and /12, not
#: overlapping the VPC (EKS API reference, KubernetesNetworkConfigRequest.serviceIpv4Cidr).
RFC1918 = tuple(IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
#: A VPC's IPv4 CIDR block is between /16 and /28 (Amazon VPC user guide, "VPC CIDR blocks").
VPC_PREFIX_RANGE = (16, 28)
#: The derived subnet layout cuts the VPC into 64ths for public subnets; below /24 there is no room for nodes.
MAX_AUTO_LAYOUT_PREFIX = 24
#: EKS needs subnets in at least two AZs for the control plane ENIs (EKS user guide, network requirements).
MIN_CLUSTER_AZS = 2
#: The default subnet layout splits the VPC into eighths: at most six private subnets fit (components.planning.subnets).
MAX_AZS = 6

#: The default system pool added when a stack names none: CoreDNS and controllers need CPU nodes off the GPUs.
DEFAULT_SYSTEM_POOL = {
    "name": "system",
    "role": "system",
    "instanceType": "m7i.xlarge",
    "scaling": {"min": 2, "desired": 2, "max": 3, "mode": "fixed"},
}


def validate(raw: Mapping[str, Any], region: str) -> StackConfig:
    """The validated stack, or ConfigError with every problem found."""
    parsed = _Parsed.from_raw(raw, region)
    problems = list(parsed.problems)
    for rule in RULES:
        problems.extend(rule(parsed))
    if problems:
        raise ConfigError(problems)
    return StackConfig(
        region=region,
        cluster=parsed.cluster,
        network=parsed.network,
        node_pools=[pool for _, pool in parsed.pools],
        storage=parsed.storage or StorageConfig(),
        addons=parsed.addons or AddonsConfig(),
    )


# ------------------------------------------------------------------------------------------------ first pass: parse
@dataclass
class _Parsed:
    """What parsed, with each pool's index in the stack file (for key paths)."""

    region: str
    region_ok: bool
    cluster: Any = None
    network: Any = None
    pools: list[tuple[int, NodePool]] = field(default_factory=list)
    pools_complete: bool = True
    storage: StorageConfig | None = None
    addons: AddonsConfig | None = None
    problems: list[Problem] = field(default_factory=list)

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], region: str) -> _Parsed:
        parsed = cls(region=region, region_ok=bool(REGION_PATTERN.match(region)))
        if not parsed.region_ok:
            parsed.problems.append(Problem("aws:region", f"{region!r} is not an AWS region name, e.g. us-east-1"))
        for key in raw:
            if key not in SECTIONS:
                parsed.problems.append(Problem(key, f"unknown config key; valid keys: {', '.join(SECTIONS)}"))
        if "cluster" not in raw:
            parsed.problems.append(Problem("cluster", "missing; every stack needs at least `cluster: {name: ...}`"))
        else:
            parsed.cluster = parsed._parse(ClusterConfig, raw["cluster"], "cluster")
        parsed.network = parsed._parse(NetworkConfig, raw.get("network", {}), "network")
        pools_raw = raw.get("nodePools", [])
        if not isinstance(pools_raw, list):
            parsed.problems.append(Problem("nodePools", "must be a list of node pools"))
            parsed.pools_complete = False
            pools_raw = []
        for index, item in enumerate(pools_raw):
            pool = parsed._parse(NodePool, item, f"nodePools[{index}]")
            if pool is None:
                parsed.pools_complete = False
            else:
                parsed.pools.append((index, pool))
        if parsed.pools_complete and not any(p.role == "system" for _, p in parsed.pools):
            parsed.pools.append((len(pools_raw), NodePool.model_validate(DEFAULT_SYSTEM_POOL)))
        parsed.storage = parsed._parse(StorageConfig, raw.get("storage", {}), "storage")
        parsed.addons = parsed._parse(AddonsConfig, raw.get("addons", {}), "addons")
        return parsed

    def _parse(self, model: type[BaseModel], value: Any, path: str) -> Any:
        """Parse `value`; on errors, report them and try once more without the offending keys.

        The second try gives the cross-field rules a section to check even when one of its keys is bad, so a typo
        in `cluster.tags` does not hide an unsupported `cluster.kubernetesVersion`. Only the errors of the first
        try are reported.
        """
        try:
            return model.model_validate(value)
        except ValidationError as error:
            for item in error.errors():
                self.problems.append(Problem(_join(path, item["loc"]), _describe(item)))
            pruned = _without(value, [item["loc"] for item in error.errors()])
            try:
                return model.model_validate(pruned)
            except ValidationError:
                return None

    @property
    def pool_names(self) -> set[str]:
        return {p.name for _, p in self.pools}

    @property
    def zones(self) -> list[str]:
        return self.network.zones if self.network else []


def _without(value: Any, locations: list[tuple[Any, ...]]) -> Any:
    """A deep copy of `value` without the dict keys the error locations point into (lists are kept whole)."""
    copy = copy_module.deepcopy(value)
    for loc in locations:
        node, parent, key = copy, None, None
        for part in loc:
            if isinstance(node, dict) and part in node:
                parent, key, node = node, part, node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
        if isinstance(parent, dict) and key in parent:
            del parent[key]
    return copy


def _join(path: str, loc: Iterable[Any]) -> str:
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


#: What the config's regular expressions mean, for people (the pattern itself is a poor error message).
PATTERN_MEANINGS = {
    r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$": "use 2-32 lowercase letters, digits and hyphens, starting with a letter",
    r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$": "EKS cluster names are 1-100 letters, digits, hyphens and underscores",
    r"^cr-[0-9a-f]{8,17}$": "a capacity reservation id looks like cr-0123456789abcdef0",
    r"^vpc-[0-9a-f]{8,17}$": "a VPC id looks like vpc-0123456789abcdef0",
    r"^subnet-[0-9a-f]{8,17}$": "a subnet id looks like subnet-0123456789abcdef0",
    r"^\d+[smh]$": "a duration like 10m, 30s or 1h",
    r"^v\d+\.\d+\.\d+-eksbuild\.\d+$": "an EKS add-on version like v1.20.4-eksbuild.1",
}


def _describe(item: Mapping[str, Any]) -> str:
    """Pydantic's message, made to say what would be valid."""
    kind, message = item["type"], item["msg"]
    if kind == "extra_forbidden":
        return "unknown key (check its spelling and the config reference in the README)"
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error":
        return f"got {item.get('input')!r}; {message[0].lower()}{message[1:]}"
    if kind == "string_pattern_mismatch":
        pattern = item["ctx"]["pattern"]
        return f"{item.get('input')!r} is not valid: {PATTERN_MEANINGS.get(pattern, f'must match {pattern}')}"
    return f"{message} (got {item.get('input')!r})"


# ---------------------------------------------------------------------------------------------- second pass: rules
Rule = Callable[[_Parsed], Iterator[Problem]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


@rule
def cluster_rules(p: _Parsed) -> Iterator[Problem]:
    c: ClusterConfig | None = p.cluster
    if c is None:
        return
    supported = versions.supported_kubernetes_versions()
    if c.kubernetes_version not in supported:
        yield Problem(
            "cluster.kubernetesVersion",
            f"{c.kubernetes_version} is not a Kubernetes version EKS supports; supported: {', '.join(supported)} "
            "(EKS Kubernetes version calendar, see components/catalog/versions.yaml)",
        )
    e = c.endpoint
    if not e.private and not e.public:
        yield Problem("cluster.endpoint", "private and public access are both off; nothing could reach the API")
    if e.public and not e.public_access_cidrs:
        yield Problem(
            "cluster.endpoint.publicAccessCidrs",
            "a public endpoint needs an allow-list of CIDRs (e.g. your office or VPN egress, 203.0.113.0/24); "
            "or set endpoint.public: false",
        )
    for i, cidr in enumerate(e.public_access_cidrs):
        if cidr.prefixlen == 0:
            yield Problem(f"cluster.endpoint.publicAccessCidrs[{i}]", "0.0.0.0/0 is no allow-list; name the CIDRs")
    if not e.public and e.public_access_cidrs:
        yield Problem("cluster.endpoint.publicAccessCidrs", "only used with endpoint.public: true; remove it")
    svc = c.service_cidr
    if not any(svc.subnet_of(block) for block in RFC1918) or not 12 <= svc.prefixlen <= 24:
        yield Problem(
            "cluster.serviceCidr",
            f"{svc} must lie in 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 and be /12 to /24 (EKS serviceIpv4Cidr)",
        )
    if p.network and p.network.existing_vpc is None and svc.overlaps(p.network.vpc_cidr):
        yield Problem("cluster.serviceCidr", f"{svc} overlaps the VPC CIDR {p.network.vpc_cidr}; EKS refuses that")
    for key in c.tags:
        if key.lower().startswith("aws:"):
            yield Problem(f"cluster.tags.{key}", "the `aws:` prefix is reserved by AWS; choose another key")


@rule
def network_rules(p: _Parsed) -> Iterator[Problem]:
    n: NetworkConfig | None = p.network
    if n is None:
        return
    if n.existing_vpc is not None:
        ev = n.existing_vpc
        if not ev.private_subnet_ids:
            yield Problem(
                "network.existingVpc.privateSubnetIds",
                "an existing VPC needs its private subnets, by AZ: {us-east-1a: subnet-..., us-east-1b: subnet-...}",
            )
        elif len(ev.private_subnet_ids) < MIN_CLUSTER_AZS:
            yield Problem(
                "network.existingVpc.privateSubnetIds",
                f"EKS needs subnets in at least {MIN_CLUSTER_AZS} AZs; got {len(ev.private_subnet_ids)}",
            )
        if n.availability_zones:
            yield Problem("network.availabilityZones", "not used with existingVpc (AZs are the subnet map's keys)")
        for group in ("privateSubnetIds", "publicSubnetIds"):
            subnets = ev.private_subnet_ids if group == "privateSubnetIds" else ev.public_subnet_ids
            yield from _zones_in_region(p, list(subnets), f"network.existingVpc.{group}")
        return
    prefix = n.vpc_cidr.prefixlen
    if not VPC_PREFIX_RANGE[0] <= prefix <= VPC_PREFIX_RANGE[1]:
        yield Problem("network.vpcCidr", f"/{prefix} is outside the /16 to /28 a VPC allows (Amazon VPC guide)")
    elif prefix > MAX_AUTO_LAYOUT_PREFIX:
        yield Problem(
            "network.vpcCidr",
            f"/{prefix} is too small: pods take VPC addresses (VPC CNI); use /16 to /{MAX_AUTO_LAYOUT_PREFIX}",
        )
    zones = n.availability_zones
    if len(zones) < MIN_CLUSTER_AZS:
        yield Problem(
            "network.availabilityZones",
            f"list at least {MIN_CLUSTER_AZS} AZs of {p.region} (EKS control plane needs two), "
            f"e.g. [{p.region}a, {p.region}b]",
        )
    if len(zones) > MAX_AZS:
        yield Problem("network.availabilityZones", f"at most {MAX_AZS} AZs fit the subnet layout; got {len(zones)}")
    for zone, count in Counter(zones).items():
        if count > 1:
            yield Problem("network.availabilityZones", f"{zone} is listed {count} times")
    for i, zone in enumerate(zones):
        yield from _zones_in_region(p, [zone], f"network.availabilityZones[{i}]")
    for key in ("privateSubnetCidrs", "publicSubnetCidrs"):
        given = n.private_subnet_cidrs if key == "privateSubnetCidrs" else n.public_subnet_cidrs
        if given is None:
            continue
        if len(given) != len(zones):
            yield Problem(f"network.{key}", f"give one CIDR per AZ ({len(zones)}); got {len(given)}")
        for i, cidr in enumerate(given):
            if not cidr.subnet_of(n.vpc_cidr):
                yield Problem(f"network.{key}[{i}]", f"{cidr} is outside the VPC CIDR {n.vpc_cidr}")
    if 0 < len(zones) <= MAX_AZS and VPC_PREFIX_RANGE[0] <= prefix <= MAX_AUTO_LAYOUT_PREFIX:
        layout = subnet_layout(n)
        all_subnets = [*layout.private, *layout.public]
        for (_, a), (_, b) in _pairs(all_subnets):
            if a.overlaps(b):
                yield Problem("network", f"subnets {a} and {b} overlap; give distinct subnet CIDRs")


def _zones_in_region(p: _Parsed, zones: list[str], path: str) -> Iterator[Problem]:
    if not p.region_ok:
        return
    for zone in zones:
        if not re.fullmatch(re.escape(p.region) + r"[a-z]", zone):
            yield Problem(path, f"{zone} is not an availability zone of {p.region} (expected {p.region}a, ...)")


def _pairs(items: list[IPv4Network]) -> Iterator[tuple[tuple[int, IPv4Network], tuple[int, IPv4Network]]]:
    for i, a in enumerate(items):
        for j in range(i + 1, len(items)):
            yield (i, a), (j, items[j])


@rule
def pool_names(p: _Parsed) -> Iterator[Problem]:
    for name, count in Counter(pool.name for _, pool in p.pools).items():
        if count > 1:
            indexes = [i for i, pool in p.pools if pool.name == name]
            yield Problem(f"nodePools[{indexes[-1]}].name", f"{name!r} is used by {count} pools; names must be unique")


@rule
def aws_pool_rules(p: _Parsed) -> Iterator[Problem]:
    for i, pool in p.pools:
        if pool.kind != "aws":
            continue
        path = f"nodePools[{i}]"
        instance = yield from _pool_instance(pool, path)
        yield from _scaling(pool, path)
        if instance is None:
            continue
        efa = wants_efa(pool, instance)
        if pool.efa == "on" and not instance.efa_supported:
            yield Problem(
                f"{path}.efa",
                f"{instance.name} has no EFA; types with EFA: {', '.join(catalog.efa_instance_type_names())}",
            )
        if pool.role == "system" and instance.is_gpu:
            yield Problem(
                f"{path}.instanceType",
                "system pools run CoreDNS and controllers: use a CPU type (m7i.xlarge)",
            )
        yield from _capacity(pool, instance, path)
        yield from _placement(p, pool, efa, path)
        yield from _local_storage(pool, instance, path)
        if pool.scaling.mode == "gpu-utilization":
            yield from _gpu_utilization(p, pool, instance, path)
        if pool.nodes is not None or pool.network is not None:
            yield Problem(path, "`nodes` and `network` are for hybrid pools; aws pools size with `scaling`")
        yield from _node_settings(p, pool, path)
        if efa and pool.capacity.type == "spot":
            for j, name in enumerate(pool.capacity.spot_instance_types):
                other = catalog.instance_types().get(name)
                if other is not None and not set(instance.efa_cards) <= set(other.efa_cards):
                    yield Problem(
                        f"{path}.capacity.spotInstanceTypes[{j}]",
                        f"{name} lacks EFA cards {instance.name} has; the launch template wires the primary type's "
                        "network cards and EC2 rejects a NetworkCardIndex the type does not have",
                    )


def _gpu_utilization(p: _Parsed, pool: NodePool, instance: catalog.InstanceType, path: str) -> Iterator[Problem]:
    """GPU-utilization scaling reads `nvidia_smi_utilization_gpu` per ASG, published by the CloudWatch agent."""
    if not instance.is_gpu:
        yield Problem(f"{path}.scaling.mode", "gpu-utilization scaling needs GPUs; use cluster-autoscaler or fixed")
    if p.addons is not None and not p.addons.monitoring.container_insights:
        yield Problem(
            f"{path}.scaling.mode",
            "gpu-utilization scaling reads nvidia_smi_utilization_gpu, which the CloudWatch agent of the "
            "amazon-cloudwatch-observability add-on publishes; set addons.monitoring.containerInsights: true "
            "or use mode cluster-autoscaler",
        )
    if pool.scaling.min < 1:
        yield Problem(
            f"{path}.scaling.min",
            "a gpu-utilization pool at zero nodes publishes no GPU metric and can never scale out; set min >= 1 "
            "or use mode cluster-autoscaler (scale from zero)",
        )


#: Launch template names allow 128 characters (EC2 CreateLaunchTemplate); Pulumi appends an 8-character suffix.
MAX_POOL_RESOURCE_NAME = 120
#: kubelet refuses `--node-labels` in these namespaces except a few allowed keys (kubelet reference, --node-labels).
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
KUBELET_ALLOWED_LABEL_PREFIXES = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def _node_settings(p: _Parsed, pool: NodePool, path: str) -> Iterator[Problem]:
    """Labels, taints and names that kubelet, cluster-autoscaler and EC2 would refuse at launch."""
    if p.cluster is not None and len(p.cluster.name) + 1 + len(pool.name) > MAX_POOL_RESOURCE_NAME:
        yield Problem(f"{path}.name", f"cluster name + pool name exceed {MAX_POOL_RESOURCE_NAME} characters")
    for key in pool.labels:
        domain = key.split("/")[0] if "/" in key else ""
        reserved = any(domain == d or domain.endswith("." + d) for d in RESERVED_LABEL_DOMAINS)
        if reserved and not key.startswith(KUBELET_ALLOWED_LABEL_PREFIXES):
            yield Problem(
                f"{path}.labels.{key}", "kubelet refuses labels under kubernetes.io / k8s.io; use your domain"
            )
    keys = Counter(t.key for t in pool.taints or [])
    for key, count in keys.items():
        if count > 1 and pool.scaling.mode == "cluster-autoscaler":
            yield Problem(
                f"{path}.taints",
                f"{key} appears {count} times; cluster-autoscaler's node-template tag holds one value:Effect per key",
            )
    if pool.ami_family == "bottlerocket" and pool.local_storage in ("RAID10", "Mount"):
        yield Problem(f"{path}.localStorage", "Bottlerocket offers RAID0 ephemeral storage only; use RAID0 or none")


def _pool_instance(pool: NodePool, path: str) -> Generator[Problem, None, catalog.InstanceType | None]:
    """Yields the pool's problems and returns its instance type (None when it cannot be resolved)."""
    if pool.instance_type and pool.gpu_model:
        yield Problem(path, "give instanceType or gpuModel (+ gpusPerNode), not both")
        return None
    if pool.instance_type:
        try:
            return catalog.instance_type(pool.instance_type)
        except KeyError as error:
            yield Problem(f"{path}.instanceType", str(error.args[0]))
            return None
    if pool.gpu_model:
        try:
            catalog.gpu_model(pool.gpu_model)
        except KeyError as error:
            yield Problem(f"{path}.gpuModel", str(error.args[0]))
            return None
        if not catalog.is_rented_by_aws(pool.gpu_model):
            alternative = catalog.gpu_model(pool.gpu_model).cloud_alternative
            yield Problem(
                f"{path}.gpuModel",
                f"AWS does not rent {pool.gpu_model} GPUs; run your own {pool.gpu_model} servers as a `kind: hybrid` "
                f"pool, or use {alternative or 'another model'} in the cloud"
                + (" (4x L40S 48 GB)" if pool.gpu_model == "A40" else ""),
            )
            return None
        instance = resolve_instance(pool)
        if instance is None:
            counts = sorted({t.gpu_count for t in catalog.instance_types_with_gpu(pool.gpu_model)})
            yield Problem(
                f"{path}.gpusPerNode",
                f"no instance type has {pool.gpus_per_node} x {pool.gpu_model}; available counts: {counts}",
            )
        return instance
    yield Problem(path, "aws pools need instanceType (e.g. p5.48xlarge) or gpuModel + gpusPerNode")
    return None


def _scaling(pool: NodePool, path: str) -> Iterator[Problem]:
    s = pool.scaling
    if s.min > s.max:
        yield Problem(f"{path}.scaling.min", f"min {s.min} is above max {s.max}; need min <= desired <= max")
    if s.desired is not None and not s.min <= s.desired <= s.max:
        yield Problem(f"{path}.scaling.desired", f"desired {s.desired} is outside min {s.min} .. max {s.max}")
    if s.max == 0:
        yield Problem(f"{path}.scaling.max", "max 0 means the pool can never run a node; set max >= 1")
    g = s.gpu_utilization
    if g.scale_in_below_percent >= g.scale_out_above_percent:
        yield Problem(
            f"{path}.scaling.gpuUtilization.scaleInBelowPercent",
            f"{g.scale_in_below_percent}% must be below scaleOutAbovePercent ({g.scale_out_above_percent}%) "
            "or the pool would flap",
        )


def _capacity(pool: NodePool, instance: catalog.InstanceType, path: str) -> Iterator[Problem]:
    c, cpath = pool.capacity, f"{path}.capacity"
    if c.spot_instance_types and c.type != "spot":
        yield Problem(
            f"{cpath}.spotInstanceTypes",
            f"extra instance types are for spot pools; a {c.type} pool launches only {instance.name} "
            "(spot and capacity blocks cannot be combined)",
        )
    if c.type == "spot":
        for j, name in enumerate(c.spot_instance_types):
            try:
                other = catalog.instance_type(name)
            except KeyError as error:
                yield Problem(f"{cpath}.spotInstanceTypes[{j}]", str(error.args[0]))
                continue
            if other.gpu_shape != instance.gpu_shape:
                same = [
                    t.name
                    for t in catalog.instance_types().values()
                    if t.gpu_shape == instance.gpu_shape and t.name != instance.name
                ]
                yield Problem(
                    f"{cpath}.spotInstanceTypes[{j}]",
                    f"{name} ({_shape(other)}) differs from {instance.name} ({_shape(instance)}); a spot pool mixes "
                    f"only one GPU shape so pods fit every node; same shape: {', '.join(same) or 'none in catalog'}",
                )
        if c.on_demand_base_capacity > pool.scaling.max:
            yield Problem(
                f"{cpath}.onDemandBaseCapacity",
                f"{c.on_demand_base_capacity} exceeds scaling.max {pool.scaling.max}",
            )
    if c.type == "capacity-block":
        if not c.reservation_id:
            yield Problem(f"{cpath}.reservationId", "a capacity-block pool needs the Capacity Block id (cr-...)")
        if c.reservation_resource_group_arn:
            yield Problem(f"{cpath}.reservationResourceGroupArn", "capacity blocks are targeted by reservationId")
    if c.type == "reservation" and not (c.reservation_id or c.reservation_resource_group_arn):
        yield Problem(
            f"{cpath}.reservationId",
            "a reservation pool needs reservationId (cr-...) or reservationResourceGroupArn",
        )
    if c.type in ("on-demand", "spot") and (c.reservation_id or c.reservation_resource_group_arn):
        yield Problem(
            f"{cpath}.reservationId",
            f"reservations are for capacity-block or reservation pools, not {c.type}",
        )


def _shape(t: catalog.InstanceType) -> str:
    return f"{t.gpu_count} x {t.gpu_model} {t.gpu_memory_gib:g} GiB" if t.is_gpu else "no GPU"


def _placement(p: _Parsed, pool: NodePool, efa: bool, path: str) -> Iterator[Problem]:
    if p.network is None:
        return
    zones = pool_zones(pool, p.network, efa)
    for j, zone in enumerate(pool.placement.availability_zones or []):
        if zone not in p.zones:
            yield Problem(
                f"{path}.placement.availabilityZones[{j}]",
                f"{zone} is not one of the network's AZs ({', '.join(p.zones)})",
            )
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


def _local_storage(pool: NodePool, instance: catalog.InstanceType, path: str) -> Iterator[Problem]:
    strategy = pool.local_storage
    if strategy in (None, "none"):
        return
    if instance.local_nvme_count == 0:
        yield Problem(f"{path}.localStorage", f"{instance.name} has no instance-store NVMe; remove localStorage")
    elif strategy == "RAID10" and instance.local_nvme_count < 4:
        yield Problem(
            f"{path}.localStorage",
            f"RAID10 needs at least 4 disks; {instance.name} has {instance.local_nvme_count} (nodeadm)",
        )


@rule
def hybrid_pool_rules(p: _Parsed) -> Iterator[Problem]:
    seen: list[tuple[str, IPv4Network]] = []
    for i, pool in p.pools:
        if pool.kind != "hybrid":
            continue
        path = f"nodePools[{i}]"
        if pool.instance_type:
            yield Problem(
                f"{path}.instanceType",
                "hybrid pools are your own servers: give gpuModel (e.g. A40) and gpusPerNode, not an instance type",
            )
        if not pool.gpu_model:
            yield Problem(f"{path}.gpuModel", f"give the servers' GPU model: {', '.join(sorted(catalog.gpu_models()))}")
        else:
            try:
                catalog.gpu_model(pool.gpu_model)
            except KeyError as error:
                yield Problem(f"{path}.gpuModel", str(error.args[0]))
        if pool.gpu_model and pool.gpus_per_node is None:
            yield Problem(f"{path}.gpusPerNode", "how many GPUs each server has (e.g. 4)")
        if pool.nodes is None:
            yield Problem(f"{path}.nodes", "how many servers join (e.g. 2)")
        for key in ("scaling", "capacity", "placement", "efa"):
            if key in pool.model_fields_set:
                yield Problem(f"{path}.{key}", "does not apply to hybrid pools (on-prem servers); remove it")
        creds = pool.credentials
        if pool.nodes and creds.activation_limit is not None and creds.activation_limit < pool.nodes:
            yield Problem(
                f"{path}.credentials.activationLimit",
                f"{creds.activation_limit} registrations cannot join {pool.nodes} nodes; set it >= {pool.nodes}",
            )
        if creds.provider == "iam-roles-anywhere":
            for key in ("activation_limit", "activation_expiry_hours"):
                if key in creds.model_fields_set:
                    yield Problem(f"{path}.credentials", f"{key} applies to SSM activations, not IAM Roles Anywhere")
        elif creds.trust_anchor_certificate:
            yield Problem(f"{path}.credentials.trustAnchorCertificate", "only used with provider: iam-roles-anywhere")
        pem = creds.trust_anchor_certificate
        if pem and "-----BEGIN CERTIFICATE-----" not in pem:
            yield Problem(
                f"{path}.credentials.trustAnchorCertificate", "expected a PEM certificate (BEGIN CERTIFICATE)"
            )
        if creds.provider == "iam-roles-anywhere" and not creds.trust_anchor_certificate:
            yield Problem(
                f"{path}.credentials.trustAnchorCertificate",
                "IAM Roles Anywhere needs the PEM of the CA that signs the nodes' certificates",
            )
        if pool.network is None or not pool.network.remote_node_cidrs:
            yield Problem(f"{path}.network.remoteNodeCidrs", "the on-prem node network(s), e.g. [10.80.0.0/16]")
            continue
        net = pool.network
        if not net.remote_pod_cidrs and net.webhooks_on_hybrid_nodes:
            yield Problem(
                f"{path}.network.remotePodCidrs",
                "the control plane must reach webhooks on hybrid nodes: give the routable pod CIDRs (e.g. "
                "[10.85.0.0/16]) or set webhooksOnHybridNodes: false (EKS hybrid nodes networking)",
            )
        blocks = cilium_node_blocks(net.remote_pod_cidrs)
        if net.remote_pod_cidrs and pool.nodes and blocks < pool.nodes:
            yield Problem(
                f"{path}.network.remotePodCidrs",
                f"room for {blocks} node pod blocks (/25 each, Cilium cluster-pool as in AWS's hybrid CNI example) "
                f"but {pool.nodes} nodes join; give a larger pod CIDR",
            )
        for key, cidrs in (
            ("remoteNodeCidrs", net.remote_node_cidrs),
            ("remotePodCidrs", net.remote_pod_cidrs),
        ):
            for j, cidr in enumerate(cidrs):
                where = f"{path}.network.{key}[{j}]"
                if not any(cidr.subnet_of(block) for block in RFC1918):
                    yield Problem(where, f"{cidr} is not RFC 1918; EKS remote networks must be private IPv4")
                if not 8 <= cidr.prefixlen <= 32:
                    yield Problem(where, f"{cidr}: EKS accepts /8 to /32")
                if p.network is not None and p.network.existing_vpc is None and cidr.overlaps(p.network.vpc_cidr):
                    yield Problem(where, f"{cidr} overlaps the VPC CIDR {p.network.vpc_cidr}")
                if p.cluster is not None and cidr.overlaps(p.cluster.service_cidr):
                    yield Problem(where, f"{cidr} overlaps the service CIDR {p.cluster.service_cidr}")
                for other_path, other in seen:
                    if cidr.overlaps(other):
                        yield Problem(where, f"{cidr} overlaps {other} ({other_path})")
                seen.append((where, cidr))


#: Kubernetes object names (namespaces, claims): DNS-1123 labels, at most 63 characters (Kubernetes "Object Names").
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@rule
def storage_rules(p: _Parsed) -> Iterator[Problem]:
    if p.storage is None:
        return
    systems = [(key, fs) for key, fs in (("lustre", p.storage.lustre), ("nfs", p.storage.nfs)) if fs is not None]
    for key, fs in systems:
        volume = fs.kubernetes
        for field_name, value in (("namespace", volume.namespace), ("claimName", volume.claim_name)):
            if value is not None and not DNS_1123.match(value):
                yield Problem(
                    f"storage.{key}.kubernetes.{field_name}",
                    f"{value!r} is not a Kubernetes name: at most 63 lowercase letters, digits and hyphens",
                )
    if len(systems) == 2:
        (_, lustre), (_, nfs) = systems
        if lustre.name == nfs.name:
            yield Problem("storage.nfs.name", f"{nfs.name!r} is also the Lustre file system's name; pick another")
        same_namespace = lustre.kubernetes.namespace == nfs.kubernetes.namespace
        if (
            same_namespace
            and lustre.kubernetes.claim_name
            and lustre.kubernetes.claim_name == nfs.kubernetes.claim_name
        ):
            yield Problem("storage.nfs.kubernetes.claimName", "the Lustre claim has the same name in that namespace")
    if p.storage.lustre is not None:
        yield from _lustre(p, p.storage.lustre)
    if p.storage.nfs is not None:
        yield from _nfs(p, p.storage.nfs)


def _lustre(p: _Parsed, fs: LustreConfig) -> Iterator[Problem]:
    path = "storage.lustre"
    persistent = fs.deployment_type == "PERSISTENT_2"
    if persistent and fs.per_unit_storage_throughput not in lustre_rules.PERSISTENT_2_THROUGHPUTS:
        yield Problem(
            f"{path}.perUnitStorageThroughput",
            f"{fs.per_unit_storage_throughput} MB/s/TiB is not a PERSISTENT_2 tier; valid: "
            f"{', '.join(map(str, lustre_rules.PERSISTENT_2_THROUGHPUTS))} (FSx API PerUnitStorageThroughput)",
        )
    if not persistent and "per_unit_storage_throughput" in fs.model_fields_set:
        yield Problem(f"{path}.perUnitStorageThroughput", "SCRATCH_2 has a fixed 200 MB/s/TiB; remove this key")
    if fs.efa_enabled and not persistent:
        yield Problem(f"{path}.efaEnabled", "EFA-enabled Lustre needs deploymentType PERSISTENT_2 (FSx Lustre guide)")
    if fs.efa_enabled and fs.metadata is None:
        yield Problem(f"{path}.metadata", "EFA-enabled Lustre needs a metadata configuration, e.g. {mode: AUTOMATIC}")
    if fs.metadata is not None and not persistent:
        yield Problem(f"{path}.metadata", "metadata configuration exists only on PERSISTENT_2 (FSx API)")
    if fs.metadata is not None:
        if fs.metadata.mode == "USER_PROVISIONED" and fs.metadata.iops is None:
            yield Problem(
                f"{path}.metadata.iops", "USER_PROVISIONED metadata needs iops (1500, 3000, 6000, 12000, ...)"
            )
        if fs.metadata.mode == "AUTOMATIC" and fs.metadata.iops is not None:
            yield Problem(f"{path}.metadata.iops", "AUTOMATIC metadata sizes its own IOPS; remove iops")
        if fs.metadata.iops is not None and not lustre_rules.valid_metadata_iops(fs.metadata.iops):
            yield Problem(
                f"{path}.metadata.iops",
                f"{fs.metadata.iops} is not valid: 1500, 3000, 6000, 12000 or a multiple of 12000 "
                "up to 192000 (FSx API)",
            )
    if not persistent and fs.backup_retention_days and "backup_retention_days" in fs.model_fields_set:
        yield Problem(f"{path}.backupRetentionDays", "SCRATCH_2 file systems have no automatic backups; set 0")
    sizable = not fs.efa_enabled or (persistent and fs.per_unit_storage_throughput in lustre_rules.EFA_INCREMENTS)
    if sizable and not lustre_rules.is_valid_capacity(fs):
        below, above = lustre_rules.nearest_valid_capacities(fs)
        steps = (
            f"multiples of {lustre_rules.capacity_increment(fs)} GiB for EFA at "
            f"{fs.per_unit_storage_throughput} MB/s/TiB"
            if fs.efa_enabled
            else "1200, 2400, then multiples of 2400 GiB"
        )
        nearest = f"{below} or {above}" if below else f"{above}"
        yield Problem(
            f"{path}.storageCapacityGib",
            f"{fs.storage_capacity_gib} GiB is not a valid size ({steps}, FSx CreateFileSystem); "
            f"nearest valid: {nearest}",
        )
    dras = fs.data_repositories
    if len(dras) > lustre_rules.MAX_DATA_REPOSITORY_ASSOCIATIONS:
        yield Problem(
            f"{path}.dataRepositories",
            f"{len(dras)} associations; FSx allows at most {lustre_rules.MAX_DATA_REPOSITORY_ASSOCIATIONS}",
        )
    for j, dra in enumerate(dras):
        for k in range(j):
            if lustre_rules.paths_overlap(dra.file_system_path, dras[k].file_system_path):
                yield Problem(
                    f"{path}.dataRepositories[{j}].fileSystemPath",
                    f"{dra.file_system_path} overlaps {dras[k].file_system_path} (dataRepositories[{k}]); "
                    "FSx needs distinct, non-nested paths",
                )
        if dra.file_system_path == "/" and len(dras) > 1:
            yield Problem(
                f"{path}.dataRepositories[{j}].fileSystemPath", "`/` is allowed only for a single association"
            )
        if dra.data_repository_path is None and not fs.create_bucket:
            yield Problem(
                f"{path}.dataRepositories[{j}].dataRepositoryPath",
                "give s3://bucket/prefix/ or set createBucket: true",
            )
    yield from _mounting_pools(p, fs.pools, f"{path}.pools", aws_only=True)
    training = [
        pool
        for _, pool in p.pools
        if pool.kind == "aws" and pool.role == "training" and (not fs.pools or pool.name in fs.pools)
    ]
    if not training and fs.pools is None and p.pools_complete:
        yield Problem(path, "no training pool to mount Lustre; add one or list the pools under storage.lustre.pools")
    if p.network is not None and training:
        zones = {z for pool in training for z in pool_zones(pool, p.network, wants_efa(pool, _instance_or_none(pool)))}
        if fs.availability_zone is not None and fs.availability_zone not in zones:
            yield Problem(
                f"{path}.availabilityZone",
                f"{fs.availability_zone} has no training pool (they run in {', '.join(sorted(zones))}); Lustre "
                "lives in one subnet, so put it where its clients are",
            )
        elif fs.availability_zone is None and len(zones) > 1:
            yield Problem(
                f"{path}.availabilityZone",
                f"its training pools span {', '.join(sorted(zones))}; pick the AZ (Lustre takes exactly one subnet)",
            )


def _instance_or_none(pool: NodePool) -> catalog.InstanceType | None:
    """The pool's instance type for rules about other sections; an unknown type is reported by the pool rules."""
    try:
        return resolve_instance(pool)
    except KeyError:
        return None


def _mounting_pools(p: _Parsed, names: list[str] | None, path: str, aws_only: bool = False) -> Iterator[Problem]:
    if names is None or not p.pools_complete:
        return
    kinds = {pool.name: pool.kind for _, pool in p.pools}
    for j, name in enumerate(names):
        if name not in kinds:
            yield Problem(f"{path}[{j}]", f"no node pool named {name!r}; pools: {', '.join(sorted(kinds))}")
        elif aws_only and kinds[name] != "aws":
            yield Problem(
                f"{path}[{j}]",
                f"{name} is a hybrid pool; the FSx CSI driver does not run on EKS Hybrid Nodes (EKS user guide, "
                "fsx-csi-create); serve on-prem pools from storage.nfs",
            )


def _nfs(p: _Parsed, fs: NfsConfig) -> Iterator[Problem]:
    path = "storage.nfs"
    if fs.kind == "existing":
        if not fs.server:
            yield Problem(f"{path}.server", "an existing NFS server needs its address (e.g. nfs.lab.example.com)")
        if not fs.share:
            yield Problem(f"{path}.share", "an existing NFS server needs the exported path (e.g. /exports/models)")
        elif not fs.share.startswith("/"):
            yield Problem(f"{path}.share", f"{fs.share!r} must be an absolute export path like /exports/models")
    else:
        for key in ("server", "share"):
            if getattr(fs, key) is not None:
                yield Problem(f"{path}.{key}", "only for kind: existing; EFS is created by the stack")
        if fs.throughput_mode == "provisioned" and fs.provisioned_throughput_mibps is None:
            yield Problem(f"{path}.provisionedThroughputMibps", "provisioned throughput needs a MiB/s figure (1-3414)")
    yield from _mounting_pools(p, fs.pools, f"{path}.pools")


@rule
def addon_rules(p: _Parsed) -> Iterator[Problem]:
    if p.addons is None:
        return
    known = sorted(versions.managed_addons())
    for name, version in p.addons.managed.pins.items():
        where = f"addons.managed.pins.{name}"
        if name not in known:
            yield Problem(where, f"unknown EKS add-on; known: {', '.join(known)}")
            continue
        minimum = versions.managed_addon(name).minimum_version
        if minimum and not versions.version_at_least(version, minimum):
            yield Problem(where, f"{version} is below the minimum {minimum} ({versions.managed_addon(name).source})")
    expander = p.addons.cluster_autoscaler.expander
    if expander == "price":
        yield Problem(
            "addons.clusterAutoscaler.expander",
            "the price expander works only on GCE, GKE and Equinix Metal (cluster-autoscaler FAQ); use least-waste",
        )
    elif expander == "priority":
        yield Problem(
            "addons.clusterAutoscaler.expander",
            "the priority expander needs a priorities ConfigMap this blueprint does not manage; use least-waste",
        )
    email = p.addons.monitoring.alerts.email
    if email is not None and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email):
        yield Problem("addons.monitoring.alerts.email", f"{email!r} is not an email address")


__all__ = ["RULES", "ConfigError", "Problem", "validate"]
