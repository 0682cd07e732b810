"""The CloudWatch dashboard of a stack on the Container Insights path (pure, no Pulumi).

One dashboard, `<cluster>-gpu-cluster`, a section per thing the stack runs (GPUs and nodes, EFA, FSx for Lustre,
EFS, the health loop). Invariant: every AWS metric name comes from components/catalog/metrics.yaml ([CWI], [CWDASH]);
the health loop's own are those it publishes (components/planning/node_health.py). Why and sources:
docs/design-notes.md#the-cloudwatch-dashboard; the user view: docs/addons.md#dashboards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from components.planning.addons.efa_metrics import efa_plans
from components.planning.addons.node_health_alarms import (
    GATE_FAILED,
    HOUR_SECONDS,
    STATE_FAILED,
    condition_pools,
    gated_pools,
    repaired_pools,
)
from components.planning.addons.placement import gpu_plans
from components.planning.node_health import (
    CLOUDWATCH_CHECKS,
    CLOUDWATCH_CLUSTER_DIMENSION,
    CLOUDWATCH_CONDITIONS_FALSE,
    CLOUDWATCH_HEARTBEAT,
    CLOUDWATCH_KIND_DIMENSION,
    CLOUDWATCH_NAMESPACE,
    CLOUDWATCH_NODES,
    CLOUDWATCH_POOL_DIMENSION,
    CLOUDWATCH_REPAIRS,
    CLOUDWATCH_REPAIRS_HELD,
    CLOUDWATCH_RESULT_DIMENSION,
    CLOUDWATCH_STATE_DIMENSION,
)
from components.planning.pools import PoolPlan

CONTAINER_INSIGHTS = "ContainerInsights"
FSX = "AWS/FSx"
EFS = "AWS/EFS"
PERIOD_SECONDS = 60
GRID_COLUMNS = 24
WIDGET_WIDTH = 12
WIDGET_HEIGHT = 6


def dashboard_name(cluster: str) -> str:
    """Dashboard names allow letters, digits, `-` and `_` ([CWDASH] PutDashboard `DashboardName`); cluster names
    are already limited to those."""
    return f"{cluster}-gpu-cluster"


#: Where a GPU node's health is read on a Container Insights stack without the health loop: the EKS node monitoring
#: agent's conditions are node conditions, not Container Insights metrics ([CWI] lists none for them), and only the
#: loop publishes them, so the dashboard points to them.
NODE_HEALTH_NOTE = (
    "## GPU node health: the node monitoring agent's conditions (AcceleratedHardwareReady, ...) are not CloudWatch "
    "metrics; read them with `blueprint verify --only conditions` (docs/operations.md, Detecting failed GPU nodes)"
)


@dataclass
class _Layout:
    """Places widgets left to right, two per row, sections starting on a new row."""

    region: str
    widgets: list[dict[str, Any]] = field(default_factory=list)
    x: int = 0
    y: int = 0

    def heading(self, markdown: str) -> None:
        if self.x:
            self.x, self.y = 0, self.y + WIDGET_HEIGHT
        self.widgets.append(
            {
                "type": "text",
                "x": 0,
                "y": self.y,
                "width": GRID_COLUMNS,
                "height": 1,
                "properties": {"markdown": markdown},
            }
        )
        self.y += 1

    def metric(
        self,
        title: str,
        metrics: list[list[Any]],
        stat: str = "Average",
        unit: str | None = None,
        period: int = PERIOD_SECONDS,
    ) -> None:
        properties: dict[str, Any] = {
            "title": title,
            "view": "timeSeries",
            "stacked": False,
            "region": self.region,
            "period": period,
            "stat": stat,
            "metrics": metrics,
        }
        if unit:
            properties["yAxis"] = {"left": {"label": unit, "showUnits": False}}
        self.widgets.append(
            {
                "type": "metric",
                "x": self.x,
                "y": self.y,
                "width": WIDGET_WIDTH,
                "height": WIDGET_HEIGHT,
                "properties": properties,
            }
        )
        self.x += WIDGET_WIDTH
        if self.x >= GRID_COLUMNS:
            self.x, self.y = 0, self.y + WIDGET_HEIGHT


def _ci(metric: str, cluster: str, **options: Any) -> list[Any]:
    row: list[Any] = [CONTAINER_INSIGHTS, metric, "ClusterName", cluster]
    return [*row, options] if options else row


def _per_second(namespace: str, metrics: Sequence[tuple[str, str]], file_system: str) -> list[list[Any]]:
    """`Sum` of each metric over the period divided by the period: a rate per second ([FSXCW], [EFSCW])."""
    rows: list[list[Any]] = []
    for i, (metric, label) in enumerate(metrics, start=1):
        rows.append([{"expression": f"m{i}/PERIOD(m{i})", "label": label, "id": f"e{i}"}])
        rows.append([namespace, metric, "FileSystemId", file_system, {"id": f"m{i}", "stat": "Sum", "visible": False}])
    return rows


def _health(metric: str, cluster: str, pool: str, **options: Any) -> list[Any]:
    """One pool's series of the health loop (the `node_health_alarms` queries read the same dimensions, one
    contributor per pool); `Kind`, `Result` and `State` options are dimensions, the rest widget options. A line per
    pool rather than a Metrics Insights widget: a widget's query reads two weeks at most ([CWMILIMITS]), a metric
    line all the metric's retention."""
    dimensions = [CLOUDWATCH_CLUSTER_DIMENSION, cluster, CLOUDWATCH_POOL_DIMENSION, pool]
    for name in (CLOUDWATCH_KIND_DIMENSION, CLOUDWATCH_RESULT_DIMENSION, CLOUDWATCH_STATE_DIMENSION):
        if name in options:
            dimensions += [name, options.pop(name)]
    return [CLOUDWATCH_NAMESPACE, metric, *dimensions, {"label": pool, **options}]


