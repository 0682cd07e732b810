"""The VPC flow-log delivery role's documents (pure, no Pulumi): who may assume it, and what it may write.

The role trusts `vpc-flow-logs.amazonaws.com` for this account's flow logs only (`aws:SourceAccount`,
`aws:SourceArn`), as the VPC user guide's role for publishing flow logs to CloudWatch Logs does
(https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html), and may write to the stack's flow-log
group only (`components.planning.log_groups`). The component (`components.flow_logs`) applies these functions to the
account id and partition at deploy time.
"""

from __future__ import annotations

from typing import Any

FLOW_LOGS_SERVICE = "vpc-flow-logs.amazonaws.com"
#: The calls delivery makes on the group (the VPC page's minimum): `CreateLogGroup` too, as the page lists it, though
#: the stack creates the group (it can create nothing else).
DELIVERY_ACTIONS = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams")
#: Lists groups and takes no group ARN, so it is the one action on `*`.
FIND_GROUP_ACTION = "logs:DescribeLogGroups"


def flow_log_arn_pattern(partition: str, region: str, account_id: str) -> str:
    """Every flow log of this account and region: the `aws:SourceArn` the service assumes the role for."""
    return f"arn:{partition}:ec2:{region}:{account_id}:vpc-flow-log/*"


def flow_logs_trust_policy(account_id: str, region: str, partition: str = "aws") -> dict[str, Any]:
    """The delivery role: only the flow logs service, only for flow logs of this account and region."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": FLOW_LOGS_SERVICE},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account_id},
                    "ArnLike": {"aws:SourceArn": flow_log_arn_pattern(partition, region, account_id)},
                },
            }
        ],
    }


def flow_logs_delivery_policy(log_group_arn: str) -> dict[str, Any]:
    """What delivery needs, on this group (and its streams) only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "WriteThisGroup",
                "Effect": "Allow",
                "Action": list(DELIVERY_ACTIONS),
                "Resource": [log_group_arn, f"{log_group_arn}:*"],
            },
            {"Sid": "FindTheGroup", "Effect": "Allow", "Action": FIND_GROUP_ACTION, "Resource": "*"},
        ],
    }
