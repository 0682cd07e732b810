"""Monitoring and alerts (pure, no Pulumi): the CloudWatch Observability add-on with Container Insights, its
alarms, the alerts topic's key and publish policies, the DCGM exporter and kube-prometheus-stack with GPU rules.

Sources (docs/sources.md: aws-gpu-facts.md): [CWI] Container Insights GPU metrics (§7a), [DCGM]
NVIDIA/dcgm-exporter chart 4.8.2 (§8). Grafana, its dashboards and the EFA counters: grafana.py, efa_metrics.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components import tags
from components.config import Alerts, NodeHealth
from components.planning.addons.alarms import METRIC_PERIOD_SECONDS, MetricAlarmPlan
from components.planning.addons.efa_metrics import efa_plans, efa_textfile_values
from components.planning.addons.grafana import NODE_RELABELING, grafana_values
from components.planning.addons.image_digests import with_image_digests
from components.planning.addons.node_monitoring import agent_wanted, node_health_rules, pending_limit_seconds
from components.planning.addons.placement import (
    SYSTEM_NODE_SELECTOR,
    gpu_plans,
    system_plans,
    tolerations_for,
)
from components.planning.dra import dra_plans
from components.planning.gpu_runtime import NVIDIA_RUNTIME_CLASS, runtime_class_plans
from components.planning.mig import (
    DCGM_EXPORTER_DEPLOY_LABEL,
    DEPLOY_ENABLED,
    DEPLOY_PAUSED,
    MIG_CONFIG_STATE_LABEL,
    MIG_STATE_SUCCESS,
    mig_plans,
)
from components.planning.node_health import HEALTH_STATE_LABEL
from components.planning.pools import GPU_PRESENT_LABEL, MIG_CONFIG_LABEL, PoolPlan
from components.planning.serving_autoscaling import ScrapeTarget

#: Helm releases and service accounts of the Prometheus path. Pod Identity binds a role to a (namespace, service
#: account) pair, so the charts are told these names explicitly instead of deriving them from the release name.
MONITORING_NAMESPACE = "monitoring"
KUBE_PROMETHEUS_STACK_RELEASE = "kube-prometheus-stack"
#: The label Prometheus selects ServiceMonitors and PodMonitors by, in every namespace: what the stack's own monitors
#: carry, and the documented label for users' own (docs/operations.md, "Workload metrics"). Stated as explicit
#: selectors in the Prometheus values (`monitor_selectors`), so neither kind depends on the chart's
#: `*SelectorNilUsesHelmValues` defaults ([KPS] 88.5.3 values.yaml, templates/prometheus/prometheus.yaml). It is the
#: label the chart gives its own ServiceMonitors (`release: <release name>`), which keep being scraped. A tenant's
#: monitor is scraped only with it, which its namespace's admins choose to give it.
POD_MONITOR_LABELS = {"release": KUBE_PROMETHEUS_STACK_RELEASE}
ALERTMANAGER_SERVICE_ACCOUNT = "alertmanager"
DCGM_EXPORTER_RELEASE = "dcgm-exporter"
#: The exporter's second release, on the hybrid pools whose pods name the `nvidia` RuntimeClass, in a namespace of
#: its own: the chart renders ConfigMap `exporter-metrics-config-map` and Role `dcgm-exporter-read-cm` under those
#: fixed names in the release's namespace whatever the release is called ([DCGM] templates/metrics-configmap.yaml,
#: role.yaml), and Helm refuses to install an object another release owns, so a second release in `monitoring`
#: fails `pulumi up`.
DCGM_EXPORTER_RUNTIME_CLASS_RELEASE = "dcgm-exporter-runtime-class"
DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE = "dcgm-exporter-runtime-class"
#: The amazon-cloudwatch-observability add-on runs its agent as `amazon-cloudwatch/cloudwatch-agent`
#: (EKS user guide, "Amazon CloudWatch Observability agent": `eksctl create iamserviceaccount --name
#: cloudwatch-agent --namespace amazon-cloudwatch`; the add-on's chart values `agent.serviceAccount`).
CLOUDWATCH_ADDON = "amazon-cloudwatch-observability"
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"
CLOUDWATCH_SERVICE_ACCOUNT = "cloudwatch-agent"
#: AWS managed policy the CloudWatch agent needs (CloudWatch UG, "Install the Amazon CloudWatch Observability EKS
#: add-on": `CloudWatchAgentServerPolicy`); a policy path the Pod Identity helper qualifies with the partition.
CLOUDWATCH_AGENT_POLICY = "CloudWatchAgentServerPolicy"

CONTAINER_INSIGHTS_NAMESPACE = "ContainerInsights"
CLUSTER_DIMENSION = "ClusterName"
#: Placeholder for the EKS cluster name in alarm dimensions (known only once the cluster exists).
CLUSTER_NAME = "${cluster}"
#: GPU temperature must stay high for this many minutes before alerting, so one hot sample does not page anyone.
TEMPERATURE_MINUTES = 5


#: What Prometheus asks of a system node: the chart sets no requests, and a BestEffort Prometheus is the first pod
#: evicted under memory pressure ([K8SQOS]) on system nodes it shares with the controllers. A starting point for a
#: few dozen GPU nodes, not a measured figure: raise it with the cluster (Prometheus's memory grows with its series).
PROMETHEUS_REQUESTS = {"cpu": "500m", "memory": "2Gi"}


def cloudwatch_addon_configuration(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """`configuration_values` of the amazon-cloudwatch-observability add-on (the values of the chart it installs,
    [CWCHART] amazon-cloudwatch-observability 6.4.0 values.yaml).

    - `tolerations` (the chart's root value, used by the agent, Fluent Bit and the DCGM exporter it runs for GPU
      metrics): every pool taint plus CriticalAddonsOnly, so GPU nodes are observed. The chart default is
      `operator: Exists`, but older add-on builds did not tolerate tainted nodes (containers-roadmap #2195), so
      we state the list explicitly.
    - `manager`: the operator's controller-manager Deployment takes its own `manager.tolerations` (default `[]`),
      which wins over the root list ([CWCHART] templates/operator-deployment.yaml, `common.tolerations` in
      _helpers.tpl), so without it the manager tolerates no taint and fits no node of a stack whose every node is
      tainted: the add-on stays DEGRADED. It runs on the system pool, like the other controllers.
    """
    return {
        "tolerations": tolerations_for(plans),
        "manager": {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "tolerations": tolerations_for(system_plans(plans))},
    }


def container_insights_alarms(alerts: Alerts) -> list[MetricAlarmPlan]:
    """Alerts on Container Insights GPU metrics ([CWI] §7a, dimension ClusterName):

    - `node_gpu_temperature` Maximum above `gpuTemperatureCelsius` (85 °C) for 5 minutes;
    - `node_gpu_utilization` Average below `idleUtilizationPercent` (30%) for `idleMinutes` (30): GPUs paid for
      and idle. No GPU nodes means no data, which is not idle spend (`notBreaching`).
    Container Insights publishes no XID or ECC metric; those are covered on the DCGM/Prometheus path only.
    """
    dims = {CLUSTER_DIMENSION: CLUSTER_NAME}
    return [
        MetricAlarmPlan(
            suffix="gpu-temperature",
            description=f"a GPU is above {alerts.gpu_temperature_celsius:g} C for {TEMPERATURE_MINUTES} min",
            namespace=CONTAINER_INSIGHTS_NAMESPACE,
            metric_name="node_gpu_temperature",
            statistic="Maximum",
            comparison="GreaterThanThreshold",
            threshold=alerts.gpu_temperature_celsius,
            period=METRIC_PERIOD_SECONDS,
            evaluation_periods=TEMPERATURE_MINUTES,
            dimensions=dims,
            treat_missing_data="notBreaching",
        ),
        MetricAlarmPlan(
            suffix="gpu-idle",
            description=(
                f"average GPU utilization below {alerts.idle_utilization_percent:g}% for {alerts.idle_minutes} min "
                "(idle spend)"
            ),
            namespace=CONTAINER_INSIGHTS_NAMESPACE,
            metric_name="node_gpu_utilization",
            statistic="Average",
            comparison="LessThanThreshold",
            threshold=alerts.idle_utilization_percent,
            period=METRIC_PERIOD_SECONDS,
            evaluation_periods=alerts.idle_minutes,
            dimensions=dims,
            treat_missing_data="notBreaching",
        ),
    ]


def alerts_topic_arn_pattern(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """The alerts topic's ARN, its generated suffix wildcarded (Pulumi names it `<cluster>-alerts-<suffix>`)."""
    return f"arn:{partition}:sns:{region}:{account_id}:{cluster_name}-alerts-*"


def alerts_key_policy(account_id: str, topic_arn_pattern: str, partition: str = "aws") -> dict[str, Any]:
    """Key policy of the alerts topic's KMS key: the account administers it; CloudWatch alarms may encrypt
    messages for the topic. Alarms cannot publish to a topic encrypted with the AWS managed key `aws/sns`
    (CloudWatch UG, "Using Amazon SNS topics ... encrypted": the key policy must allow
    `cloudwatch.amazonaws.com` kms:Decrypt and kms:GenerateDataKey*). Only for this topic: SNS encrypts with the
    encryption context `aws:sns:topicArn` (SNS developer guide, "Managing Amazon SNS encryption keys and costs",
    https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html), so the service principal cannot use the key
    for any other topic (`topic_arn_pattern`, `alerts_topic_arn_pattern`)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountAdministers",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchAlarmsEncrypt",
                "Effect": "Allow",
                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                "Resource": "*",
                "Condition": {"StringLike": {"kms:EncryptionContext:aws:sns:topicArn": topic_arn_pattern}},
            },
        ],
    }


def alertmanager_sns_policy(topic_arn: str, key_arn: str | None) -> dict[str, Any]:
    """Alertmanager may publish to the alerts topic only (and use its key when the stack created one)."""
    statements: list[dict[str, Any]] = [
        {"Sid": "Publish", "Effect": "Allow", "Action": "sns:Publish", "Resource": topic_arn}
    ]
    if key_arn:
        statements.append(
            {
                "Sid": "EncryptForTopic",
                "Effect": "Allow",
                "Action": ["kms:GenerateDataKey*", "kms:Decrypt"],
                "Resource": key_arn,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


#: DCGM fields exported by our dcgm-exporter: the chart's defaults that matter for GPU health and use, plus the
#: volatile ECC counters, which the default list ships commented out ([DCGM] etc/default-counters.csv @d5e5f51).
#: (field, Prometheus type, help); `customMetrics` replaces the whole default list.
DCGM_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
)


def dcgm_counters_csv() -> str:
    return "".join(f"{field}, {kind}, {text}\n" for field, kind, text in DCGM_COUNTERS)


#: The NVIDIA Container Toolkit gives a container whose environment sets this to `all` the MIG monitor
#: capability (/dev/nvidia-caps), which an exporter needs to read MIG devices' counters; the GPU Operator sets it
#: on its exporter whenever MIG is on ([GPUOP] controllers/object_controls.go `applyMIGConfiguration`;
#: [NVCTK] `NVIDIA_MIG_MONITOR_DEVICES`, which also needs CAP_SYS_ADMIN: the chart adds it, [DCGM] values.yaml
#: `securityContext`). docs/gpu-sharing.md#how-a-pool-gets-partitioned.
MIG_MONITOR_ENV = {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}
#: On time-sliced pools a GPU serves several pods; without this the exporter credits each GPU to one of them
#: ([DCGMEXP] internal/pkg/transformation/kubernetes.go `Process`: `toDeviceToPod` keeps one pod per device unless
#: `KubernetesVirtualGPUs`, then `toDeviceToSharingPods` lists every pod holding a replica). With it on,
#: `DCGM_FI_DEV_GPU_UTIL` and `DCGM_FI_DEV_FB_USED` get one series per pod holding each pod's own processes' value
#: (process_metrics.go `isPerProcessMetric`), mapped from the GPU's process IDs through `/proc/<pid>/cgroup`
#: (pidmapper.go), which needs the host's PID namespace (`hostPID`); every other field is repeated per pod with the
#: whole GPU's value. docs/gpu-sharing.md#metrics-on-time-sliced-gpus.
VIRTUAL_GPUS_ENV = {"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"}


def dcgm_exporter_values(
    plans: Sequence[PoolPlan], image_tag: str | None, runtime_class: bool = False
) -> dict[str, Any]:
    """Helm values of the DCGM exporter: on every GPU node (the chart tolerates only the control plane and selects
    nothing, [DCGM] §8), with the counters above and the chart's ServiceMonitor (its CRD comes from
    kube-prometheus-stack, installed first), labelled for Prometheus to select it (`POD_MONITOR_LABELS`).

    Like the device plugin, the exporter needs the NVIDIA runtime to see the GPUs; the chart's `runtimeClassName`
    covers its whole DaemonSet ([DCGM] templates/daemonset.yaml), so the hybrid pools that reach the runtime through
    the `nvidia` RuntimeClass get their own release (`runtime_class`), with its own Service and ServiceMonitor, and
    the first release keeps off them. Either way every GPU pool, hybrid included, is scraped, so the XID,
    temperature and idle rules below cover the on-prem GPUs. The ServiceMonitor labels every sample with its
    `node` (the chart's `serviceMonitor.relabelings`, [DCGM] templates/service-monitor.yaml), which the dashboards
    filter and join on.

    On MIG pools the exporter reads its device list once, at start, so it waits for the partitions and restarts
    after every reconfiguration (`mig_gate`), with the MIG monitor capability (`MIG_MONITOR_ENV`); with time-sliced
    pools it splits each GPU's series per pod (`VIRTUAL_GPUS_ENV`, with the host's PIDs). On every node it
    leaves while the deploy label reads a pause value (`NOT_PAUSED`), which `blueprint verify` sets for DCGM's
    level-4 diagnostic. With DRA pools, `kubernetesDRA.enabled` has it attribute the GPUs of resource claims to their
    pods ([DCGM] values.yaml `kubernetesDRA`: "metrics associated with GPUs managed by NVIDIA k8s-dra-driver")."""
    by_class = sorted(p.name for p in runtime_class_plans(plans))
    served = runtime_class_plans(plans) if runtime_class else [p for p in gpu_plans(plans) if p.name not in by_class]
    values: dict[str, Any] = {
        "nodeSelector": {GPU_PRESENT_LABEL: "true"},
        "tolerations": tolerations_for(served),
        "customMetrics": dcgm_counters_csv(),
        "serviceMonitor": {
            "enabled": True,
            "additionalLabels": dict(POD_MONITOR_LABELS),
            "relabelings": [dict(NODE_RELABELING)],
        },
    }
    base = [{"key": tags.POOL, "operator": "In" if runtime_class else "NotIn", "values": by_class}] if by_class else []
    terms = mig_gate(base) if mig_plans(served) else [{"matchExpressions": [*base, dict(NOT_PAUSED)]}]
    values["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    extra_env = [dict(MIG_MONITOR_ENV)] if mig_plans(served) else []
    if any(p.pool.device_plugin.time_slicing_replicas > 1 for p in served):
        extra_env.append(dict(VIRTUAL_GPUS_ENV))
        values["hostPID"] = True
    if extra_env:
        values["extraEnv"] = extra_env
    if runtime_class:
        values["runtimeClassName"] = NVIDIA_RUNTIME_CLASS
    if dra_plans(served):
        # GPUs allocated through claims: the exporter maps them to their pods from the DRA driver's allocations
        values["kubernetesDRA"] = {"enabled": True}
    if image_tag:
        values["image"] = {"tag": image_tag}
    return values


#: Keeps the exporter off a node whose deploy label reads a pause value; an absent label matches (NotIn selects a
#: node without the key, [K8SAFFINITY]), so nodes nobody labels keep their exporter.
NOT_PAUSED = {"key": DCGM_EXPORTER_DEPLOY_LABEL, "operator": "NotIn", "values": list(DEPLOY_PAUSED)}


def mig_gate(base: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Node selector terms (ORed) that keep the exporter off a MIG node until its partitions exist, and off it
    again while the mig-manager reconfigures it: nodes without `nvidia.com/mig.config`, or nodes whose manager
    reports `nvidia.com/mig.config.state=success` and has set `nvidia.com/gpu.deploy.dcgm-exporter=true`.

    dcgm-exporter builds its device list when it starts ([DCGMEXP] pkg/cmd/app.go `buildRegistry`), so an exporter
    started on whole GPUs would keep reporting them after the node is partitioned. The manager sets the state to
    `pending` and the deploy label to `paused-for-mig-change` before it changes anything, and back to `true` then
    `success` when done ([MIGPARTED] pkg/mig/reconfigure `Run`, `shutdownKubernetesGPUClients`, `setState`): the
    DaemonSet controller removes the exporter from a node that stops matching and starts a new one, which enumerates
    the new MIG devices, once it matches again, as the GPU Operator's exporter does."""
    return [
        {"matchExpressions": [*base, {"key": MIG_CONFIG_LABEL, "operator": "DoesNotExist"}, dict(NOT_PAUSED)]},
        {
            "matchExpressions": [
                *base,
                {"key": MIG_CONFIG_STATE_LABEL, "operator": "In", "values": [MIG_STATE_SUCCESS]},
                {"key": DCGM_EXPORTER_DEPLOY_LABEL, "operator": "In", "values": [DEPLOY_ENABLED]},
            ]
        },
    ]


