"""GPU-utilization scaling (pure, no Pulumi): per pool, CloudWatch alarms on the ASG's average GPU utilization and
the step scaling policies they trigger, plus the CloudWatch agent that publishes that metric per ASG.

Source: [CWI] Container Insights GPU metrics (docs/sources.md: aws-gpu-facts.md §7a); CloudWatch agent pages are
cited where they are used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from components import tags
from components.config import GpuUtilizationScaling
from components.planning.addons.alarms import METRIC_PERIOD_SECONDS, MetricAlarmPlan
from components.planning.addons.placement import node_affinity, tolerations_for
from components.planning.pools import PoolPlan


def gpu_scaling_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.kind == "aws" and p.pool.scaling.mode == "gpu-utilization"]


#: The CloudWatch agent's NVIDIA GPU metric (CloudWatch UG, "Collect NVIDIA GPU metrics",
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Agent-NVIDIA-GPU.html:
#: measurement `utilization_gpu` is published as `nvidia_smi_utilization_gpu`), in the agent's default namespace.
GPU_UTILIZATION_METRIC = "nvidia_smi_utilization_gpu"
GPU_UTILIZATION_NAMESPACE = "CWAgent"
ASG_DIMENSION = "AutoScalingGroupName"
#: The extra agent that publishes it (an entry of the add-on's `agents` list, see `gpu_metrics_agent`).
GPU_METRICS_AGENT = "gpu-utilization-agent"


@dataclass(frozen=True)
class StepScalingPolicy:
    """An `aws.autoscaling.Policy` of type StepScaling with one step."""

    suffix: str
    adjustment: int
    #: Bounds of the step, relative to the alarm threshold (AWS: metric - threshold); None = unbounded.
    lower_bound: float | None
    upper_bound: float | None
    #: Seconds before a new instance's metrics count. Step scaling has no cooldown (the `Cooldown` parameter is
    #: SimpleScaling-only, pulumi-aws `autoscaling.Policy` docs / EC2 Auto Scaling API PutScalingPolicy); the
    #: estimated warm-up is its step-scaling counterpart for scale-out.
    estimated_instance_warmup: int | None


@dataclass(frozen=True)
class GpuScalingPlan:
    """Both directions of one pool's GPU-utilization scaling: each alarm triggers the policy of its direction."""

    pool: str
    scale_out_alarm: MetricAlarmPlan
    scale_out_policy: StepScalingPolicy
    scale_in_alarm: MetricAlarmPlan
    scale_in_policy: StepScalingPolicy


#: Stands for the pool's ASG name in `MetricAlarmPlan.dimensions`; the component substitutes the real name.
ASG_NAME = "${asg}"


def gpu_scaling_plan(plan: PoolPlan) -> GpuScalingPlan:
    """Default rule: average GPU utilization of the pool's ASG > 85% for 15 min adds 2 instances,
    < 30% for 30 min removes 1. Evaluation periods are minutes, one 60-second period each.

    Missing data: an ASG at zero publishes nothing; that must not read as "idle" (scale-in) nor as "busy".
    Scale-in pacing: while the scale-in alarm stays in ALARM, CloudWatch invokes its Auto Scaling action once a
    minute (CloudWatch UG, "Alarm actions": "For Auto Scaling actions, the alarm continues to invoke the action
    once per minute that the alarm remains in the new state"), so an idle pool shrinks by one node per minute
    after the first 30 idle minutes until it is busy enough again or reaches `min`.
    """
    g: GpuUtilizationScaling = plan.pool.scaling.gpu_utilization
    return GpuScalingPlan(
        pool=plan.name,
        scale_out_alarm=_pool_gpu_alarm(
            "gpu-high",
            f"pool {plan.name}: average GPU utilization above {g.scale_out_above_percent:g}% for "
            f"{g.scale_out_after_minutes} min -> add {g.scale_out_by} instance(s)",
            "GreaterThanThreshold",
            g.scale_out_above_percent,
            g.scale_out_after_minutes,
        ),
        scale_out_policy=StepScalingPolicy(
            suffix="gpu-scale-out",
            adjustment=g.scale_out_by,
            lower_bound=0.0,
            upper_bound=None,
            estimated_instance_warmup=g.cooldown_seconds,
        ),
        scale_in_alarm=_pool_gpu_alarm(
            "gpu-low",
            f"pool {plan.name}: average GPU utilization below {g.scale_in_below_percent:g}% for "
            f"{g.scale_in_after_minutes} min -> remove {g.scale_in_by} instance(s)",
            "LessThanThreshold",
            g.scale_in_below_percent,
            g.scale_in_after_minutes,
        ),
        scale_in_policy=StepScalingPolicy(
            suffix="gpu-scale-in",
            adjustment=-g.scale_in_by,
            lower_bound=None,
            upper_bound=0.0,
            estimated_instance_warmup=None,
        ),
    )


