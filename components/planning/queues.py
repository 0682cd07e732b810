"""The training platform's queues (pure, no Pulumi): a Kueue ResourceFlavor per GPU pool, ClusterQueues with quotas
derived from the pools, a LocalQueue in every workload namespace, the network Topology, and the ProvisioningRequest
admission check that makes cluster-autoscaler scale a pool up for a whole job before it starts.

Planned from `workloads.queues` (default: one ClusterQueue `shared` over every GPU pool and workload namespace) when
the Kueue add-on is on. Every Kueue object uses API `kueue.x-k8s.io/v1beta2`, the version the v0.19.2 CRDs store
([KUEUE] chart templates/crd). Quotas are in devices at the pools' maximum size: `nvidia.com/gpu` as the pool's
nodes advertise it (components.planning.mig) and `vpc.amazonaws.com/efa` where the pool wires EFA. What each part
does when a job is submitted, and what happens when capacity is short: docs/training.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.config import ClusterQueueConfig, GangAdmission, QueuesConfig, StackConfig
from components.planning.addons.cluster_autoscaler import autoscaled_plans
from components.planning.addons.selection import AddonSelection
from components.planning.autoscaler_tags import EFA_RESOURCE
from components.planning.dra import allocates_through_dra, dra_plans
from components.planning.gpu_quotas import gpu_quotas
from components.planning.mig import advertised_gpus
from components.planning.pools import GPU_RESOURCE, PoolPlan
from components.planning.tenants import gpu_pools, workload_namespace_names
from components.planning.tolerations import toleration
from components.planning.training_platform import LOCAL_QUEUE_NAME, NETWORK_TOPOLOGY_LEVELS

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
#: The ClusterQueue every workload namespace submits to when `workloads.queues.clusterQueues` names none.
SHARED_CLUSTER_QUEUE = "shared"
#: The Topology over the AWS network layers; flavors of pools whose instances get the labels name it.
TOPOLOGY_NAME = "aws-network"
#: The admission check (and its ProvisioningRequestConfig) attached to the flavors of pools cluster-autoscaler scales.
PROVISIONING_CHECK = "capacity"
#: The controller that runs a ProvisioningRequest admission check ([KUEUE] apis/kueue/v1beta2
#: provisioningrequestconfig_types.go `ProvisioningRequestControllerName`).
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
#: The only ProvisioningRequest class cluster-autoscaler scales nodes up for ([CASRC] cluster-autoscaler 1.35.2
#: apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go; `check-capacity.autoscaling.x-k8s.io` only checks room
#: on nodes that exist). On AWS it is not atomic: docs/training.md#all-or-nothing-admission.
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: The ProvisioningRequest CRD, from cluster-autoscaler's source at the tag of the 1.35 image the catalog pins
#: ([CASRC] cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml): the cluster-autoscaler
#: chart grants RBAC on the kind but installs no CRD, and Kueue's chart has none. The provider reads it at deploy time.
PROVISIONING_REQUEST_CRD_URL = (
    "https://raw.githubusercontent.com/kubernetes/autoscaler/cluster-autoscaler-1.35.2/"
    "cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"
)

#: Instance types whose nodes get `topology.k8s.aws/network-node-layer-*`: the types EC2's DescribeInstanceTopology
#: answers for ([EC2TOPO], "Prerequisites for Amazon EC2 topology", instance types; 3 layers, and 4 on p6-b200 and
#: p6-b300). The AWS cloud controller manager sets the labels when it initializes the node, from that API
#: ([CPAWS] kubernetes/cloud-provider-aws pkg/providers/v1 `getAdditionalLabels`), so every EC2 node of such a type
#: gets them whatever launched it (self-managed group, managed node group, Karpenter); hybrid nodes, which are no
#: EC2 instances, never do.
TOPOLOGY_INSTANCE_FAMILIES = frozenset(
    {
        "g6e",
        "g7e",
        "hpc6a",
        "hpc6id",
        "hpc7a",
        "hpc7g",
        "p3dn",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "p6-b200",
        "p6-b300",
        "p6e-gb200",
        "trn1",
        "trn1n",
        "trn2",
        "trn2u",
    }
)


def has_network_topology(plan: PoolPlan) -> bool:
    """Whether every node of the pool carries the network-layer labels: an `aws` pool all of whose instance types
    are of a family EC2 describes the topology of."""
    return (
        plan.kind == "aws"
        and bool(plan.instance_types)
        and all(t.split(".")[0] in TOPOLOGY_INSTANCE_FAMILIES for t in plan.instance_types)
    )


@dataclass(frozen=True)
class FlavorPlan:
    """The ResourceFlavor of one GPU pool: the pool's node labels select its nodes, its taints become the
    tolerations Kueue adds to the pods it admits there."""

    name: str
    node_labels: dict[str, str]
    tolerations: tuple[dict[str, str], ...]
    topology: bool
    #: cluster-autoscaler scales the pool: the ProvisioningRequest check applies on this flavor.
    autoscaled: bool

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"nodeLabels": dict(self.node_labels)}
        if self.tolerations:
            spec["tolerations"] = [dict(t) for t in self.tolerations]
        if self.topology:
            spec["topologyName"] = TOPOLOGY_NAME
        return spec


@dataclass(frozen=True)
class FlavorQuota:
    """A ClusterQueue's quota on one flavor, and what the pool holds at its maximum size."""

    flavor: str
    gpus: int
    efa_devices: int
    gpu_capacity: int
    efa_capacity: int
    borrowing_limit_gpus: int | None = None
    lending_limit_gpus: int | None = None

    def resources(self, efa: bool) -> list[dict[str, Any]]:
        gpu: dict[str, Any] = {"name": GPU_RESOURCE, "nominalQuota": self.gpus}
        if self.borrowing_limit_gpus is not None:
            gpu["borrowingLimit"] = self.borrowing_limit_gpus
        if self.lending_limit_gpus is not None:
            gpu["lendingLimit"] = self.lending_limit_gpus
        return [gpu, {"name": EFA_RESOURCE, "nominalQuota": self.efa_devices}] if efa else [gpu]


