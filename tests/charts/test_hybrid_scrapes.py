"""Every scrape kube-prometheus-stack renders for targets on hybrid nodes has its port in the on-prem firewall table
the plan prints (`components.planning.hybrid.site.scrape_paths`), so no `TargetDown` fires for every server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.planning.hybrid.site import scrape_paths
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import objects, render_text

pytestmark = pytest.mark.charts


def _rendered(tmp_path: Path, release_name: str) -> list[dict[str, Any]]:
    require_charts()
    case = planned_case("hybrid", tmp_path)
    [release] = [r for r in case.releases if r.name == release_name]
    return objects(render_text(release, release.values))


def _ports(tmp_path: Path) -> dict[str, int]:
    case = planned_case("hybrid", tmp_path)
    return {path.target: path.port for path in scrape_paths(case.pools, prometheus=True, serving_metrics={})}


def test_kube_proxy_scrape_is_kept_and_its_port_is_in_the_firewall_table(tmp_path: Path) -> None:
    """The choice made explicit: kube-proxy runs on the servers (EKS installs it on hybrid nodes) and the chart keeps
    scraping it, so its metrics port is a firewall path rather than an unreachable target."""
    rendered = _rendered(tmp_path, "kube-prometheus-stack")
    [service] = [o for o in rendered if o["kind"] == "Service" and o["metadata"]["name"].endswith("-kube-proxy")]
    assert any(o["kind"] == "ServiceMonitor" and o["metadata"]["name"].endswith("-kube-proxy") for o in rendered)
    assert {p["port"] for p in service["spec"]["ports"]} == {_ports(tmp_path)["kube-proxy"]}


def test_node_level_scrapes_reach_the_servers_through_listed_ports(tmp_path: Path) -> None:
    rendered = _rendered(tmp_path, "kube-prometheus-stack")
    ports = _ports(tmp_path)
    [exporter] = [o for o in rendered if o["kind"] == "DaemonSet" and "node-exporter" in o["metadata"]["name"]]
    spec = exporter["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True  # so the servers' own address and port, not the pod CIDRs
    container_ports = {p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])}
    assert ports["node-exporter"] in container_ports
    [coredns] = [o for o in rendered if o["kind"] == "Service" and o["metadata"]["name"].endswith("-coredns")]
    assert {p["port"] for p in coredns["spec"]["ports"]} == {ports["CoreDNS (on-prem replica)"]}
    kubelet = [o for o in rendered if o["kind"] == "ServiceMonitor" and o["metadata"]["name"].endswith("-kubelet")]
    assert kubelet and all(e.get("scheme") == "https" for e in kubelet[0]["spec"]["endpoints"])
    assert ports["kubelet and cAdvisor"] == 10250  # the kubelet's port, which the operator's kubelet Service names


def test_dcgm_exporter_port_is_in_the_firewall_table(tmp_path: Path) -> None:
    rendered = _rendered(tmp_path, "dcgm-exporter")
    [service] = [o for o in rendered if o["kind"] == "Service"]
    assert {p["port"] for p in service["spec"]["ports"]} == {_ports(tmp_path)["DCGM exporter"]}
