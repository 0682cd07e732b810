"""GPU-utilization step scaling for pools in `gpu-utilization` mode (inference pools behind a queue or a router).

cluster-autoscaler adds nodes only for pending pods; an inference pool that serves more traffic on the same pods
needs to grow on load instead. Per pool: two CloudWatch alarms on the average `nvidia_smi_utilization_gpu` of the
pool's ASG (published by the GPU metrics agent the monitoring add-on runs on these pools, see
`components.planning.addons.gpu_scaling.gpu_metrics_agent`) and two step scaling policies they trigger.
Thresholds, minutes and steps come from `scaling.gpuUtilization`
(default: > 85% for 15 min -> +2, < 30% for 30 min -> -1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws

from components import tags
from components.addons.alarms import metric_alarm
from components.context import ClusterContext
from components.planning.addons.gpu_scaling import ASG_NAME, gpu_scaling_plan, gpu_scaling_plans
from components.planning.pools import PoolPlan


def _bound(value: float | None) -> str | None:
    """Step bounds are strings in the provider (a float rendered without a trailing `.0`)."""
    return None if value is None else f"{value:g}"


class GpuUtilizationScaling(pulumi.ComponentResource):
    """Alarms and step scaling policies for one pool."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        pool: PoolPlan,
        asg_name: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:GpuUtilizationScaling", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.plan = gpu_scaling_plan(pool)
        resource_tags = tags.with_tags(ctx.tags, pool=pool.name)
        prefix = f"{ctx.cluster_name_plain}-{pool.name}"
        self.policies: dict[str, aws.autoscaling.Policy] = {}
        self.alarms: dict[str, aws.cloudwatch.MetricAlarm] = {}
        for alarm, step in (
            (self.plan.scale_out_alarm, self.plan.scale_out_policy),
            (self.plan.scale_in_alarm, self.plan.scale_in_policy),
        ):
            policy = aws.autoscaling.Policy(
                f"{prefix}-{step.suffix}",
                autoscaling_group_name=asg_name,
                policy_type="StepScaling",
                adjustment_type="ChangeInCapacity",
                metric_aggregation_type="Average",
                estimated_instance_warmup=step.estimated_instance_warmup,
                step_adjustments=[
                    aws.autoscaling.PolicyStepAdjustmentArgs(
                        scaling_adjustment=step.adjustment,
                        metric_interval_lower_bound=_bound(step.lower_bound),
                        metric_interval_upper_bound=_bound(step.upper_bound),
                    )
                ],
                opts=child,
            )
            self.policies[step.suffix] = policy
            self.alarms[alarm.suffix] = metric_alarm(
                f"{prefix}-{alarm.suffix}",
                alarm,
                {ASG_NAME: asg_name},
                actions=[policy.arn],
                tags=resource_tags,
                opts=child,
            )
        self.register_outputs({})


def gpu_utilization_scaling(
    name: str,
    ctx: ClusterContext,
    plans: Sequence[PoolPlan],
    asg_names: Mapping[str, pulumi.Input[str]],
    parent: pulumi.Resource,
) -> dict[str, GpuUtilizationScaling]:
    """One `GpuUtilizationScaling` per pool in `gpu-utilization` mode (each needs its ASG's name)."""
    pools = gpu_scaling_plans(plans)
    missing = [p.name for p in pools if p.name not in asg_names]
    if missing:
        raise ValueError(f"gpu-utilization pool(s) {', '.join(missing)} have no Auto Scaling group to scale")
    return {
        p.name: GpuUtilizationScaling(
            f"{name}-{p.name}", ctx, p, asg_names[p.name], opts=pulumi.ResourceOptions(parent=parent)
        )
        for p in pools
    }