@dataclass(frozen=True)
class ClusterQueuePlan:
    name: str
    namespaces: tuple[str, ...]
    quotas: tuple[FlavorQuota, ...]
    cohort: str | None
    preemption: dict[str, Any]
    #: Flavors the ProvisioningRequest check applies on (empty: admitted on quota alone).
    checked_flavors: tuple[str, ...]
    #: Whether `vpc.amazonaws.com/efa` is a covered resource (a pool of the queue wires EFA).
    efa: bool

    @property
    def gpus(self) -> int:
        return sum(q.gpus for q in self.quotas)

    def spec(self) -> dict[str, Any]:
        """The ClusterQueue's spec: one resource group over GPUs (and EFA devices) with a flavor per pool, only its
        namespaces admitted, the preemption policy, and the capacity check on the autoscaled flavors."""
        covered = [GPU_RESOURCE, EFA_RESOURCE] if self.efa else [GPU_RESOURCE]
        spec: dict[str, Any] = {
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(self.namespaces)}
                ]
            },
            "resourceGroups": [
                {
                    "coveredResources": covered,
                    "flavors": [{"name": q.flavor, "resources": q.resources(self.efa)} for q in self.quotas],
                }
            ]
            if self.quotas
            else [],
            "preemption": dict(self.preemption),
        }
        if self.cohort is not None:
            spec["cohortName"] = self.cohort
        if self.checked_flavors:
            spec["admissionChecksStrategy"] = {
                "admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": list(self.checked_flavors)}]
            }
        return spec

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespaces": list(self.namespaces),
            "cohort": self.cohort,
            "flavors": [
                {
                    "flavor": q.flavor,
                    "gpus": q.gpus,
                    "efaDevices": q.efa_devices if self.efa else None,
                    "borrowingLimitGpus": q.borrowing_limit_gpus,
                    "lendingLimitGpus": q.lending_limit_gpus,
                }
                for q in self.quotas
            ],
            "gpus": self.gpus,
            "preemption": dict(self.preemption),
            "admissionChecks": [PROVISIONING_CHECK] if self.checked_flavors else [],
            "checkedFlavors": list(self.checked_flavors),
        }


@dataclass(frozen=True)
class LocalQueuePlan:
    namespace: str
    cluster_queue: str
    name: str = LOCAL_QUEUE_NAME

    def spec(self) -> dict[str, Any]:
        return {"clusterQueue": self.cluster_queue}


