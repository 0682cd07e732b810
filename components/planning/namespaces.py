"""Every namespace the stack creates or installs into, with its Pod Security level (pure, no Pulumi).

Planned once from the stack's config, pools and add-on selection: the workload namespaces (the claim namespaces of
the file systems, where the serving workloads run too, and the team namespaces: components.planning.tenants) at
`restricted`, each add-on's namespace at the lowest level
its pods meet (the chart tests render every pod and hold it to its namespace's level), `privileged` only where a
pod needs the host, with the reason. `components.namespaces` creates them with their labels before anything is
installed into them. The list and the reasons: docs/security.md#pod-security-and-networkpolicy.

Labels ([PSA]): `pod-security.kubernetes.io/<mode>` with mode `enforce` (pods beyond the level are refused),
`audit` (recorded in the audit log) or `warn` (the client is warned, for workload objects too), each with a
`<mode>-version` pinning the Pod Security Standards to the cluster's Kubernetes minor version, so an upgrade of the
control plane does not change what is admitted until the stack's version moves with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from components.config import StackConfig
from components.planning.addons.envoy_gateway import NAMESPACE as ENVOY_GATEWAY_NAMESPACE
from components.planning.addons.jobset import NAMESPACE as JOBSET_NAMESPACE
from components.planning.addons.keda import KEDA_NAMESPACE
from components.planning.addons.mig_manager import NAMESPACE as MIG_MANAGER_NAMESPACE
from components.planning.addons.monitoring import (
    CLOUDWATCH_NAMESPACE,
    DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE,
    MONITORING_NAMESPACE,
)
from components.planning.addons.node_health import NAMESPACE as NODE_HEALTH_NAMESPACE
from components.planning.addons.placement import KUBE_SYSTEM
from components.planning.addons.selection import AddonSelection
from components.planning.gpu_quotas import GpuQuota, gpu_quotas
from components.planning.gpu_runtime import runtime_class_plans
from components.planning.pools import PoolPlan
from components.planning.training_platform import KUEUE_NAMESPACE

Level = Literal["privileged", "baseline", "restricted"]
#: How the namespace gets its labels: `created` by the stack with them; `patched` onto a namespace Kubernetes
#: creates itself (`default`); `unlabelled`: owned by Kubernetes or an EKS add-on and left at the cluster's default.
Ownership = Literal["created", "patched", "unlabelled"]

PSA_PREFIX = "pod-security.kubernetes.io"
PSA_MODES = ("enforce", "audit", "warn")
#: What `audit` records everywhere: anything beyond `restricted`, so the audit log shows every exception.
AUDIT_LEVEL: Level = "restricted"
#: Namespaces Kubernetes creates itself ([PSA]: kube-system, kube-public, kube-node-lease and default exist on every
#: cluster). Workloads go into a namespace of their own; `default` is the only one the stack labels.
KUBERNETES_NAMESPACES = frozenset({"default", KUBE_SYSTEM, "kube-public", "kube-node-lease"})
#: Namespaces the add-ons use: no workload (claim) namespace may be one of them.
ADDON_NAMESPACES = frozenset(
    {
        KEDA_NAMESPACE,
        JOBSET_NAMESPACE,
        ENVOY_GATEWAY_NAMESPACE,
        MONITORING_NAMESPACE,
        DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE,
        MIG_MANAGER_NAMESPACE,
        CLOUDWATCH_NAMESPACE,
        KUEUE_NAMESPACE,
        NODE_HEALTH_NAMESPACE,
    }
)

KUBE_SYSTEM_REASON = (
    "Kubernetes' own namespace, which the stack does not label: without a label Pod Security Admission applies the "
    "cluster's default, and EKS sets none, so it is privileged ([EKSPSA]). It holds what needs the host: the VPC "
    "CNI (aws-node), kube-proxy, the Pod Identity agent, the NVIDIA and EFA device plugins (the kubelet's "
    "device-plugin socket, hostPath), the EBS, FSx and NFS CSI node plugins (mounts for the kubelet), the node "
    "termination handler, cluster-autoscaler and, on hybrid nodes, Cilium (the node's network)"
)
MONITORING_REASON = (
    "node-exporter (kube-prometheus-stack) reads the host through its network and PID namespaces and its root "
    "filesystem (hostPath /); the DCGM exporter reads the GPUs through the kubelet's pod-resources socket (hostPath) "
    "and adds SYS_ADMIN for profiling counters"
)
DCGM_RUNTIME_CLASS_REASON = (
    "the DCGM exporter of the hybrid pools on the nvidia RuntimeClass: the kubelet's pod-resources socket "
    "(hostPath) and SYS_ADMIN, as in monitoring"
)
MIG_MANAGER_REASON = (
    "mig-manager repartitions the GPUs of MIG pools: a privileged container in the host's PID and IPC namespaces "
    "with the host's / and /sys (hostPath)"
)
NODE_HEALTH_REASON = (
    "the health loop's check pods run NVIDIA's DCGM diagnostic, which adds the SYS_ADMIN capability that baseline "
    "refuses ([PSS]); they are root in the DCGM image, ask for every GPU and EFA device of the node they check, "
    "and mount nothing of the host. The loop itself meets restricted"
)
CLOUDWATCH_REASON = (
    "created and owned by the amazon-cloudwatch-observability EKS add-on, which the stack does not label: the "
    "cluster's default applies, privileged ([EKSPSA]). The CloudWatch agent and Fluent Bit read the host (hostPath "
    "/, /var/log, /sys, the container runtime's socket)"
)


@dataclass(frozen=True)
class NamespacePlan:
    """One namespace: its Pod Security level, why it is above `restricted`, how it gets its labels, and, for a
    workload namespace, its GPU quota."""

    name: str
    level: Level
    reason: str | None
    ownership: Ownership
    #: A tenant's namespace (a file system's claim namespace or a team namespace): default-deny ingress and a GPU
    #: quota.
    workload: bool = False
    quota: GpuQuota | None = None

    @property
    def labelled(self) -> bool:
        return self.ownership != "unlabelled"


def pod_security_labels(level: Level, kubernetes_version: str) -> dict[str, str]:
    """The namespace labels: `enforce` and `warn` at the namespace's level, `audit` at `restricted`, each pinned to
    the cluster's Kubernetes minor version (`v1.35`)."""
    version = f"v{kubernetes_version}"
    levels: dict[str, Level] = {"enforce": level, "audit": AUDIT_LEVEL, "warn": level}
    labels: dict[str, str] = {}
    for mode in PSA_MODES:
        labels[f"{PSA_PREFIX}/{mode}"] = levels[mode]
        labels[f"{PSA_PREFIX}/{mode}-version"] = version
    return labels


