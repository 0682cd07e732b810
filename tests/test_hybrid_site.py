"""The on-prem site section of the plan: Prometheus's paths through the site firewall and how each hybrid pool's
pod blocks are routed, with a warning where a rejoin leaves a static route stale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blueprint.plan.summary import summarize
from components.planning.addons.monitoring import EKS_HIDDEN_COMPONENTS
from components.planning.hybrid.site import pod_routes, scrape_paths, site_summary, static_route_warnings
from components.planning.serving import METRICS_PORT
from components.planning.stack_plan import plan_pools, plan_stack
from tests.builders import A40, SYSTEM, shipped_plan, stack_config

BGP = {"peerAddress": "192.168.100.1", "peerAsn": 65000, "localAsn": 65010}


def spec(*pools: dict[str, Any], prometheus: bool = True) -> Any:
    monitoring = {"containerInsights": False, "dcgmPrometheus": prometheus}
    return stack_config(SYSTEM, *pools, name="gpu", addons={"monitoring": monitoring}, validated=True)


def with_bgp(pool: dict[str, Any]) -> dict[str, Any]:
    return {**pool, "network": {**pool["network"], "bgp": BGP}}


def test_static_routes_are_reported_stale_after_a_rejoin_and_bgp_routes_are_not() -> None:
    static = plan_pools(spec(A40))[-1]
    bgp = plan_pools(spec(with_bgp(A40)))[-1]
    assert pod_routes(static)["mode"] == "static"
    assert pod_routes(static)["validAcrossRejoins"] is False
    assert pod_routes(bgp)["mode"] == "bgp"
    assert pod_routes(bgp)["validAcrossRejoins"] is True
    assert pod_routes(bgp)["peer"] == {"address": "192.168.100.1", "asn": 65000, "localAsn": 65010}
    assert pod_routes(bgp)["blocks"] == 128  # a /18 in /25s


def test_plan_warns_for_each_static_routed_pool_only() -> None:
    l40s = {**with_bgp(A40), "name": "l40s", "gpuModel": "L40S"}
    l40s["network"] = {**l40s["network"], "remoteNodeCidrs": ["192.168.200.0/24"], "remotePodCidrs": ["10.64.0.0/18"]}
    found = static_route_warnings(plan_pools(spec(A40, l40s)))
    assert len(found) == 1
    assert found[0].startswith("hybrid pool a40 has no network.bgp")
    warnings = summarize(plan_stack(spec(A40)))["warnings"]
    assert any(w.startswith("hybrid pool a40 has no network.bgp") for w in warnings)
    assert not any("no network.bgp" in w for w in summarize(plan_stack(spec(with_bgp(A40))))["warnings"])


def test_kube_proxy_stays_scraped_and_its_port_is_a_site_path() -> None:
    # The explicit choice: not dropped with the components EKS hides, so the servers' 10249 must be open.
    assert "kubeProxy" not in EKS_HIDDEN_COMPONENTS
    ports = {(p.target, p.to, p.port) for p in scrape_paths(plan_pools(spec(A40)), prometheus=True, serving_metrics={})}
    assert ("kube-proxy", "servers", 10249) in ports
    assert ("node-exporter", "servers", 9100) in ports
    assert ("kubelet and cAdvisor", "servers", 10250) in ports
    assert ("DCGM exporter", "pod CIDRs", 9400) in ports


def test_a_serving_workload_on_the_servers_is_a_site_path_on_its_metrics_port() -> None:
    # The queue rule reads vLLM's own metrics: Prometheus in the VPC scrapes the on-prem replicas' pods.
    paths = scrape_paths(plan_pools(spec(A40)), prometheus=True, serving_metrics={"a40": METRICS_PORT})
    assert ("vLLM servers", "pod CIDRs", METRICS_PORT) in {(p.target, p.to, p.port) for p in paths}
    elsewhere = scrape_paths(plan_pools(spec(A40)), prometheus=True, serving_metrics={"l40s": METRICS_PORT})
    assert "vLLM servers" not in {p.target for p in elsewhere}


@pytest.mark.program
def test_the_shipped_hybrid_plan_opens_the_vllm_port_to_prometheus() -> None:
    (chat,) = [
        p for p in shipped_plan("hybrid")["summary"]["hybridSite"]["scrapePaths"] if p["target"] == "vLLM servers"
    ]
    assert (chat["to"], chat["port"]) == ("pod CIDRs", METRICS_PORT)


def test_no_scrape_paths_without_prometheus_or_hybrid_pools() -> None:
    assert scrape_paths(plan_pools(spec(A40, prometheus=False)), prometheus=False, serving_metrics={}) == []
    assert site_summary(plan_pools(spec()), prometheus=True, serving_metrics={}) == {}


def test_plan_summary_prints_the_site_section() -> None:
    site = summarize(plan_stack(spec(A40)))["hybridSite"]
    assert [r["pool"] for r in site["podRoutes"]] == ["a40"]
    assert {p["port"] for p in site["scrapePaths"]} == {9153, 9100, 9400, 10249, 10250}


OPERATIONS = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def test_site_firewall_table_in_the_runbook_lists_every_scrape_port() -> None:
    """The site team works from the runbook's table: every port of the plan's scrape paths is in its Prometheus row."""
    [row] = [
        line for line in OPERATIONS.read_text().splitlines() if line.startswith("  | Prometheus on the system pool")
    ]
    for path in scrape_paths(plan_pools(spec(A40)), prometheus=True, serving_metrics={"a40": METRICS_PORT}):
        assert str(path.port) in row, f"{path.target} ({path.port}) missing from the firewall table"


def test_runbook_has_the_day_two_procedures_for_servers() -> None:
    headings = {line.lstrip("#").strip() for line in OPERATIONS.read_text().splitlines() if line.startswith("####")}
    for heading in (
        "Site-link outages",
        "Rebooting a server",
        "Upgrading the servers",
        "Rejoining a server",
        "Removing a server",
    ):
        assert heading in headings
    text = OPERATIONS.read_text()
    assert "activationRevision" in text and "nodeadm uninstall" in text and "kubectl delete node" in text
