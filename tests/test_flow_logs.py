"""VPC flow logs: on by default for a new VPC, to an encrypted log group with a retention, delivered by a role that
only the flow logs service of this account may assume and that may write to that group only."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from blueprint.plan.runner import ProgramRun, run_mocked
from components.config import FlowLogs
from components.flow_logs import VpcFlowLogs
from components.gpu_cluster import GpuCluster
from components.planning.stack_plan import plan_stack
from tests.builders import IAM_ROLE, LOG_GROUP, ROLE_POLICY, SYSTEM_DEFAULT_SCALING, once_per_config, stack_config

pytestmark = pytest.mark.program

KEY = "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000"
GROUP_ARN = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/vpc/demo/flow-logs"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
SYSTEM_POOL = SYSTEM_DEFAULT_SCALING


def build(settings: FlowLogs, retain: bool = True) -> ProgramRun:
    def program() -> None:
        VpcFlowLogs(
            "demo-flow-logs",
            "demo",
            "vpc-0123456789abcdef0",
            settings,
            KEY,
            pulumi.Output.from_input("123456789012"),
            pulumi.Output.from_input("aws"),
            "us-east-1",
            {"gpu-clusters/cluster": "demo"},
            retain_on_delete=retain,
        )

    return run_mocked(program)


def test_every_flow_of_the_vpc_goes_to_the_encrypted_log_group_with_its_retention() -> None:
    run = build(FlowLogs(retention_days=90))
    group = run.one(LOG_GROUP, "demo-flow-logs")
    assert group.inputs["name"] == "/aws/vpc/demo/flow-logs"
    assert group.inputs["retentionInDays"] == 90
    assert group.inputs["kmsKeyId"] == KEY
    assert group.retain_on_delete is True
    flow = run.one(FLOW_LOG).inputs
    assert flow["vpcId"] == "vpc-0123456789abcdef0"
    assert flow["trafficType"] == "ALL"
    assert flow["logDestinationType"] == "cloud-watch-logs"
    assert flow["logDestination"] == GROUP_ARN
    assert flow["iamRoleArn"] == "arn:aws:iam::123456789012:role/demo-flow-logs"


def test_the_records_go_with_their_key_when_the_stack_keeps_nothing() -> None:
    assert build(FlowLogs(), retain=False).one(LOG_GROUP).retain_on_delete is False


def test_only_the_flow_logs_service_of_this_account_assumes_the_delivery_role() -> None:
    trust = json.loads(build(FlowLogs()).one(IAM_ROLE, "demo-flow-logs").inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnLike": {"aws:SourceArn": "arn:aws:ec2:us-east-1:123456789012:vpc-flow-log/*"},
    }


def test_the_delivery_role_writes_to_its_group_only() -> None:
    run = build(FlowLogs())
    policy = json.loads(run.one(ROLE_POLICY, "demo-flow-logs").inputs["policy"])
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert statements["WriteThisGroup"]["Resource"] == [GROUP_ARN, f"{GROUP_ARN}:*"]
    assert "logs:PutLogEvents" in statements["WriteThisGroup"]["Action"]
    assert statements["FindTheGroup"]["Action"] == "logs:DescribeLogGroups"
    # nothing but describing is granted beyond this group
    assert [s["Sid"] for s in policy["Statement"] if s["Resource"] == "*"] == ["FindTheGroup"]
    assert run.one(ROLE_POLICY).urn in run.one(FLOW_LOG).depends_on


@once_per_config
def build_cluster(config: Any) -> ProgramRun:
    return run_mocked(lambda: GpuCluster("demo", stack_plan=plan_stack(config), stack="test"))


def test_a_new_vpc_records_its_flow_logs_by_default() -> None:
    run = build_cluster(stack_config(SYSTEM_POOL))
    assert run.one(FLOW_LOG).inputs["logDestination"] == GROUP_ARN
    assert run.one(LOG_GROUP, "demo-flow-logs").inputs["retentionInDays"] == 365


def test_flow_logs_are_off_only_when_the_stack_says_so() -> None:
    run = build_cluster(stack_config(SYSTEM_POOL, network={"flowLogs": {"enabled": False}}))
    assert run.of_type(FLOW_LOG) == []
    assert [g.inputs["name"] for g in run.of_type(LOG_GROUP)] == ["/aws/eks/demo/cluster"]


def test_an_existing_vpc_gets_no_flow_log_from_the_stack() -> None:
    network = {
        "existingVpc": {
            "vpcId": "vpc-0123456789abcdef0",
            "privateSubnetIds": {"us-east-1a": "subnet-0a1b2c3d", "us-east-1b": "subnet-0e1f2a3b"},
        }
    }
    run = build_cluster(stack_config(SYSTEM_POOL, zones=None, network=network))
    assert run.of_type(FLOW_LOG) == []
    assert run.of_type("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup") == []