def _pool_gpu_alarm(suffix: str, description: str, comparison: str, threshold: float, minutes: int) -> MetricAlarmPlan:
    """Average `nvidia_smi_utilization_gpu` of the pool's ASG, one-minute periods, `minutes` of them."""
    return MetricAlarmPlan(
        suffix=suffix,
        description=description,
        namespace=GPU_UTILIZATION_NAMESPACE,
        metric_name=GPU_UTILIZATION_METRIC,
        statistic="Average",
        comparison=comparison,
        threshold=threshold,
        period=METRIC_PERIOD_SECONDS,
        evaluation_periods=minutes,
        dimensions={ASG_DIMENSION: ASG_NAME},
        treat_missing_data="missing",
    )


def gpu_metrics_agent(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """An extra CloudWatch agent (an entry of the add-on's `agents` list) that publishes each GPU-utilization
    pool's `nvidia_smi_utilization_gpu` with the `AutoScalingGroupName` dimension.

    Why an extra agent: Container Insights' `node_gpu_utilization` carries ClusterName/InstanceId/NodeName only
    ([CWI] §7a), so it cannot be scoped to one ASG. The agent's `nvidia_gpu` input with `append_dimensions`
    `${aws:AutoScalingGroupName}` and `aggregation_dimensions [["AutoScalingGroupName"]]` publishes the per-ASG
    aggregate (CloudWatch UG, "Manually create or edit the CloudWatch agent configuration file", metrics section).

    How it runs (aws-observability/helm-charts, chart amazon-cloudwatch-observability, `agents` list: "each entry
    uses the schema & the defaults from $.agent", templates/linux/cloudwatch-agent-custom-resource.yaml @71a298f;
    per-agent `env` from chart 4.3.1, `nodeSelector`/`affinity`/`tolerations` from 3.7.0): a DaemonSet on the host
    network (the chart's `agent.hostNetwork: true`, so IMDS answers with hop limit 1) on the GPU-utilization pools
    only, under the add-on's `cloudwatch-agent` service account (its Pod Identity role holds
    CloudWatchAgentServerPolicy, incl. ec2:DescribeTags for the ASG name). `nvidia-smi` reaches the container
    through the NVIDIA container runtime, which nodeadm makes containerd's default on NVIDIA AMIs ([AMI]
    nodeadm/internal/containerd/runtime_config_nvidia.go), when `NVIDIA_VISIBLE_DEVICES=all` is set (the way GPU
    monitoring DaemonSets see every GPU without requesting one).
    """
    pools = gpu_scaling_plans(plans)
    config = {
        "agent": {"metrics_collection_interval": METRIC_PERIOD_SECONDS},
        "metrics": {
            "namespace": GPU_UTILIZATION_NAMESPACE,
            "append_dimensions": {ASG_DIMENSION: "${aws:AutoScalingGroupName}", "InstanceId": "${aws:InstanceId}"},
            "aggregation_dimensions": [[ASG_DIMENSION]],
            "metrics_collected": {
                "nvidia_gpu": {
                    "measurement": ["utilization_gpu"],
                    "metrics_collection_interval": METRIC_PERIOD_SECONDS,
                }
            },
        },
    }
    return {
        "name": GPU_METRICS_AGENT,
        "mode": "daemonset",
        "config": config,
        "env": [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
        "affinity": node_affinity(tags.POOL, [p.name for p in pools]),
        "tolerations": tolerations_for(pools),
    }
