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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.planning.addons.keda import KEDA_NAMESPACE
from components.planning.addons.monitoring import MONITORING_NAMESPACE
from components.planning.addons.selection import AddonSelection
from components.planning.namespaces import NamespacePlan, workload_namespaces

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


def workload_policies(namespace: str, addons: AddonSelection) -> list[NetworkPolicyPlan]:
    """A workload namespace: nothing comes in but from its own pods (a job's ranks, a client beside its server) and,
    on the Prometheus path, Prometheus's scrapes of the targets its users add there."""
    policies = [
        NetworkPolicyPlan(namespace, DEFAULT_DENY, _ingress(None, [])),
        NetworkPolicyPlan(namespace, SAME_NAMESPACE, _ingress(None, [{"from": [{"podSelector": {}}]}])),
    ]
    if addons.on("dcgm-prometheus"):
        scrapes = [{"from": [_in_namespace(MONITORING_NAMESPACE, PROMETHEUS_PODS)]}]
        policies.append(NetworkPolicyPlan(namespace, PROMETHEUS_SCRAPES, _ingress(None, scrapes)))
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


def network_policies(namespaces: Sequence[NamespacePlan], addons: AddonSelection) -> list[NetworkPolicyPlan]:
    """Every NetworkPolicy of the stack, by namespace."""
    policies = [p for ns in workload_namespaces(namespaces) for p in workload_policies(ns.name, addons)]
    if addons.on("dcgm-prometheus"):
        policies += monitoring_policies(addons)
    return policies