def dcgm_exporter_target(plan: PoolPlan) -> ScrapeTarget:
    """The scrape target that reports a pool's GPUs: the runtime-class release on hybrid pools that name the
    `nvidia` RuntimeClass, the main release elsewhere. Its ServiceMonitor sets no `jobLabel`, so `job` is its
    Service's name ([PROMOP] ServiceMonitor `jobLabel`), the chart's fullname, which is the release name since it
    contains the chart's ([DCGM] templates/_helpers.tpl, service.yaml, service-monitor.yaml)."""
    if runtime_class_plans([plan]):
        return ScrapeTarget(DCGM_EXPORTER_RUNTIME_CLASS_RELEASE, DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE)
    return ScrapeTarget(DCGM_EXPORTER_RELEASE, MONITORING_NAMESPACE)


#: What idle spend is judged on: graphics engine activity (a ratio), which dcgm-exporter reports for whole GPUs
#: and for MIG devices alike; `DCGM_FI_DEV_GPU_UTIL` has no value on MIG devices ([DCGMMIG]), so an alert on it
#: would leave MIG pools out of the average. The pinned exporter's default counters collect it ([DCGMEXP]
#: etc/default-counters.csv), and so do ours (`DCGM_COUNTERS`).
IDLE_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

XID_WINDOW_MINUTES = 10
"""How long a new XID code keeps GpuXidError firing (the gauge keeps the last code, so only its change is news)."""


