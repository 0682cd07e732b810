"""Rules on GPU metrics: one DCGM exporter per GPU node."""

from __future__ import annotations

from collections.abc import Iterator

from components.errors import Problem
from components.validation.parse import Parsed


def one_dcgm_exporter_per_node(p: Parsed) -> Iterator[Problem]:
    """Container Insights and the Prometheus path each run a DCGM exporter on every NVIDIA node: the
    `amazon-cloudwatch-observability` add-on ships its own, on by default and pinned to every NVIDIA instance type
    (aws-observability/helm-charts @71a298ff, charts/amazon-cloudwatch-observability 6.4.0, values.yaml
    `dcgmExporter`, templates/linux/dcgm-exporter-daemonset.yaml), and `dcgmPrometheus` installs NVIDIA's
    dcgm-exporter chart. Two exporters would read the same GPUs twice and publish two sets of series; pick one."""
    monitoring = p.addons.monitoring if p.addons else None
    if monitoring is not None and monitoring.dcgm_prometheus and monitoring.container_insights:
        yield Problem(
            "addons.monitoring.dcgmPrometheus",
            "Container Insights (containerInsights, on by default) already runs a DCGM exporter on every NVIDIA "
            "node (amazon-cloudwatch-observability add-on); set containerInsights: false to use the "
            "Prometheus path, or leave dcgmPrometheus off",
        )


RULES = (one_dcgm_exporter_per_node,)
