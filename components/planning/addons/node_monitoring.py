"""Node health detection (pure, no Pulumi): the EKS node monitoring agent add-on, the node conditions it sets, the
Prometheus rules on those conditions and on the health loop's metrics, and the scrape of the health loop.

Sources ([EKSNMA] EKS user guide, node health pages; [NMACHART] the agent's chart, configuration schema and issue
reference; [KSM] kube-state-metrics). What it checks, what it needs and how to read it: docs/operations.md,
"Detecting failed GPU nodes".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.config import NodeHealth
from components.planning.addons.node_health import POLL_SECONDS
from components.planning.addons.placement import gpu_plans, tolerations_for
from components.planning.node_health import (
    CHECKS_METRIC,
    FAILED_TAINT_KEY,
    HEALTH_STATE_LABEL,
    LAST_PASS_METRIC,
    LOOP_POD_LABELS,
    NODE_HEALTH_NAMESPACE,
    REPAIRS_HELD_METRIC,
    REPAIRS_METRIC,
    STARTUP_TAINT_KEY,
)
from components.planning.pools import PoolPlan

#: The EKS add-on's name ([EKSADDON]); its chart installs into `kube-system` ([NMACHART] chart README).
NODE_MONITORING_AGENT = "eks-node-monitoring-agent"
NODE_MONITORING_NAMESPACE = "kube-system"
#: The DaemonSets the add-on runs ([NMACHART] templates/daemonset.yaml, dcgm-daemonset.yaml): the agent on every
#: EC2 node, and the DCGM host engine (`nv-hostengine`, port 5555) it reads GPU health from on NVIDIA instances.
AGENT_DAEMONSET = NODE_MONITORING_AGENT
DCGM_SERVER_DAEMONSET = "dcgm-server"

#: The node conditions the agent sets, one per category of issue ([NMACHART] pkg/conditions/conditions.go,
#: docs/node-health-issues.adoc; [EKSNMA]). `AcceleratedHardwareReady` appears only on nodes with NVIDIA (or Neuron)
#: devices and with XID, DCGM health and diagnostics, NVLink, fabric and GPU-count issues as its reasons; EFA
#: degradation (`EFAErrorMetric`) is an event, not a condition, so it never turns `NetworkingReady` False.
ACCELERATED_HARDWARE_READY = "AcceleratedHardwareReady"
AGENT_CONDITIONS: tuple[str, ...] = (
    ACCELERATED_HARDWARE_READY,
    "ContainerRuntimeReady",
    "KernelReady",
    "NetworkingReady",
    "StorageReady",
)

#: Tolerates the health gate's startup taint whatever its effect: a new GPU node keeps that taint until its gate
#: passes, and the agent's conditions are part of what the gate and the repair path read.
STARTUP_TAINT_TOLERATION: dict[str, str] = {"key": STARTUP_TAINT_KEY, "operator": "Exists"}
#: And the status taint a node that failed its check carries instead: its conditions still drive repair.
FAILED_TAINT_TOLERATION: dict[str, str] = {"key": FAILED_TAINT_KEY, "operator": "Exists"}
#: The agent's own default, stated: it must run on every node, whatever the node's taints ([NMACHART] values.yaml
#: `nodeAgent.tolerations`).
EVERY_TAINT: dict[str, str] = {"operator": "Exists"}


def agent_wanted(plans: Sequence[PoolPlan]) -> bool:
    """The agent runs on every stack with a GPU pool."""
    return bool(gpu_plans(plans))


def monitored_gpu_plans(plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """The GPU pools whose nodes the agent watches: cloud ones. Its DaemonSets keep off
    `eks.amazonaws.com/compute-type: hybrid` and its DCGM server selects NVIDIA EC2 instance types only ([NMACHART]
    values.yaml affinities), so on-prem servers get no agent conditions: their detection is the health loop's checks
    and the DCGM exporter's alerts."""
    return [p for p in gpu_plans(plans) if p.kind == "aws"]