def prometheus_rules(alerts: Alerts) -> dict[str, Any]:
    """PrometheusRule groups on DCGM metrics (kube-prometheus-stack `additionalPrometheusRulesMap`).

    XID: `DCGM_FI_DEV_XID_ERRORS` is a gauge holding the last XID code (dcgm-exporter's counters CSV), so it stays
    non-zero after one XID: the rule fires while a non-zero code is new within the window, then resolves. ECC: an
    increase of the double-bit (uncorrectable) volatile counter. Temperature and idle spend mirror the CloudWatch
    alarms; idle spend reads `IDLE_METRIC`, so MIG pools count.
    """
    rules = [
        {
            "alert": "GpuXidError",
            "expr": f"DCGM_FI_DEV_XID_ERRORS != 0 and changes(DCGM_FI_DEV_XID_ERRORS[{XID_WINDOW_MINUTES}m]) > 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}"},
        },
        {
            "alert": "GpuEccUncorrectableErrors",
            "expr": "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0",
            "labels": {"severity": "critical"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} had double-bit ECC errors"},
        },
        {
            "alert": "GpuTemperatureHigh",
            "expr": f"DCGM_FI_DEV_GPU_TEMP > {alerts.gpu_temperature_celsius:g}",
            "for": f"{TEMPERATURE_MINUTES}m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is at {{ $value }} C"},
        },
        {
            "alert": "GpuIdleSpend",
            "expr": f"avg({IDLE_METRIC}) * 100 < {alerts.idle_utilization_percent:g}",
            "for": f"{alerts.idle_minutes}m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "average GPU utilization is {{ $value }}%: GPUs are paid for and idle"},
        },
    ]
    return {"gpu-health": {"groups": [{"name": "gpu-health", "rules": rules}]}}


