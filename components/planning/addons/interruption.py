"""Drains with the AWS Node Termination Handler in queue mode (pure, no Pulumi): EventBridge patterns, the queue and
its policy, the terminate lifecycle hook every `aws` pool gets, the handler's IAM policy and Helm values.

Source: [NTH] aws-node-termination-handler queue processor (docs/sources.md: aws-gpu-facts.md §7b).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from components import tags
from components.config import NodeTerminationHandler
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.drain import hook_timeout_seconds
from components.planning.pools import PoolPlan

#: Helm release and service account. Pod Identity binds a role to a (namespace, service account) pair, so the
#: chart is told the service account's name instead of deriving it from the release name.
NTH_RELEASE = "aws-node-termination-handler"
NTH_SERVICE_ACCOUNT = "aws-node-termination-handler"


def drained_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """Pools whose nodes the handler drains: every `aws` pool. Any Auto Scaling group terminates instances (a
    scale-in by the autoscaler or an alarm, a smaller `max`, an instance refresh, AZ rebalancing, a spot
    interruption, a Capacity Block's end), and each termination passes the group's terminate lifecycle hook, which
    routes it to the handler. Hybrid pools have no Auto Scaling group: their servers leave when you drain them."""
    return [p for p in plans if p.kind == "aws"]


#: EventBridge rules of the termination handler's queue mode as [NTH] documents them (facts §7b), less the rebalance
#: recommendation rule: spot Auto Scaling groups rebalance capacity themselves (`capacity_rebalance`, required by
#: the `spot-capacity-rebalance` policy), and the group owns that event. It launches a replacement, then terminates
#: the old instance through the terminate lifecycle hook, which the handler drains on. Routed to the queue, every
#: recommendation would also be drained at once: in queue mode the handler cordons *and drains* on a rebalance
#: recommendation whatever `enableRebalanceDraining` says (aws/aws-node-termination-handler v1.25.6,
#: pkg/interruptionevent/draincordon/handler.go: cordon only if `!EnableSQSTerminationDraining &&
#: IsRebalanceRecommendation() && !EnableRebalanceDraining`), possibly long before a replacement is Ready.
INTERRUPTION_EVENT_PATTERNS: dict[str, dict[str, Any]] = {
    "asg-terminate": {"source": ["aws.autoscaling"], "detail-type": ["EC2 Instance-terminate Lifecycle Action"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "scheduled-change": {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
}
#: The handler in queue mode runs this many replicas, with a disruption budget of one: a drain or a rolling update of
#: the system pool never leaves the queue unread. The chart renders its PodDisruptionBudget only in queue mode with
#: more than one replica ([NTH] chart 0.27.6 templates/pdb.yaml), and SQS hands each message to one reader at a time,
#: so two readers do not drain a node twice.
NTH_REPLICAS = 2


def interruption_queue_retention_seconds(drain_timeout_seconds: int) -> int:
    """How long the queue keeps an event: as long as the terminate hook waits for it. [NTH]'s example keeps 300 s
    (spot warnings are stale after their 2 minutes), but a terminate lifecycle event stays actionable until the hook's
    heartbeat ends (`components.planning.drain`); with 300 s, a handler down for five minutes (a system node replaced)
    would lose the terminations of that window and leave their nodes undrained. Stale spot or state-change events
    read late name instances that are already gone, which the handler skips."""
    return max(SQS_MIN_RETENTION_SECONDS, hook_timeout_seconds(drain_timeout_seconds))


#: SQS `MessageRetentionPeriod` is 60 s to 14 days (SQS API reference, SetQueueAttributes).
SQS_MIN_RETENTION_SECONDS = 60
#: Terminate lifecycle hook: the ASG waits for the handler to drain the node, up to the drain timeout plus a margin
#: (components.planning.drain.hook_timeout_seconds), then goes on.
LIFECYCLE_TRANSITION = "autoscaling:EC2_INSTANCE_TERMINATING"
LIFECYCLE_DEFAULT_RESULT = "CONTINUE"
#: Principals that put messages on the queue: EventBridge (the rules) and SQS (([NTH] §7b queue policy).
QUEUE_SENDERS: tuple[str, ...] = ("events.amazonaws.com", "sqs.amazonaws.com")
NTH_DESCRIBE_ACTIONS: tuple[str, ...] = (
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeTags",
    "ec2:DescribeInstances",
)
NTH_QUEUE_ACTIONS: tuple[str, ...] = ("sqs:DeleteMessage", "sqs:ReceiveMessage")
NTH_LIFECYCLE_ACTIONS: tuple[str, ...] = ("autoscaling:CompleteLifecycleAction",)


def interruption_queue_policy(queue_arn: str, rule_arns: Sequence[str]) -> dict[str, Any]:
    """Only EventBridge/SQS may send, and only from this stack's rules (`aws:SourceArn`)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "InterruptionEvents",
                "Effect": "Allow",
                "Principal": {"Service": list(QUEUE_SENDERS)},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": list(rule_arns)}},
            }
        ],
    }


