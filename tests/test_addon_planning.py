"""Pure add-on planning: which add-ons a stack gets, and the values they are installed with."""

from __future__ import annotations

import pytest
import yaml

from components.config import Alerts
from components.planning.addons.cluster_autoscaler import cluster_autoscaler_values
from components.planning.addons.device_plugins import nvidia_device_plugin_values
from components.planning.addons.interruption import asg_arn_pattern, node_termination_handler_policy
from components.planning.addons.monitoring import (
    CLOUDWATCH_ADDON,
    CLUSTER_NAME,
    cloudwatch_addon_configuration,
    container_insights_alarms,
    dcgm_counters_csv,
    prometheus_rules,
)
from components.planning.addons.placement import CRITICAL_ADDONS_ONLY, tolerations_for
from components.planning.addons.selection import select_addons
from components.planning.pools import DEVICE_PLUGIN_CONFIG_LABEL, STARTUP_TAINT
from components.planning.stack_plan import plan_pools
from tests.builders import (
    EKS_ADDON,
    HELM_RELEASE,
    HYBRID_POOL,
    INFERENCE_POOL,
    SYSTEM_POOL,
    TRAINING_POOL,
    addon_stack,
    pool,
    shipped_stack,
)


def select(*pools, **addons):
    spec = addon_stack(*pools, addons=addons)
    return select_addons(spec.addons, plan_pools(spec))


# ---------------------------------------------------------------------------------------------- selection
def test_training_stack_gets_both_device_plugins_and_the_autoscaler():
    s = select(SYSTEM_POOL, TRAINING_POOL)
    assert s.on("nvidia-device-plugin") and s.on("efa-device-plugin") and s.on("cluster-autoscaler")
    assert s.on("node-termination-handler")  # every Auto Scaling group drains through it, on-demand ones too
    assert not s.on("keda")  # no serving workload
    assert s.on("kueue")  # a training GPU pool queues its jobs
    assert s.enabled == [
        "nvidia-device-plugin",
        "efa-device-plugin",
        "cluster-autoscaler",
        "node-termination-handler",
        "kueue",
        "jobset",
        "container-insights",
        "node-health",
    ]


def test_a_gpu_utilization_pool_is_sized_by_the_autoscaler_and_drained_by_the_handler():
    s = select(SYSTEM_POOL, INFERENCE_POOL)
    assert s.on("node-termination-handler")
    assert s.on("cluster-autoscaler")  # l40s nodes follow the serving replicas
    assert not s.on("efa-device-plugin")  # inference pools wire no EFA by default


def test_auto_switches_follow_explicit_on_and_off():
    s = select(
        SYSTEM_POOL,
        TRAINING_POOL,
        efaDevicePlugin={"enabled": "off"},
        clusterAutoscaler={"enabled": "off"},
        nodeTerminationHandler={"enabled": "on"},
    )
    assert not s.on("efa-device-plugin") and not s.on("cluster-autoscaler") and s.on("node-termination-handler")


def test_autoscaler_auto_ignores_pools_that_cannot_scale():
    fixed_range = pool(TRAINING_POOL, scaling={"min": 2, "max": 2, "mode": "cluster-autoscaler"})
    assert not select(SYSTEM_POOL, fixed_range).on("cluster-autoscaler")


def test_nvidia_plugin_needs_gpus_and_its_switch():
    assert not select(SYSTEM_POOL).on("nvidia-device-plugin")
    assert not select(SYSTEM_POOL, TRAINING_POOL, nvidiaDevicePlugin={"enabled": False}).on("nvidia-device-plugin")
    assert select(SYSTEM_POOL, HYBRID_POOL).on("nvidia-device-plugin")  # on-prem A40s need it too