def node_monitoring_configuration(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """The add-on's `configuration_values` (its schema: [NMACHART] charts/configuration.schema.json).

    The DCGM server's chart default tolerates no taint ([NMACHART] values.yaml `dcgmAgent.tolerations: []`), so on
    tainted GPU pools it would never start and the agent would report `DCGMError` (AcceleratedHardwareReady False)
    on every GPU node: it tolerates every GPU pool's taints and the startup taint. The agent keeps its own default of
    tolerating everything, stated here so a new default cannot take it off the GPU nodes."""
    return {
        "nodeAgent": {"tolerations": [dict(EVERY_TAINT)]},
        "dcgmAgent": {
            "tolerations": [
                *tolerations_for(monitored_gpu_plans(plans), critical_addons=False),
                dict(STARTUP_TAINT_TOLERATION),
                dict(FAILED_TAINT_TOLERATION),
            ]
        },
    }


# ------------------------------------------------------------------------------------------------ Prometheus rules
#: How long a condition stays False before it pages: the agent's repair actions start 10 minutes after an issue is
#: detected ([NMACHART] docs/node-health-issues.adoc), so an alert at 5 minutes reaches a human before any repair.
CONDITION_FALSE_MINUTES = 5
#: How long a node may stay `failed` (or cordoned with a failed state) before someone must look: repair should have
#: replaced or uncordoned it by then (the repair path's drain and replacement take minutes, not hours).
FAILED_TOO_LONG_MINUTES = 60
#: Gate failures in an hour that mean a pool's new nodes are bad, not one unlucky node.
GATE_FAILURES_PER_HOUR = 2
#: Gate checks that failed (the health loop's checks counter, `node_health.CHECKS_METRIC`).
GATE_FAILURES = f'{CHECKS_METRIC}{{kind="gate",result="failed"}}'
#: The kube-state-metrics name of the health label on `kube_node_labels` (`label_` + the key with
#: non-alphanumerics as `_`, [KSM]); exported only because the allowlist names it (`monitoring.py`).
HEALTH_STATE_METRIC_LABEL = "label_" + "".join(c if c.isalnum() else "_" for c in HEALTH_STATE_LABEL)
#: Seconds without a finished pass before the loop counts as stuck: five of its passes (`POLL_SECONDS` apart).
LOOP_STALE_SECONDS = 5 * POLL_SECONDS
#: How long a stale heartbeat lasts before it pages, and how long the heartbeat may be missing altogether (the pod
#: crash-looping, e.g. its repair path failing to load, or never scheduled) before it pages.
LOOP_STALE_MINUTES = 5
LOOP_ABSENT_MINUTES = 10


def pending_limit_seconds(config: NodeHealth) -> int:
    """The longest a node may honestly stay `pending`: its check pod's wait to be scheduled plus its run."""
    return config.check_timeout_seconds + config.schedule_timeout_seconds


def condition_false_expr(conditions: Sequence[str]) -> str:
    """One series per node and condition of `conditions` that is False ([KSM] `kube_node_status_condition`: one
    series per condition in the node's `status.conditions` and per status, 1 for the current status)."""
    return f'kube_node_status_condition{{condition=~"{"|".join(conditions)}",status="false"}} == 1'


def events_in_last_hour(selector: str, by: str) -> str:
    """How many times a counter of the health loop went up in the last hour, summed `by` labels. A series born within
    the hour counts from zero (`increase` alone cannot see its first increment, since it never saw the counter at
    zero); one older than the hour counts by `increase`."""
    return f"sum by ({by}) (({selector} unless {selector} offset 1h) or increase({selector}[1h]))"


def failed_too_long_expr() -> str:
    """Nodes whose health label reads `failed`: firing after `FAILED_TOO_LONG_MINUTES` (the rule's `for`)."""
    return f'kube_node_labels{{{HEALTH_STATE_METRIC_LABEL}="failed"}} == 1'


def node_health_rules(pending_seconds: int = pending_limit_seconds(NodeHealth())) -> dict[str, Any]:
    """PrometheusRule groups on node health (kube-prometheus-stack `additionalPrometheusRulesMap`):

    - `GpuNodeHardwareFault` (critical): AcceleratedHardwareReady False for 5 minutes, a GPU, NVLink or fabric
      fault that stalls every job on the node; `NodeConditionFalse` (warning): another agent condition False;
    - `NodeHealthRepairsHeld`: the repair path held a repair back (hourly cap per pool, Capacity Block guard): a
      repair storm, or a pool that cannot be repaired without losing capacity;
    - `NodeHealthGateFailures`: a pool's new nodes failed the gate `GATE_FAILURES_PER_HOUR` times in an hour;
    - `NodeHealthFailedTooLong`: a node labelled `failed` for `FAILED_TOO_LONG_MINUTES`: repair has not finished;
    - `NodeHealthPendingTooLong`: a node `pending` for longer than `pending_seconds` (`pending_limit_seconds`): its
      gate neither passed nor failed, so the loop is not gating it and its startup taint keeps work off it;
    - `NodeHealthLoopStuck` / `NodeHealthLoopDown` (critical): the loop's last pass is older than
      `LOOP_STALE_SECONDS`, or its heartbeat is missing: no gate runs, and every new GPU node stays tainted.
    """
    rules = [
        {
            "alert": "GpuNodeHardwareFault",
            "expr": condition_false_expr([ACCELERATED_HARDWARE_READY]),
            "for": f"{CONDITION_FALSE_MINUTES}m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "node {{ $labels.node }} reports a GPU fault (AcceleratedHardwareReady False: XID, DCGM "
                "health, NVLink or GPU count); kubectl describe node shows the reason"
            },
        },
        {
            "alert": "NodeConditionFalse",
            "expr": condition_false_expr([c for c in AGENT_CONDITIONS if c != ACCELERATED_HARDWARE_READY]),
            "for": f"{CONDITION_FALSE_MINUTES}m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "{{ $labels.condition }} is False on node {{ $labels.node }}"},
        },
        {
            "alert": "NodeHealthRepairsHeld",
            "expr": f"{events_in_last_hour(REPAIRS_HELD_METRIC, 'pool, reason')} > 0",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "repairs held back in pool {{ $labels.pool }} ({{ $labels.reason }}): a repair storm or "
                "capacity that cannot be replaced; failed nodes stay cordoned"
            },
        },
        {
            "alert": "NodeHealthGateFailures",
            "expr": f"{events_in_last_hour(GATE_FAILURES, 'pool')} >= {GATE_FAILURES_PER_HOUR}",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $value }} new nodes of pool {{ $labels.pool }} failed the health gate in 1h"
            },
        },
        {
            "alert": "NodeHealthFailedTooLong",
            "expr": failed_too_long_expr(),
            "for": f"{FAILED_TOO_LONG_MINUTES}m",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "node {{ $labels.node }} has been marked failed for over "
                f"{FAILED_TOO_LONG_MINUTES} minutes and is still in the cluster"
            },
        },
        {
            "alert": "NodeHealthPendingTooLong",
            "expr": f'kube_node_labels{{{HEALTH_STATE_METRIC_LABEL}="pending"}} == 1',
            "for": f"{pending_seconds}s",
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "node {{ $labels.node }} has waited for its health gate for over "
                f"{pending_seconds} seconds: the health loop is not gating it and its startup taint keeps work off"
            },
        },
        {
            "alert": "NodeHealthLoopStuck",
            "expr": f"time() - max({LAST_PASS_METRIC}) > {LOOP_STALE_SECONDS}",
            "for": f"{LOOP_STALE_MINUTES}m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"the health loop has finished no pass for over {LOOP_STALE_SECONDS} seconds: new "
                "GPU nodes stay tainted and failed nodes are not repaired "
                "(kubectl -n node-health logs deploy/node-health)"
            },
        },
        {
            "alert": "NodeHealthLoopDown",
            "expr": f"absent({LAST_PASS_METRIC})",
            "for": f"{LOOP_ABSENT_MINUTES}m",
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "the health loop reports no heartbeat: new GPU nodes stay tainted and failed nodes are not "
                "repaired (kubectl -n node-health get pods; logs deploy/node-health)"
            },
        },
    ]
    return {"node-health": {"groups": [{"name": "node-health", "rules": rules}]}}


