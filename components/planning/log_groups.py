"""The CloudWatch Logs groups a cluster writes to, named once (pure, no Pulumi).

EKS sends control-plane logs to `/aws/eks/<cluster>/cluster` and creates that group itself, without retention or
encryption, if it does not exist when logging is turned on (EKS user guide, "Send control plane logs to CloudWatch
Logs", https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html): the stack creates it first. The VPC
flow log group is the stack's own choice of name. The cluster's KMS key policy lets CloudWatch Logs use the key for
exactly these groups (encryption context `aws:logs:arn`, CloudWatch Logs user guide, "Encrypt log data in CloudWatch
Logs using AWS KMS", https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html).
"""

from __future__ import annotations


def control_plane_log_group(cluster_name: str) -> str:
    """The group EKS writes control-plane logs to; the name is fixed by EKS."""
    return f"/aws/eks/{cluster_name}/cluster"


def flow_log_group(cluster_name: str) -> str:
    """The group the VPC's flow logs go to."""
    return f"/aws/vpc/{cluster_name}/flow-logs"


def log_group_arn(partition: str, region: str, account_id: str, name: str) -> str:
    """A log group's ARN as CloudWatch Logs puts it in the KMS encryption context (no trailing `:*`)."""
    return f"arn:{partition}:logs:{region}:{account_id}:log-group:{name}"


def cluster_log_group_arns(partition: str, region: str, account_id: str, cluster_name: str) -> list[str]:
    """Every log group of the cluster that is encrypted with its KMS key."""
    return [
        log_group_arn(partition, region, account_id, name)
        for name in (control_plane_log_group(cluster_name), flow_log_group(cluster_name))
    ]