def alertmanager_config(region: str, topic_arn: str | None) -> dict[str, Any] | None:
    """Alertmanager routing to the alerts topic (Alertmanager `sns_configs` with SigV4 signing); None keeps the
    chart's default (alerts visible in Alertmanager only)."""
    if topic_arn is None:
        return None
    return {
        "route": {
            "receiver": "sns",
            "group_by": ["alertname"],
            "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}],
        },
        "receivers": [
            {"name": "null"},
            {"name": "sns", "sns_configs": [{"topic_arn": topic_arn, "sigv4": {"region": region}}]},
        ],
    }


def prometheus_url() -> str:
    """The in-cluster Prometheus kube-prometheus-stack runs: its Service is the chart's fullname (the release name
    when it contains the chart's, cut to 26 characters) plus `-prometheus`, on port 9090 ([KPS] templates/_helpers.tpl
    `kube-prometheus-stack.fullname`, templates/prometheus/service.yaml, values.yaml `prometheus.service.port`)."""
    fullname = KUBE_PROMETHEUS_STACK_RELEASE[:26].rstrip("-")
    return f"http://{fullname}-prometheus.{MONITORING_NAMESPACE}.svc:9090"


#: Control-plane components EKS runs out of the cluster's reach: no Prometheus inside the cluster can scrape them,
#: so the chart's scrape targets and their "down" alerts (KubeSchedulerDown, KubeControllerManagerDown, etcd*)
#: would fire forever. `enabled: false` drops both: the chart renders those Services, ServiceMonitors and rule
#: groups only when the component is enabled ([KPS] kube-prometheus-stack-88.5.3, values.yaml `kubeScheduler`,
#: `kubeControllerManager`, `kubeEtcd`; templates/prometheus/rules-1.14/kubernetes-system-scheduler.yaml,
#: kubernetes-system-controller-manager.yaml, etcd.yaml). kube-proxy stays: every stack installs the kube-proxy
#: add-on on its nodes (hybrid nodes included; Cilium runs with `kubeProxyReplacement: "false"`).
EKS_HIDDEN_COMPONENTS: tuple[str, ...] = ("kubeScheduler", "kubeControllerManager", "kubeEtcd")


