"""Dashboards: valid Grafana models that query only metrics our exporters emit, provisioned as ConfigMaps for
Grafana's sidecar on the Prometheus path, and a CloudWatch dashboard on the Container Insights path."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.plan.plan import run_stack_under_mocks
from components.addons.monitoring import MonitoredFileSystems
from components.catalog import dashboards
from components.catalog.metrics import cloudwatch_metrics, efa_metric_name, efa_port_counters, prometheus_metrics
from components.planning.addons.cloudwatch_dashboard import NODE_HEALTH_NOTE, cloudwatch_dashboard
from components.planning.addons.efa_metrics import EFA_TEXTFILE, efa_counters_pass, efa_metric_names
from components.planning.addons.grafana import (
    CLOUDWATCH_UID,
    DASHBOARD_FOLDER,
    FILE_SYSTEM_DASHBOARDS,
    POOL_LABEL,
    WORKLOAD_DASHBOARDS,
    DashboardPlan,
    render_dashboard,
)
from components.planning.addons.monitoring import DCGM_COUNTERS
from components.planning.addons.node_monitoring import repair_metrics
from components.planning.node_health import CLOUDWATCH_NAMESPACE
from components.planning.stack_plan import plan_pools
from components.planning.training_job import JOBSET_METRIC_LABEL, TRAINING_METRICS
from programs.node_health import cloudwatch as loop_cloudwatch
from tests.builders import (
    HELM_RELEASE,
    IAM_ROLE,
    ROLE_POLICY,
    SYSTEM,
    SYSTEM_POOL,
    TRAINING_POOL,
    addon_stack,
    releases,
    run_addons,
    stack_config,
    training_on_container_insights,
)

STACKS = Path(__file__).resolve().parents[1] / "stacks"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CW_DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
PROMETHEUS_DS = {"type": "prometheus", "uid": "${datasource}"}
CLOUDWATCH_DS = {"type": "cloudwatch", "uid": CLOUDWATCH_UID}

#: Every Prometheus metric name a dashboard may query: the exporters' sourced lists (metrics.yaml), the DCGM
#: exporter's configured counters, the EFA sidecar's counters and the health loop's own metrics
#: (components/planning/node_health.py). Derived, never written twice.
ALLOWED_PROMQL = (
    frozenset().union(*prometheus_metrics().values())
    | {field for field, _, _ in DCGM_COUNTERS}
    | efa_metric_names()
    | set(repair_metrics())
    | set(TRAINING_METRICS)
)

# ------------------------------------------------------------------------------------------- PromQL metric names
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_CLAUSES = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_VARIABLES = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are neither functions (followed by `(`),
    keywords, label names (inside `{}` or a `by (...)`-style clause) nor durations."""
    text = _VARIABLES.sub(" ", expr)
    for pattern in (_STRINGS, _MATCHERS, _RANGES, _CLAUSES):
        text = pattern.sub(" ", text)
    return {m.group(1) for m in _IDENTIFIER.finditer(text) if not m.group(2) and m.group(1) not in _KEYWORDS}


def test_metric_names_of_promql():
    expr = (
        'avg by (label_gpu_clusters_pool) (DCGM_FI_DEV_GPU_UTIL{node=~"$node"} * on (node) '
        "group_left (label_gpu_clusters_pool) kube_node_labels) / rate(node_efa_rx_bytes_total[$__rate_interval])"
        " or vector(0)"
    )
    assert metric_names(expr) == {"DCGM_FI_DEV_GPU_UTIL", "kube_node_labels", "node_efa_rx_bytes_total"}


# ----------------------------------------------------------------------------------------------- the JSON files
def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def _targets(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for p in _panels(board) for t in p.get("targets", [])]