def _node_health(board: _Layout, cluster: str, plans: Sequence[PoolPlan]) -> None:
    """What the health loop publishes on a Container Insights stack, per pool: the agent's conditions False, repairs
    held, nodes labelled failed, repairs, gate failures, and its heartbeat; the alarms' series (docs/operations.md)."""
    board.heading(f"## GPU node health (the health loop, namespace {CLOUDWATCH_NAMESPACE})")
    board.metric(
        "Agent conditions False (nodes x conditions)",
        [_health(CLOUDWATCH_CONDITIONS_FALSE, cluster, p.name) for p in condition_pools(plans)],
        stat="Maximum",
    )
    board.metric(
        "Repairs held per hour (cap, Capacity Block, threshold)",
        [_health(CLOUDWATCH_REPAIRS_HELD, cluster, p.name) for p in repaired_pools(plans)],
        stat="Sum",
        period=HOUR_SECONDS,
    )
    board.metric(
        "Nodes labelled failed (repair not finished)",
        [_health(CLOUDWATCH_NODES, cluster, p.name, **STATE_FAILED) for p in repaired_pools(plans)],
        stat="Maximum",
    )
    board.metric(
        "Repairs started per hour",
        [_health(CLOUDWATCH_REPAIRS, cluster, p.name) for p in repaired_pools(plans)],
        stat="Sum",
        period=HOUR_SECONDS,
    )
    board.metric(
        "Gate failures per hour",
        [_health(CLOUDWATCH_CHECKS, cluster, p.name, **GATE_FAILED) for p in gated_pools(plans)],
        stat="Sum",
        period=HOUR_SECONDS,
    )
    board.metric(
        "Health loop passes per minute",
        [[CLOUDWATCH_NAMESPACE, CLOUDWATCH_HEARTBEAT, CLOUDWATCH_CLUSTER_DIMENSION, cluster, {"label": "passes"}]],
        stat="Sum",
    )


