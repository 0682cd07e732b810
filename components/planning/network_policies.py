"""The stack's NetworkPolicies (pure, no Pulumi): default-deny ingress in every workload namespace, and the allows
for what must reach in; the monitoring namespace's Prometheus, Alertmanager and Grafana admit only their clients.

Ingress only. A namespace whose pods are selected by an ingress policy refuses every connection no policy allows
([NETPOL]); egress stays open, so pods keep reaching DNS, the API server, S3 and the file systems without an
allow-list of addresses the stack cannot know at plan time (the control plane's ENIs, the site's servers). Traffic
from the node a pod runs on (the kubelet's probes) is always allowed ([NETPOL]). What enforces the policies: the VPC
CNI's network policy agent on EC2 nodes (`components.managed_addons`, `enableNetworkPolicy`) and Cilium on hybrid
nodes (`components.planning.hybrid.cilium`). Why and what each allow is for:
docs/security.md#pod-security-and-networkpolicy.

Another helper's allow (the serving endpoint's clients) is additive: NetworkPolicies are a union, so any policy that
selects a pod and admits a source lets it through the default deny.

Across the two enforcers a selector peer does not match: Cilium knows only the pods it runs (an EC2 pod's address is
outside the cluster to it, [CILIUMCIDR]), and Cilium masquerades a hybrid pod's connection to an EC2 pod to its
server's address ([HYBRIDCNI]), which the VPC CNI cannot map to the pod its selector resolved. So in a namespace
whose pods can run on a hybrid pool, each selector allow gets `ipBlock` peers: the EC2 pods' address ranges (for
Cilium) and, for the namespace's own pods, the hybrid servers' node CIDRs (for the VPC CNI). The cost, an allow that
admits any pod of the VPC or of those servers: docs/security.md#pod-security-and-networkpolicy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.config import NetworkConfig
from components.planning.addons.jobset import CONTROLLER_PODS as JOBSET_CONTROLLER_PODS
from components.planning.addons.jobset import NAMESPACE as JOBSET_NAMESPACE
from components.planning.addons.jobset import WEBHOOK_PORT as JOBSET_WEBHOOK_PORT
from components.planning.addons.keda import KEDA_NAMESPACE
from components.planning.addons.monitoring import MONITORING_NAMESPACE
from components.planning.addons.selection import AddonSelection
from components.planning.hybrid.networks import hybrid_plans, remote_node_cidrs
from components.planning.namespaces import NamespacePlan, workload_namespaces
from components.planning.node_health import LOOP_POD_LABELS, METRICS_PORT, NODE_HEALTH_NAMESPACE
from components.planning.pools import PoolPlan
from components.planning.subnets import pod_address_ranges

#: The label the API server sets on every namespace to its name, which nobody can change ([NETPOL], "Targeting a
#: Namespace by its name").
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: kube-prometheus-stack's pods, as the chart's own Services select them ([KPS] 88.5.3 templates
#: prometheus/service.yaml, alertmanager/service.yaml; the Grafana subchart's service.yaml): the operator labels the
#: Prometheus and Alertmanager pods it creates so. The chart tests check these against the rendered Services.
PROMETHEUS_PODS = {
    "app.kubernetes.io/name": "prometheus",
    "operator.prometheus.io/name": "kube-prometheus-stack-prometheus",
}
ALERTMANAGER_PODS = {"app.kubernetes.io/name": "alertmanager", "alertmanager": "kube-prometheus-stack-alertmanager"}
GRAFANA_PODS = {"app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": "kube-prometheus-stack"}
#: Prometheus's HTTP API port ([KPS] values.yaml `prometheus.service.port`, equal to the container's, as the VPC CNI
#: needs for a port in a policy: [EKSNP] considerations).
PROMETHEUS_PORT = 9090

DEFAULT_DENY = "default-deny-ingress"
SAME_NAMESPACE = "allow-same-namespace"
PROMETHEUS_SCRAPES = "allow-prometheus-scrapes"


@dataclass(frozen=True)
class NetworkPolicyPlan:
    """One `networking.k8s.io/v1` NetworkPolicy: where, its name and its spec."""

    namespace: str
    name: str
    spec: dict[str, Any]


@dataclass(frozen=True)
class CrossCniSources:
    """Where connections between the two pod networks come from, as the enforcer on the far side sees them."""

    #: The hybrid pools, by name: a namespace or workload placed on one gets the `ipBlock` peers.
    hybrid_pools: frozenset[str]
    #: EC2 pods' addresses (`components.planning.subnets.pod_address_ranges`), as Cilium sees them.
    ec2_pods: tuple[str, ...]
    #: The hybrid servers' node CIDRs: a hybrid pod's connection to an EC2 pod, masqueraded, as the VPC CNI sees it.
    hybrid_nodes: tuple[str, ...]

    def reaches(self, pools: Sequence[str]) -> bool:
        """Whether pods placed on these pools can land on a hybrid node."""
        return not self.hybrid_pools.isdisjoint(pools)


def cross_cni_sources(network: NetworkConfig, pools: Sequence[PoolPlan]) -> CrossCniSources | None:
    """The stack's cross-network sources, or None without a hybrid pool (one enforcer, selectors suffice)."""
    hybrid = hybrid_plans(pools)
    if not hybrid:
        return None
    return CrossCniSources(
        hybrid_pools=frozenset(plan.name for plan in hybrid),
        ec2_pods=tuple(pod_address_ranges(network)),
        hybrid_nodes=tuple(remote_node_cidrs(plan.pool for plan in hybrid)),
    )


