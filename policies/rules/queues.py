"""Queue rules: in a stack that trains on GPUs, every workload namespace submits its jobs through Kueue and is capped
by a GPU ResourceQuota (components.planning.queues, components.planning.gpu_quotas; docs/training.md).
"""

from __future__ import annotations

from components.planning.namespaces import ADDON_NAMESPACES
from policies.resources import Resource, Stack
from policies.rules.deployed_pools import node_pools
from policies.rules.kubernetes import NAMESPACE, NAMESPACE_PATCH
from policies.rules.signatures import Config, StackViolations

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
#: How pulumi-kubernetes registers a Kueue LocalQueue (`apiextensions.CustomResource`, type `kubernetes:<apiVersion>:
#: <kind>`); any served version counts.
LOCAL_QUEUE_PREFIX = "kubernetes:kueue.x-k8s.io/"
LOCAL_QUEUE_KIND = ":LocalQueue"
GPU_QUOTA_KEY = "requests.nvidia.com/gpu"


def _namespace_of(r: Resource) -> str | None:
    value = r.get("metadata", "namespace")
    return value if isinstance(value, str) else None


def _denies_all_ingress(policy: Resource) -> bool:
    """A default-deny ingress NetworkPolicy: every pod selected, Ingress only, no rule admitting anything."""
    return (
        policy.get("spec", "podSelector", default={}) in ({}, {"matchLabels": {}})
        and "Ingress" in (policy.get("spec", "policyTypes") or [])
        and not policy.get("spec", "ingress")
    )


def workload_namespaces(stack: Stack) -> dict[str, Resource]:
    """The namespaces the stack treats as workload namespaces (a default-deny ingress NetworkPolicy in them, and not
    an add-on's own namespace), each
    with the resource to report against: its Namespace when the stack declares it, else the policy."""
    found: dict[str, Resource] = {}
    for policy in stack.of_type(NETWORK_POLICY):
        namespace = _namespace_of(policy)
        if namespace is not None and _denies_all_ingress(policy):
            found.setdefault(namespace, policy)
    for ns in stack.of_type(NAMESPACE, NAMESPACE_PATCH):
        name = ns.get("metadata", "name")
        if name in found:
            found[name] = ns
    # An add-on's own namespace that denies ingress (the health loop's) runs no team's jobs.
    return {name: resource for name, resource in found.items() if name not in ADDON_NAMESPACES}


def training_namespaces_queued(stack: Stack, config: Config) -> StackViolations:
    """In a stack with a GPU pool of role training, every workload namespace has a Kueue LocalQueue and a
    ResourceQuota on `requests.nvidia.com/gpu`.

    Without a LocalQueue a namespace's jobs bypass Kueue: no gang admission, so a multi-node job can start half its
    workers and hold their GPUs while the rest wait (docs/training.md, "All-or-nothing admission"). Without a GPU
    ResourceQuota nothing caps what one namespace's pods take outside the queues (a bare pod, a Deployment), so one
    team can take every GPU of the cluster (docs/security.md, "Tenants").
    """
    if not any(pool.is_gpu and pool.role == "training" for pool in node_pools(stack)):
        return
    queued = {
        _namespace_of(r) for r in stack if r.type.startswith(LOCAL_QUEUE_PREFIX) and r.type.endswith(LOCAL_QUEUE_KIND)
    }
    capped = {_namespace_of(r) for r in stack.of_type(RESOURCE_QUOTA) if GPU_QUOTA_KEY in (r.get("spec", "hard") or {})}
    for namespace, resource in sorted(workload_namespaces(stack).items()):
        missing = [
            what
            for what, present in (
                ("a Kueue LocalQueue", namespace in queued),
                ("a GPU ResourceQuota", namespace in capped),
            )
            if not present
        ]
        if missing:
            yield (
                f"training namespace '{namespace}' has no {' and no '.join(missing)}: a stack with a training GPU "
                "pool queues every workload namespace's jobs through Kueue and caps its GPUs",
                resource.urn,
            )
