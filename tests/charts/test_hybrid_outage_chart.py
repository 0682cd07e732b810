"""cluster-autoscaler's readiness gate as the pinned chart (cluster-autoscaler-9.59.0) renders it into the container's
arguments: raised by the servers of the shipped hybrid stack and of a larger site, absent without servers.
Marked `charts`: CI runs them in their own step (docs/charts.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.plan.runner import stack_file
from tests.builders import releases, stack_run
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import Release, containers, objects, pod_spec, render_text

pytestmark = pytest.mark.charts

CA = "cluster-autoscaler"


def autoscaler_args(release: Release) -> list[str]:
    """The container's command line (the chart passes every flag in `command`, after `./cluster-autoscaler`)."""
    (deployment,) = [o for o in objects(render_text(release)) if o["kind"] == "Deployment"]
    spec = pod_spec(deployment)
    assert spec is not None
    (container,) = containers(spec)
    args: list[str] = container["command"]
    return args


def ca_release(stack: str, tmp: Path) -> Release:
    return next(r for r in planned_case(stack, tmp).releases if r.name == CA)


def large_site_values(tmp: Path) -> dict[str, Any]:
    """The values the hybrid stack gives the chart with 12 servers (the runbook's larger site)."""
    config = yaml.safe_load(stack_file("hybrid").read_text())["config"]
    next(p for p in config["gpu-clusters:nodePools"] if p["name"] == "a40")["nodes"] = 12
    path = tmp / "Pulumi.hybrid-12.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    values: dict[str, Any] = releases(stack_run(config_file=path).run)[CA]["values"]
    return values


def test_the_chart_passes_the_raised_gate_to_cluster_autoscaler(tmp_path: Path) -> None:
    require_charts()
    shipped = ca_release("hybrid", tmp_path)
    assert shipped.chart_dir == "cluster-autoscaler-9.59.0"
    args = autoscaler_args(shipped)
    assert "--ok-total-unready-count=7" in args
    assert "--max-total-unready-percentage=45" in args
    large = dataclasses.replace(shipped, values=large_site_values(tmp_path))
    assert "--ok-total-unready-count=15" in autoscaler_args(large)


def test_without_servers_the_chart_leaves_the_defaults(tmp_path: Path) -> None:
    require_charts()
    args = autoscaler_args(ca_release("training", tmp_path))
    assert not any(a.startswith(("--ok-total-unready-count", "--max-total-unready-percentage")) for a in args)
