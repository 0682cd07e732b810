"""The VPC flow-log delivery role's trust and permissions, planned without Pulumi."""

from __future__ import annotations

from components.planning.flow_logs import flow_logs_delivery_policy, flow_logs_trust_policy
from components.planning.log_groups import flow_log_group, log_group_arn

ACCOUNT = "210987654321"


def test_only_the_flow_logs_service_assumes_the_role_for_this_accounts_flow_logs_in_its_region() -> None:
    (statement,) = flow_logs_trust_policy(ACCOUNT, "cn-north-1", "aws-cn")["Statement"]
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": ACCOUNT},
        "ArnLike": {"aws:SourceArn": f"arn:aws-cn:ec2:cn-north-1:{ACCOUNT}:vpc-flow-log/*"},
    }


def test_delivery_writes_to_the_stacks_flow_log_group_and_its_streams_only() -> None:
    group = log_group_arn("aws", "eu-west-1", ACCOUNT, flow_log_group("lab"))
    write, find = flow_logs_delivery_policy(group)["Statement"]
    assert write["Resource"] == [
        f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:/aws/vpc/lab/flow-logs",
        f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:/aws/vpc/lab/flow-logs:*",
    ]
    assert write["Action"] == [
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "logs:DescribeLogStreams",
    ]
    # Listing groups takes no group ARN: the one action on "*", and it reads nothing.
    assert (find["Action"], find["Resource"]) == ("logs:DescribeLogGroups", "*")
