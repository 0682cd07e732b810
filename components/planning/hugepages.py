"""2 MiB huge pages on EFA nodes: set at boot, advertised to the scheduler and to cluster-autoscaler alike.

Invariant: every EFA node gets the same 5128 pages from its user data whatever its AMI ([EKSEFA]), and the
node-template tag promises exactly that quantity (components.planning.autoscaler_tags). Why and sources:
docs/design-notes.md#huge-pages-on-efa-nodes.
"""

from __future__ import annotations

from components.planning.pools import PoolPlan

#: The extended resource the kubelet reports 2 MiB pages under (kubernetes.io "Manage HugePages").
HUGEPAGES_RESOURCE = "hugepages-2Mi"
HUGEPAGE_MIB = 2
#: Pages per EFA node: what AWS's EFA-enabled images pre-allocate ([EKSEFA]).
EFA_HUGEPAGES = 5128
#: The kernel setting that sizes the 2 MiB pool (the default huge page size on x86_64 and arm64).
NR_HUGEPAGES_SYSCTL = "vm.nr_hugepages"


def hugepages(plan: PoolPlan) -> int:
    """2 MiB pages a node of the pool sets aside: EFA's pool on EFA nodes, none elsewhere."""
    return EFA_HUGEPAGES if plan.efa else 0


def hugepages_quantity(plan: PoolPlan) -> str:
    """The node's `hugepages-2Mi` capacity as a Kubernetes quantity (5128 pages -> `10256Mi`)."""
    return f"{hugepages(plan) * HUGEPAGE_MIB}Mi"


def sysctls(plan: PoolPlan) -> dict[str, str]:
    """Kernel settings a node of the pool applies before its kubelet starts."""
    pages = hugepages(plan)
    return {NR_HUGEPAGES_SYSCTL: str(pages)} if pages else {}
