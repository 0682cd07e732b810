"""Node pools as the policies see them in a stack: a self-managed Auto Scaling group or an EKS managed node group,
its launch template, the template's network interfaces, the pool's taints and capacity type, and the catalog
entries of its instance types.

Stack rules of several families (fabric, nodes, spot, cost) read pools through this one model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from pulumi_policy.proxy import UnknownValueError

from components.catalog import InstanceType, instance_type
from components.planning.autoscaler_tags import ENABLED_TAG, TAINT_TAG_PREFIX
from components.planning.efa import EFA_INTERFACE_TYPES
from components.tags import CAPACITY_TYPE, GPU_ALLOCATION, GPU_MODEL, POOL, ROLE, TAINTS
from policies.resources import (
    AUTOSCALING_GROUP,
    LAUNCH_TEMPLATE,
    NODE_GROUP,
    Resource,
    Stack,
    get,
    items,
    peek,
    strings,
    truthy,
)


@dataclass(frozen=True)
class Interface:
    """One `networkInterfaces` entry of a launch template."""

    card: int
    device: int
    type: str
    public_ip: bool
    security_groups: tuple[str, ...]

    @property
    def is_efa(self) -> bool:
        return self.type in EFA_INTERFACE_TYPES


def interfaces(lt: Resource) -> list[Interface]:
    out = []
    for nic in items(lt.get("networkInterfaces")):
        try:
            groups = tuple(strings(get(nic, "securityGroups")))
        except UnknownValueError:
            groups = ()
        out.append(
            Interface(
                card=int(get(nic, "networkCardIndex", default=0)),
                device=int(get(nic, "deviceIndex", default=0)),
                type=str(get(nic, "interfaceType", default="interface")),
                public_ip=truthy(get(nic, "associatePublicIpAddress", default=False)),
                security_groups=groups,
            )
        )
    return out


def is_efa_launch_template(lt: Resource | None) -> bool:
    """EFA pools are launch templates with at least one `efa` or `efa-only` interface."""
    return lt is not None and lt.type == LAUNCH_TEMPLATE and any(i.is_efa for i in interfaces(lt))


def catalog_entry(name: str) -> tuple[InstanceType | None, str]:
    """The catalog entry of an instance type, or None and the catalog's message (which suggests close names)."""
    try:
        return instance_type(name), ""
    except KeyError as e:
        return None, str(e.args[0] if e.args else e)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> Taint:
        """`key=value:Effect` (kubelet `--register-with-taints` form; the value may be empty)."""
        spec, _, effect = text.strip().rpartition(":")
        key, _, value = spec.partition("=")
        return cls(key, value, effect)

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True)
class Pool:
    """A node pool as deployed: its Auto Scaling group or EKS managed node group (`asg`, both carry the pool's
    tags) and (when it can be resolved) its launch template."""

    asg: Resource
    launch_template: Resource | None

    @property
    def name(self) -> str:
        return self.asg.tags().get(POOL, self.asg.name)

    @property
    def role(self) -> str | None:
        return self.asg.tags().get(ROLE)

    @property
    def dra(self) -> bool:
        """GPUs allocated through NVIDIA's DRA driver (the pool's `gpu-clusters/gpu-allocation` tag), not the device
        plugin."""
        return self.asg.tags().get(GPU_ALLOCATION) == "dra"

    @property
    def managed(self) -> bool:
        """An EKS managed node group (its Auto Scaling group is EKS's, not in the stack)."""
        return self.asg.type == NODE_GROUP

    @property
    def autoscaled(self) -> bool:
        """cluster-autoscaler finds the group: a self-managed group tagged for discovery, or any managed node
        group, whose group EKS tags for discovery itself (EKS user guide, "Managed node groups concepts")."""
        return self.managed or ENABLED_TAG in self.asg.tags()

    @property
    def capacity_rebalance(self) -> bool:
        """A self-managed group's `capacityRebalance`; EKS turns it on for every spot managed node group (EKS user
        guide, "Managed node group capacity types")."""
        return self.managed or truthy(self.asg.get("capacityRebalance", default=False))

    @property
    def max_size(self) -> int:
        """The group's `maxSize` (a node group's `scalingConfig.maxSize`)."""
        path = ("scalingConfig", "maxSize") if self.managed else ("maxSize",)
        return int(self.asg.get(*path, default=0))

    @property
    def subnets_property(self) -> str:
        """The property naming the pool's subnets: `vpcZoneIdentifiers`, or a node group's `subnetIds`."""
        return "subnetIds" if self.managed else "vpcZoneIdentifiers"

    @cached_property
    def efa(self) -> bool:
        return is_efa_launch_template(self.launch_template)

    @property
    def instance_types(self) -> list[str]:
        """The overrides of a mixed-instances policy or a node group's `instanceTypes` (which replace the
        template's type), else the template's."""
        overrides = [
            str(get(o, "instanceType"))
            for o in items(self.asg.get("mixedInstancesPolicy", "launchTemplate", "overrides"))
            if get(o, "instanceType")
        ] + [str(t) for t in items(self.asg.get("instanceTypes")) if t]
        if overrides:
            return list(dict.fromkeys(overrides))
        primary = self.launch_template.get("instanceType") if self.launch_template else None
        return [str(primary)] if primary else []

    @property
    def capacity_type(self) -> str:
        """on-demand | spot | capacity-block | reservation: the pool's tag, else what its settings say."""
        tagged = self.asg.tags().get(CAPACITY_TYPE)
        if tagged:
            return tagged
        if self.asg.type == NODE_GROUP:
            managed = str(self.asg.get("capacityType") or "ON_DEMAND")
            return {"SPOT": "spot", "CAPACITY_BLOCK": "capacity-block"}.get(managed, "on-demand")
        lt = self.launch_template
        market = lt.get("instanceMarketOptions", "marketType") if lt else None
        if market in ("spot", "capacity-block"):
            return str(market)
        if lt and lt.get("capacityReservationSpecification", "capacityReservationTarget") is not None:
            return "reservation"
        # Without the setting AWS runs 100 % on-demand above the base capacity (autoscaling InstancesDistribution).
        distribution = self.asg.get("mixedInstancesPolicy", "instancesDistribution")
        on_demand_percent = int(get(distribution, "onDemandPercentageAboveBaseCapacity", default=100))
        if self.asg.get("mixedInstancesPolicy") is not None and on_demand_percent < 100:
            return "spot"
        return "on-demand"

    @property
    def taints(self) -> list[Taint]:
        tags = self.asg.tags()
        found = [Taint.parse(t) for t in tags.get(TAINTS, "").split(",") if t.strip()]
        for key, value in tags.items():
            if key.startswith(TAINT_TAG_PREFIX):
                taint = Taint.parse(f"{key.removeprefix(TAINT_TAG_PREFIX)}={value}")
                if taint not in found:
                    found.append(taint)
        return found

    def catalog_entries(self) -> list[InstanceType]:
        return [e for e in (catalog_entry(t)[0] for t in self.instance_types) if e is not None]

    @property
    def is_gpu(self) -> bool:
        """GPU pools: a GPU instance type per the catalog, or tagged as a training/inference or GPU pool."""
        tags = self.asg.tags()
        return (
            any(e.is_gpu for e in self.catalog_entries())
            or self.role in ("training", "inference")
            or bool(tags.get(GPU_MODEL))
        )