@pytest.mark.parametrize("name", dashboards.names())
def test_dashboard_is_a_grafana_model(name):
    board = dashboards.load(name)
    assert board["uid"] == f"gpu-cluster-{name}" and len(board["uid"]) <= 40  # Grafana's uid limit
    assert board["title"].startswith("GPU cluster / ")
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    assert "gpu-cluster" in board["tags"]
    panels = _panels(board)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["type"] in {"timeseries", "stat", "table"}, panel["title"]
        assert panel["targets"], f"{panel['title']}: a panel without a query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        # data sources by uid or variable, never by name
        assert panel["datasource"] in (PROMETHEUS_DS, CLOUDWATCH_DS), panel["title"]
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"]), panel["title"]


def test_dashboard_uids_are_unique():
    uids = [dashboards.load(n)["uid"] for n in dashboards.names()]
    assert len(uids) == len(set(uids))


#: The dashboards on Prometheus data (the Lustre one reads CloudWatch only).
PROMETHEUS_DASHBOARDS = [
    n for n in dashboards.names() if any(t["datasource"] == PROMETHEUS_DS for t in _targets(dashboards.load(n)))
]


def test_only_the_file_system_dashboards_read_cloudwatch():
    assert sorted(set(dashboards.names()) - set(PROMETHEUS_DASHBOARDS)) == sorted(FILE_SYSTEM_DASHBOARDS)
    assert set(MonitoredFileSystems(lustre="fs-1", efs="fs-2").present()) == set(FILE_SYSTEM_DASHBOARDS)


#: The workload dashboards pick a workload, not a pool: vLLM's and the training script's series carry no node.
WORKLOAD_VARIABLES = {"serving": {"workload", "model"}, "training": {"jobset"}}


def test_the_workload_dashboards_are_the_planned_ones():
    assert set(WORKLOAD_VARIABLES) == set(WORKLOAD_DASHBOARDS) <= set(dashboards.names())


@pytest.mark.parametrize("name", PROMETHEUS_DASHBOARDS)
def test_prometheus_dashboards_pick_their_data_source_and_pool(name):
    board = dashboards.load(name)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    if name in WORKLOAD_VARIABLES:
        assert set(variables) == {"datasource", *WORKLOAD_VARIABLES[name]}
    else:
        # the pool variable reads the kube-state-metrics label of our pool node label
        assert POOL_LABEL == "label_gpu_clusters_pool"
        assert POOL_LABEL in variables["pool"]["definition"]
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == PROMETHEUS_DS
            selector = re.fullmatch(r"label_values\((.*), *\w+\)", variable["definition"])
            assert selector, variable["definition"]
            assert metric_names(selector.group(1)) <= ALLOWED_PROMQL


@pytest.mark.parametrize("name", dashboards.names())
def test_every_query_uses_metrics_our_exporters_emit(name):
    board = dashboards.load(name)
    for target in _targets(board):
        if target["datasource"] == PROMETHEUS_DS:
            names = metric_names(target["expr"])
            assert names, target["expr"]
            assert names <= ALLOWED_PROMQL, f"{name}: {sorted(names - ALLOWED_PROMQL)} in {target['expr']}"
        elif target.get("metricEditorMode") == 0:
            assert target["metricName"] in cloudwatch_metrics()[target["namespace"]], target


@pytest.mark.parametrize(("name", "namespace"), [("lustre", "AWS/FSx"), ("efs", "AWS/EFS")])
def test_cloudwatch_panels_query_metrics_of_the_stack_file_system(name, namespace):
    board = dashboards.load(name)
    metric_queries = [t for t in _targets(board) if t["metricEditorMode"] == 0]
    assert {t["namespace"] for t in metric_queries} == {namespace}
    assert all(t["dimensions"]["FileSystemId"] == "$filesystem" for t in metric_queries)
    # math expressions refer to queries of the same panel
    for panel in _panels(board):
        ids = {t["id"] for t in panel.get("targets", [])}
        for target in panel.get("targets", []):
            if target["metricEditorMode"] == 1:
                assert set(re.findall(r"\bm\d+\b", target["expression"])) <= ids, target["expression"]
    rendered = json.loads(render_dashboard(DashboardPlan(name, ("filesystem",)), {"filesystem": "fs-0abc"}))
    (constant,) = [v for v in rendered["templating"]["list"] if v["name"] == "filesystem"]
    assert constant["type"] == "constant" and constant["query"] == "fs-0abc"
    with pytest.raises(ValueError, match="filesystem"):
        render_dashboard(DashboardPlan(name, ("filesystem",)), {})


