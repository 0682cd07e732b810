"""Drains before terminations: AWS Node Termination Handler in queue mode ([NTH], aws-gpu-facts.md §7b).

Builds the SQS queue (SSE-SQS), its policy, four EventBridge rules, a terminate lifecycle hook on every `aws`
pool's group, the handler's Pod Identity role and its Helm release. Invariant: the handler drains only instances
tagged `aws-node-termination-handler/managed`; a Capacity Block's end is handled by the pool's scheduled
scale-to-zero (components.planning.reservations). See
docs/addons.md#node-termination-handling-spot-interruptions-and-every-group-termination.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons.helm import helm_release, service_account_role
from components.catalog import versions
from components.config import NodeTerminationHandler
from components.context import ClusterContext
from components.planning.addons.documents import as_json
from components.planning.addons.interruption import (
    INTERRUPTION_EVENT_PATTERNS,
    LIFECYCLE_DEFAULT_RESULT,
    LIFECYCLE_TRANSITION,
    NTH_RELEASE,
    NTH_SERVICE_ACCOUNT,
    asg_arn_pattern,
    drained_plans,
    interruption_queue_policy,
    interruption_queue_retention_seconds,
    node_termination_handler_policy,
    node_termination_handler_values,
)
from components.planning.addons.placement import KUBE_SYSTEM
from components.planning.drain import hook_timeout_seconds
from components.planning.pools import PoolPlan


class InterruptionHandler(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        settings: NodeTerminationHandler,
        plans: Sequence[PoolPlan],
        asg_names: Mapping[str, pulumi.Input[str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:InterruptionHandler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster = context.cluster_name_plain
        drained = drained_plans(plans)
        missing = [p.name for p in drained if p.name not in asg_names]
        if missing:
            raise ValueError(f"pool(s) {', '.join(missing)} have no Auto Scaling group to hook")
        heartbeat = hook_timeout_seconds(settings.drain_timeout_seconds)

        self.queue = aws.sqs.Queue(
            f"{cluster}-interruptions",
            message_retention_seconds=interruption_queue_retention_seconds(settings.drain_timeout_seconds),
            sqs_managed_sse_enabled=True,
            tags=dict(context.tags),
            opts=child,
        )
        self.rules: dict[str, aws.cloudwatch.EventRule] = {}
        self.targets: dict[str, aws.cloudwatch.EventTarget] = {}
        for key, pattern in INTERRUPTION_EVENT_PATTERNS.items():
            rule = aws.cloudwatch.EventRule(
                f"{cluster}-nth-{key}",
                description=f"{key} events for the node termination handler of cluster {cluster}",
                event_pattern=as_json(pattern),
                tags=dict(context.tags),
                opts=child,
            )
            self.rules[key] = rule
            self.targets[key] = aws.cloudwatch.EventTarget(
                f"{cluster}-nth-{key}", rule=rule.name, arn=self.queue.arn, opts=child
            )
        self.queue_policy = aws.sqs.QueuePolicy(
            f"{cluster}-interruptions",
            queue_url=self.queue.url,
            policy=pulumi.Output.all(self.queue.arn, *[r.arn for r in self.rules.values()]).apply(
                lambda v: as_json(interruption_queue_policy(v[0], v[1:]))
            ),
            opts=child,
        )
        self.lifecycle_hooks = {
            p.name: aws.autoscaling.LifecycleHook(
                f"{cluster}-{p.name}-terminate",
                autoscaling_group_name=asg_names[p.name],
                lifecycle_transition=LIFECYCLE_TRANSITION,
                default_result=LIFECYCLE_DEFAULT_RESULT,
                heartbeat_timeout=heartbeat,
                opts=child,
            )
            for p in drained
        }

        policy = pulumi.Output.all(
            context.partition, context.account_id, self.queue.arn, *[asg_names[p.name] for p in drained]
        ).apply(
            lambda v: as_json(
                node_termination_handler_policy(
                    v[2], [asg_arn_pattern(context.region, v[1], group, v[0]) for group in v[3:]]
                )
            )
        )
        self.identity = service_account_role(
            context, "node-termination-handler", KUBE_SYSTEM, NTH_SERVICE_ACCOUNT, policy, (), self
        )
        self.release: k8s.helm.v3.Release = helm_release(
            name,
            NTH_RELEASE,
            versions.chart("aws-node-termination-handler"),
            KUBE_SYSTEM,
            self.queue.url.apply(lambda url: node_termination_handler_values(settings, context.region, plans, url)),
            context,
            parent=self,
            depends_on=[*self.identity, self.queue_policy, *self.targets.values()],
        )
        self.queue_url: pulumi.Output[str] = self.queue.url
        self.register_outputs({"queueUrl": self.queue.url})
