"""2 MiB huge pages on EFA nodes: set at boot, advertised to the scheduler and to cluster-autoscaler alike.

EFA jobs request `hugepages-2Mi` next to `vpc.amazonaws.com/efa` and `nvidia.com/gpu`: libfabric's EFA provider
takes its buffers from the huge page pool, and AWS's EFA jobs ask for it ([EKSEFA]: "Amazon EC2 instances with the
EFA driver installed pre-allocate 5128 2MiB Huge Pages, which you can request as resources to consume in your job
specifications"; its NCCL test workers request `hugepages-2Mi: 5120Mi`). That pool is an effect of the image, not
of the instance: Bottlerocket allocates no huge pages unless `settings.kernel.sysctl."vm.nr_hugepages"` asks ([EKSEFA]
Bottlerocket example). So every EFA node gets the same 5128 pages from its user data whatever its AMI, the kubelet
reports them as `hugepages-2Mi` capacity, and the node-template tag promises exactly that quantity to
cluster-autoscaler, which otherwise builds a zero-node template without any huge pages and never scales up for a
job that asks for them (components.planning.autoscaler_tags).
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