def test_efa_dashboard_covers_traffic_rdma_and_errors():
    exprs = " ".join(t["expr"] for t in _targets(dashboards.load("efa")))
    for counter in ("rx_bytes", "tx_bytes", "rdma_read_bytes", "rdma_write_bytes", "rx_drops", "rdma_read_wr_err"):
        assert efa_metric_name(counter) in exprs


def test_serving_dashboard_covers_latency_first_token_queue_kv_cache_and_tokens():
    board = dashboards.load("serving")
    exprs = " ".join(t["expr"] for t in _targets(board))
    for metric in (
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:generation_tokens_total",
    ):
        assert metric in exprs
    # every query keeps to the chosen workloads: the `job` the workloads' PodMonitors give their samples
    assert all('job=~"$workload"' in t["expr"] for t in _targets(board))


def test_training_dashboard_reads_every_metric_of_the_script_by_jobset():
    board = dashboards.load("training")
    exprs = " ".join(t["expr"] for t in _targets(board))
    # every metric of the script is on a panel, each filtered by the label the PodMonitor gives the samples
    assert {m for m in TRAINING_METRICS if m in exprs} == set(TRAINING_METRICS)
    assert all(f'{JOBSET_METRIC_LABEL}=~"$jobset"' in t["expr"] for t in _targets(board))