def plan_namespaces(spec: StackConfig, plans: Sequence[PoolPlan], addons: AddonSelection) -> list[NamespacePlan]:
    """The stack's namespaces: kube-system first, then the add-ons' and the workload namespaces by name."""
    planned = [NamespacePlan(KUBE_SYSTEM, "privileged", KUBE_SYSTEM_REASON, "unlabelled")]
    if addons.on("keda"):
        # Every KEDA pod runs as non-root with all capabilities dropped, no privilege escalation and the runtime's
        # seccomp profile ([KEDA] chart 2.20.2 values `podSecurityContext`, `securityContext`; the chart tests check).
        planned.append(NamespacePlan(KEDA_NAMESPACE, "restricted", None, "created"))
    if addons.on("kueue"):
        # Kueue's controller runs as non-root with all capabilities dropped, no privilege escalation, a read-only
        # root filesystem and the runtime's seccomp profile ([KUEUE] chart 0.19.2 values
        # `controllerManager.manager.podSecurityContext` / `containerSecurityContext`; the chart tests check).
        planned.append(NamespacePlan(KUEUE_NAMESPACE, "restricted", None, "created"))
    if addons.on("jobset"):
        # The controller runs as non-root with every capability dropped, no privilege escalation, a read-only root
        # filesystem and the runtime's seccomp profile ([JOBSET] chart 0.12.0 values `controller.securityContext`,
        # `controller.podSecurityContext`; the chart tests check).
        planned.append(NamespacePlan(JOBSET_NAMESPACE, "restricted", None, "created"))
    if addons.on("envoy-gateway"):
        # The controller, its certificate Job and the Envoy proxies it creates run as non-root with every capability
        # dropped, no privilege escalation and the runtime's seccomp profile (components.planning.addons.envoy_gateway;
        # the chart tests check the chart's pods).
        planned.append(NamespacePlan(ENVOY_GATEWAY_NAMESPACE, "restricted", None, "created"))
    if addons.on("dcgm-prometheus"):
        planned.append(NamespacePlan(MONITORING_NAMESPACE, "privileged", MONITORING_REASON, "created"))
        if runtime_class_plans(plans):
            planned.append(
                NamespacePlan(DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE, "privileged", DCGM_RUNTIME_CLASS_REASON, "created")
            )
    if addons.on("container-insights"):
        planned.append(NamespacePlan(CLOUDWATCH_NAMESPACE, "privileged", CLOUDWATCH_REASON, "unlabelled"))
    if addons.on("node-health"):
        planned.append(NamespacePlan(NODE_HEALTH_NAMESPACE, "privileged", NODE_HEALTH_REASON, "created"))
    if addons.on("mig-manager"):
        planned.append(NamespacePlan(MIG_MANAGER_NAMESPACE, "privileged", MIG_MANAGER_REASON, "created"))
    for quota in gpu_quotas(spec.storage, spec.workloads, plans):
        ownership: Ownership = "patched" if quota.namespace in KUBERNETES_NAMESPACES else "created"
        planned.append(NamespacePlan(quota.namespace, "restricted", None, ownership, workload=True, quota=quota))
    return [planned[0], *sorted(planned[1:], key=lambda n: n.name)]


def workload_namespaces(namespaces: Sequence[NamespacePlan]) -> list[NamespacePlan]:
    return [n for n in namespaces if n.workload]