# ---------------------------------------------------------------------------------------------------- scraping
#: The health loop's PodMonitor; it lives with Prometheus and selects the loop's pods in their own namespace.
HEALTH_LOOP_POD_MONITOR = "node-health"
#: The name of the loop's container port `node_health.METRICS_PORT`, which the PodMonitor scrapes (the loop's
#: Deployment names it so).
METRICS_PORT_NAME = "metrics"


def health_loop_pod_monitor(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    """The PodMonitor that has Prometheus scrape the health loop's metrics port by name ([PROMOP] PodMonitor:
    `selector`, `namespaceSelector.matchNames`, `podMetricsEndpoints[].port`). It lives in Prometheus's `namespace`
    so it does not wait for the loop's namespace, and Prometheus selects it by `labels`, the release label
    (`monitoring.POD_MONITOR_LABELS`) the serving workloads' PodMonitors carry too."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": HEALTH_LOOP_POD_MONITOR, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(LOOP_POD_LABELS)},
            "namespaceSelector": {"matchNames": [NODE_HEALTH_NAMESPACE]},
            "podMetricsEndpoints": [{"port": METRICS_PORT_NAME}],
        },
    }


def repair_metrics() -> tuple[str, ...]:
    """The health loop's metric names the dashboards and rules read."""
    return (CHECKS_METRIC, REPAIRS_METRIC, REPAIRS_HELD_METRIC)
