"""Spot interruption handling: queue, EventBridge rules, lifecycle hooks, handler role and its OCI release."""

from __future__ import annotations

import json

import pytest

from components import tags
from components.catalog import versions
from tests.builders import (
    HELM_RELEASE,
    IAM_ROLE,
    INFERENCE_POOL,
    SYSTEM_POOL,
    TRAINING_POOL,
    addon_stack,
    asg_name,
    policy_document,
    pool,
    releases,
    run_addons,
)

pytestmark = pytest.mark.program

QUEUE = "aws:sqs/queue:Queue"
RULE = "aws:cloudwatch/eventRule:EventRule"
TARGET = "aws:cloudwatch/eventTarget:EventTarget"
HOOK = "aws:autoscaling/lifecycleHook:LifecycleHook"

#: aws-gpu-facts.md §7b, verbatim, less the rebalance recommendation (the Auto Scaling group's own).
EXPECTED_PATTERNS = [
    {"source": ["aws.autoscaling"], "detail-type": ["EC2 Instance-terminate Lifecycle Action"]},
    {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
]

ON_DEMAND_INFERENCE = {**INFERENCE_POOL, "name": "od", "capacity": {"type": "on-demand"}}


@pytest.fixture(scope="module")
def spot_run():
    spec = addon_stack(SYSTEM_POOL, INFERENCE_POOL, ON_DEMAND_INFERENCE, name="serve")
    return spec, run_addons(spec)


def test_queue_is_encrypted_and_keeps_events_as_long_as_the_hooks_wait(spot_run):
    """A handler down for five minutes must not lose the terminations of that window: each stays queued until its
    terminate hook gives up (heartbeat 720 s with the default 600 s drain)."""
    _, run = spot_run
    queue = run.one(QUEUE)
    assert queue.inputs["sqsManagedSseEnabled"] is True
    assert queue.inputs["messageRetentionSeconds"] == 720
    assert {hook.inputs["heartbeatTimeout"] for hook in run.of_type(HOOK)} == {720}


def test_four_rules_with_the_documented_patterns_all_target_the_queue(spot_run):
    _, run = spot_run
    patterns = [json.loads(r.inputs["eventPattern"]) for r in run.of_type(RULE)]

    def canonical(pattern):
        return json.dumps(pattern, sort_keys=True)

    assert sorted(map(canonical, patterns)) == sorted(map(canonical, EXPECTED_PATTERNS))
    queue_arn = "arn:aws:sqs:us-east-1:123456789012:serve-interruptions"
    targets = run.of_type(TARGET)
    assert len(targets) == 4 and {t.inputs["arn"] for t in targets} == {queue_arn}
    assert {t.inputs["rule"] for t in targets} == {r.inputs.get("name", r.name) for r in run.of_type(RULE)}


def test_queue_policy_lets_only_eventbridge_and_sqs_send_from_these_rules(spot_run):
    _, run = spot_run
    policy = json.loads(run.one("aws:sqs/queuePolicy:QueuePolicy").inputs["policy"])
    (statement,) = policy["Statement"]
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    rule_arns = sorted(statement["Condition"]["ArnEquals"]["aws:SourceArn"])
    rule_prefix = "arn:aws:events:us-east-1:123456789012:rule/serve-nth-"
    assert len(rule_arns) == 4 and all(arn.startswith(rule_prefix) for arn in rule_arns)


def test_every_aws_pool_drains_through_a_terminate_hook_that_outlasts_the_drain(spot_run):
    """Any group scales in (autoscaler, alarms, refresh, spot, a block's end): every pool, not only spot ones, holds
    a leaving instance until the handler drained it, for the drain timeout (600 s) plus two minutes."""
    spec, run = spot_run
    hooks = {hook.inputs["autoscalingGroupName"]: hook.inputs for hook in run.of_type(HOOK)}
    assert set(hooks) == {asg_name(spec, name) for name in ("system", "l40s", "od")}
    for hook in hooks.values():
        assert hook["lifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
        assert hook["defaultResult"] == "CONTINUE"
        assert hook["heartbeatTimeout"] == 720
    release = releases(run)["aws-node-termination-handler"]
    assert release["values"]["nodeTerminationGracePeriod"] == 600


def test_handler_release_is_the_pinned_oci_chart_in_queue_mode(spot_run):
    _, run = spot_run
    release = releases(run)["aws-node-termination-handler"]
    pin = versions.chart("aws-node-termination-handler")
    assert release["chart"] == "oci://public.ecr.aws/aws-ec2/helm/aws-node-termination-handler"
    assert release["version"] == pin.version == "0.27.6"
    assert "repositoryOpts" not in release  # OCI: the URL is the reference
    assert release["namespace"] == "kube-system"
    values = release["values"]
    assert values["enableSqsTerminationDraining"] is True
    assert values["queueURL"] == "https://sqs.us-east-1.amazonaws.com/123456789012/serve-interruptions"
    assert values["awsRegion"] == "us-east-1"
    assert values["nodeSelector"] == {"gpu-clusters/role": "system"}
    # two readers and a budget of one: the queue is read while a system node drains (the chart's pdb.yaml renders
    # only in queue mode with more than one replica)
    assert values["replicas"] == 2
    assert values["podDisruptionBudget"] == {"maxUnavailable": 1}
    # drains only what node pools tag as managed (every ASG propagates tags.NTH_MANAGED)
    assert values["checkTagBeforeDraining"] is True and values["managedTag"] == tags.NTH_MANAGED


def test_handler_role_has_the_documented_actions_on_the_narrowest_resources(spot_run):
    spec, run = spot_run
    role = run.one(IAM_ROLE, "node-termination-handler")
    assert role.inputs["tags"] == {"namespace": "kube-system", "service-account": "aws-node-termination-handler"}
    statements = {s["Sid"]: s for s in policy_document(run, "node-termination-handler")["Statement"]}
    actions = sorted(a for s in statements.values() for a in s["Action"])
    assert actions == sorted(
        [
            "autoscaling:CompleteLifecycleAction",
            "autoscaling:DescribeAutoScalingInstances",
            "autoscaling:DescribeTags",
            "ec2:DescribeInstances",
            "sqs:DeleteMessage",
            "sqs:ReceiveMessage",
        ]
    )
    assert statements["Queue"]["Resource"] == "arn:aws:sqs:us-east-1:123456789012:serve-interruptions"
    assert statements["Lifecycle"]["Resource"] == [
        f"arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*:autoScalingGroupName/{asg_name(spec, name)}"
        for name in ("system", "l40s", "od")
    ]
    release = next(r for r in run.of_type(HELM_RELEASE) if r.inputs["name"] == "aws-node-termination-handler")
    assert role.urn in release.depends_on


def test_nothing_deployed_when_off():
    spec = addon_stack(SYSTEM_POOL, INFERENCE_POOL, addons={"nodeTerminationHandler": {"enabled": "off"}})
    run = run_addons(spec)
    for token in (QUEUE, RULE, TARGET, HOOK, "aws:sqs/queuePolicy:QueuePolicy"):
        assert run.of_type(token) == []
    assert "aws-node-termination-handler" not in releases(run)


def test_on_demand_pools_drain_too():
    """No spot pool: the handler still deploys, and the training and system groups are hooked and may be completed."""
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"nodeTerminationHandler": {"drainTimeoutSeconds": 1800}})
    run = run_addons(spec)
    assert len(run.of_type(RULE)) == 4
    assert {hook.inputs["heartbeatTimeout"] for hook in run.of_type(HOOK)} == {1920}
    assert run.one(QUEUE).inputs["messageRetentionSeconds"] == 1920
    assert {hook.inputs["autoscalingGroupName"] for hook in run.of_type(HOOK)} == {
        asg_name(spec, "system"),
        asg_name(spec, "h100"),
    }
    statements = {s["Sid"]: s for s in policy_document(run, "node-termination-handler")["Statement"]}
    assert len(statements["Lifecycle"]["Resource"]) == 2
    assert releases(run)["aws-node-termination-handler"]["values"]["nodeTerminationGracePeriod"] == 1800


def test_spot_pool_without_an_asg_is_an_error():
    spec = addon_stack(SYSTEM_POOL, pool(INFERENCE_POOL, scaling={"min": 1, "max": 4, "mode": "cluster-autoscaler"}))
    with pytest.raises(ValueError, match="l40s"):
        run_addons(spec, asg_names={})


def test_rebalance_recommendations_belong_to_the_auto_scaling_group_alone(spot_run):
    """In queue mode the handler drains on every rebalance recommendation it reads, whatever its rebalance flags
    say (NTH v1.25.6 draincordon/handler.go); spot groups rebalance capacity themselves (the
    `spot-capacity-rebalance` policy), so no rule routes the recommendation to the handler's queue."""
    _, run = spot_run
    detail_types = {t for r in run.of_type(RULE) for t in json.loads(r.inputs["eventPattern"])["detail-type"]}
    assert "EC2 Spot Instance Interruption Warning" in detail_types
    assert "EC2 Instance Rebalance Recommendation" not in detail_types
