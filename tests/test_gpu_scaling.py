"""GPU-utilization scaling: two alarms on the pool ASG's GPU utilization, each wired to a step scaling policy."""

from __future__ import annotations

import json

import pytest

from tests.builders import INFERENCE_POOL, SYSTEM_POOL, TRAINING_POOL, addon_stack, asg_name, pool, run_addons

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
POLICY = "aws:autoscaling/policy:Policy"


@pytest.fixture(scope="module")
def default_run():
    spec = addon_stack(SYSTEM_POOL, INFERENCE_POOL, name="serve")
    return spec, run_addons(spec)


def test_default_rule_alarms(default_run):
    spec, run = default_run
    high = run.one(ALARM, "serve-l40s-gpu-high").inputs
    low = run.one(ALARM, "serve-l40s-gpu-low").inputs
    for alarm in (high, low):
        assert alarm["namespace"] == "CWAgent"
        assert alarm["metricName"] == "nvidia_smi_utilization_gpu"
        assert alarm["statistic"] == "Average"
        assert alarm["period"] == 60
        assert alarm["dimensions"] == {"AutoScalingGroupName": asg_name(spec, "l40s")}
    assert (high["comparisonOperator"], high["threshold"], high["evaluationPeriods"]) == (
        "GreaterThanThreshold",
        85,
        15,
    )
    assert (low["comparisonOperator"], low["threshold"], low["evaluationPeriods"]) == ("LessThanThreshold", 30, 30)


def test_default_rule_step_policies_are_the_alarm_actions(default_run):
    spec, run = default_run
    out = run.one(POLICY, "serve-l40s-gpu-scale-out").inputs
    scale_in = run.one(POLICY, "serve-l40s-gpu-scale-in").inputs
    for policy in (out, scale_in):
        assert policy["autoscalingGroupName"] == asg_name(spec, "l40s")
        assert policy["policyType"] == "StepScaling"
        assert policy["adjustmentType"] == "ChangeInCapacity"
        assert "cooldown" not in policy  # SimpleScaling-only parameter
    assert out["stepAdjustments"] == [{"metricIntervalLowerBound": "0", "scalingAdjustment": 2}]
    assert out["estimatedInstanceWarmup"] == 300
    assert scale_in["stepAdjustments"] == [{"metricIntervalUpperBound": "0", "scalingAdjustment": -1}]
    # the mocks give each policy the ARN `arn:aws:autoscaling:<region>:<account>:policy/<name>`
    high = run.one(ALARM, "serve-l40s-gpu-high").inputs
    low = run.one(ALARM, "serve-l40s-gpu-low").inputs
    assert len(high["alarmActions"]) == 1 and high["alarmActions"][0].endswith("/serve-l40s-gpu-scale-out")
    assert len(low["alarmActions"]) == 1 and low["alarmActions"][0].endswith("/serve-l40s-gpu-scale-in")


def test_custom_thresholds_minutes_steps_and_warmup():
    custom = pool(
        INFERENCE_POOL,
        scaling={
            "min": 2,
            "max": 10,
            "mode": "gpu-utilization",
            "gpuUtilization": {
                "scaleOutAbovePercent": 75,
                "scaleOutAfterMinutes": 10,
                "scaleOutBy": 4,
                "scaleInBelowPercent": 25,
                "scaleInAfterMinutes": 60,
                "scaleInBy": 2,
                "cooldownSeconds": 900,
            },
        },
    )
    run = run_addons(addon_stack(SYSTEM_POOL, custom, name="serve"))
    high = run.one(ALARM, "serve-l40s-gpu-high").inputs
    low = run.one(ALARM, "serve-l40s-gpu-low").inputs
    assert (high["threshold"], high["evaluationPeriods"]) == (75, 10)
    assert (low["threshold"], low["evaluationPeriods"]) == (25, 60)
    out = run.one(POLICY, "serve-l40s-gpu-scale-out").inputs
    scale_in = run.one(POLICY, "serve-l40s-gpu-scale-in").inputs
    assert out["stepAdjustments"][0]["scalingAdjustment"] == 4 and out["estimatedInstanceWarmup"] == 900
    assert scale_in["stepAdjustments"][0]["scalingAdjustment"] == -2


def test_the_metric_publisher_runs_on_the_pool(default_run):
    _, run = default_run
    addon = run.one("aws:eks/addon:Addon").inputs
    agents = json.loads(addon["configurationValues"])["agents"]
    gpu_agent = next(a for a in agents if a["name"] == "gpu-utilization-agent")
    expression = gpu_agent["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"][0]
    assert expression == {"key": "gpu-clusters/pool", "operator": "In", "values": ["l40s"]}
    assert gpu_agent["config"]["metrics"]["aggregation_dimensions"] == [["AutoScalingGroupName"]]


def test_nothing_for_pools_in_other_modes():
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL))
    assert run.of_type(POLICY) == []
    assert [a.name for a in run.of_type(ALARM) if "-gpu-high" in a.name or "-gpu-low" in a.name] == []
    assert run.of_type("gpu-clusters:index:GpuUtilizationScaling") == []
