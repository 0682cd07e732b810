"""The serving workloads' PodMonitors are scraped: the pinned kube-prometheus-stack, rendered with the stack's values,
makes a Prometheus whose PodMonitor selectors match each PodMonitor's labels and namespace, and whose role lets it
discover and scrape pods in that namespace (components/planning/addons/monitoring.py, `POD_MONITOR_LABELS`)."""

from __future__ import annotations

from typing import Any

import pytest

from components.planning.addons.monitoring import KUBE_PROMETHEUS_STACK_RELEASE
from components.planning.network_policies import NAMESPACE_NAME_LABEL
from tests.charts.conftest import Case
from tests.charts.test_rendered_releases import objects_of, rendered

pytestmark = pytest.mark.charts

POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector: every `matchLabels` pair present, every `matchExpressions` entry holds; `{}`
    selects everything."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        value, operator, values = labels.get(expression["key"]), expression["operator"], expression.get("values", [])
        holds = {
            "In": value in values,
            "NotIn": value not in values,
            "Exists": value is not None,
            "DoesNotExist": value is None,
        }[operator]
        if not holds:
            return False
    return True


def prometheus_of(case: Case) -> dict[str, Any] | None:
    found = [
        obj
        for release in rendered(case)
        if release.name == KUBE_PROMETHEUS_STACK_RELEASE
        for obj in objects_of(release)
        if obj["kind"] == "Prometheus"
    ]
    return found[0] if found else None


def test_prometheus_selects_every_serving_pod_monitor(case: Case) -> None:
    monitors = [r["inputs"] for r in case.resources if r["type"] == POD_MONITOR]
    prometheus = prometheus_of(case)
    if not monitors:
        return
    assert prometheus is not None, f"{case.name}: PodMonitors without kube-prometheus-stack's Prometheus"
    spec = prometheus["spec"]
    for monitor in monitors:
        meta = monitor["metadata"]
        namespace_labels = {NAMESPACE_NAME_LABEL: meta["namespace"]}
        assert selects(spec["podMonitorSelector"], meta["labels"]), (case.name, spec["podMonitorSelector"])
        assert selects(spec["podMonitorNamespaceSelector"], namespace_labels), spec["podMonitorNamespaceSelector"]


def test_the_chart_default_selects_only_the_release_label(case: Case) -> None:
    """The control: the selector is the chart's `release` label (nil selector, `podMonitorSelectorNilUsesHelmValues`
    true), so a PodMonitor without it would not be scraped."""
    prometheus = prometheus_of(case)
    if prometheus is None:
        return
    assert prometheus["spec"]["podMonitorSelector"] == {"matchLabels": {"release": KUBE_PROMETHEUS_STACK_RELEASE}}
    assert not selects(prometheus["spec"]["podMonitorSelector"], {"app.kubernetes.io/name": "chat"})


def test_prometheus_may_discover_pods_in_every_namespace(case: Case) -> None:
    """Kubernetes service discovery of pods needs list/watch on pods; the chart grants it cluster-wide."""
    prometheus = prometheus_of(case)
    if prometheus is None:
        return
    roles = [
        obj
        for release in rendered(case)
        if release.name == KUBE_PROMETHEUS_STACK_RELEASE
        for obj in objects_of(release)
        if obj["kind"] == "ClusterRole" and obj["metadata"]["name"].endswith("-prometheus")
    ]
    assert roles, f"{case.name}: no Prometheus ClusterRole"
    verbs = {
        verb
        for role in roles
        for rule in role.get("rules") or []
        if "pods" in rule.get("resources", []) and "" in rule.get("apiGroups", [""])
        for verb in rule.get("verbs", [])
    }
    assert {"get", "list", "watch"} <= verbs
