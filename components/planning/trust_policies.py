"""Trust policies of the cluster's own roles (pure, no Pulumi): the control plane, the nodes, and the Pod Identity roles
of controllers.

A Pod Identity role is trusted for one service account of one cluster in this account only, through the session tags
EKS Pod Identity sets; docs/network-and-cluster.md describes the roles. Hybrid node roles are planned with the hybrid
pools (`components.planning.hybrid`), the flow-log delivery role with the flow logs (`components.planning.flow_logs`).
"""

from __future__ import annotations

from typing import Any

#: The service that runs the control plane (https://docs.aws.amazon.com/eks/latest/userguide/cluster-iam-role.html).
EKS_SERVICE = "eks.amazonaws.com"
#: The service EC2 instances (the nodes) assume their role through
#: (https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html).
EC2_SERVICE = "ec2.amazonaws.com"
#: Session tags EKS Pod Identity adds when it assumes a role; trust conditions on them restrict a role to one
#: cluster, namespace and service account (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html,
#: https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html).
POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"
POD_IDENTITY_ACTIONS = ("sts:AssumeRole", "sts:TagSession")
SESSION_TAG_CLUSTER = "aws:RequestTag/eks-cluster-name"
SESSION_TAG_NAMESPACE = "aws:RequestTag/kubernetes-namespace"
SESSION_TAG_SERVICE_ACCOUNT = "aws:RequestTag/kubernetes-service-account"
#: The cluster's ARN, another session tag Pod Identity sets (`eks-cluster-arn`, EKS user guide "Enable or disable
#: session tags", https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html): the name alone would also
#: match a cluster of the same name in another account or region.
SESSION_TAG_CLUSTER_ARN = "aws:RequestTag/eks-cluster-arn"
#: Confused-deputy guard on the service principal: only requests made for this account (IAM user guide, "The
#: confused deputy problem", https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html).
SOURCE_ACCOUNT = "aws:SourceAccount"


def service_trust_policy(service: str) -> dict[str, Any]:
    """A role that one AWS service assumes: the control plane's (`EKS_SERVICE`) and the nodes' (`EC2_SERVICE`)."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }


def pod_identity_trust_policy(
    cluster_name: str, namespace: str, service_account: str, account_id: str, cluster_arn: str
) -> dict[str, Any]:
    """Trust for one service account of one cluster, through EKS Pod Identity: the session tags Pod Identity sets pin
    the cluster (name and ARN), namespace and service account, and `aws:SourceAccount` the account the request is
    made for ([PODIDTRUST]: the EKS guide documents the session tags; Pod Identity's AssumeRole carries
    `aws:SourceAccount`, shown working in a trust policy, while an `aws:SourceArn` condition on the association ARN
    broke it, so the cluster ARN is pinned through the `eks-cluster-arn` tag instead)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EksPodIdentity",
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": list(POD_IDENTITY_ACTIONS),
                "Condition": {
                    "StringEquals": {
                        SOURCE_ACCOUNT: account_id,
                        SESSION_TAG_CLUSTER: cluster_name,
                        SESSION_TAG_CLUSTER_ARN: cluster_arn,
                        SESSION_TAG_NAMESPACE: namespace,
                        SESSION_TAG_SERVICE_ACCOUNT: service_account,
                    },
                },
            }
        ],
    }
