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
    if _monitoring_damaged(p):
        return
    monitoring = p.addons.monitoring if p.addons else None
    if monitoring is not None and monitoring.dcgm_prometheus and monitoring.container_insights:
        yield Problem(
            "addons.monitoring.dcgmPrometheus",
            "Container Insights (containerInsights, on by default) already runs a DCGM exporter on every NVIDIA "
            "node (amazon-cloudwatch-observability add-on); set containerInsights: false to use the "
            "Prometheus path, or leave dcgmPrometheus off",
        )


def on_prem_gpus_are_monitored(p: Parsed) -> Iterator[Problem]:
    """Hybrid pools are monitored on the Prometheus path only. Container Insights cannot see them: the
    add-on's DCGM exporter is scheduled by NVIDIA EC2 instance type (the same values.yaml `dcgmExporter` and
    daemonset template as above), which an on-prem server has none of, and its CloudWatch agent needs
    `RUN_WITH_IRSA=True` and no node-level metrics on hybrid nodes ([EKSUG] hybrid-nodes-add-ons, "CloudWatch
    Observability agent"). So a stack with hybrid GPU pools sets `dcgmPrometheus: true` and `containerInsights:
    false`, whose exporter and XID, temperature and idle rules cover every GPU node, on-prem included (a stack
    with CPU-only hybrid pools sets at least `containerInsights: false`, keeping the agent off them)."""
    if _monitoring_damaged(p):
        return
    monitoring = p.addons.monitoring if p.addons else None
    if monitoring is not None and not monitoring.container_insights:
        return
    for index, pool in p.pools:
        if pool.kind == "hybrid":
            yield Problem(
                "addons.monitoring.containerInsights",
                f"nodePools[{index}] is a hybrid pool, which Container Insights cannot monitor "
                "(its DCGM exporter runs only on NVIDIA EC2 instance types, its agent needs hybrid settings); set "
                "containerInsights: false and dcgmPrometheus: true",
            )
            return


def _monitoring_damaged(p: Parsed) -> bool:
    """The monitoring settings did not parse: their defaults stand in, and a rule on them would be a follow-on."""
    return any(key in ("addons", "addons.monitoring") or key.startswith("addons.monitoring.") for key in p.damaged)


RULES = (one_dcgm_exporter_per_node, on_prem_gpus_are_monitored)
