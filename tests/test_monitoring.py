"""Monitoring and alerts: the CloudWatch observability add-on, GPU alarms, the SNS topic, DCGM + Prometheus."""

from __future__ import annotations

import json

import pytest

from components.catalog import versions
from components.errors import ConfigError
from tests.builders import (
    EKS_ADDON,
    HELM_RELEASE,
    HYBRID_POOL,
    IAM_ROLE,
    KMS_KEY,
    SYSTEM_POOL,
    TRAINING_POOL,
    addon_stack,
    pool,
    releases,
    run_addons,
    stack_config,
)

ADDON = EKS_ADDON
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
TOPIC = "aws:sns/topic:Topic"
SUBSCRIPTION = "aws:sns/topicSubscription:TopicSubscription"
KEY = KMS_KEY
EXISTING_TOPIC = "arn:aws:sns:us-east-1:123456789012:gpu-oncall"
NODE_LABELLED_SERVICE_MONITOR = {
    "enabled": True,
    "additionalLabels": {"release": "kube-prometheus-stack"},
    "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}],
}


@pytest.mark.program
def test_cloudwatch_addon_with_pod_identity_role_and_gpu_tolerations():
    tainted = pool(TRAINING_POOL, taints=[{"key": "dedicated", "value": "training", "effect": "NoSchedule"}])
    run = run_addons(addon_stack(SYSTEM_POOL, tainted, name="train"))
    addon = run.one(ADDON)
    assert addon.inputs["addonName"] == "amazon-cloudwatch-observability"
    assert addon.inputs["clusterName"] == "train"
    # unpinned: the catalog's exact version for the cluster's Kubernetes version
    assert addon.inputs["addonVersion"] == versions.managed_addon_version("amazon-cloudwatch-observability", "1.35")
    config = json.loads(addon.inputs["configurationValues"])
    assert {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"} in config[
        "tolerations"
    ]
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in config["tolerations"]
    # the operator's controller-manager reads only `manager.tolerations` (chart default []): it must tolerate the
    # system pool's taint and select it, or it fits no node (tests/charts renders it against the pools)
    assert config["manager"]["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in config["manager"]["tolerations"]
    assert {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"} not in config[
        "manager"
    ]["tolerations"]
    role = run.one(IAM_ROLE, "cloudwatch-agent")
    assert role.inputs["managedPolicyArns"] == ["CloudWatchAgentServerPolicy"]
    assert role.inputs["tags"] == {"namespace": "amazon-cloudwatch", "service-account": "cloudwatch-agent"}
    assert role.urn in addon.depends_on


@pytest.mark.program
def test_pinned_addon_version_is_used_and_checked_against_the_gpu_metrics_minimum():
    pin = "v4.7.0-eksbuild.1"
    spec = addon_stack(
        SYSTEM_POOL, TRAINING_POOL, addons={"managed": {"pins": {"amazon-cloudwatch-observability": pin}}}
    )
    assert run_addons(spec).one(ADDON).inputs["addonVersion"] == pin
    minimum = versions.managed_addon("amazon-cloudwatch-observability").minimum_version
    assert minimum == "v1.3.0-eksbuild.1"  # Container Insights GPU metrics, facts §7a


@pytest.mark.program
def test_gpu_alarms_on_container_insights_metrics():
    spec = addon_stack(
        SYSTEM_POOL,
        TRAINING_POOL,
        name="train",
        addons={
            "monitoring": {"alerts": {"gpuTemperatureCelsius": 80, "idleUtilizationPercent": 25, "idleMinutes": 45}}
        },
    )
    run = run_addons(spec)
    hot = run.one(ALARM, "train-gpu-temperature").inputs
    idle = run.one(ALARM, "train-gpu-idle").inputs
    for alarm in (hot, idle):
        assert alarm["namespace"] == "ContainerInsights"
        assert alarm["dimensions"] == {"ClusterName": "train"}
        assert alarm["period"] == 60
        assert "alarmActions" not in alarm or alarm["alarmActions"] == []  # no topic configured
    assert (hot["metricName"], hot["comparisonOperator"], hot["threshold"]) == (
        "node_gpu_temperature",
        "GreaterThanThreshold",
        80,
    )
    assert (idle["metricName"], idle["comparisonOperator"], idle["threshold"], idle["evaluationPeriods"]) == (
        "node_gpu_utilization",
        "LessThanThreshold",
        25,
        45,
    )


@pytest.mark.program
def test_email_creates_a_kms_encrypted_topic_and_alarms_notify_it():
    spec = addon_stack(
        SYSTEM_POOL, TRAINING_POOL, name="train", addons={"monitoring": {"alerts": {"email": "ops@example.com"}}}
    )
    run = run_addons(spec)
    key = run.one(KEY)
    topic = run.one(TOPIC)
    assert topic.inputs["kmsMasterKeyId"].startswith("arn:aws:kms:")
    assert key.protect and key.retain_on_delete  # a KMS key is stateful (components.planning.stateful)
    statements = {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}
    assert statements["CloudWatchAlarmsEncrypt"]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    # ... for this stack's alerts topic only (SNS's encryption context names the topic)
    assert statements["CloudWatchAlarmsEncrypt"]["Condition"] == {
        "StringLike": {"kms:EncryptionContext:aws:sns:topicArn": "arn:aws:sns:us-east-1:123456789012:train-alerts-*"}
    }
    subscription = run.one(SUBSCRIPTION).inputs
    assert (subscription["protocol"], subscription["endpoint"]) == ("email", "ops@example.com")
    topic_arn = subscription["topic"]
    for alarm in (run.one(ALARM, "train-gpu-temperature"), run.one(ALARM, "train-gpu-idle")):
        assert alarm.inputs["alarmActions"] == [topic_arn]


@pytest.mark.program
def test_existing_topic_is_used_not_created():
    spec = addon_stack(
        SYSTEM_POOL, TRAINING_POOL, name="train", addons={"monitoring": {"alerts": {"snsTopicArn": EXISTING_TOPIC}}}
    )
    run = run_addons(spec)
    assert run.of_type(TOPIC) == [] and run.of_type(KEY) == [] and run.of_type(SUBSCRIPTION) == []
    assert run.one(ALARM, "train-gpu-idle").inputs["alarmActions"] == [EXISTING_TOPIC]
    # the health loop's alarms too, its Metrics Insights ones (each pool a contributor that notifies) included
    alarms = {a.name: a.inputs for a in run.of_type(ALARM)}
    assert "metricQueries" in alarms["train-node-health-repairs-held"]
    for name, alarm in alarms.items():
        assert (alarm["alarmActions"], alarm["okActions"]) == ([EXISTING_TOPIC], [EXISTING_TOPIC]), name


@pytest.mark.program
def test_dcgm_prometheus_path():
    spec = addon_stack(
        SYSTEM_POOL,
        TRAINING_POOL,
        name="train",
        addons={
            "monitoring": {
                "containerInsights": False,
                "dcgmPrometheus": True,
                "alerts": {"snsTopicArn": EXISTING_TOPIC},
            }
        },
    )
    run = run_addons(spec)
    assert run.of_type(ADDON) == []  # Container Insights off
    by_name = releases(run)
    kps, dcgm = by_name["kube-prometheus-stack"], by_name["dcgm-exporter"]
    for release, chart in ((kps, "kube-prometheus-stack"), (dcgm, "dcgm-exporter")):
        pin = versions.chart(chart)
        assert release["chart"] == chart and release["version"] == pin.version
        assert release["repositoryOpts"] == {"repo": pin.repository}
        assert release["namespace"] == "monitoring"
    assert kps["createNamespace"] is False, "the stack creates the namespace with its Pod Security labels"
    # DCGM exporter: every GPU node, GPU taints tolerated, ServiceMonitor on, ECC counters exported
    values = dcgm["values"]
    assert values["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in values[
        "tolerations"
    ]
    # samples labelled with their node, as the dashboards filter and join on it
    assert values["serviceMonitor"] == NODE_LABELLED_SERVICE_MONITOR
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in values["customMetrics"]
    # installed after kube-prometheus-stack, whose CRDs its ServiceMonitor needs
    kps_urn = next(r.urn for r in run.of_type(HELM_RELEASE) if r.inputs["name"] == "kube-prometheus-stack")
    dcgm_reg = next(r for r in run.of_type(HELM_RELEASE) if r.inputs["name"] == "dcgm-exporter")
    assert kps_urn in dcgm_reg.depends_on
    # rules and routing to the topic
    rules = kps["values"]["additionalPrometheusRulesMap"]["gpu-health"]["groups"][0]["rules"]
    assert {r["alert"] for r in rules} >= {"GpuXidError", "GpuEccUncorrectableErrors"}
    receivers = {r["name"]: r for r in kps["values"]["alertmanager"]["config"]["receivers"]}
    assert receivers["sns"]["sns_configs"][0]["topic_arn"] == EXISTING_TOPIC
    assert kps["values"]["prometheus"]["prometheusSpec"]["nodeSelector"] == {"gpu-clusters/role": "system"}
    # Burstable on the shared system nodes, never evicted first as BestEffort
    assert kps["values"]["prometheus"]["prometheusSpec"]["resources"] == {"requests": {"cpu": "500m", "memory": "2Gi"}}
    assert kps["values"]["grafana"]["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}}
    # Alertmanager may publish to that topic only
    role = run.one(IAM_ROLE, "alertmanager")
    (inline,) = role.inputs["inlinePolicies"]
    assert json.loads(inline["policy"])["Statement"] == [
        {"Sid": "Publish", "Effect": "Allow", "Action": "sns:Publish", "Resource": EXISTING_TOPIC}
    ]


@pytest.mark.program
@pytest.mark.parametrize("dcgm", [False, True])
def test_nothing_deployed_when_monitoring_is_off(dcgm):
    spec = addon_stack(
        SYSTEM_POOL, TRAINING_POOL, addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": dcgm}}
    )
    run = run_addons(spec)
    assert run.of_type(ADDON) == [] and run.of_type(ALARM) == [] and run.of_type(TOPIC) == []
    names = set(releases(run))
    assert ("kube-prometheus-stack" in names) is dcgm and ("dcgm-exporter" in names) is dcgm
    assert (run.of_type("gpu-clusters:index:Monitoring") != []) is dcgm


@pytest.mark.program
def test_kube_prometheus_stack_leaves_out_what_eks_hides_and_runs_its_hook_jobs_on_the_system_pool():
    """EKS runs the scheduler, controller manager and etcd out of reach: scraping them would alert forever
    (KubeSchedulerDown, ...). The admission webhook's certificate Jobs (pre-install hooks) get the system pool's
    selector and tolerations, or they never schedule on a cluster whose every node is tainted."""
    tainted_system = pool(SYSTEM_POOL, taints=[{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}])
    monitoring = {"containerInsights": False, "dcgmPrometheus": True}
    spec = addon_stack(tainted_system, TRAINING_POOL, addons={"monitoring": monitoring})
    values = releases(run_addons(spec))["kube-prometheus-stack"]["values"]
    for component in ("kubeScheduler", "kubeControllerManager", "kubeEtcd"):
        assert values[component] == {"enabled": False}
    assert "kubeProxy" not in values  # every stack runs the kube-proxy add-on
    patch = values["prometheusOperator"]["admissionWebhooks"]["patch"]
    assert patch["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in patch[
        "tolerations"
    ]


def test_two_dcgm_exporters_never_share_a_node():
    """The CloudWatch add-on runs its own DCGM exporter on every NVIDIA node, so the Prometheus path (NVIDIA's
    dcgm-exporter) is refused while Container Insights is on."""
    both = {"monitoring": {"dcgmPrometheus": True}}
    with pytest.raises(ConfigError, match=r"addons\.monitoring\.dcgmPrometheus.*containerInsights: false"):
        stack_config(SYSTEM_POOL, TRAINING_POOL, addons=both, validated=True)
    one = {"monitoring": {"dcgmPrometheus": True, "containerInsights": False}}
    stack_config(SYSTEM_POOL, TRAINING_POOL, addons=one, validated=True)


@pytest.mark.program
def test_dcgm_exporter_and_gpu_alerts_cover_the_hybrid_pool():
    """The A40 servers are scraped by their own DCGM exporter release running under the `nvidia` RuntimeClass (runc
    sees no GPU there), cloud GPU nodes by the first release, and the XID, temperature and idle rules select no pool,
    so they fire for on-prem GPUs too."""
    monitoring = {"containerInsights": False, "dcgmPrometheus": True}
    by_name = releases(
        run_addons(
            addon_stack(
                SYSTEM_POOL,
                TRAINING_POOL,
                pool(HYBRID_POOL, gpuRuntime="runtime-class"),
                addons={"monitoring": monitoring},
            )
        )
    )
    hybrid, cloud = by_name["dcgm-exporter-runtime-class"], by_name["dcgm-exporter"]
    # its own namespace: the chart's ConfigMap and Role have fixed names, which a second release in `monitoring`
    # would render again (tests/charts renders both)
    assert hybrid["chart"] == "dcgm-exporter" and hybrid["namespace"] == "dcgm-exporter-runtime-class"
    assert cloud["namespace"] == "monitoring"
    assert hybrid["values"]["runtimeClassName"] == "nvidia"
    assert hybrid["values"]["serviceMonitor"] == NODE_LABELLED_SERVICE_MONITOR
    pool_term = {"key": "gpu-clusters/pool", "operator": "In", "values": ["a40"]}
    terms = hybrid["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    not_paused = {
        "key": "nvidia.com/gpu.deploy.dcgm-exporter",
        "operator": "NotIn",
        "values": ["paused-for-mig-change", "paused-for-diagnostic"],
    }
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [pool_term, not_paused]}]
    assert "runtimeClassName" not in cloud["values"]
    cloud_terms = cloud["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert cloud_terms["nodeSelectorTerms"] == [{"matchExpressions": [{**pool_term, "operator": "NotIn"}, not_paused]}]
    rules = by_name["kube-prometheus-stack"]["values"]["additionalPrometheusRulesMap"]["gpu-health"]["groups"][0]
    exprs = {rule["alert"]: rule["expr"] for rule in rules["rules"]}
    for alert in ("GpuXidError", "GpuTemperatureHigh", "GpuIdleSpend"):
        assert "{" not in exprs[alert], f"{alert} selects series: {exprs[alert]}"


@pytest.mark.program
def test_cloud_only_dcgm_exporter_values_keep_off_only_paused_nodes():
    """Without hybrid or MIG pools the exporter's only affinity is the pause label (`verify dcgm --dcgm-level 4`)."""
    monitoring = {"containerInsights": False, "dcgmPrometheus": True}
    by_name = releases(run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"monitoring": monitoring})))
    assert "dcgm-exporter-runtime-class" not in by_name
    terms = by_name["dcgm-exporter"]["values"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {
                    "key": "nvidia.com/gpu.deploy.dcgm-exporter",
                    "operator": "NotIn",
                    "values": ["paused-for-mig-change", "paused-for-diagnostic"],
                }
            ]
        }
    ]
    assert "runtimeClassName" not in by_name["dcgm-exporter"]["values"]


@pytest.mark.program
def test_a_time_sliced_pool_gets_per_pod_gpu_series_with_the_hosts_pids():
    monitoring = {"containerInsights": False, "dcgmPrometheus": True}
    shared = pool(TRAINING_POOL, devicePlugin={"timeSlicingReplicas": 2})
    values = releases(run_addons(addon_stack(SYSTEM_POOL, shared, addons={"monitoring": monitoring})))["dcgm-exporter"][
        "values"
    ]
    assert {"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"} in values["extraEnv"]
    assert values["hostPID"] is True
    whole = releases(run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"monitoring": monitoring})))
    assert "extraEnv" not in whole["dcgm-exporter"]["values"] and "hostPID" not in whole["dcgm-exporter"]["values"]