@dataclass(frozen=True)
class QueuePlan:
    """Every Kueue object of the stack, and the gang-admission settings of the controller."""

    flavors: tuple[FlavorPlan, ...]
    cluster_queues: tuple[ClusterQueuePlan, ...]
    local_queues: tuple[LocalQueuePlan, ...]
    admission: GangAdmission
    #: GPU pools on DRA, which no queue admits onto (Kueue would not count their GPUs, `queue_pools`).
    dra_pools: tuple[str, ...] = ()

    @property
    def counts_gpus(self) -> bool:
        """Whether some ClusterQueue holds a GPU quota, so a GPU job is admitted all at once or not at all."""
        return any(cq.quotas for cq in self.cluster_queues)

    @property
    def topology(self) -> bool:
        """Whether the stack gets the Topology: a flavor names it."""
        return any(f.topology for f in self.flavors)

    @property
    def provisioning(self) -> bool:
        """Whether the stack gets the ProvisioningRequest check (and cluster-autoscaler handles the requests)."""
        return any(cq.checked_flavors for cq in self.cluster_queues)

    def summary(self) -> dict[str, Any]:
        """The plan summary's `queues`."""
        return {
            "clusterQueues": [cq.summary() for cq in self.cluster_queues],
            "localQueues": [
                {"namespace": lq.namespace, "name": lq.name, "clusterQueue": lq.cluster_queue}
                for lq in self.local_queues
            ],
            "flavors": [
                {"name": f.name, "topology": TOPOLOGY_NAME if f.topology else None, "autoscaled": f.autoscaled}
                for f in self.flavors
            ],
            "topology": list(NETWORK_TOPOLOGY_LEVELS) if self.topology else None,
            "draPoolsOutsideQueues": list(self.dra_pools),
            "admission": {
                "timeout": self.admission.timeout,
                "recoveryTimeout": self.admission.recovery_timeout or self.admission.timeout,
                "backoffLimitCount": self.admission.backoff_limit_count,
                "provisioningClass": PROVISIONING_CLASS if self.provisioning else None,
            },
        }


def topology_spec() -> dict[str, Any]:
    """The Topology: the AWS network layers from the coarsest down to the node ([KUEUE] topology_types.go)."""
    return {"levels": [{"nodeLabel": label} for label in NETWORK_TOPOLOGY_LEVELS]}


def provisioning_config_spec(admission: GangAdmission) -> dict[str, Any]:
    """The ProvisioningRequestConfig: a best-effort-atomic request for the pods that ask for GPUs (others need no
    new node of a GPU pool), retried with the pods-ready backoff."""
    retry: dict[str, Any] = {
        "backoffBaseSeconds": admission.backoff_base_seconds,
        "backoffMaxSeconds": admission.backoff_max_seconds,
    }
    if admission.backoff_limit_count is not None:
        retry["backoffLimitCount"] = admission.backoff_limit_count
    return {"provisioningClassName": PROVISIONING_CLASS, "managedResources": [GPU_RESOURCE], "retryStrategy": retry}


def admission_check_spec() -> dict[str, Any]:
    return {
        "controllerName": PROVISIONING_CONTROLLER,
        "parameters": {
            "apiGroup": KUEUE_API_VERSION.split("/")[0],
            "kind": "ProvisioningRequestConfig",
            "name": PROVISIONING_CHECK,
        },
    }


def plan_flavor(plan: PoolPlan, autoscaled: bool) -> FlavorPlan:
    found: dict[tuple[str, str, str], dict[str, str]] = {}
    for taint in plan.taints:
        found.setdefault((taint.key, taint.value, taint.effect), toleration(taint))
    return FlavorPlan(
        name=plan.name,
        node_labels=dict(plan.labels),
        tolerations=tuple(found[k] for k in sorted(found)),
        topology=has_network_topology(plan),
        autoscaled=autoscaled,
    )


def pool_capacity(plan: PoolPlan) -> tuple[int, int]:
    """GPUs and EFA devices the pool holds at its maximum size."""
    return advertised_gpus(plan) * plan.max_nodes, (plan.efa_devices * plan.max_nodes if plan.efa else 0)


def queue_configs(queues: QueuesConfig) -> list[ClusterQueueConfig]:
    """The configured ClusterQueues, or the one shared queue."""
    return list(queues.cluster_queues) or [ClusterQueueConfig(name=SHARED_CLUSTER_QUEUE)]


def queue_namespaces(configs: Sequence[ClusterQueueConfig], workload_namespaces: Sequence[str]) -> dict[str, list[str]]:
    """Each ClusterQueue's namespaces: those it names, or every workload namespace no other queue names."""
    named = {ns for c in configs for ns in c.namespaces or []}
    rest = [ns for ns in workload_namespaces if ns not in named]
    return {c.name: list(c.namespaces) if c.namespaces is not None else rest for c in configs}


