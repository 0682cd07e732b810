"""Security group rules that several components need in the same form."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws


def cidr_resource_name(cidr: str) -> str:
    """`10.80.0.0/16` -> `10-80-0-0-16`: resource names may not contain dots or slashes everywhere."""
    return cidr.replace(".", "-").replace("/", "-")


def allow_all_within(
    name: str, group_id: pulumi.Input[str], purpose: str, tags: Mapping[str, str], opts: pulumi.ResourceOptions
) -> tuple[aws.vpc.SecurityGroupIngressRule, aws.vpc.SecurityGroupEgressRule]:
    """All traffic in from and out to the group's own members.

    EFA's OS-bypass traffic is authorized by group membership, so it needs both directions, the egress rule even
    where a 0.0.0.0/0 egress rule exists ("the EFA must be a member of a security group that allows all inbound and
    outbound traffic to and from the security group itself", aws-gpu-facts.md §2).
    """
    ingress = aws.vpc.SecurityGroupIngressRule(
        f"{name}-in-self",
        security_group_id=group_id,
        referenced_security_group_id=group_id,
        ip_protocol="-1",
        description=f"{purpose}: all inbound traffic from members of this group",
        tags=dict(tags),
        opts=opts,
    )
    egress = aws.vpc.SecurityGroupEgressRule(
        f"{name}-out-self",
        security_group_id=group_id,
        referenced_security_group_id=group_id,
        ip_protocol="-1",
        description=f"{purpose}: all outbound traffic to members of this group",
        tags=dict(tags),
        opts=opts,
    )
    return ingress, egress
