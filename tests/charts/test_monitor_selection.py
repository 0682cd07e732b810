"""Which ServiceMonitors and PodMonitors Prometheus scrapes: the pinned kube-prometheus-stack, rendered with the stack's
values, makes a Prometheus that selects both kinds by the documented monitor label (`POD_MONITOR_LABELS`) in every
namespace, and every monitor the stack creates or its charts render carries it, so none is left unscraped
(components/planning/addons/monitoring.py, `monitor_selectors`; docs/operations.md, "Workload metrics")."""

from __future__ import annotations

from typing import Any

import pytest

from components.planning.addons.monitoring import POD_MONITOR_LABELS
from components.planning.network_policies import NAMESPACE_NAME_LABEL
from tests.charts.conftest import Case
from tests.charts.test_rendered_releases import objects_of, rendered
from tests.charts.test_serving_scrape import prometheus_of, selects

pytestmark = pytest.mark.charts

#: Monitor kind -> the Prometheus spec's (selector, namespace selector) fields for it ([PROMOP] PrometheusSpec).
SELECTORS = {
    "ServiceMonitor": ("serviceMonitorSelector", "serviceMonitorNamespaceSelector"),
    "PodMonitor": ("podMonitorSelector", "podMonitorNamespaceSelector"),
}


def monitors(case: Case) -> list[tuple[str, dict[str, Any]]]:
    """(where it comes from, metadata) of every ServiceMonitor and PodMonitor: the charts' and the stack's own."""
    found = [
        (f"{release.name}: {obj['kind']} {obj['metadata']['name']}", obj)
        for release in rendered(case)
        for obj in objects_of(release)
        if obj["kind"] in SELECTORS
    ]
    for resource in case.resources:
        kind = resource["type"].rsplit(":", 1)[-1]
        if resource["type"].startswith("kubernetes:monitoring.coreos.com/") and kind in SELECTORS:
            found.append((f"plan: {kind} {resource['name']}", {"kind": kind, **resource["inputs"]}))
    return found


def test_every_monitor_of_the_stack_is_selected(case: Case) -> None:
    prometheus = prometheus_of(case)
    found = monitors(case)
    if prometheus is None:
        assert not found, f"{case.name}: monitors without kube-prometheus-stack's Prometheus"
        return
    assert found, f"{case.name}: a Prometheus with nothing to scrape"
    spec = prometheus["spec"]
    for where, monitor in found:
        selector, namespaces = SELECTORS[monitor["kind"]]
        metadata = monitor["metadata"]
        assert selects(spec[selector], metadata.get("labels") or {}), (case.name, where, spec[selector])
        namespace_labels = {NAMESPACE_NAME_LABEL: metadata.get("namespace", "")}
        assert selects(spec[namespaces], namespace_labels), (case.name, where, spec[namespaces])


@pytest.mark.parametrize("kind", sorted(SELECTORS))
def test_a_users_monitor_is_scraped_with_the_documented_label_in_any_namespace_and_only_with_it(
    case: Case, kind: str
) -> None:
    prometheus = prometheus_of(case)
    if prometheus is None:
        return
    selector, namespaces = prometheus["spec"][SELECTORS[kind][0]], prometheus["spec"][SELECTORS[kind][1]]
    assert selector == {"matchLabels": POD_MONITOR_LABELS}
    assert namespaces == {}  # every namespace, a tenant's included
    assert selects(selector, {**POD_MONITOR_LABELS, "app.kubernetes.io/name": "my-model"})
    assert not selects(selector, {"app.kubernetes.io/name": "my-model"})
    assert selects(namespaces, {NAMESPACE_NAME_LABEL: "team-a"})