def queue_pools(config: ClusterQueueConfig, plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """The GPU pools a ClusterQueue admits onto: those it names, in its order, else every GPU pool on the device
    plugin. A DRA pool stays out of the default: Kueue 0.19.2 counts GPUs taken through claims only behind its alpha
    `DynamicResourceAllocation` gate ([KUEUEDRA]), so its quota would hold nothing (docs/training.md)."""
    if config.pools is None:
        return [p for p in gpu_pools(plans) if not allocates_through_dra(p)]
    by_name = {p.name: p for p in plans}
    return [by_name[name] for name in config.pools if name in by_name]


def plan_cluster_queue(
    config: ClusterQueueConfig, namespaces: Sequence[str], plans: Sequence[PoolPlan], checked: frozenset[str]
) -> ClusterQueuePlan:
    quotas = []
    pools = queue_pools(config, plans)
    for plan in pools:
        gpu_capacity, efa_capacity = pool_capacity(plan)
        configured = config.quotas.get(plan.name)
        quotas.append(
            FlavorQuota(
                flavor=plan.name,
                gpus=configured.gpus if configured and configured.gpus is not None else gpu_capacity,
                efa_devices=(
                    configured.efa_devices if configured and configured.efa_devices is not None else efa_capacity
                ),
                gpu_capacity=gpu_capacity,
                efa_capacity=efa_capacity,
                borrowing_limit_gpus=configured.borrowing_limit_gpus if configured else None,
                lending_limit_gpus=configured.lending_limit_gpus if configured else None,
            )
        )
    preemption = {
        "withinClusterQueue": config.preemption.within_cluster_queue,
        "reclaimWithinCohort": config.preemption.reclaim_within_cohort,
        "borrowWithinCohort": {"policy": config.preemption.borrow_within_cohort},
    }
    return ClusterQueuePlan(
        name=config.name,
        namespaces=tuple(namespaces),
        quotas=tuple(quotas),
        cohort=config.cohort,
        preemption=preemption,
        checked_flavors=tuple(p.name for p in pools if p.name in checked),
        efa=any(p.efa for p in pools),
    )


def plan_queues(spec: StackConfig, plans: Sequence[PoolPlan], addons: AddonSelection) -> QueuePlan | None:
    """The stack's queues, or None without Kueue."""
    if not addons.on("kueue"):
        return None
    queues = spec.workloads.queues or QueuesConfig()
    provisioning = queues.admission.provisioning == "auto" and addons.on("cluster-autoscaler")
    autoscaled = frozenset(p.name for p in autoscaled_plans(plans)) if provisioning else frozenset()
    configs = queue_configs(queues)
    namespaces = queue_namespaces(configs, workload_namespace_names(spec.storage, spec.workloads))
    cluster_queues = tuple(plan_cluster_queue(c, namespaces[c.name], plans, autoscaled) for c in configs)
    used = {q.flavor for cq in cluster_queues for q in cq.quotas}
    flavors = tuple(plan_flavor(p, p.name in autoscaled) for p in gpu_pools(plans) if p.name in used)
    local_queues = tuple(
        LocalQueuePlan(namespace=ns, cluster_queue=cq.name) for cq in cluster_queues for ns in cq.namespaces
    )
    return QueuePlan(
        flavors=flavors,
        cluster_queues=cluster_queues,
        local_queues=tuple(sorted(local_queues, key=lambda lq: lq.namespace)),
        admission=queues.admission,
        dra_pools=tuple(p.name for p in dra_plans(plans)),
    )


def quota_warnings(spec: StackConfig, plans: Sequence[PoolPlan], queues: QueuePlan | None) -> list[str]:
    """Where Kueue may admit more GPUs for a namespace than its ResourceQuota lets it create: over the pools the
    namespace's quota counts, its ClusterQueue's quota (nominal plus borrowing limit) above the ResourceQuota. Kueue
    would admit a job whose pods the ResourceQuota then refuses; the job never gets all its pods ready and is
    requeued after `waitForPodsReady.timeout` (docs/training.md#queues-and-quotas)."""
    if queues is None:
        return []
    by_namespace = {cq_ns: cq for cq in queues.cluster_queues for cq_ns in cq.namespaces}
    found = []
    for quota in gpu_quotas(spec.storage, spec.workloads, plans):
        cq = by_namespace.get(quota.namespace)
        if cq is None:
            continue
        reachable = [q for q in cq.quotas if q.flavor in quota.pools]
        limits = [q.borrowing_limit_gpus for q in reachable]
        admitted = sum(q.gpus for q in reachable)
        if cq.cohort is not None and any(limit is None for limit in limits):
            admitted_text = f"{admitted} GPUs of its own and, unlimited, what its cohort {cq.cohort} lends"
            above = True
        else:
            admitted += sum(limit or 0 for limit in limits) if cq.cohort is not None else 0
            admitted_text = f"{admitted} GPUs"
            above = admitted > quota.gpus
        if above:
            found.append(
                f"workloads.queues: ClusterQueue {cq.name} may admit {admitted_text} for namespace "
                f"{quota.namespace} on {', '.join(quota.pools)}, above its GPU ResourceQuota of {quota.gpus}; a job "
                "beyond the ResourceQuota is admitted but its pods are refused, and Kueue requeues it after "
                f"{queues.admission.timeout} (lower the ClusterQueue's quota or raise "
                f"workloads.quotas.{quota.namespace})"
            )
    return found
