"""Kubernetes AI Conformance from the plan (pure): each checklist requirement's status for a stack, with the
evidence that backs it and what the stack would need where it falls short; and the pool the upstream autoscaling
test runs on.

The checklist is the catalog's (components/catalog/ai_conformance.yaml); the rules read only the StackPlan (add-ons,
pools, namespaces), so `blueprint conformance` says what the stack builds, not what it could. Why each rule counts a
requirement as met, and the N/A reasons: docs/conformance.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from components import tags
from components.catalog.ai_conformance import Checklist, ChecklistRequirement, checklist
from components.planning.addons.cluster_autoscaler import autoscaled_plans
from components.planning.dra import dra_plans
from components.planning.mig import mig_plans
from components.planning.namespaces import workload_namespaces
from components.planning.pools import PoolPlan
from components.planning.stack_plan import StackPlan

Status = Literal["Implemented", "Not Implemented", "Partially Implemented", "N/A"]

#: The checklist's four statuses ([AICHECKLIST]).
STATUSES: tuple[Status, ...] = ("Implemented", "Not Implemented", "Partially Implemented", "N/A")

#: The add-on names of the DRA driver and the Gateway API implementation (their switches in
#: components.planning.addons.selection); a plan without the switch reads as off.
DRA_DRIVER = "nvidia-dra-driver-gpu"
GATEWAY = "envoy-gateway"

#: The page every evidence link points into; each requirement has a section there whose anchor is its id.
CONFORMANCE_DOC = "docs/conformance.md"

#: First Kubernetes minor serving the DRA API `resource.k8s.io/v1` on EKS, where DRA went GA ([EKSDRA], [K8SDRA]).
DRA_GA_MINOR = (1, 34)

#: The value the upstream suite's `-accelerator-type` flag takes for NVIDIA GPUs ([AISUITE]).
ACCELERATOR_TYPE = "nvidia"


@dataclass(frozen=True)
class Assessment:
    """One requirement for one stack: its status, evidence (repository paths with anchors), notes, and the add-ons
    whose switch would meet it where it falls short."""

    requirement: ChecklistRequirement
    status: Status
    evidence: tuple[str, ...]
    notes: str
    missing: tuple[str, ...] = ()

    @property
    def met(self) -> bool:
        """Implemented, or N/A with a reason: what a MUST needs."""
        return self.status == "Implemented" or (self.status == "N/A" and bool(self.notes))


@dataclass(frozen=True)
class _Finding:
    status: Status
    notes: str
    evidence: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()


def _on(plan: StackPlan, name: str) -> bool:
    """Whether the add-on is deployed; an add-on the plan has no switch for is not."""
    return plan.addons.switches.get(name, False)


def _names(plans: list[PoolPlan]) -> str:
    return ", ".join(p.name for p in plans)


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _dra_support(plan: StackPlan) -> _Finding:
    version = plan.spec.cluster.kubernetes_version
    if _minor(version) < DRA_GA_MINOR:
        return _Finding(
            "Not Implemented", f"Kubernetes {version} does not serve resource.k8s.io/v1.", missing=(DRA_DRIVER,)
        )
    api = (
        f"Kubernetes {version} serves the DRA API resource.k8s.io/v1 (DeviceClass, ResourceClaim, "
        "ResourceClaimTemplate, ResourceSlice), which is what the requirement's test, the Kubernetes conformance "
        "DRA CRUD tests, checks"
    )
    dra = dra_plans(plan.pools)
    if _on(plan, DRA_DRIVER) and dra:
        return _Finding(
            "Implemented",
            f"{api}. NVIDIA's DRA driver for GPUs publishes the GPUs of {_names(dra)} as devices of the DeviceClass "
            "gpu.nvidia.com, and the stack's workloads there ask for them with ResourceClaimTemplates.",
            evidence=("docs/gpu-sharing.md#gpus-through-dra",),
        )
    return _Finding(
        "Implemented",
        f"{api}. No GPU pool of this stack allocates through DRA, so no driver publishes devices for a claim to "
        "match; `gpuAllocation: dra` on an AWS GPU pool adds NVIDIA's DRA driver (the upstream ai-conformance "
        "suite's test needs one).",
        evidence=("docs/gpu-sharing.md#gpus-through-dra",),
    )


def _driver_runtime_management(plan: StackPlan) -> _Finding:
    return _Finding(
        "Implemented",
        "The NVIDIA driver and container runtime come with the pinned EKS accelerated AMI release (the on-prem "
        "runbook for hybrid servers). `blueprint verify`'s drivers check compares each GPU node's driver and CUDA "
        "versions (GPU feature discovery's labels, or the DRA driver's device attributes) with what the catalog "
        "pins for its pool and fails on a mismatch; its DCGM diagnostic runs in a GPU container on each node, "
        "through the runtime. No label or attribute exposes the container toolkit's version: it is reported with "
        "its pin, not compared.",
        evidence=("docs/operations.md#driver-and-runtime-versions",),
    )


def _gpu_sharing(plan: StackPlan) -> _Finding:
    mig = mig_plans(plan.pools)
    sliced = [p for p in plan.pools if p.is_gpu and p.pool.device_plugin.time_slicing_replicas > 1]
    used = [
        *([f"MIG on {_names(mig)}"] if mig else []),
        *([f"time-slicing on {_names(sliced)}"] if sliced else []),
    ]
    notes = (
        f"This stack shares GPUs: {'; '.join(used)}."
        if used
        else "Per pool: MIG partitions (`devicePlugin.migDevices`, advertised as schedulable resources) or "
        "time-slicing (`devicePlugin.timeSlicingReplicas`, oversubscribed); no pool of this stack shares its GPUs."
    )
    return _Finding("Implemented", notes, evidence=("docs/gpu-sharing.md",))


def _virtualized_accelerator(plan: StackPlan) -> _Finding:
    return _Finding(
        "N/A",
        "No accelerator of this platform is virtualized: EC2 GPU instances give each instance whole physical GPUs, "
        "and the on-prem servers join as EKS Hybrid Nodes on bare metal, with no hypervisor or vGPU manager. "
        "Fractional GPUs are MIG partitions and time-slicing (gpu_sharing).",
    )


#: Why a stack that serves no models answers a serving MUST with N/A, and what it means for a submission.
NOT_SUBMITTED = (
    "; the CNCF validator accepts only Implemented for a MUST, so this stack is not the submitted configuration"
)


def _serves(plan: StackPlan) -> bool:
    return bool(plan.spec.workloads.serving)


def _ai_inference(plan: StackPlan) -> _Finding:
    if _on(plan, GATEWAY):
        return _Finding(
            "Implemented",
            "Envoy Gateway implements the Gateway API: the stack's Gateway and an HTTPRoute per model split the "
            "model's requests between its versions by weight and match the model named in the "
            "`X-Gateway-Model-Name` header (the header the Inference Extension's body-based router writes from the "
            "OpenAI request's `model`; clients set it here).",
            evidence=("docs/inference-routing.md",),
        )
    if not _serves(plan):
        return _Finding(
            "N/A",
            "This stack serves no models (no `workloads.serving`), so it has no inference service to route; the "
            "first exposed serving workload brings Envoy Gateway, a Gateway and its routes" + NOT_SUBMITTED + ".",
            evidence=("docs/inference-routing.md",),
            missing=(GATEWAY,),
        )
    return _Finding(
        "Not Implemented",
        "No Gateway API implementation is deployed: every serving workload sets `gateway.expose: false` and is "
        "reached through its ClusterIP Service.",
        missing=(GATEWAY,),
    )


def _gang_scheduling(plan: StackPlan) -> _Finding:
    queues = plan.job_queues
    if _on(plan, "kueue") and queues is not None and queues.counts_gpus:
        return _Finding(
            "Implemented",
            "Kueue admits a job's pods all at once against its ClusterQueue's GPU quota and requeues a job whose pods "
            "are not all ready in time (waitForPodsReady).",
            evidence=("docs/training.md#all-or-nothing-admission",),
        )
    if _on(plan, "kueue"):
        return _Finding(
            "Partially Implemented",
            "Kueue runs and requeues a job whose pods are not all ready in time, but every GPU pool of this stack "
            "allocates through DRA, whose claims Kueue 0.19.2 counts only behind an alpha feature gate, so no "
            "ClusterQueue holds a GPU quota and a GPU job larger than the free GPUs may start some of its pods (the "
            "namespace's ResourceQuota on DRA devices caps it); a GPU pool on the device plugin gets a quota.",
            evidence=("docs/training.md#queues-and-quotas",),
        )
    return _Finding("Not Implemented", "Kueue is off (`addons.kueue.enabled: off`).", missing=("kueue",))


def _cluster_autoscaling(plan: StackPlan) -> _Finding:
    gpu = [p for p in autoscaled_plans(plan.pools) if p.is_gpu]
    if _on(plan, "cluster-autoscaler") and gpu:
        from_zero = [p for p in gpu if p.min_nodes == 0]
        zero = f"; {_names(from_zero)} scale from zero" if from_zero else ""
        return _Finding(
            "Implemented",
            f"cluster-autoscaler resizes the GPU pools {_names(gpu)} on pending pods that ask for their GPUs{zero}.",
            evidence=("docs/addons.md#cluster-autoscaler",),
        )
    if not _on(plan, "cluster-autoscaler"):
        return _Finding(
            "N/A",
            "This configuration provides no cluster autoscaler: every GPU pool has a fixed size, so the requirement's "
            "condition (a cluster autoscaler or an equivalent mechanism) does not hold.",
            missing=("cluster-autoscaler",),
        )
    return _Finding(
        "Not Implemented",
        "cluster-autoscaler runs, but no GPU pool is in its range (scaling mode and min < max).",
        missing=("cluster-autoscaler",),
    )


def _pod_autoscaling(plan: StackPlan) -> _Finding:
    if _on(plan, "keda"):
        return _Finding(
            "Implemented",
            "KEDA serves the serving workloads' custom metrics (vLLM's requests in flight, the DCGM exporter's GPU "
            "utilization) to a HorizontalPodAutoscaler that scales the GPU pods.",
            evidence=("docs/addons.md#serving-autoscaling",),
        )
    if not _serves(plan):
        return _Finding(
            "N/A",
            "This stack serves no models (no `workloads.serving`): no accelerator pod of it scales horizontally "
            "(training jobs run a fixed number of workers); KEDA and a HorizontalPodAutoscaler come with the first "
            "serving workload" + NOT_SUBMITTED + ".",
            evidence=("docs/addons.md#serving-autoscaling",),
            missing=("keda",),
        )
    return _Finding("Not Implemented", "No custom metrics API is served (KEDA is off).", missing=("keda",))


def _accelerator_metrics(plan: StackPlan) -> _Finding:
    paths = [
        *(["NVIDIA's DCGM exporter scraped by Prometheus"] if _on(plan, "dcgm-prometheus") else []),
        *(["Container Insights' DCGM exporter"] if _on(plan, "container-insights") else []),
    ]
    if paths:
        return _Finding(
            "Implemented",
            f"{' and '.join(paths)}: per-GPU utilization, memory, temperature, power and interconnect counters in "
            "the Prometheus exposition format.",
            evidence=("docs/addons.md#monitoring-and-alerts",),
        )
    return _Finding(
        "Not Implemented",
        "Neither metrics path is on (`addons.monitoring`).",
        missing=("dcgm-prometheus",),
    )


def _ai_service_metrics(plan: StackPlan) -> _Finding:
    if _on(plan, "dcgm-prometheus"):
        return _Finding(
            "Implemented",
            "The Prometheus operator (kube-prometheus-stack) discovers ServiceMonitor and PodMonitor objects "
            "labelled `release: kube-prometheus-stack` in every namespace and scrapes the workloads they select in "
            "the Prometheus exposition format: the stack's own (each serving workload's vLLM `/metrics`, the "
            "reference training job's) and users'.",
            evidence=("docs/addons.md#monitoring-and-alerts", "docs/operations.md#workload-metrics"),
        )
    if not _serves(plan) and plan.spec.workloads.training is None:
        return _Finding(
            "N/A",
            "This stack runs no workload of its own (no `workloads.serving`, no `workloads.training`) and monitors "
            "its GPUs through Container Insights, which collects no workload's own metrics; the Prometheus path "
            "(`addons.monitoring.dcgmPrometheus: true`) discovers and scrapes them" + NOT_SUBMITTED + ".",
            evidence=("docs/addons.md#monitoring-and-alerts",),
            missing=("dcgm-prometheus",),
        )
    return _Finding(
        "Not Implemented",
        "Container Insights alone collects no workload's own metrics; the Prometheus path "
        "(`addons.monitoring.dcgmPrometheus`) discovers and scrapes them.",
        missing=("dcgm-prometheus",),
    )


def _secure_accelerator_access(plan: StackPlan) -> _Finding:
    tenants = workload_namespaces(plan.namespaces)
    loose = [n.name for n in tenants if n.level != "restricted"]
    if loose:
        return _Finding(
            "Partially Implemented",
            f"The workload namespaces {', '.join(loose)} admit pods beyond Pod Security `restricted`.",
            evidence=("docs/security.md#pod-security-and-networkpolicy",),
        )
    allocators = "NVIDIA's device plugin" + (" and DRA driver" if _on(plan, DRA_DRIVER) else "")
    return _Finding(
        "Implemented",
        f"Containers reach GPUs only through {allocators}, which hand each container the devices it was "
        "allocated; every workload namespace enforces Pod Security `restricted`, so no tenant pod runs "
        "privileged or mounts the host's devices.",
        evidence=("docs/security.md#pod-security-and-networkpolicy",),
    )


def _robust_controller(plan: StackPlan) -> _Finding:
    operators = [name for name in ("kueue", "jobset") if _on(plan, name)]
    if operators:
        return _Finding(
            "Implemented",
            f"{' and '.join(n.capitalize() if n == 'kueue' else 'JobSet' for n in operators)}: CRDs, admission "
            "webhooks and controllers that reconcile them; each release waits until its webhook answers.",
            evidence=("docs/training.md",),
        )
    return _Finding("Not Implemented", "Neither Kueue nor JobSet is deployed.", missing=("kueue", "jobset"))


#: The rule of each requirement, by id; every id of the checklist has one (checked by the tests).
RULES: Mapping[str, Callable[[StackPlan], _Finding]] = {
    "dra_support": _dra_support,
    "driver_runtime_management": _driver_runtime_management,
    "gpu_sharing": _gpu_sharing,
    "virtualized_accelerator": _virtualized_accelerator,
    "ai_inference": _ai_inference,
    "gang_scheduling": _gang_scheduling,
    "cluster_autoscaling": _cluster_autoscaling,
    "pod_autoscaling": _pod_autoscaling,
    "accelerator_metrics": _accelerator_metrics,
    "ai_service_metrics": _ai_service_metrics,
    "secure_accelerator_access": _secure_accelerator_access,
    "robust_controller": _robust_controller,
}


def assess(plan: StackPlan, list_: Checklist | None = None) -> list[Assessment]:
    """Every requirement of the checklist for the stack, in published order; evidence first points at the
    requirement's section of docs/conformance.md."""
    out = []
    for requirement in (list_ or checklist()).requirements:
        finding = RULES[requirement.id](plan)
        evidence = (f"{CONFORMANCE_DOC}#{requirement.id}", *finding.evidence)
        out.append(Assessment(requirement, finding.status, evidence, finding.notes, finding.missing))
    return out