def test_alerts_topic_mode():
    assert select(SYSTEM_POOL).alerts_topic == "none"
    assert select(SYSTEM_POOL, monitoring={"alerts": {"email": "ops@example.com"}}).alerts_topic == "create"
    arn = "arn:aws:sns:us-east-1:123456789012:ops"
    assert select(SYSTEM_POOL, monitoring={"alerts": {"snsTopicArn": arn}}).alerts_topic == "existing"


def test_everything_off_selects_nothing():
    s = select(
        SYSTEM_POOL,
        nvidiaDevicePlugin={"enabled": False},
        efaDevicePlugin={"enabled": "off"},
        clusterAutoscaler={"enabled": "off"},
        nodeTerminationHandler={"enabled": "off"},
        monitoring={"containerInsights": False, "dcgmPrometheus": False},
    )
    assert s.enabled == [] and not s.monitoring


# ----------------------------------------------------------------------------------------------- tolerations
def test_tolerations_match_each_taint_once_with_its_value_and_effect():
    gpu = pool(TRAINING_POOL, taints=[{"key": "dedicated", "value": "training", "effect": "NoExecute"}])
    other = pool(INFERENCE_POOL, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    spec = addon_stack(SYSTEM_POOL, gpu, other)
    assert tolerations_for(plan_pools(spec)) == [
        CRITICAL_ADDONS_ONLY,
        {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoExecute"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        # node agents run on held nodes: the check needs them
        {"key": STARTUP_TAINT.key, "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    ]


# ------------------------------------------------------------------------------------- NVIDIA device plugin
def test_device_plugin_config_map_has_a_default_and_one_entry_per_time_sliced_pool():
    sliced = pool(INFERENCE_POOL, devicePlugin={"timeSlicingReplicas": 4})
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, sliced, addons={"nvidiaDevicePlugin": {"migStrategy": "single"}})
    plans = plan_pools(spec)
    values = nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, plans)
    config = values["config"]
    assert config["default"] == "default"
    assert sorted(config["map"]) == ["default", "l40s"]
    # the entry name is what the pool's nodes carry in their per-node config label
    label = next(p for p in plans if p.name == "l40s").labels[DEVICE_PLUGIN_CONFIG_LABEL]
    assert label in config["map"]
    sliced_config = yaml.safe_load(config["map"][label])
    assert sliced_config["version"] == "v1"
    assert sliced_config["flags"] == {"migStrategy": "single"}
    assert sliced_config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert sliced_config["sharing"]["timeSlicing"]["renameByDefault"] is False
    default = yaml.safe_load(config["map"]["default"])
    assert default == {"version": "v1", "flags": {"migStrategy": "single"}}
    assert values["migStrategy"] == "single"


def test_device_plugin_schedules_on_the_gpu_present_label_and_runs_gpu_feature_discovery_with_one_nfd():
    """One release covers cloud and hybrid GPU nodes when the hybrid servers run the NVIDIA runtime by default; it
    runs GPU feature discovery and the chart's NFD, whose worker goes on every GPU node and nowhere else; the
    runtime-class release runs GPU feature discovery without a second NFD."""
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, pool(HYBRID_POOL, gpuRuntime="default-runtime"))
    plans = plan_pools(spec)
    values = nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, plans)
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]
    assert values["gfd"] == {"enabled": True} and values["nfd"]["enabled"] is True
    worker = values["nfd"]["worker"]
    assert worker["affinity"] == values["affinity"]
    gpu_taints = {(t.key, t.value, t.effect) for p in plans if p.is_gpu for t in p.registration_taints}
    assert gpu_taints and gpu_taints <= {(t["key"], t.get("value"), t.get("effect")) for t in worker["tolerations"]}
    assert values["nfd"]["master"]["nodeSelector"] == {"gpu-clusters/role": "system"}
    by_class = addon_stack(SYSTEM_POOL, TRAINING_POOL, pool(HYBRID_POOL, gpuRuntime="runtime-class"))
    second = nvidia_device_plugin_values(by_class.addons.nvidia_device_plugin, plan_pools(by_class), runtime_class=True)
    assert second["gfd"] == {"enabled": True} and second["nfd"] == {"enabled": False}
    assert values["priorityClassName"] == "system-node-critical"
    # every GPU pool (cloud and hybrid) carries the label the affinity requires
    assert all(p.labels.get("nvidia.com/gpu.present") == "true" for p in plan_pools(spec) if p.is_gpu)


