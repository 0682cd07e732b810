"""A small, compliant GPU stack as offline-plan records, for stack-policy tests to break one thing at a time.

It holds what the blueprint builds: an EFA training pool of p5.48xlarge (interfaces laid out by the planner, so the
fixture follows `components.planning.efa`), a spot inference pool of L40S types, the device plugins and the
termination handler at the versions pinned in `components.catalog.versions`, Lustre, EFS and a checkpoint bucket.
Records follow the plan contract (docs/architecture.md) plus `id` and `propertyDependencies`, which the helpers in
`tests.policies` use to link resources the three ways the engine and the offline plan can.
"""

from __future__ import annotations

import base64
import copy
import json
import pickle
from collections.abc import Mapping
from functools import cache
from typing import Any

from components import tags
from components.catalog import instance_type
from components.catalog.versions import chart
from components.planning.efa import efa_interfaces
from tests.builders import (
    AUTOSCALING_GROUP,
    BUCKET,
    EFS,
    EKS_CLUSTER,
    HELM_RELEASE,
    IAM_ROLE,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LOG_GROUP,
    LUSTRE,
    PLACEMENT_GROUP,
    ROLE_POLICY,
    SECURITY_GROUP,
    SUBNET,
)
from tests.policies import urn

KMS_ARN = "arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555"
ACCOUNT = "123456789012"
COST_TAGS = {"team": "ml-platform", "cost-center": "cc-4242"}
TAGS = {tags.CLUSTER: "good", tags.STACK: "test", **COST_TAGS}

Record = dict[str, Any]


def record(
    type_: str,
    name: str,
    inputs: Mapping[str, Any],
    *,
    id_: str | None = None,
    refs: Mapping[str, list[Record]] | None = None,
    protect: bool = False,
) -> Record:
    """A plan record; `refs` maps each referencing property to the records it points at."""
    refs = refs or {}
    deps = list(dict.fromkeys(t["urn"] for targets in refs.values() for t in targets))
    out: Record = {
        "urn": urn(type_, name),
        "type": type_,
        "name": name,
        "parent": None,
        "custom": True,
        "inputs": copy.deepcopy(dict(inputs)),
        "options": {"protect": protect, "retainOnDelete": False, "dependsOn": deps, "ignoreChanges": []},
        "propertyDependencies": {prop: [t["urn"] for t in targets] for prop, targets in refs.items()},
    }
    if id_ is not None:
        out["id"] = id_
    return out


def asg_tags(pool: str, role: str, capacity: str, taints: str | None) -> list[dict[str, Any]]:
    values = {**TAGS, tags.POOL: pool, tags.ROLE: role, tags.CAPACITY_TYPE: capacity}
    if taints is not None:
        values[tags.TAINTS] = taints
    return [{"key": k, "value": v, "propagateAtLaunch": True} for k, v in sorted(values.items())]


def helm_release(name: str, values: Mapping[str, Any]) -> Record:
    pin = chart(name)
    return record(
        HELM_RELEASE,
        name,
        {
            "chart": pin.chart_ref,
            "version": pin.version,
            "repositoryOpts": {} if pin.is_oci else {"repo": pin.repository},
            "namespace": "kube-system",
            "values": dict(values),
        },
    )


def good_stack() -> list[Record]:
    """Every record of the compliant stack, in registration order: a fresh copy each call, for the test to change.
    Built once per process (hundreds of tests start from it); a copy is unpickled from the built records, which
    gives the same values and the same sharing as a new build, in a tenth of the time."""
    return list(pickle.loads(_good_stack_pickled()))


@cache
def _good_stack_pickled() -> bytes:
    return pickle.dumps(_build_good_stack(), protocol=pickle.HIGHEST_PROTOCOL)