def unmet_musts(assessments: list[Assessment]) -> list[Assessment]:
    """The MUSTs a stack does not meet (neither Implemented nor N/A with a reason)."""
    return [a for a in assessments if a.requirement.level == "MUST" and not a.met]


@dataclass(frozen=True)
class AutoscalingTarget:
    """The pool the upstream cluster autoscaling test scales ([AISUITECA]): a node label its new nodes inherit, how
    its GPUs are allocated, and its size (the test wants a minimum of at least one node)."""

    pool: str
    label: str
    allocation_mode: Literal["device-plugin", "dra"]
    min_nodes: int
    max_nodes: int


def autoscaling_target(plan: StackPlan) -> AutoscalingTarget | None:
    """The autoscaled GPU pool with the fewest GPUs per node (the cheapest node to add), by name on a tie; None
    without one."""
    gpu = [p for p in autoscaled_plans(plan.pools) if p.is_gpu] if _on(plan, "cluster-autoscaler") else []
    if not gpu:
        return None
    pool = min(gpu, key=lambda p: (p.gpus_per_node, p.name))
    mode: Literal["device-plugin", "dra"] = (
        "dra" if getattr(pool.pool, "gpu_allocation", "device-plugin") == "dra" else "device-plugin"
    )
    return AutoscalingTarget(pool.name, f"{tags.POOL}={pool.name}", mode, pool.min_nodes, pool.max_nodes)
