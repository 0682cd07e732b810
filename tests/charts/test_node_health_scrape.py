"""What kube-prometheus-stack renders for node health: kube-state-metrics exports the health state label on
`kube_node_labels` (its `--metric-labels-allowlist` argument), and Prometheus selects the health loop's PodMonitor
by the release label it gives every PodMonitor the stack creates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components import tags
from components.planning.addons.monitoring import POD_MONITOR_LABELS
from components.planning.addons.node_monitoring import health_loop_pod_monitor
from components.planning.node_health import HEALTH_STATE_LABEL
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import objects, render_text

pytestmark = pytest.mark.charts


def _rendered(tmp_path: Path) -> list[dict[str, Any]]:
    require_charts()
    case = planned_case("inference", tmp_path)
    [release] = [r for r in case.releases if r.name == "kube-prometheus-stack"]
    return objects(render_text(release, release.values))


def test_kube_state_metrics_is_told_to_export_the_health_state_label(tmp_path: Path) -> None:
    rendered = _rendered(tmp_path)
    [ksm] = [o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("kube-state-metrics")]
    [container] = ksm["spec"]["template"]["spec"]["containers"]
    allowlists = [a for a in container["args"] if a.startswith("--metric-labels-allowlist=")]
    assert allowlists == [f"--metric-labels-allowlist=nodes=[{tags.POOL},{tags.ROLE},{HEALTH_STATE_LABEL}]"]


def test_prometheus_selects_the_health_loops_pod_monitor(tmp_path: Path) -> None:
    [prometheus] = [o for o in _rendered(tmp_path) if o["kind"] == "Prometheus"]
    spec = prometheus["spec"]
    labels = health_loop_pod_monitor("monitoring", POD_MONITOR_LABELS)["metadata"]["labels"]
    selector = spec["podMonitorSelector"]["matchLabels"]
    assert selector and selector.items() <= labels.items()
    # an absent namespace selector would limit them to Prometheus's own namespace ([PROMOP])
    assert spec["podMonitorNamespaceSelector"] == {}