def _build_good_stack() -> list[Record]:
    administers = {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*",
                   "Resource": "*"}  # fmt: skip
    key = record(
        KMS_KEY,
        "good-key",
        {"enableKeyRotation": True, "policy": policy_json(administers), "tags": TAGS},
        id_="mrk-1",
        protect=True,
    )
    subnet_a = record(SUBNET, "good-private-a", {"availabilityZone": "us-east-1a", "tags": TAGS}, id_="subnet-0a")
    subnet_b = record(SUBNET, "good-private-b", {"availabilityZone": "us-east-1b", "tags": TAGS}, id_="subnet-0b")
    cluster = record(
        EKS_CLUSTER,
        "good",
        {
            "vpcConfig": {
                "endpointPrivateAccess": True,
                "endpointPublicAccess": False,
                "subnetIds": ["subnet-0a", "subnet-0b"],
            },
            "encryptionConfig": {"provider": {"keyArn": KMS_ARN}, "resources": ["secrets"]},
            "enabledClusterLogTypes": ["api", "audit", "authenticator"],
            "name": "good",
            "tags": TAGS,
        },
        id_="good-cluster-id",
        refs={"vpcConfig": [subnet_a, subnet_b], "encryptionConfig": [key]},
    )
    efa_sg = record(SECURITY_GROUP, "good-efa", {"vpcId": "vpc-1", "tags": TAGS}, id_="sg-0efa")
    node_sg = record(
        SECURITY_GROUP,
        "good-node",
        {
            "vpcId": "vpc-1",
            "ingress": [{"protocol": "tcp", "fromPort": 443, "toPort": 443, "cidrBlocks": ["10.0.0.0/16"]}],
            "tags": TAGS,
        },
        id_="sg-0node",
    )
    self_rules = [
        record(
            f"aws:vpc/securityGroup{direction}Rule:SecurityGroup{direction}Rule",
            f"good-efa-self-{direction.lower()}",
            {"securityGroupId": "sg-0efa", "referencedSecurityGroupId": "sg-0efa", "ipProtocol": "-1", "tags": TAGS},
            refs={"securityGroupId": [efa_sg], "referencedSecurityGroupId": [efa_sg]},
        )
        for direction in ("Ingress", "Egress")
    ]
    group = record(
        PLACEMENT_GROUP,
        "good-train-placement",
        {"name": "good-train-pg", "strategy": "cluster", "tags": TAGS},
        id_="good-train-pg",
    )
    root_volume = {
        "deviceName": "/dev/xvda",
        "ebs": {"encrypted": "true", "kmsKeyId": KMS_ARN, "volumeSize": 200, "volumeType": "gp3"},
    }
    metadata = {"httpTokens": "required", "httpPutResponseHopLimit": 1, "httpEndpoint": "enabled"}
    train_lt = record(
        LAUNCH_TEMPLATE,
        "good-train-lt",
        {
            "instanceType": "p5.48xlarge",
            "networkInterfaces": [
                {
                    "networkCardIndex": nic.network_card_index,
                    "deviceIndex": nic.device_index,
                    "interfaceType": nic.interface_type,
                    "securityGroups": ["sg-0efa"],
                    "deleteOnTermination": "true",
                }
                for nic in efa_interfaces(instance_type("p5.48xlarge"))
            ],
            "metadataOptions": metadata,
            "blockDeviceMappings": [root_volume],
            "placement": {"groupName": "good-train-pg"},
            "tags": TAGS,
        },
        id_="lt-0train",
        refs={"networkInterfaces": [efa_sg], "blockDeviceMappings": [key], "placement": [group]},
    )
    train_asg = record(
        AUTOSCALING_GROUP,
        "good-train",
        {
            "vpcZoneIdentifiers": ["subnet-0a"],
            "minSize": 0,
            "maxSize": 4,
            "launchTemplate": {"id": "lt-0train", "version": "$Latest"},
            "placementGroup": "good-train-pg",
            "tags": asg_tags("train", "training", "on-demand", "nvidia.com/gpu=true:NoSchedule"),
        },
        refs={"vpcZoneIdentifiers": [subnet_a], "launchTemplate": [train_lt], "placementGroup": [group]},
    )
    infer_lt = record(
        LAUNCH_TEMPLATE,
        "good-infer-lt",
        {
            "instanceType": "g6e.12xlarge",
            "vpcSecurityGroupIds": ["sg-0node"],
            "metadataOptions": metadata,
            "blockDeviceMappings": [root_volume],
            "tags": TAGS,
        },
        id_="lt-0infer",
        refs={"vpcSecurityGroupIds": [node_sg], "blockDeviceMappings": [key]},
    )
    infer_asg = record(
        AUTOSCALING_GROUP,
        "good-infer",
        {
            "vpcZoneIdentifiers": ["subnet-0a", "subnet-0b"],
            "minSize": 0,
            "maxSize": 4,
            "capacityRebalance": True,
            "mixedInstancesPolicy": {
                "instancesDistribution": {
                    "onDemandBaseCapacity": 0,
                    "onDemandPercentageAboveBaseCapacity": 0,
                    "spotAllocationStrategy": "price-capacity-optimized",
                },
                "launchTemplate": {
                    "launchTemplateSpecification": {"launchTemplateId": "lt-0infer", "version": "$Latest"},
                    "overrides": [{"instanceType": "g6e.12xlarge"}, {"instanceType": "g6e.24xlarge"}],
                },
            },
            "tags": asg_tags("infer", "inference", "spot", "nvidia.com/gpu=true:NoSchedule"),
        },
        refs={"vpcZoneIdentifiers": [subnet_a, subnet_b], "mixedInstancesPolicy": [infer_lt]},
    )
    gpu_toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    releases = [
        helm_release("nvidia-device-plugin", {"tolerations": gpu_toleration}),
        helm_release("aws-efa-k8s-device-plugin", {"tolerations": gpu_toleration}),
        helm_release("aws-node-termination-handler", {"enableSqsTerminationDraining": True}),
    ]
    lustre = record(
        LUSTRE,
        "good-lustre",
        {
            "deploymentType": "PERSISTENT_2",
            "storageCapacity": 4800,
            "perUnitStorageThroughput": 1000,
            "efaEnabled": True,
            "metadataConfiguration": {"mode": "AUTOMATIC"},
            "kmsKeyId": KMS_ARN,
            "subnetIds": ["subnet-0a"],
            "tags": TAGS,
        },
        id_="fs-0lustre",
        refs={"kmsKeyId": [key], "subnetIds": [subnet_a]},
        protect=True,
    )
    efs = record(
        EFS,
        "good-models",
        {"encrypted": True, "kmsKeyId": KMS_ARN, "throughputMode": "elastic", "tags": TAGS},
        id_="fs-0efs",
        refs={"kmsKeyId": [key]},
        protect=True,
    )
    bucket = record(BUCKET, "good-checkpoints", {"tags": TAGS}, id_="good-checkpoints-b", protect=True)
    bucket_settings = [
        record(
            "aws:s3/bucketVersioning:BucketVersioning",
            "good-checkpoints-versioning",
            {"bucket": "good-checkpoints-b", "versioningConfiguration": {"status": "Enabled"}},
            refs={"bucket": [bucket]},
        ),
        record(
            "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
            "good-checkpoints-private",
            {
                "bucket": "good-checkpoints-b",
                "blockPublicAcls": True,
                "blockPublicPolicy": True,
                "ignorePublicAcls": True,
                "restrictPublicBuckets": True,
            },
            refs={"bucket": [bucket]},
        ),
        record(
            "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            "good-checkpoints-sse",
            {
                "bucket": "good-checkpoints-b",
                "rules": [
                    {
                        "applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": KMS_ARN},
                        "bucketKeyEnabled": True,
                    }
                ],
            },
            refs={"bucket": [bucket], "rules": [key]},
        ),
        record(
            "aws:s3/bucketPolicy:BucketPolicy",
            "good-checkpoints-policy",
            {
                "bucket": "good-checkpoints-b",
                "policy": policy_json(
                    {
                        "Sid": "DenyInsecureTransport",
                        "Effect": "Deny",
                        "Principal": "*",
                        "Action": "s3:*",
                        "Resource": ["arn:aws:s3:::good-checkpoints-b", "arn:aws:s3:::good-checkpoints-b/*"],
                        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                    }
                ),
            },
            refs={"bucket": [bucket]},
        ),
    ]
    return [
        key, subnet_a, subnet_b, cluster, efa_sg, node_sg, *self_rules, group, train_lt, train_asg, infer_lt,
        infer_asg, *releases, lustre, efs, bucket, *bucket_settings, *security_records(key),
        *training_namespace_records(),
    ]  # fmt: skip