# ---------------------------------------------------------------------------------------- the EFA textfile sidecar
def _fake_sysfs(root: Path) -> Path:
    """/sys with one EFA device (two counters) and one Mellanox device, linked like the kernel links them."""
    sys = root / "sys"
    for device, driver, counters in (
        ("rdmap16s27", "efa", {"rx_bytes": 1234, "rdma_read_bytes": 99}),
        ("mlx5_0", "mlx5_core", {"rx_bytes": 5}),
    ):
        pci = sys / "devices" / "pci0000:00" / device
        hw = pci / "infiniband" / device / "ports" / "1" / "hw_counters"
        hw.mkdir(parents=True)
        for counter, value in counters.items():
            (hw / counter).write_text(f"{value}\n")
        (sys / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
        (pci / "driver").symlink_to(Path("../../../bus/pci/drivers") / driver)
        (pci / "infiniband" / device / "device").symlink_to(Path("../.."))
        (sys / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
        (sys / "class" / "infiniband" / device).symlink_to(
            Path("../../devices/pci0000:00") / device / "infiniband" / device
        )
    return sys


def test_efa_sidecar_exports_only_efa_devices_in_prometheus_text(tmp_path):
    out = tmp_path / "textfile"
    out.mkdir()
    script = efa_counters_pass(str(_fake_sysfs(tmp_path)), str(out))
    subprocess.run(["sh", "-c", script], check=True)
    assert sorted(p.name for p in out.iterdir()) == [EFA_TEXTFILE]  # the temporary file was renamed
    lines = (out / EFA_TEXTFILE).read_text().splitlines()
    assert lines == [
        "# TYPE node_efa_rx_bytes_total counter",
        'node_efa_rx_bytes_total{device="rdmap16s27",port="1"} 1234',
        "# TYPE node_efa_rdma_read_bytes_total counter",
        'node_efa_rdma_read_bytes_total{device="rdmap16s27",port="1"} 99',
    ]
    assert {line.split("{")[0] for line in lines if not line.startswith("#")} <= efa_metric_names()


def test_efa_sidecar_writes_an_empty_file_on_nodes_without_efa(tmp_path):
    out = tmp_path / "textfile"
    out.mkdir()
    subprocess.run(["sh", "-c", efa_counters_pass(str(tmp_path / "no-sys"), str(out))], check=True)
    assert (out / EFA_TEXTFILE).read_text() == ""


def test_efa_counters_are_the_drivers_port_counters():
    assert {"rx_bytes", "tx_bytes", "rdma_read_bytes", "rdma_write_bytes", "rx_drops"} <= set(efa_port_counters())


# ------------------------------------------------------------------------------------- Prometheus path (hybrid)
def test_hybrid_dashboards_are_config_maps_for_the_grafana_sidecar(hybrid_stack):
    maps = {r.inputs["metadata"]["name"]: r for r in hybrid_stack.run.of_type(CONFIG_MAP)}
    names = {f"gpu-cluster-dashboard-{n}" for n in ("gpus", "nodes", "efa", "lustre")}
    assert names <= set(maps)
    lustre_id = hybrid_stack.exports["lustreFileSystemId"]
    kps = next(r for r in hybrid_stack.run.of_type(HELM_RELEASE) if r.inputs["name"] == "kube-prometheus-stack")
    for name in names:
        cm = maps[name]
        meta = cm.inputs["metadata"]
        assert meta["namespace"] == "monitoring"
        assert meta["labels"]["grafana_dashboard"] == "1"
        assert meta["annotations"] == {"grafana_folder": DASHBOARD_FOLDER}
        (text,) = cm.inputs["data"].values()
        board = json.loads(text)
        assert board["uid"] == f"gpu-cluster-{name.removeprefix('gpu-cluster-dashboard-')}"
        assert kps.urn in cm.depends_on  # the release creates the namespace
    lustre = json.loads(next(iter(maps["gpu-cluster-dashboard-lustre"].inputs["data"].values())))
    (constant,) = [v for v in lustre["templating"]["list"] if v["name"] == "filesystem"]
    assert constant["query"] == lustre_id
    assert hybrid_stack.run.of_type(CW_DASHBOARD) == []  # Container Insights is off there


def test_hybrid_grafana_values_sidecar_and_cloudwatch_source(hybrid_stack):
    kps = next(r for r in hybrid_stack.run.of_type(HELM_RELEASE) if r.inputs["name"] == "kube-prometheus-stack")
    grafana = kps.inputs["values"]["grafana"]
    assert grafana["enabled"] is True
    assert "adminPassword" not in grafana  # the chart generates one and keeps it in its Secret
    sidecar = grafana["sidecar"]["dashboards"]
    assert (sidecar["enabled"], sidecar["label"], sidecar["labelValue"]) == (True, "grafana_dashboard", "1")
    assert sidecar["searchNamespace"] == ["monitoring"] and grafana["rbac"] == {"namespaced": True}
    assert sidecar["folderAnnotation"] == "grafana_folder" and sidecar["provider"]["foldersFromFilesStructure"]
    assert grafana["sidecar"]["datasources"]["uid"] == "prometheus"
    assert grafana["nodeSelector"] == {"gpu-clusters/role": "system"}
    (source,) = grafana["additionalDataSources"]
    assert source["uid"] == CLOUDWATCH_UID and source["jsonData"] == {
        "authType": "default",
        "defaultRegion": "us-east-1",
    }
    # Grafana's Pod Identity role reads CloudWatch metrics and nothing else, and the release waits for it
    role = hybrid_stack.run.one(IAM_ROLE, "hybrid-grafana")
    policy = hybrid_stack.run.one(ROLE_POLICY, "hybrid-grafana")
    (statement,) = json.loads(policy.inputs["policy"])["Statement"]
    assert statement["Action"] == ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"]
    assert role.urn in kps.depends_on
    association = next(
        r
        for r in hybrid_stack.run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.inputs["serviceAccount"] == "grafana"
    )
    assert association.inputs["namespace"] == "monitoring"


def test_hybrid_exporters_label_nodes_and_export_efa(hybrid_stack):
    by_name = {r.inputs["name"]: r.inputs for r in hybrid_stack.run.of_type(HELM_RELEASE)}
    values = by_name["kube-prometheus-stack"]["values"]
    relabel = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}
    exporter = values["prometheus-node-exporter"]
    assert exporter["prometheus"]["monitor"]["relabelings"] == [relabel]
    assert by_name["dcgm-exporter"]["values"]["serviceMonitor"]["relabelings"] == [relabel]
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == [
        "nodes=[gpu-clusters/pool,gpu-clusters/role,gpu-clusters/node-health]"
    ]
    # the p5 pool has EFA: the textfile sidecar runs in the busybox variant of the pinned node-exporter image
    assert exporter["image"] == {"distroless": False}
    assert "--collector.textfile.directory=/run/efa-textfile" in exporter["extraArgs"]
    assert any(a.startswith("--collector.filesystem.mount-points-exclude=") for a in exporter["extraArgs"])
    (sidecar,) = exporter["sidecars"]
    assert sidecar["command"][:2] == ["/bin/sh", "-c"] and "node_efa_" in sidecar["command"][2]
    assert {"name": "sys", "mountPath": "/host/sys", "readOnly": True} in sidecar["volumeMounts"]


def test_efs_dashboard_on_the_prometheus_path(inference_stack):
    """The inference stack (EFS, on the Prometheus path for its serving autoscaler) gets the EFS dashboard pinned to
    its file system and the serving dashboard, and Grafana the CloudWatch data source and role; no CloudWatch
    dashboard."""
    planned = inference_stack
    maps = {r.inputs["metadata"]["name"]: r for r in planned.run.of_type(CONFIG_MAP)}
    dashboards = {name for name in maps if name.startswith("gpu-cluster-dashboard-")}
    assert dashboards == {f"gpu-cluster-dashboard-{n}" for n in ("nodes", "gpus", "efs", "serving")}
    board = json.loads(next(iter(maps["gpu-cluster-dashboard-efs"].inputs["data"].values())))
    (constant,) = [v for v in board["templating"]["list"] if v["name"] == "filesystem"]
    assert constant["query"] == planned.exports["efsFileSystemId"]
    kps = next(r for r in planned.run.of_type(HELM_RELEASE) if r.inputs["name"] == "kube-prometheus-stack")
    assert [s["uid"] for s in kps.inputs["values"]["grafana"]["additionalDataSources"]] == [CLOUDWATCH_UID]
    assert planned.run.of_type(CW_DASHBOARD) == []


def _efs_stack_on_container_insights(tmp_path: Path) -> Any:
    """The inference stack moved to the Container Insights path: no serving workload (its autoscaler reads
    Prometheus), its pool on cluster-autoscaler."""
    raw = yaml.safe_load((STACKS / "Pulumi.inference.yaml").read_text())
    config = raw["config"]
    config.pop("gpu-clusters:workloads", None)
    config["gpu-clusters:addons"] = {"monitoring": {"containerInsights": True, "dcgmPrometheus": False}}
    for pool in config["gpu-clusters:nodePools"]:
        if pool["scaling"].get("mode") == "gpu-utilization":
            pool["scaling"] = {"min": 1, "max": 8, "mode": "cluster-autoscaler"}
    path = tmp_path / "Pulumi.efs-container-insights.yaml"
    path.write_text(yaml.safe_dump(raw))
    return run_stack_under_mocks(config_file=path)


@pytest.mark.program
def test_no_efa_sidecar_and_no_file_system_dashboards_without_them():
    cpu = {"name": "cpu", "role": "inference", "instanceType": "m7i.xlarge", "scaling": {"min": 0, "max": 2}}
    spec = addon_stack(SYSTEM_POOL, cpu, addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}})
    run = run_addons(spec)
    values = releases(run)["kube-prometheus-stack"]["values"]
    assert "sidecars" not in values["prometheus-node-exporter"]
    assert "additionalDataSources" not in values["grafana"]
    assert {r.inputs["metadata"]["name"] for r in run.of_type(CONFIG_MAP)} == {
        "gpu-cluster-dashboard-nodes",
        "gpu-cluster-dashboard-gpus",
    }
    assert not [r for r in run.of_type(IAM_ROLE) if r.name.endswith("grafana")]