#: Node labels kube-state-metrics copies onto `kube_node_labels` (`--metric-labels-allowlist`, [KSM]): by default
#: none. The dashboards group and filter nodes by pool; the node health row and the `NodeHealthFailedTooLong` alert
#: read the health state label (`components.planning.node_health.HEALTH_STATE_LABEL`).
NODE_LABELS_FOR_DASHBOARDS: tuple[str, ...] = (tags.POOL, tags.ROLE, HEALTH_STATE_LABEL)


def node_exporter_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """prometheus-node-exporter values: on every node (every pool taint tolerated), samples labelled with their
    `node` ([KPS] prometheus-node-exporter `prometheus.monitor.relabelings`), and on a stack with EFA pools the
    textfile sidecar that exports the EFA counters (`components.planning.addons.efa_metrics`)."""
    values: dict[str, Any] = {
        "tolerations": tolerations_for(plans),
        "prometheus": {"monitor": {"relabelings": [dict(NODE_RELABELING)]}},
    }
    if efa_plans(plans):
        values |= efa_textfile_values()
    return values


def monitor_selectors() -> dict[str, Any]:
    """The Prometheus's ServiceMonitor and PodMonitor selectors: the monitor label (`POD_MONITOR_LABELS`), in every
    namespace (an empty namespace selector selects all namespaces; an absent one only Prometheus's own, [PROMOP])."""
    return {
        "serviceMonitorSelector": {"matchLabels": dict(POD_MONITOR_LABELS)},
        "serviceMonitorNamespaceSelector": {},
        "podMonitorSelector": {"matchLabels": dict(POD_MONITOR_LABELS)},
        "podMonitorNamespaceSelector": {},
    }