def training_namespace_records(namespace: str = "training") -> list[Record]:
    """A workload namespace as the stack declares it: restricted, default-deny ingress, a GPU ResourceQuota and a
    Kueue LocalQueue (the `training-namespaces-queued` rule)."""
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    deny = {"podSelector": {}, "policyTypes": ["Ingress"]}
    return [
        record(
            "kubernetes:core/v1:Namespace", f"good-ns-{namespace}", {"metadata": {"name": namespace, "labels": labels}}
        ),
        record(
            "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            f"good-{namespace}-default-deny",
            {"metadata": {"name": "default-deny-ingress", "namespace": namespace}, "spec": deny},
        ),
        record(
            "kubernetes:core/v1:ResourceQuota",
            f"good-{namespace}-gpu-quota",
            {"metadata": {"name": "gpu", "namespace": namespace}, "spec": {"hard": {"requests.nvidia.com/gpu": "32"}}},
        ),
        record(
            "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue",
            f"good-{namespace}-local-queue",
            {"metadata": {"name": "default", "namespace": namespace}, "spec": {"clusterQueue": "shared"}},
        ),
    ]


def policy_json(*statements: Mapping[str, object]) -> str:
    """An IAM policy document as pulumi-aws registers it: a JSON string."""
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def pod_identity_trust(service_account: str) -> str:
    """The trust policy of an EKS Pod Identity role, scoped to the account, cluster and service account."""
    return policy_json(
        {
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {
                "StringEquals": {
                    "aws:SourceAccount": ACCOUNT,
                    "aws:RequestTag/eks-cluster-name": "good",
                    "aws:RequestTag/kubernetes-namespace": "kube-system",
                    "aws:RequestTag/kubernetes-service-account": service_account,
                }
            },
        }
    )


