"""The service quotas a stack needs, planned: how much of each quota the stack uses with every pool at its maximum.

Invariant: instances count in vCPUs per quota group (components/catalog/quotas.yaml), with a pool's largest type;
reserved capacity counts as on-demand (conservative). Why and the counting rules:
docs/design-notes.md#counting-quota-needs; what to do with the figures: docs/operations.md#service-quotas.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from components import catalog
from components.catalog.quotas import Quota, count_quotas, vcpu_group
from components.config import StackConfig
from components.planning.pools import PoolPlan
from components.planning.subnets import nat_gateway_zones


@dataclass(frozen=True)
class QuotaNeed:
    """One quota and how much of it the stack uses at its maximum, with what uses it."""

    quota: Quota
    needed: int
    used_by: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "service": self.quota.service,
            "quotaCode": self.quota.code,
            "name": self.quota.name,
            "scope": self.quota.scope,
            "unit": self.quota.unit,
            "needed": self.needed,
            "default": self.quota.default,
            "usedBy": list(self.used_by),
            "source": self.quota.source,
        }


def market_split(plan: PoolPlan, nodes: int) -> tuple[int, int]:
    """(on-demand, spot) nodes of `nodes`: a spot pool's on-demand base and its percentage above the base are
    on-demand (the percentage rounded up, as the quota must hold whatever the group launches); other pools are all
    on-demand."""
    if plan.capacity_type != "spot":
        return nodes, 0
    capacity = plan.pool.capacity
    base = min(nodes, capacity.on_demand_base_capacity)
    above = nodes - base
    on_demand_above = math.ceil(above * capacity.on_demand_percentage_above_base / 100)
    return base + on_demand_above, above - on_demand_above


def vcpu_needs(plans: Sequence[PoolPlan]) -> list[QuotaNeed]:
    """vCPUs per EC2 quota (group and market) with every `aws` pool at its maximum."""
    needed: dict[Quota, int] = defaultdict(int)
    used_by: dict[Quota, list[str]] = defaultdict(list)
    for plan in plans:
        if plan.kind != "aws" or plan.max_nodes == 0:
            continue
        on_demand, spot = market_split(plan, plan.max_nodes)
        by_group: dict[str, int] = {}
        groups = {}
        for name in plan.instance_types:
            group = vcpu_group(name)
            groups[group.group] = group
            by_group[group.group] = max(by_group.get(group.group, 0), catalog.instance_type(name).vcpu)
        for key, vcpus in by_group.items():
            for quota, nodes in ((groups[key].on_demand, on_demand), (groups[key].spot, spot)):
                if nodes:
                    needed[quota] += nodes * vcpus
                    used_by[quota].append(f"{plan.name}: {nodes} x {vcpus} vCPUs")
    return [QuotaNeed(quota, needed[quota], tuple(used_by[quota])) for quota in needed]


def network_needs(spec: StackConfig) -> list[QuotaNeed]:
    """A new VPC: one VPC, one internet gateway, and per NAT gateway an Elastic IP (at most one gateway per AZ).
    An existing VPC uses none of them."""
    network = spec.network
    if network.existing_vpc is not None:
        return []
    quotas = count_quotas()
    nat_zones = nat_gateway_zones(network)
    nat = (f"network: NAT gateways in {', '.join(nat_zones)}",)
    return [
        QuotaNeed(quotas["vpcs"], 1, ("network: the VPC",)),
        QuotaNeed(quotas["internet_gateways"], 1, ("network: the VPC's internet gateway",)),
        QuotaNeed(quotas["nat_gateways"], 1, nat),
        QuotaNeed(quotas["elastic_ips"], len(nat_zones), nat),
    ]


#: The Lustre quotas are per deployment type: PERSISTENT_2 has its own, SCRATCH_1 and SCRATCH_2 share the Scratch ones
#: (components/catalog/quotas.yaml).
LUSTRE_QUOTA_FAMILY = {"PERSISTENT_2": "persistent_2", "SCRATCH_1": "scratch", "SCRATCH_2": "scratch"}


def storage_needs(spec: StackConfig) -> list[QuotaNeed]:
    """An FSx for Lustre file system counts one file system and its capacity against the Region's Lustre quotas of
    its deployment type."""
    lustre = spec.storage.lustre
    if lustre is None:
        return []
    quotas = count_quotas()
    family = LUSTRE_QUOTA_FAMILY[lustre.deployment_type]
    used = (f"storage.lustre {lustre.name} ({lustre.deployment_type})",)
    return [
        QuotaNeed(quotas[f"lustre_file_systems_{family}"], 1, used),
        QuotaNeed(quotas[f"lustre_storage_gib_{family}"], lustre.storage_capacity_gib, used),
    ]


def stack_quotas(spec: StackConfig, plans: Sequence[PoolPlan]) -> list[QuotaNeed]:
    """Every quota the stack uses, EC2 vCPUs first."""
    return [*vcpu_needs(plans), *network_needs(spec), *storage_needs(spec)]
