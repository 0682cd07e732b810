"""Security group rules that several components need in the same form."""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws


def cidr_resource_name(cidr: str) -> str:
    """`10.80.0.0/16` -> `10-80-0-0-16`: resource names may not contain dots or slashes everywhere."""
    return cidr.replace(".", "-").replace("/", "-")


def lustre_client_group(
    cluster_name: str, vpc_id: pulumi.Input[str], tags: Mapping[str, str], opts: pulumi.ResourceOptions
) -> aws.ec2.SecurityGroup:
    """The group of the pools that mount the Lustre file system, and of no other: the file system's group admits
    LNET (and, with EFA, all traffic) from this group only, so a node of another pool cannot reach it even though
    all nodes share the node group (docs/security.md#tenants). Its rules are the file system's
    (`components.storage.lustre`), plus all traffic among its members: it sits on EFA interfaces too, and every group
    of an EFA interface must allow all traffic to and from itself (aws-gpu-facts.md §2; the members already talk
    freely through the node group, so this widens nothing)."""
    group = aws.ec2.SecurityGroup(
        f"{cluster_name}-lustre-clients",
        vpc_id=vpc_id,
        description=f"Nodes of {cluster_name} that mount its FSx for Lustre file system",
        tags={**tags, "Name": f"{cluster_name}-lustre-clients"},
        opts=opts,
    )
    allow_all_within(f"{cluster_name}-lustre-clients", group.id, "Lustre clients", tags, opts)
    return group


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