def cloudwatch_dashboard(
    cluster: str,
    region: str,
    plans: Sequence[PoolPlan],
    lustre_id: str | None,
    efs_id: str | None,
    health_loop: bool = False,
) -> dict[str, Any]:
    """The dashboard body: GPUs (when a pool has GPUs), EFA (when a pool has EFA), FSx for Lustre and EFS (when the
    stack has them), nodes, and node health (what the health loop publishes, when it runs)."""
    board = _Layout(region)
    if gpu_plans(plans):
        board.heading(f"## GPUs of cluster {cluster} (Container Insights)")
        board.metric(
            "GPU utilization (%)",
            [
                _ci("node_gpu_utilization", cluster, stat="Average", label="average"),
                _ci("node_gpu_utilization", cluster, stat="Maximum", label="busiest"),
            ],
        )
        board.metric("GPU memory utilization (%)", [_ci("node_gpu_memory_utilization", cluster)])
        board.metric("Tensor core utilization (%)", [_ci("node_gpu_tensor_core_utilization", cluster)])
        board.metric("GPU temperature (C)", [_ci("node_gpu_temperature", cluster, stat="Maximum", label="hottest")])
        board.metric("GPU power draw (W)", [_ci("node_gpu_power_draw", cluster, stat="Sum", label="total")])
        board.metric(
            "GPUs allocated to pods",
            [
                _ci("node_gpu_usage_total", cluster, stat="Sum", label="in use"),
                _ci("node_gpu_limit", cluster, stat="Sum", label="allocatable"),
            ],
        )
    if efa_plans(plans):
        board.heading("## EFA (Container Insights, per second)")
        board.metric(
            "EFA traffic",
            [
                _ci("node_efa_rx_bytes", cluster, stat="Sum", label="received"),
                _ci("node_efa_tx_bytes", cluster, stat="Sum", label="transmitted"),
            ],
            unit="bytes/s",
        )
        board.metric(
            "RDMA",
            [
                _ci("node_efa_rdma_read_bytes", cluster, stat="Sum", label="read"),
                _ci("node_efa_rdma_write_bytes", cluster, stat="Sum", label="written"),
                _ci("node_efa_rdma_write_recv_bytes", cluster, stat="Sum", label="write received"),
            ],
            unit="bytes/s",
        )
        board.metric(
            "EFA receive drops", [_ci("node_efa_rx_dropped", cluster, stat="Sum", label="dropped")], unit="packets/s"
        )
    if lustre_id:
        board.heading("## FSx for Lustre")
        board.metric(
            "Lustre client throughput",
            _per_second(FSX, [("DataReadBytes", "read"), ("DataWriteBytes", "write")], lustre_id),
            unit="bytes/s",
        )
        board.metric(
            "Lustre operations",
            _per_second(
                FSX,
                [("DataReadOperations", "read"), ("DataWriteOperations", "write"), ("MetadataOperations", "metadata")],
                lustre_id,
            ),
            unit="ops/s",
        )
        board.metric(
            "Lustre free capacity",
            [
                [FSX, "FreeDataStorageCapacity", "FileSystemId", lustre_id, {"stat": "Sum", "label": "total"}],
                [
                    FSX,
                    "FreeDataStorageCapacity",
                    "FileSystemId",
                    lustre_id,
                    {"stat": "Minimum", "label": "fullest OST"},
                ],
            ],
            unit="bytes",
        )
        board.metric(
            "Lustre client connections", [[FSX, "ClientConnections", "FileSystemId", lustre_id, {"stat": "Sum"}]]
        )
    if efs_id:
        board.heading("## EFS")
        board.metric(
            "EFS throughput",
            _per_second(
                EFS,
                [("DataReadIOBytes", "read"), ("DataWriteIOBytes", "write"), ("MetadataIOBytes", "metadata")],
                efs_id,
            ),
            unit="bytes/s",
        )
        board.metric(
            "EFS clients and size",
            [
                [EFS, "ClientConnections", "FileSystemId", efs_id, {"stat": "Sum", "label": "clients"}],
                [
                    EFS,
                    "StorageBytes",
                    "FileSystemId",
                    efs_id,
                    "StorageClass",
                    "Total",
                    {"stat": "Average", "label": "bytes stored", "yAxis": "right"},
                ],
            ],
        )
    board.heading("## Nodes (Container Insights)")
    board.metric(
        "Node CPU utilization (%)",
        [
            _ci("node_cpu_utilization", cluster, stat="Average", label="average"),
            _ci("node_cpu_utilization", cluster, stat="Maximum", label="busiest"),
        ],
    )
    board.metric(
        "Node memory utilization (%)",
        [
            _ci("node_memory_utilization", cluster, stat="Average", label="average"),
            _ci("node_memory_utilization", cluster, stat="Maximum", label="fullest"),
        ],
    )
    board.metric(
        "Node network", [_ci("node_network_total_bytes", cluster, stat="Sum", label="all nodes")], unit="bytes/s"
    )
    board.metric(
        "Node file system utilization (%)",
        [_ci("node_filesystem_utilization", cluster, stat="Maximum", label="fullest")],
    )
    board.metric(
        "Nodes",
        [_ci("cluster_node_count", cluster, label="nodes"), _ci("cluster_failed_node_count", cluster, label="failed")],
    )
    if health_loop:
        _node_health(board, cluster, plans)
    elif gpu_plans(plans):
        # Container Insights publishes no metric for the agent's conditions: say where they are read instead.
        board.heading(NODE_HEALTH_NOTE)
    return {"widgets": board.widgets}