# ---------------------------------------------------------------------------- Container Insights path (CloudWatch)
def _widget_metrics(body: dict[str, Any]) -> list[list[Any]]:
    return [row for w in body["widgets"] if w["type"] == "metric" for row in w["properties"]["metrics"]]


def _check_cloudwatch_body(body: dict[str, Any]) -> None:
    # AWS's metrics as the catalog lists them, and the health loop's own as it publishes them
    published = {
        *loop_cloudwatch.COUNTERS.values(),
        *loop_cloudwatch.GAUGES.values(),
        *loop_cloudwatch.STATE_GAUGES.values(),
        loop_cloudwatch.HEARTBEAT,
    }
    allowed = {**cloudwatch_metrics(), CLOUDWATCH_NAMESPACE: frozenset(published)}
    for widget in body["widgets"]:
        assert widget["x"] + widget["width"] <= 24
    for row in _widget_metrics(body):
        if isinstance(row[0], dict):  # a metric math expression over hidden rows of the same widget
            continue
        namespace, metric = row[0], row[1]
        assert metric in allowed[namespace], f"{namespace} {metric}"


@pytest.mark.program
@pytest.mark.parametrize("stack", ["training", "efs"])
def test_container_insights_stacks_get_a_cloudwatch_dashboard(stack, tmp_path):
    planned = training_on_container_insights() if stack == "training" else _efs_stack_on_container_insights(tmp_path)
    (dashboard,) = planned.run.of_type(CW_DASHBOARD)
    cluster = planned.exports["clusterName"]
    assert dashboard.inputs["dashboardName"] == f"{cluster}-gpu-cluster"
    body = json.loads(dashboard.inputs["dashboardBody"])
    _check_cloudwatch_body(body)
    rows = [r for r in _widget_metrics(body) if not isinstance(r[0], dict)]
    ci = {r[1] for r in rows if r[0] == "ContainerInsights"}
    assert {"node_gpu_utilization", "node_gpu_temperature", "node_cpu_utilization"} <= ci
    assert all(r[2:4] == ["ClusterName", cluster] for r in rows if r[0] == "ContainerInsights")
    file_systems = {(r[0], r[3]) for r in rows if r[0] in ("AWS/FSx", "AWS/EFS")}
    if stack == "training":
        assert ("AWS/FSx", planned.exports["lustreFileSystemId"]) in file_systems
        assert "node_efa_rdma_read_bytes" in ci  # the p5 pool has EFA
    else:
        assert file_systems == {("AWS/EFS", planned.exports["efsFileSystemId"])}
        assert not any(m.startswith("node_efa_") for m in ci)
    assert planned.run.of_type(CONFIG_MAP) == [] or all(
        "grafana_dashboard" not in (r.inputs["metadata"].get("labels") or {}) for r in planned.run.of_type(CONFIG_MAP)
    )


