"""The node label EKS sets by compute type, and the compute types that are not EC2 instances in the VPC.

Hybrid nodes carry `eks.amazonaws.com/compute-type=hybrid` and Fargate nodes `fargate` (aws-gpu-facts.md §5f,
https://docs.aws.amazon.com/eks/latest/userguide/hybrid-nodes-cni.html). Cilium is pinned to hybrid nodes by it,
and the VPC CNI and the FSx for Lustre CSI node plugin are kept off both kinds with it.
"""

from __future__ import annotations

COMPUTE_TYPE_LABEL = "eks.amazonaws.com/compute-type"
HYBRID = "hybrid"
FARGATE = "fargate"
#: Compute types that are not EC2 instances of the cluster's VPC: the VPC CNI does not work there (pulumi-eks PR
#: #291 keeps aws-node off Fargate; §5f for hybrid) and the FSx CSI driver "isn't supported" there (EKS user guide,
#: fsx-csi-create.html).
NOT_IN_VPC = (FARGATE, HYBRID)


def on_compute_type(compute_type: str) -> dict[str, object]:
    """The node-affinity match expression that selects nodes of one compute type."""
    return {"key": COMPUTE_TYPE_LABEL, "operator": "In", "values": [compute_type]}


def in_vpc_only() -> dict[str, object]:
    """The node-affinity match expression that keeps a pod off hybrid and Fargate nodes."""
    return {"key": COMPUTE_TYPE_LABEL, "operator": "NotIn", "values": list(NOT_IN_VPC)}
