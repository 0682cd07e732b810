"""Trust policies of the control plane, node and Pod Identity roles, planned without Pulumi."""

from __future__ import annotations

from components.planning.trust_policies import (
    EC2_SERVICE,
    EKS_SERVICE,
    pod_identity_trust_policy,
    service_trust_policy,
)

ACCOUNT = "210987654321"
CLUSTER_ARN = f"arn:aws:eks:eu-west-1:{ACCOUNT}:cluster/lab"


def test_the_control_plane_role_is_assumed_by_eks_and_the_node_role_by_ec2() -> None:
    for service, principal in ((EKS_SERVICE, "eks.amazonaws.com"), (EC2_SERVICE, "ec2.amazonaws.com")):
        (statement,) = service_trust_policy(service)["Statement"]
        assert statement == {"Effect": "Allow", "Principal": {"Service": principal}, "Action": "sts:AssumeRole"}


def test_a_pod_identity_role_trusts_one_service_account_of_one_cluster_in_this_account() -> None:
    (statement,) = pod_identity_trust_policy("lab", "monitoring", "grafana", ACCOUNT, CLUSTER_ARN)["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": ACCOUNT,
            "aws:RequestTag/eks-cluster-name": "lab",
            "aws:RequestTag/eks-cluster-arn": CLUSTER_ARN,
            "aws:RequestTag/kubernetes-namespace": "monitoring",
            "aws:RequestTag/kubernetes-service-account": "grafana",
        }
    }


def test_a_pod_identity_role_carries_no_source_arn_condition() -> None:
    """An `aws:SourceArn` condition on the association broke Pod Identity ([PODIDTRUST]); the cluster ARN is pinned
    through the `eks-cluster-arn` session tag instead."""
    (statement,) = pod_identity_trust_policy("lab", "kube-system", "ebs", ACCOUNT, CLUSTER_ARN)["Statement"]
    assert set(statement["Condition"]) == {"StringEquals"}
    assert "aws:SourceArn" not in statement["Condition"]["StringEquals"]