def test_the_nfd_master_and_garbage_collector_tolerate_the_system_pools_own_taints():
    """A system pool that names its own taints: NFD's master and garbage collector tolerate them like every other
    controller on that pool (the release waits for the master, so one that cannot land fails `pulumi up`)."""
    taint = {"key": "dedicated", "value": "platform", "effect": "NoSchedule"}
    spec = addon_stack(pool(SYSTEM_POOL, taints=[taint]), TRAINING_POOL)
    values = nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, plan_pools(spec))
    for part in ("master", "gc"):
        placement = values["nfd"][part]
        assert placement["nodeSelector"] == {"gpu-clusters/role": "system"}
        assert {"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"} in placement[
            "tolerations"
        ], part


def test_device_plugin_stays_off_bottlerocket_nodes_which_bundle_their_own():
    bottlerocket = pool(INFERENCE_POOL, amiFamily="bottlerocket")
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, bottlerocket)
    values = nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, plan_pools(spec))
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
        {"key": "gpu-clusters/pool", "operator": "NotIn", "values": ["l40s"]},
    ]


# ---------------------------------------------------------------------------------------- cluster-autoscaler
def test_autoscaler_values_follow_config():
    spec = addon_stack(
        SYSTEM_POOL,
        TRAINING_POOL,
        addons={"clusterAutoscaler": {"expander": "most-pods", "scaleDownUnneededTime": "20m"}},
        name="train",
    )
    values = cluster_autoscaler_values(
        spec.addons.cluster_autoscaler, spec.cluster.name, spec.region, plan_pools(spec), "v1.35.2"
    )
    assert values["autoDiscovery"] == {
        "clusterName": "train",
        "tags": ["k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/train"],
    }
    assert values["extraArgs"]["expander"] == "most-pods"
    assert values["extraArgs"]["scale-down-unneeded-time"] == "20m"
    assert values["extraArgs"]["skip-nodes-with-local-storage"] is False
    assert values["extraArgs"]["balance-similar-node-groups"] is True
    assert values["image"] == {"tag": "v1.35.2"}
    assert values["nodeSelector"] == {"gpu-clusters/role": "system"}


# ----------------------------------------------------------------------------------------- interruptions
def test_asg_arn_pattern_wildcards_only_the_group_id():
    assert asg_arn_pattern("us-east-1", "123456789012", "serve-l40s") == (
        "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/serve-l40s"
    )


def test_termination_handler_policy_without_spot_groups_grants_no_lifecycle_action():
    document = node_termination_handler_policy("arn:aws:sqs:us-east-1:1:q", [])
    actions = [a for s in document["Statement"] for a in s["Action"]]
    assert "autoscaling:CompleteLifecycleAction" not in actions


# ---------------------------------------------------------------------------------- GPU-utilization scaling
def test_cloudwatch_addon_runs_no_gpu_agent_for_scaling():
    """The CloudWatch agent's `nvidia_gpu` input cannot publish from the add-on's image; serving autoscaling reads the
    DCGM exporter instead, so the add-on keeps its default agent list."""
    config = cloudwatch_addon_configuration(plan_pools(addon_stack(SYSTEM_POOL, INFERENCE_POOL)))
    assert "agents" not in config


