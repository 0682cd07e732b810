"""What the site network must carry for hybrid pools besides the join itself: the paths the cluster's Prometheus
scrapes on the servers, and how each server's pod block is routed (pure, no Pulumi).

Invariant: every scrape the plan deploys onto hybrid nodes has a path here, so none is left for `TargetDown` to
find. The site team's full table: docs/operations.md#1-network-and-firewall-site-network-team; rejoins:
docs/operations.md#rejoining-a-server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from components.planning.hybrid.cilium import CILIUM_NODE_MASK_SIZE, cilium_node_blocks
from components.planning.hybrid.networks import KUBELET_PORT, hybrid_plans
from components.planning.pools import PoolPlan

#: prometheus-node-exporter listens on the host network, port 9100 ([KPS] kube-prometheus-stack-88.5.3
#: charts/prometheus-node-exporter/values.yaml `hostNetwork: true`, `service.port: 9100`).
NODE_EXPORTER_PORT = 9100
#: kube-proxy's metrics port, on the host network (the chart's `kubeProxy.service.port: 10249`, [KPS] values.yaml).
KUBE_PROXY_METRICS_PORT = 10249
#: The DCGM exporter serves on its pod address, port 9400 (NVIDIA dcgm-exporter chart 4.8.2 values.yaml
#: `hostNetwork: false`, `service.port: 9400`).
DCGM_EXPORTER_PORT = 9400
#: CoreDNS's metrics port, on the on-prem replica's pod address (the chart's `coreDns.service.port: 9153`).
COREDNS_METRICS_PORT = 9153


@dataclass(frozen=True)
class ScrapePath:
    """One scrape Prometheus (on the system pool, so from the VPC CIDR) makes of the servers or their pods: the
    site firewall must admit it, or kube-prometheus-stack's `TargetDown` fires for every server."""

    target: str
    to: Literal["servers", "pod CIDRs"]
    port: int
    why: str


def scrape_paths(plans: Sequence[PoolPlan], prometheus: bool, serving_metrics: Mapping[str, int]) -> list[ScrapePath]:
    """The scrapes that reach hybrid nodes when kube-prometheus-stack runs (`dcgmPrometheus`), in port order.

    kube-prometheus-stack's chart scrapes every node's node-exporter, kubelet (HTTPS 10250, cAdvisor included) and
    kube-proxy (`kubeProxy.enabled`, default true, and the stack keeps it: EKS installs kube-proxy on hybrid nodes
    too), and CoreDNS pods (`coreDns.enabled`): one replica runs on-prem. The DCGM exporter runs on every GPU node.
    Choosing to keep kube-proxy's scrape on the servers means its port is in this list, so in the table the plan
    prints. A serving workload on a hybrid pool (`serving_metrics`: each serving pool's metrics port,
    `planning.serving.METRICS_PORT`) is scraped there by its PodMonitor: the input of its autoscaler's queue rule.
    """
    if not prometheus or not hybrid_plans(plans):
        return []
    paths = [
        ScrapePath("CoreDNS (on-prem replica)", "pod CIDRs", COREDNS_METRICS_PORT, "kube-prometheus-stack coreDns"),
        ScrapePath("node-exporter", "servers", NODE_EXPORTER_PORT, "host network; node alerts and dashboards"),
        ScrapePath("DCGM exporter", "pod CIDRs", DCGM_EXPORTER_PORT, "GPU alerts, dashboards, gpu-utilization rule"),
        ScrapePath("kube-proxy", "servers", KUBE_PROXY_METRICS_PORT, "host network; kube-prometheus-stack kubeProxy"),
        ScrapePath("kubelet and cAdvisor", "servers", KUBELET_PORT, "HTTPS; container metrics"),
    ]
    for port in sorted({serving_metrics[p.name] for p in hybrid_plans(plans) if p.name in serving_metrics}):
        paths.append(ScrapePath("vLLM servers", "pod CIDRs", port, "PodMonitor; the serving autoscaler's queue rule"))
    return sorted(paths, key=lambda path: path.port)


def pod_routes(plan: PoolPlan) -> dict[str, Any]:
    """How the site reaches one hybrid pool's pod blocks, and whether that survives a rejoin.

    A server that leaves with `nodeadm uninstall` is deregistered from SSM and rejoins as a new managed instance,
    so a new Node and a new CiliumNode, and Cilium's cluster-pool IPAM gives that new node a block of its own (the
    operator allocates per CiliumNode, [SSMDEREG]: Cilium docs "Cluster Scope IPAM"). With BGP the server
    advertises whichever block it holds and the router follows; a static route keeps pointing at the old block.
    """
    network = plan.pool.network
    cidrs = [str(c) for c in network.remote_pod_cidrs] if network is not None else []
    routes: dict[str, Any] = {
        "pool": plan.name,
        "podCidrs": cidrs,
        "blockPrefix": CILIUM_NODE_MASK_SIZE,
        "blocks": cilium_node_blocks(cidrs),
    }
    bgp = network.bgp if network is not None else None
    if bgp is not None:
        return routes | {
            "mode": "bgp",
            "peer": {"address": str(bgp.peer_address), "asn": bgp.peer_asn, "localAsn": bgp.local_asn},
            "validAcrossRejoins": True,
        }
    return routes | {"mode": "static", "validAcrossRejoins": False}


def static_route_warnings(plans: Sequence[PoolPlan]) -> list[str]:
    """A warning per hybrid pool routed by static routes: the route for a server that rejoins goes stale."""
    return [
        f"hybrid pool {plan.name} has no network.bgp: the site's static route for a server's pod block goes stale "
        "when the server rejoins (it gets a new block), and the control plane's webhook calls and Prometheus's "
        f"scrapes of its pods fail silently; set network.bgp on the pool, or re-read the routes after every rejoin "
        "(docs/operations.md, 'Rejoining a server')"
        for plan in hybrid_plans(plans)
        if pod_routes(plan)["mode"] == "static"
    ]


def site_summary(plans: Sequence[PoolPlan], prometheus: bool, serving_metrics: Mapping[str, int]) -> dict[str, Any]:
    """The plan's on-prem site section: the scrape paths for the firewall table and each pool's pod routes."""
    if not hybrid_plans(plans):
        return {}
    return {
        "scrapePaths": [asdict(path) for path in scrape_paths(plans, prometheus, serving_metrics)],
        "podRoutes": [pod_routes(plan) for plan in hybrid_plans(plans)],
    }
