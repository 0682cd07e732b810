"""Rules on the clients of an EFA-enabled FSx for Lustre file system."""

from __future__ import annotations

from collections.abc import Iterator

from components.errors import Problem
from components.planning.lustre_clients import EFA_CONNECTIONS_PER_FILE_SYSTEM, efa_connections, with_lustre_clients
from components.planning.pools import PoolPlan, plan_pool
from components.validation.parse import Parsed


def lustre_efa_connections_fit(p: Parsed) -> Iterator[Problem]:
    """The EFA client pools of an EFA-enabled Lustre file system open at most 1024 EFA connections at their maximum
    size: "Each FSx for Lustre file system has a maximum limit of 1024 EFA connections across all client
    instances", one per EFA interface the FSx setup configures (8 on p5/p5e/p5en/p6-b200, 2 on other types with
    several network cards, 1 on the rest; https://docs.aws.amazon.com/fsx/latest/LustreGuide/configure-efa-clients.html)."""
    fs = p.storage.lustre if p.storage else None
    if fs is None or not fs.efa_enabled or p.network is None:
        return
    plans: list[PoolPlan] = []
    for _, pool, instance in p.aws_pools():
        if instance is None:
            return  # the pool's own problem; the count would be wrong without it
        try:
            plans.append(plan_pool(pool, p.network))
        except ValueError:
            return  # the pool's own problem (an EFA layout, a taint key twice) is reported by its rule
    clients = [plan for plan in with_lustre_clients(plans, fs) if plan.lustre_client == "efa"]
    total = sum(efa_connections(plan) * plan.max_nodes for plan in clients)
    if total > EFA_CONNECTIONS_PER_FILE_SYSTEM:
        counted = ", ".join(f"{plan.name} {plan.max_nodes} x {efa_connections(plan)}" for plan in clients)
        yield Problem(
            "storage.lustre.efaEnabled",
            f"the EFA client pools open {total} EFA connections at their maximum size ({counted}); one file system "
            f"accepts {EFA_CONNECTIONS_PER_FILE_SYSTEM} (FSx Lustre guide, Configuring EFA clients): lower the "
            "pools' scaling.max",
        )


RULES = (lustre_efa_connections_fit,)
