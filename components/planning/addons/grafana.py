"""Grafana on the Prometheus path (pure, no Pulumi): the kube-prometheus-stack `grafana` values, its data sources
and the dashboards it loads from ConfigMaps.

Invariants: the dashboard sidecar reads only the `monitoring` namespace, with namespaced RBAC; no password passes
through Pulumi; CloudWatch is read through a Pod Identity role that can read metrics and nothing else ([GRAFANA],
[KPS], [GFCW]). Why and sources: docs/design-notes.md#grafana; the user view: docs/addons.md#dashboards.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components import tags
from components.catalog import dashboards
from components.planning.addons.efa_metrics import efa_plans
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.pools import PoolPlan

GRAFANA_SERVICE_ACCOUNT = "grafana"
#: The sidecar's selector; kube-prometheus-stack's defaults, stated so a chart change cannot drop our dashboards.
DASHBOARD_LABEL = "grafana_dashboard"
DASHBOARD_LABEL_VALUE = "1"
FOLDER_ANNOTATION = "grafana_folder"
DASHBOARD_FOLDER = "GPU cluster"
#: Data source uids the dashboards reference: kube-prometheus-stack provisions Prometheus as `prometheus`
#: ([KPS] values.yaml `grafana.sidecar.datasources.uid`); the CloudWatch one is ours.
PROMETHEUS_UID = "prometheus"
CLOUDWATCH_UID = "cloudwatch"
#: The kube-state-metrics `label_<key>` of our pool label on `kube_node_labels` (non-alphanumerics become `_`,
#: [KSM]); the dashboards' pool variable reads it.
POOL_LABEL = "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", tags.POOL)
#: The label every scraped node metric carries: the node's name, set from the target pod's node by a relabeling
#: on the node-exporter and DCGM exporter ServiceMonitors (the DCGM exporter's own host label changes name across
#: releases: `Hostname` up to 4.8.2, `hostname` after [DCGM] commit d5e5f51).
NODE_LABEL = "node"
NODE_RELABELING = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": NODE_LABEL}
#: CloudWatch API calls Grafana's CloudWatch data source makes to draw metric panels; these actions take no
#: resource ARN (Service Authorization Reference, CloudWatch: resource type `*`), so the policy cannot be narrower.
CLOUDWATCH_READ_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics")


@dataclass(frozen=True)
class DashboardPlan:
    """One dashboard as a ConfigMap for the sidecar: the JSON file it comes from and the constants it needs
    filled in at deploy time (e.g. the Lustre file system id, known once the file system exists)."""

    name: str
    constants: tuple[str, ...] = ()

    @property
    def config_map(self) -> str:
        return f"gpu-cluster-dashboard-{self.name}"

    @property
    def file_name(self) -> str:
        return f"{self.name}.json"


#: The file system dashboards, each read from CloudWatch and pinned to the stack's file system of that kind.
FILE_SYSTEM_DASHBOARDS: tuple[str, ...] = ("lustre", "efs")


#: The workload dashboards, each on a stack that runs that kind of workload (`workload_kinds`): vLLM's own metrics
#: of the serving workloads, the reference training job's metrics.
WORKLOAD_DASHBOARDS: tuple[str, ...] = ("serving", "training")


def workload_kinds(serving: bool, training: bool) -> frozenset[str]:
    """The workload dashboards a stack gets: `serving` with serving workloads, `training` with the training job."""
    return frozenset(kind for kind, present in zip(WORKLOAD_DASHBOARDS, (serving, training), strict=True) if present)


def prometheus_dashboards(
    plans: Sequence[PoolPlan], file_systems: Collection[str], workloads: Collection[str] = ()
) -> list[DashboardPlan]:
    """The dashboards a stack on the Prometheus path gets: nodes and GPUs always, EFA with an EFA pool, FSx for
    Lustre and EFS for the file systems the stack has (`file_systems`, names from `FILE_SYSTEM_DASHBOARDS`), serving
    and training for the workloads it runs (`workloads`, names from `WORKLOAD_DASHBOARDS`)."""
    unknown = (set(file_systems) - set(FILE_SYSTEM_DASHBOARDS)) | (set(workloads) - set(WORKLOAD_DASHBOARDS))
    if unknown:
        raise ValueError(f"no dashboard for {sorted(unknown)}")
    out = [DashboardPlan("nodes"), DashboardPlan("gpus")]
    if efa_plans(plans):
        out.append(DashboardPlan("efa"))
    out += [DashboardPlan(kind, constants=("filesystem",)) for kind in FILE_SYSTEM_DASHBOARDS if kind in file_systems]
    out += [DashboardPlan(kind) for kind in WORKLOAD_DASHBOARDS if kind in workloads]
    return out


def render_dashboard(plan: DashboardPlan, constants: Mapping[str, str]) -> str:
    """The dashboard's JSON with its constant variables set (`constants` must name exactly `plan.constants`)."""
    if set(constants) != set(plan.constants):
        raise ValueError(f"dashboard {plan.name} needs constants {sorted(plan.constants)}, got {sorted(constants)}")
    board = copy.deepcopy(dashboards.load(plan.name))
    for variable in board["templating"]["list"]:
        if variable["name"] in constants:
            value = constants[variable["name"]]
            variable["query"] = value
            variable["current"] = {"text": value, "value": value}
            variable["options"] = [{"text": value, "value": value, "selected": True}]
    return json.dumps(board, indent=1, sort_keys=True)