def user_data(*lines: str) -> str:
    """Launch-template user data (base64 of a MIME document with a NodeConfig part), with extra script lines."""
    document = (
        'Content-Type: multipart/mixed; boundary="B"\nMIME-Version: 1.0\n\n--B\n'
        "Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
        "spec:\n  cluster:\n    name: good\n    certificateAuthority: "
        + base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n").decode()
        + "\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/bash\n"
        + "\n".join(lines)
        + "\n--B--\n"
    )
    return base64.b64encode(document.encode()).decode()


def security_records(key: Record) -> list[Record]:
    """The VPC with its flow log and closed default group, roles and their policies, a queue, a topic, a log group."""
    vpc = record("aws:ec2/vpc:Vpc", "good-vpc", {"cidrBlock": "10.0.0.0/16", "tags": TAGS}, id_="vpc-1")
    log_group = record(
        LOG_GROUP,
        "good-flow-logs",
        {"name": "/aws/vpc/good/flow-logs", "retentionInDays": 365, "kmsKeyId": KMS_ARN, "tags": TAGS},
        id_="/aws/vpc/good/flow-logs",
        refs={"kmsKeyId": [key]},
    )
    flow_log = record(
        "aws:ec2/flowLog:FlowLog",
        "good-vpc-flow-log",
        {"vpcId": "vpc-1", "trafficType": "ALL", "logDestinationType": "cloud-watch-logs", "tags": TAGS},
        refs={"vpcId": [vpc], "logDestination": [log_group]},
    )
    default_sg = record(
        "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
        "good-default",
        {"vpcId": "vpc-1", "ingress": [], "egress": [], "tags": TAGS},
        id_="sg-0default",
        refs={"vpcId": [vpc]},
    )
    node_role = record(
        IAM_ROLE,
        "good-node",
        {
            "assumeRolePolicy": policy_json(
                {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ),
            "tags": TAGS,
        },
        id_="good-node",
    )
    autoscaler_role = record(
        IAM_ROLE,
        "good-cluster-autoscaler",
        {"assumeRolePolicy": pod_identity_trust("cluster-autoscaler"), "tags": TAGS},
        id_="good-cluster-autoscaler",
    )
    autoscaler_policy = record(
        ROLE_POLICY,
        "good-cluster-autoscaler",
        {
            "role": "good-cluster-autoscaler",
            "policy": policy_json(
                {"Effect": "Allow", "Action": ["autoscaling:Describe*", "ec2:DescribeInstanceTypes"], "Resource": "*"},
                {
                    "Effect": "Allow",
                    "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                    "Resource": "*",
                    "Condition": {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/good": "owned"}},
                },
            ),
        },
        refs={"role": [autoscaler_role]},
    )
    queue = record(
        "aws:sqs/queue:Queue",
        "good-interruptions",
        {"sqsManagedSseEnabled": True, "messageRetentionSeconds": 300, "tags": TAGS},
        id_="good-interruptions",
    )
    topic = record(
        "aws:sns/topic:Topic", "good-alerts", {"kmsMasterKeyId": KMS_ARN, "tags": TAGS}, refs={"kmsMasterKeyId": [key]}
    )
    control_plane_logs = record(
        LOG_GROUP,
        "good-control-plane",
        {"name": "/aws/eks/good/cluster", "retentionInDays": 365, "kmsKeyId": KMS_ARN, "tags": TAGS},
        refs={"kmsKeyId": [key]},
    )
    return [
        vpc, log_group, control_plane_logs, flow_log, default_sg, node_role, autoscaler_role, autoscaler_policy, queue,
        topic,
    ]  # fmt: skip


def find(records: list[Record], name: str) -> Record:
    return next(r for r in records if r["name"] == name)


def without(records: list[Record], *names: str) -> list[Record]:
    return [r for r in records if r["name"] not in names]
