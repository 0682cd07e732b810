"""The S3 gateway endpoint's policy (pure, no Pulumi): what S3 the VPC reaches through it.

A gateway endpoint puts S3's prefix list on the subnets' route tables, so every request to S3 in the Region leaves
through it, and its policy decides which buckets those requests may touch (AWS PrivateLink guide, "Gateway
endpoints for Amazon S3", https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html; without a
policy the endpoint allows everything). Scoped to the stack's buckets, a pod holding someone's credentials cannot
copy data out to a bucket of its own choosing through the endpoint, nor read other buckets of the account.

What the nodes must still reach through it, read-only, each with its source:
- ECR image layers: `prod-<region>-starport-layer-bucket` (ECR user guide, "Amazon ECR interface VPC endpoints",
  minimum Amazon S3 bucket permissions, https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html);
- Amazon Linux 2023 package repositories, `al2023-repos-<region>-<suffix>` (AL2023 user guide, package repository
  access through an S3 gateway endpoint; the suffix is AWS's, so it is matched with `*`);
- the SSM agent's buckets for updates, documents and patching (Systems Manager user guide, "SSM Agent
  communications with AWS managed S3 buckets",
  https://docs.aws.amazon.com/systems-manager/latest/userguide/ssm-agent-minimum-s3-permissions.html);
- registry.k8s.io's image layers in the Region, `prod-registry-k8s-io-<region>` (kubernetes/k8s.io
  infra/aws/terraform/registry.k8s.io/s3/bucket.tf; the chart images cluster-autoscaler and others come from there).
Any other bucket workloads use (another registry serving layers from S3 in the Region, a dataset bucket) is named in
`network.s3EndpointBuckets`. Docs: docs/security.md#data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.config import StackConfig
from components.planning.storage import bucket_prefix, needs_stack_bucket


def aws_read_buckets(region: str) -> tuple[str, ...]:
    """Buckets owned by AWS (and registry.k8s.io) the nodes read through the endpoint (sources in the module doc)."""
    return (
        f"prod-{region}-starport-layer-bucket",
        f"al2023-repos-{region}-*",
        f"amazon-ssm-{region}",
        f"amazon-ssm-packages-{region}",
        f"{region}-birdwatcher-prod",
        f"aws-ssm-{region}",
        f"aws-ssm-document-attachments-{region}",
        f"aws-ssm-distributor-file-{region}",
        f"patch-baseline-snapshot-{region}",
        f"prod-registry-k8s-io-{region}",
    )


def _arns(partition: str, buckets: Sequence[str], objects_only: bool = False) -> list[str]:
    found = []
    for bucket in sorted(set(buckets)):
        if not objects_only:
            found.append(f"arn:{partition}:s3:::{bucket}")
        found.append(f"arn:{partition}:s3:::{bucket}/*")
    return found


def s3_endpoint_policy(region: str, stack_buckets: Sequence[str], partition: str = "aws") -> dict[str, Any]:
    """The endpoint policy: every S3 action on the stack's buckets (names or `prefix*` patterns), and reads of the
    objects in `aws_read_buckets(region)`; nothing else."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "AwsOwnedBucketsReadOnly",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": _arns(partition, aws_read_buckets(region), objects_only=True),
        }
    ]
    if stack_buckets:
        statements.insert(
            0,
            {
                "Sid": "StackBuckets",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": _arns(partition, stack_buckets),
            },
        )
    return {"Version": "2012-10-17", "Statement": statements}


def stack_buckets(spec: StackConfig) -> list[str]:
    """The buckets the stack's workloads use: the Lustre data bucket it creates (its name prefix and `*`: S3 adds
    the suffix), the buckets named in `dataRepositoryPath`s, and `network.s3EndpointBuckets`."""
    found = list(spec.network.s3_endpoint_buckets)
    lustre = spec.storage.lustre if spec.storage else None
    if lustre is not None:
        if needs_stack_bucket(lustre):
            found.append(bucket_prefix(spec.cluster.name, lustre.name) + "*")
        for repository in lustre.data_repositories:
            if repository.data_repository_path is not None:
                found.append(repository.data_repository_path.removeprefix("s3://").split("/", 1)[0])
    return sorted(set(found))
