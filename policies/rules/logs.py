"""Logging rules: every VPC records its traffic, and log groups keep their logs for a set time."""

from __future__ import annotations

from collections.abc import Iterator

from policies.resources import Resource, Stack, peek, strings
from policies.rules.signatures import Config, StackViolations

VPC = "aws:ec2/vpc:Vpc"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"

#: Traffic types that record rejected traffic, which Security Hub EC2.6 asks for (its default `trafficType` REJECT).
RECORDS_REJECTS = frozenset({"ALL", "REJECT"})


def vpc_flow_logs(stack: Stack, config: Config) -> StackViolations:
    """Every VPC has a flow log that records at least rejected traffic (FSBP EC2.6, also in the CIS AWS Foundations
    Benchmark standard).

    Flow logs are off by default; without them there is no record of which addresses talked to the nodes, file
    systems and endpoints when an incident has to be investigated
    (https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs.html). EFA's OS-bypass traffic between GPU nodes
    is not IP traffic of the VPC and adds nothing to them.
    """
    covered: dict[str, list[str]] = {}
    for log in stack.of_type(FLOW_LOG):
        for vpc in stack.referenced(log, "vpcId", strings(peek(log.props, "vpcId")), [VPC]):
            covered.setdefault(vpc.urn, []).append(str(log.get("trafficType", default="")).upper())
    for vpc in stack.of_type(VPC):
        types = covered.get(vpc.urn)
        if not types:
            yield (
                f"VPC '{vpc.name}' has no flow log: add an aws.ec2.FlowLog with vpc_id and traffic_type ALL "
                "(FSBP EC2.6)",
                vpc.urn,
            )
        elif not RECORDS_REJECTS & set(types):
            yield (
                f"VPC '{vpc.name}' has flow logs of {', '.join(types)} traffic only: record ALL or REJECT (FSBP EC2.6)",
                vpc.urn,
            )


def log_group_retention(group: Resource, config: Config) -> Iterator[str]:
    """Log groups expire their logs after at least `minRetentionDays` days (retentionInDays), never "keep forever".

    CloudWatch Logs keeps log events indefinitely unless the group has a retention period
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/Working-with-log-groups-and-streams.html), so audit
    and flow logs grow and bill without end; too short a period loses the evidence an investigation needs. Security
    Hub's CloudWatch.16 (NIST 800-53 standard, not FSBP) asks for 365 days by default; set `minRetentionDays` to the
    organisation's own period.
    """
    days = group.get("retentionInDays")
    minimum = int(config.get("minRetentionDays") or 1)
    if not days:
        yield f"log group '{group.name}' keeps its logs forever: set retentionInDays (at least {minimum} days)"
    elif int(days) < minimum:
        yield f"log group '{group.name}' keeps its logs {int(days)} days; at least {minimum} are required"


def eks_log_group_declared(stack: Stack, config: Config) -> StackViolations:
    """An EKS cluster that ships control-plane logs has its log group `/aws/eks/<cluster>/cluster` declared in the
    stack, so `log-group-retention` and `log-group-encrypted` can hold it to a retention period and a KMS key.

    EKS sends control-plane logs to that group and creates it when it does not exist
    (https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html), with CloudWatch Logs' defaults:
    no expiry and no customer-managed key. Declaring it before the cluster keeps the audit log under the stack's
    settings.
    """
    declared = {str(peek(g.props, "name", default="")) for g in stack.of_type(LOG_GROUP)}
    for cluster in stack.of_type(EKS_CLUSTER):
        if not strings(cluster.get("enabledClusterLogTypes")):
            continue
        name = cluster.get("name")
        if not name:
            yield (
                f"EKS cluster '{cluster.name}' has no explicit name, so its log group /aws/eks/<name>/cluster cannot "
                "be declared: name the cluster and declare the group",
                cluster.urn,
            )
        elif f"/aws/eks/{name}/cluster" not in declared:
            yield (
                f"EKS cluster '{cluster.name}' ships control-plane logs to /aws/eks/{name}/cluster, which the stack "
                "does not declare, so EKS creates it without retention or KMS key: declare that "
                "aws.cloudwatch.LogGroup (retentionInDays, kmsKeyId) before the cluster",
                cluster.urn,
            )