def config_map_labels() -> dict[str, str]:
    return {DASHBOARD_LABEL: DASHBOARD_LABEL_VALUE, "app.kubernetes.io/part-of": "gpu-clusters"}


def config_map_annotations() -> dict[str, str]:
    return {FOLDER_ANNOTATION: DASHBOARD_FOLDER}


def cloudwatch_datasource(region: str) -> dict[str, Any]:
    """A provisioned CloudWatch data source using Grafana's default AWS credentials chain (Pod Identity)."""
    return {
        "name": "CloudWatch",
        "type": "cloudwatch",
        "uid": CLOUDWATCH_UID,
        "access": "proxy",
        "editable": False,
        "jsonData": {"authType": "default", "defaultRegion": region},
    }


def grafana_cloudwatch_policy() -> dict[str, Any]:
    """Grafana's CloudWatch role: read metrics, nothing else (no logs, no alarms, no EC2 or tag lookups)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadMetrics", "Effect": "Allow", "Action": list(CLOUDWATCH_READ_ACTIONS), "Resource": "*"}
        ],
    }


def grafana_values(plans: Sequence[PoolPlan], region: str, namespace: str, cloudwatch: bool) -> dict[str, Any]:
    """kube-prometheus-stack `grafana` values: on the system pool, the dashboard sidecar on our label and
    namespace, namespaced RBAC, a fixed service account name (Pod Identity binds the role to it), and the
    CloudWatch data source when `cloudwatch`."""
    values: dict[str, Any] = {
        "enabled": True,
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "tolerations": tolerations_for(system_plans(plans)),
        "serviceAccount": {"create": True, "name": GRAFANA_SERVICE_ACCOUNT},
        # Burstable, not BestEffort: the chart sets no requests ([K8SQOS]).
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "rbac": {"namespaced": True},
        "sidecar": {
            "dashboards": {
                "enabled": True,
                "label": DASHBOARD_LABEL,
                "labelValue": DASHBOARD_LABEL_VALUE,
                "searchNamespace": [namespace],
                "folderAnnotation": FOLDER_ANNOTATION,
                "provider": {"foldersFromFilesStructure": True, "allowUiUpdates": False},
            },
            "datasources": {"enabled": True, "uid": PROMETHEUS_UID},
        },
    }
    if cloudwatch:
        values["additionalDataSources"] = [cloudwatch_datasource(region)]
    return values
