"""VPC flow logs of a VPC the stack creates: every accepted and rejected flow, to CloudWatch Logs.

Flow logs are what an incident responder reads first (who talked to the nodes, the API endpoint, the file systems),
and what security scanners look for on every VPC (Security Hub EC2.6). They go to a log group of the stack's own,
encrypted with the cluster's KMS key (whose policy lets CloudWatch Logs use it for this group only,
`components.planning.log_groups`) and kept for `network.flowLogs.retentionDays`. The delivery role trusts the flow
logs service for this account's flow logs only and may write to this group only (`components.planning.flow_logs`).

An existing VPC (`network.existingVpc`) is never modified, so it gets none: its owner records its traffic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from components.config import FlowLogs as FlowLogsConfig
from components.planning.flow_logs import flow_logs_delivery_policy, flow_logs_trust_policy
from components.planning.log_groups import flow_log_group, log_group_arn

#: Every flow, accepted and rejected: rejected ones alone hide what an attacker did once let in.
TRAFFIC_TYPE = "ALL"


class VpcFlowLogs(pulumi.ComponentResource):
    """Log group, delivery role and the `aws.ec2.FlowLog` of one VPC. Attributes: `log_group`, `role`, `flow_log`."""

    def __init__(
        self,
        name: str,
        cluster_name: str,
        vpc_id: pulumi.Input[str],
        settings: FlowLogsConfig,
        kms_key_arn: pulumi.Input[str],
        account_id: pulumi.Input[str],
        partition: pulumi.Input[str],
        region: str,
        tags: Mapping[str, str],
        retain_on_delete: bool,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`retain_on_delete`: keep the records on `pulumi destroy` (whenever the key that decrypts them is kept)."""
        super().__init__("gpu-clusters:index:VpcFlowLogs", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group_name = flow_log_group(cluster_name)
        self.log_group = aws.cloudwatch.LogGroup(
            f"{cluster_name}-flow-logs",
            name=group_name,
            retention_in_days=settings.retention_days,
            kms_key_id=kms_key_arn,
            tags=dict(tags),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=retain_on_delete),
        )
        self.role = aws.iam.Role(
            f"{cluster_name}-flow-logs",
            assume_role_policy=pulumi.Output.all(account_id, partition).apply(
                lambda v: json.dumps(flow_logs_trust_policy(v[0], region, v[1]))
            ),
            description=f"Delivers the VPC flow logs of cluster {cluster_name}",
            tags=dict(tags),
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{cluster_name}-flow-logs",
            role=self.role.id,
            policy=pulumi.Output.all(partition, account_id).apply(
                lambda v: json.dumps(flow_logs_delivery_policy(log_group_arn(v[0], region, v[1], group_name)))
            ),
            opts=child,
        )
        self.flow_log = aws.ec2.FlowLog(
            f"{cluster_name}-vpc",
            vpc_id=vpc_id,
            traffic_type=TRAFFIC_TYPE,
            log_destination_type="cloud-watch-logs",
            log_destination=self.log_group.arn,
            iam_role_arn=self.role.arn,
            tags={**tags, "Name": f"{cluster_name}-vpc"},
            # Delivery fails until the role may write (IAM is eventually consistent, but the policy must exist).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        self.register_outputs({"logGroup": self.log_group.name})
