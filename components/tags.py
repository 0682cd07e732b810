"""Tag keys and tag sets every AWS resource of a cluster carries.

Tags are how the pieces find each other after deployment: cost reports group by them, cluster-autoscaler discovers
node groups by them, the node termination handler and the policy pack read a pool's role, capacity type and taints
from them. Keeping the keys in one module means the components, the plan summary and the policies cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "gpu-clusters"
CLUSTER = f"{PREFIX}/cluster"
STACK = f"{PREFIX}/stack"
POOL = f"{PREFIX}/pool"
ROLE = f"{PREFIX}/role"
CAPACITY_TYPE = f"{PREFIX}/capacity-type"
GPU_MODEL = f"{PREFIX}/gpu-model"
TAINTS = f"{PREFIX}/taints"
EFA_DEVICES = f"{PREFIX}/efa-devices"
#: On a pool whose GPUs are allocated through NVIDIA's DRA driver (`gpuAllocation: dra`): `dra`. The policy pack
#: reads it to expect the DRA driver there instead of the device plugin.
GPU_ALLOCATION = f"{PREFIX}/gpu-allocation"
STATEFUL = f"{PREFIX}/stateful"
#: On a launch template whose IMDS hop limit is above 1: why (the pool's `imdsHopLimitReason`). The policy pack accepts
#: a hop limit above 1 only with this tag (docs/security.md).
IMDS_HOP_LIMIT_REASON = f"{PREFIX}/imds-hop-limit-reason"
#: The node termination handler (queue mode) only drains instances of ASGs carrying this tag, any value, propagated
#: at launch ([NTH] aws-node-termination-handler README, aws-gpu-facts.md §7b).
NTH_MANAGED = "aws-node-termination-handler/managed"

#: `kubernetes.io/cluster/<cluster name>`: how Kubernetes on AWS tells one cluster's resources from another's. `owned`
#: on nodes: the EKS user guide requires it on every self-managed node ("add the following tag to each node ...
#: `kubernetes.io/cluster/<cluster-name>` `owned`", https://docs.aws.amazon.com/eks/latest/userguide/worker.html),
#: and the AWS cloud provider drops every instance without it when it looks nodes up, e.g. for load balancer targets
#: (kubernetes/cloud-provider-aws `pkg/providers/v1/aws.go`: `describeInstances` keeps `hasClusterTag` matches).
#: `owned` on the node security group, `shared` on subnets (components.network).
KUBERNETES_CLUSTER_PREFIX = "kubernetes.io/cluster/"
OWNED = "owned"
SHARED = "shared"

#: AWS tag limits: 50 user tags per resource, keys up to 128 and values up to 256 characters
#: (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html#tag-conventions).
MAX_TAGS = 50
MAX_KEY_LENGTH = 128
MAX_VALUE_LENGTH = 256


def cluster_tags(cluster_name: str, stack: str, extra: Mapping[str, str]) -> dict[str, str]:
    """Tags for every AWS resource of the cluster: identity first, then the stack's cost-allocation tags."""
    return {CLUSTER: cluster_name, STACK: stack, **extra}


def kubernetes_cluster(cluster_name: str) -> str:
    """The `kubernetes.io/cluster/<cluster name>` tag key."""
    return f"{KUBERNETES_CLUSTER_PREFIX}{cluster_name}"


def with_tags(base: Mapping[str, str], **more: str) -> dict[str, str]:
    """`base` plus more tags given as keyword arguments whose names are keys of this module (pool=, role=...)."""
    keys = {
        "pool": POOL,
        "role": ROLE,
        "capacity_type": CAPACITY_TYPE,
        "gpu_model": GPU_MODEL,
        "taints": TAINTS,
    }
    return {**base, **{keys[name]: value for name, value in more.items()}}


def asg_tags(tags: Mapping[str, str], propagate_at_launch: bool = True) -> list[dict[str, object]]:
    """Auto Scaling groups take tags as a list of {key, value, propagateAtLaunch} objects, not a map."""
    return [{"key": k, "value": v, "propagate_at_launch": propagate_at_launch} for k, v in sorted(tags.items())]