def node_pools(stack: Stack) -> list[Pool]:
    """The stack's node pools, found once per stack view (`Stack.derived`)."""
    return list(stack.derived("node_pools", _find_node_pools))


def _find_node_pools(stack: Stack) -> list[Pool]:
    pools = []
    for asg in stack.of_type(AUTOSCALING_GROUP):
        if asg.get("launchTemplate") is not None:
            prop, spec = "launchTemplate", asg.get("launchTemplate")
            values = [peek(spec, "id"), peek(spec, "name")]
        else:
            prop = "mixedInstancesPolicy"
            spec = asg.get("mixedInstancesPolicy", "launchTemplate", "launchTemplateSpecification")
            values = [peek(spec, "launchTemplateId"), peek(spec, "launchTemplateName")]
        found = stack.referenced(asg, prop, [v for v in values if isinstance(v, str)], [LAUNCH_TEMPLATE])
        pools.append(Pool(asg, found[0] if len(found) == 1 else None))
    for group in stack.of_type(NODE_GROUP):
        spec = group.get("launchTemplate")
        values = [peek(spec, "id"), peek(spec, "name")]
        found = stack.referenced(group, "launchTemplate", [v for v in values if isinstance(v, str)], [LAUNCH_TEMPLATE])
        pools.append(Pool(group, found[0] if len(found) == 1 else None))
    return pools