def kube_prometheus_stack_values(
    alerts: Alerts,
    region: str,
    plans: Sequence[PoolPlan],
    topic_arn: str | None,
    cloudwatch: bool = False,
    node_health: NodeHealth | None = None,
) -> dict[str, Any]:
    """Helm values of kube-prometheus-stack: controllers on the system pool, node-exporter on every node, our
    GPU rules (and the node health rules on a stack with GPU pools, `node_monitoring.node_health_rules`), Alertmanager
    to SNS when a topic exists. Prometheus selects the ServiceMonitors and PodMonitors that carry the monitor label
    (`monitor_selectors`) in any namespace, as the DCGM exporter's, the health loop's and the workloads' do, and every
    PrometheusRule. Grafana runs with
    our dashboards (`components.planning.addons.grafana`), and a CloudWatch data source when the stack has a file
    system whose metrics live there (`cloudwatch`: FSx for Lustre, EFS). No scraping of what EKS hides
    (`EKS_HIDDEN_COMPONENTS`).

    The admission webhook's certificate Jobs (`prometheusOperator.admissionWebhooks.patch`, pre-install hooks)
    run on the system pool too: the chart gives them no toleration and no selector ([KPS] values.yaml
    `admissionWebhooks.patch`, templates job-createSecret.yaml and job-patchWebhook.yaml), so on a cluster whose
    every node is tainted they never schedule and the install hangs."""
    system = {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "tolerations": tolerations_for(system_plans(plans))}
    alertmanager: dict[str, Any] = {
        "serviceAccount": {"create": True, "name": ALERTMANAGER_SERVICE_ACCOUNT},
        "alertmanagerSpec": dict(system),
    }
    routing = alertmanager_config(region, topic_arn)
    if routing is not None:
        alertmanager["config"] = routing
    return with_image_digests(
        "kube-prometheus-stack",
        {
            "grafana": grafana_values(plans, region, MONITORING_NAMESPACE, cloudwatch=cloudwatch),
            **{component: {"enabled": False} for component in EKS_HIDDEN_COMPONENTS},
            "prometheusOperator": {**system, "admissionWebhooks": {"patch": dict(system)}},
            "kube-state-metrics": {
                **system,
                "metricLabelsAllowlist": [f"nodes=[{','.join(NODE_LABELS_FOR_DASHBOARDS)}]"],
            },
            "prometheus-node-exporter": node_exporter_values(plans),
            "prometheus": {
                "prometheusSpec": {
                    **system,
                    **monitor_selectors(),
                    "ruleSelectorNilUsesHelmValues": False,
                    "resources": {"requests": dict(PROMETHEUS_REQUESTS)},
                }
            },
            "alertmanager": alertmanager,
            "additionalPrometheusRulesMap": {
                **prometheus_rules(alerts),
                **(
                    node_health_rules(pending_limit_seconds(node_health or NodeHealth())) if agent_wanted(plans) else {}
                ),
            },
        },
    )
