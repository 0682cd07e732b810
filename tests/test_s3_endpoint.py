"""The S3 gateway endpoint's policy (components/planning/s3_endpoint.py) without mocks, and on the shipped stacks:
which requests through the endpoint it admits, judged the way a resource policy is (an allow must match)."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pytest

from components.planning.s3_endpoint import s3_endpoint_policy, stack_buckets
from tests.builders import shipped_stack, stack_config

REGION = "us-east-1"
ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"


def admits(policy: dict[str, Any], action: str, resource: str) -> bool:
    for statement in policy["Statement"]:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if (
            statement["Effect"] == "Allow"
            and fnmatch.fnmatchcase(action, statement["Action"])
            and any(fnmatch.fnmatchcase(resource, pattern) for pattern in resources)
        ):
            return True
    return False


POLICY = s3_endpoint_policy(REGION, ["train-scratch-data-*", "shared-datasets"])


@pytest.mark.parametrize(
    "bucket",
    [
        "prod-us-east-1-starport-layer-bucket",  # ECR image layers
        "al2023-repos-us-east-1-de612dc2",  # dnf on AL2023 nodes
        "amazon-ssm-us-east-1",  # SSM agent updates
        "prod-registry-k8s-io-us-east-1",  # registry.k8s.io layers in the Region
    ],
)
def test_nodes_still_read_what_they_pull_through_the_endpoint(bucket: str) -> None:
    assert admits(POLICY, "s3:GetObject", f"arn:aws:s3:::{bucket}/layer")
    assert not admits(POLICY, "s3:PutObject", f"arn:aws:s3:::{bucket}/layer")


def test_the_stacks_buckets_are_read_and_written() -> None:
    for resource in ("arn:aws:s3:::train-scratch-data-20261126abc/ckpt/1", "arn:aws:s3:::shared-datasets/x"):
        assert admits(POLICY, "s3:PutObject", resource)
        assert admits(POLICY, "s3:GetObject", resource)
    assert admits(POLICY, "s3:ListBucket", "arn:aws:s3:::shared-datasets")


def test_no_other_bucket_is_reachable() -> None:
    assert not admits(POLICY, "s3:PutObject", "arn:aws:s3:::someone-elses-bucket/exfil")
    assert not admits(POLICY, "s3:GetObject", "arn:aws:s3:::another-bucket-of-the-account/secret")
    assert not admits(POLICY, "s3:ListBucket", "arn:aws:s3:::prod-us-east-1-starport-layer-bucket")


def test_without_buckets_only_the_aws_buckets_are_read() -> None:
    policy = s3_endpoint_policy(REGION, [])
    assert [s["Sid"] for s in policy["Statement"]] == ["AwsOwnedBucketsReadOnly"]


def test_other_partitions_name_their_own_arns() -> None:
    policy = s3_endpoint_policy("cn-north-1", ["data"], "aws-cn")
    assert all(r.startswith("arn:aws-cn:s3:::") for s in policy["Statement"] for r in s["Resource"])


def test_stack_buckets_are_the_created_bucket_the_named_paths_and_the_extras() -> None:
    spec = stack_config(
        name="train",
        network={"s3EndpointBuckets": ["extra-bucket"]},
        storage={
            "lustre": {
                "name": "scratch",
                "dataRepositories": [
                    {"fileSystemPath": "/datasets", "prefix": "datasets/"},
                    {"fileSystemPath": "/shared", "dataRepositoryPath": "s3://shared-datasets/team/"},
                ],
            }
        },
    )
    assert stack_buckets(spec) == ["extra-bucket", "shared-datasets", "train-scratch-data-*"]


@pytest.mark.program
def test_the_training_stacks_endpoint_admits_its_data_bucket_only() -> None:
    planned = shipped_stack("training")
    endpoint = planned.run.one(ENDPOINT)
    policy = json.loads(endpoint.inputs["policy"])
    (bucket,) = [r for r in planned.run.of_type("aws:s3/bucket:Bucket")]
    prefix = bucket.inputs["bucketPrefix"]
    assert admits(policy, "s3:PutObject", f"arn:aws:s3:::{prefix}0123456789/checkpoints/step-1")
    assert not admits(policy, "s3:PutObject", "arn:aws:s3:::not-the-stacks-bucket/checkpoints/step-1")