def asg_arn_pattern(region: str, account_id: str, asg_name: str, partition: str = "aws") -> str:
    """An ASG's ARN with its generated id wildcarded (IAM reference, "Amazon EC2 Auto Scaling resource types":
    `arn:${Partition}:autoscaling:${Region}:${Account}:autoScalingGroup:${GroupId}:autoScalingGroupName/${Name}`)."""
    return f"arn:{partition}:autoscaling:{region}:{account_id}:autoScalingGroup:*:autoScalingGroupName/{asg_name}"


def node_termination_handler_policy(queue_arn: str, asg_arns: Sequence[str]) -> dict[str, Any]:
    """The [NTH] action list (facts §7b), each on the narrowest resource it supports: describes on `*`, the
    queue's two actions on this queue, CompleteLifecycleAction on this cluster's Auto Scaling groups only (the ones
    `drained_plans` hooks)."""
    statements: list[dict[str, Any]] = [
        {"Sid": "Describe", "Effect": "Allow", "Action": list(NTH_DESCRIBE_ACTIONS), "Resource": "*"},
        {"Sid": "Queue", "Effect": "Allow", "Action": list(NTH_QUEUE_ACTIONS), "Resource": queue_arn},
    ]
    if asg_arns:
        statements.append(
            {"Sid": "Lifecycle", "Effect": "Allow", "Action": list(NTH_LIFECYCLE_ACTIONS), "Resource": list(asg_arns)}
        )
    return {"Version": "2012-10-17", "Statement": statements}


def node_termination_handler_values(
    settings: NodeTerminationHandler, region: str, plans: Sequence[PoolPlan], queue_url: str
) -> dict[str, Any]:
    """Helm values of the handler in queue mode (a Deployment on the system pool, [NTH] chart values).

    It drains only instances tagged `aws-node-termination-handler/managed` (the chart's `checkTagBeforeDraining`,
    on by default), which node pools propagate from every ASG (`components.tags.NTH_MANAGED`); the same key is given
    here so the two can never differ. `nodeTerminationGracePeriod` is the drain's timeout ([NTH] chart values; the
    drain helper's `Timeout` in pkg/node/node.go), the figure the terminate hooks wait on.
    """
    return {
        "enableSqsTerminationDraining": True,
        "nodeTerminationGracePeriod": settings.drain_timeout_seconds,
        "queueURL": queue_url,
        "awsRegion": region,
        "checkTagBeforeDraining": True,
        "managedTag": tags.NTH_MANAGED,
        "serviceAccount": {"create": True, "name": NTH_SERVICE_ACCOUNT},
        "replicas": NTH_REPLICAS,
        "podDisruptionBudget": {"maxUnavailable": 1},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "tolerations": tolerations_for(system_plans(plans)),
    }