@pytest.mark.program
def test_cloudwatch_dashboard_without_file_systems():
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, name="train"))
    body = json.loads(run.one(CW_DASHBOARD).inputs["dashboardBody"])
    _check_cloudwatch_body(body)
    assert not [r for r in _widget_metrics(body) if not isinstance(r[0], dict) and r[0] in ("AWS/FSx", "AWS/EFS")]


@pytest.mark.program
def test_cloudwatch_dashboard_says_where_gpu_node_health_is_read():
    """The agent's conditions are not Container Insights metrics: a GPU stack without the health loop (which
    publishes them) has a dashboard that points to where they are; a stack without GPUs has no such note."""
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, name="train", addons={"nodeHealth": {"enabled": False}})
    body = json.loads(run_addons(spec).one(CW_DASHBOARD).inputs["dashboardBody"])
    notes = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    assert NODE_HEALTH_NOTE in notes and "blueprint verify --only conditions" in NODE_HEALTH_NOTE
    assert not [r for r in _widget_metrics(body) if r[0] == CLOUDWATCH_NAMESPACE]
    without_gpus = cloudwatch_dashboard("c", "us-east-1", plan_pools(stack_config(SYSTEM)), None, None)
    assert NODE_HEALTH_NOTE not in [w["properties"].get("markdown") for w in without_gpus["widgets"]]