def ip_blocks(cidrs: Sequence[str]) -> list[dict[str, Any]]:
    """`ipBlock` peers, one per CIDR."""
    return [{"ipBlock": {"cidr": cidr}} for cidr in cidrs]


def _in_namespace(namespace: str, pods: dict[str, str] | None = None) -> dict[str, Any]:
    peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}
    if pods is not None:
        peer["podSelector"] = {"matchLabels": dict(pods)}
    return peer


def _ingress(pods: dict[str, str] | None, rules: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": {"matchLabels": dict(pods)} if pods else {}, "policyTypes": ["Ingress"]}
    if rules:
        spec["ingress"] = rules
    return spec


def workload_policies(
    namespace: str, addons: AddonSelection, across: CrossCniSources | None = None
) -> list[NetworkPolicyPlan]:
    """A workload namespace: nothing comes in but from its own pods (a job's ranks, a client beside its server) and,
    on the Prometheus path, Prometheus's scrapes of the targets its users add there. `across`: the namespace's pods
    can run on a hybrid pool, so its own pods on the other network and Prometheus (on the system pool, EC2) are
    admitted by address too."""
    same: list[dict[str, Any]] = [{"podSelector": {}}]
    scrapes = [_in_namespace(MONITORING_NAMESPACE, PROMETHEUS_PODS)]
    if across is not None:
        same += ip_blocks([*across.ec2_pods, *across.hybrid_nodes])
        scrapes += ip_blocks(across.ec2_pods)
    policies = [
        NetworkPolicyPlan(namespace, DEFAULT_DENY, _ingress(None, [])),
        NetworkPolicyPlan(namespace, SAME_NAMESPACE, _ingress(None, [{"from": same}])),
    ]
    if addons.on("dcgm-prometheus"):
        policies.append(NetworkPolicyPlan(namespace, PROMETHEUS_SCRAPES, _ingress(None, [{"from": scrapes}])))
    return policies


def monitoring_policies(addons: AddonSelection) -> list[NetworkPolicyPlan]:
    """Prometheus, Alertmanager and Grafana admit their clients only: each other and the exporters' scrapes inside
    monitoring, and KEDA's queries to Prometheus. Other pods there (the operator, whose admission webhook the API
    server calls; kube-state-metrics; the exporters) are selected by none and stay reachable."""
    same: dict[str, Any] = {"from": [{"podSelector": {}}]}
    prometheus = [same]
    if addons.on("keda"):
        prometheus.append(
            {"from": [_in_namespace(KEDA_NAMESPACE)], "ports": [{"protocol": "TCP", "port": PROMETHEUS_PORT}]}
        )
    return [
        NetworkPolicyPlan(MONITORING_NAMESPACE, "prometheus-clients", _ingress(PROMETHEUS_PODS, prometheus)),
        NetworkPolicyPlan(MONITORING_NAMESPACE, "alertmanager-clients", _ingress(ALERTMANAGER_PODS, [same])),
        NetworkPolicyPlan(MONITORING_NAMESPACE, "grafana-clients", _ingress(GRAFANA_PODS, [same])),
    ]


def node_health_policies(addons: AddonSelection) -> list[NetworkPolicyPlan]:
    """The health loop's namespace takes no connection but Prometheus's scrape of the loop's metrics port (when the
    Prometheus path runs): the check pods serve nothing."""
    policies = [NetworkPolicyPlan(NODE_HEALTH_NAMESPACE, DEFAULT_DENY, _ingress(None, []))]
    if addons.on("dcgm-prometheus"):
        scrape = {
            "from": [_in_namespace(MONITORING_NAMESPACE, PROMETHEUS_PODS)],
            "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
        }
        policies.append(
            NetworkPolicyPlan(NODE_HEALTH_NAMESPACE, PROMETHEUS_SCRAPES, _ingress(LOOP_POD_LABELS, [scrape]))
        )
    return policies


def jobset_policies() -> list[NetworkPolicyPlan]:
    """The JobSet controller admits its webhook's port only, from any address: the API server calls the webhook
    from the control plane's network interfaces, whose addresses the stack cannot know at plan time. Its metrics
    port stays closed (nothing scrapes it: the chart's `prometheus.enable` is off)."""
    webhook = {"ports": [{"protocol": "TCP", "port": JOBSET_WEBHOOK_PORT}]}
    return [NetworkPolicyPlan(JOBSET_NAMESPACE, "jobset-webhook", _ingress(JOBSET_CONTROLLER_PODS, [webhook]))]


def _namespace_across(namespace: NamespacePlan, across: CrossCniSources | None) -> CrossCniSources | None:
    pools = namespace.quota.pools if namespace.quota is not None else ()
    return across if across is not None and across.reaches(pools) else None


def network_policies(
    namespaces: Sequence[NamespacePlan], addons: AddonSelection, across: CrossCniSources | None = None
) -> list[NetworkPolicyPlan]:
    """Every NetworkPolicy of the stack, by namespace. `across`: the stack's cross-network sources
    (`cross_cni_sources`), applied to the workload namespaces whose pools include a hybrid one."""
    policies = [
        p
        for ns in workload_namespaces(namespaces)
        for p in workload_policies(ns.name, addons, _namespace_across(ns, across))
    ]
    if addons.on("dcgm-prometheus"):
        policies += monitoring_policies(addons)
    if addons.on("node-health"):
        policies += node_health_policies(addons)
    if addons.on("jobset"):
        policies += jobset_policies()
    return policies