# ------------------------------------------------------------------------------------------------ monitoring
@pytest.mark.parametrize(("temperature", "idle", "minutes"), [(85, 30, 30), (80, 10, 60)])
def test_container_insights_alarms_follow_alerts_config(temperature, idle, minutes):
    alarms = {
        a.suffix: a
        for a in container_insights_alarms(
            Alerts(gpu_temperature_celsius=temperature, idle_utilization_percent=idle, idle_minutes=minutes)
        )
    }
    hot, idle_alarm = alarms["gpu-temperature"], alarms["gpu-idle"]
    assert (hot.metric_name, hot.comparison, hot.threshold) == (
        "node_gpu_temperature",
        "GreaterThanThreshold",
        temperature,
    )
    assert (idle_alarm.metric_name, idle_alarm.threshold) == ("node_gpu_utilization", idle)
    assert idle_alarm.evaluation_periods == minutes and idle_alarm.period == 60
    assert hot.namespace == idle_alarm.namespace == "ContainerInsights"
    assert hot.dimensions == {"ClusterName": CLUSTER_NAME}


def test_dcgm_counters_export_xid_and_ecc_which_the_chart_default_leaves_out():
    csv = dcgm_counters_csv()
    fields = [line.split(",")[0] for line in csv.splitlines()]
    assert {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_GPU_TEMP"} <= set(fields)
    assert len(fields) == len(set(fields))


def test_prometheus_rules_cover_xid_ecc_temperature_and_idle_spend():
    rules = prometheus_rules(Alerts(gpu_temperature_celsius=83))["gpu-health"]["groups"][0]["rules"]
    by_name = {r["alert"]: r for r in rules}
    assert set(by_name) == {"GpuXidError", "GpuEccUncorrectableErrors", "GpuTemperatureHigh", "GpuIdleSpend"}
    assert "DCGM_FI_DEV_XID_ERRORS" in by_name["GpuXidError"]["expr"]
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in by_name["GpuEccUncorrectableErrors"]["expr"]
    assert by_name["GpuTemperatureHigh"]["expr"] == "DCGM_FI_DEV_GPU_TEMP > 83"
    assert by_name["GpuIdleSpend"]["for"] == "30m"


# ------------------------------------------------------------------------------------------ shipped stacks
@pytest.mark.program
@pytest.mark.parametrize(
    ("stack_name", "expected_releases", "expected_alarms"),
    [
        (
            "training",
            {
                "nvidia-device-plugin",
                "aws-efa-k8s-device-plugin",
                "cluster-autoscaler",
                "kube-prometheus-stack",
                "dcgm-exporter",
            },
            set(),
        ),
        (
            "smoke",
            {"nvidia-device-plugin", "cluster-autoscaler"},
            {"smoke-gpu-temperature", "smoke-gpu-idle", "smoke-node-health-heartbeat"}
            # one per condition for the stack, each pool a contributor of it
            | {
                f"smoke-node-health-{alarm}"
                for alarm in ("repairs-held", "failed-too-long", "gate-failures", "conditions")
            },
        ),
        (
            "inference",
            {
                "nvidia-device-plugin",
                "aws-node-termination-handler",
                "cluster-autoscaler",
                "keda",
                "kube-prometheus-stack",
                "dcgm-exporter",
            },
            set(),
        ),
    ],
)
def test_shipped_stacks_plan_their_addons(stack_name, expected_releases, expected_alarms):
    run = shipped_stack(stack_name).run
    release_names = {r.inputs["name"] for r in run.of_type(HELM_RELEASE)}
    assert expected_releases <= release_names
    alarms = {r.name: r.inputs for r in run.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")}
    assert set(alarms) == expected_alarms
    addons = [a.inputs["addonName"] for a in run.of_type(EKS_ADDON)]
    assert addons.count(CLOUDWATCH_ADDON) == (1 if expected_alarms else 0)
    if stack_name == "inference":  # serving on the Prometheus path; both Auto Scaling groups drain through the handler
        assert run.of_type("aws:autoscaling/policy:Policy") == []
        assert len(run.of_type("aws:autoscaling/lifecycleHook:LifecycleHook")) == 2  # system and l40s
