"""cluster-autoscaler: which pools it resizes, its IAM policy and its Helm values (pure, no Pulumi).

Source: [CA] kubernetes/autoscaler AWS README and chart (docs/sources.md: aws-gpu-facts.md §6).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from components.config import ClusterAutoscaler
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.autoscaler_tags import AUTOSCALED_MODES, ENABLED_TAG, OWNER_TAG_PREFIX, discovery_tags
from components.planning.pools import PoolPlan

#: Helm release and service account. Pod Identity binds a role to a (namespace, service account) pair, so the
#: chart is told the service account's name instead of deriving it from the release name.
CLUSTER_AUTOSCALER_RELEASE = "cluster-autoscaler"
CLUSTER_AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"


def autoscaled_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """`aws` pools cluster-autoscaler may resize: mode `cluster-autoscaler` or `gpu-utilization` (nodes follow the
    serving replicas) and room between min and max."""
    return [
        p for p in plans if p.kind == "aws" and p.pool.scaling.mode in AUTOSCALED_MODES and p.min_nodes < p.max_nodes
    ]


#: Read-only calls cluster-autoscaler makes on AWS ([CA] README "IAM Policy", facts §6). These list or describe
#: across resources and take no resource ARN, so they apply to `*`.
CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS: tuple[str, ...] = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeAutoScalingInstances",
    "autoscaling:DescribeLaunchConfigurations",
    "autoscaling:DescribeScalingActivities",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:GetInstanceTypesFromInstanceRequirements",
)
#: `eks:DescribeNodegroup` reads an EKS managed node group's labels and taints ([CA] README). It does take a resource,
#: the node group's ARN `arn:${Partition}:eks:${Region}:${Account}:nodegroup/${ClusterName}/${NodegroupName}/${UUID}`
#: (Service Authorization Reference, "Actions, resources, and condition keys for Amazon EKS",
#: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html), so
#: it is scoped to this cluster's node groups. The stack's pools are self-managed Auto Scaling groups, so the call
#: finds none today; the scoped grant keeps a managed node group added later working without widening it.
CLUSTER_AUTOSCALER_NODEGROUP_ACTIONS: tuple[str, ...] = ("eks:DescribeNodegroup",)
#: The calls that change capacity; allowed only on ASGs tagged for this cluster ([CA] README, facts §6).
CLUSTER_AUTOSCALER_SCALE_ACTIONS: tuple[str, ...] = (
    "autoscaling:SetDesiredCapacity",
    "autoscaling:TerminateInstanceInAutoScalingGroup",
)


def nodegroup_arn_pattern(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """Every EKS managed node group of one cluster."""
    return f"arn:{partition}:eks:{region}:{account_id}:nodegroup/{cluster_name}/*/*"


def cluster_autoscaler_policy(cluster_name: str, nodegroups_arn: str) -> dict[str, Any]:
    """Least privilege: describe what takes no resource, this cluster's node groups only (`nodegroups_arn`,
    `nodegroup_arn_pattern`), and resize only the ASGs carrying both discovery tags of this cluster."""
    conditions = {f"aws:ResourceTag/{key}": value for key, value in discovery_tags(cluster_name).items()}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Action": list(CLUSTER_AUTOSCALER_DESCRIBE_ACTIONS),
                "Resource": "*",
            },
            {
                "Sid": "DescribeOwnNodegroups",
                "Effect": "Allow",
                "Action": list(CLUSTER_AUTOSCALER_NODEGROUP_ACTIONS),
                "Resource": nodegroups_arn,
            },
            {
                "Sid": "ScaleOwnGroups",
                "Effect": "Allow",
                "Action": list(CLUSTER_AUTOSCALER_SCALE_ACTIONS),
                "Resource": "*",
                "Condition": {"StringEquals": conditions},
            },
        ],
    }


def cluster_autoscaler_values(
    settings: ClusterAutoscaler, cluster_name: str, region: str, plans: Sequence[PoolPlan], image_tag: str | None
) -> dict[str, Any]:
    """Helm values of cluster-autoscaler ([CA] chart values.yaml, facts §6).

    - auto-discovery by exactly the two tags node pools put on autoscaled ASGs (`autoscaler_tags.discovery_tags`);
    - `balance-similar-node-groups`: spreads a scale-up across same-shape groups (spot pools in several AZs);
    - `skip-nodes-with-local-storage=false`: with nodeadm RAID0 every pod's emptyDir lives on instance-store NVMe,
      and the default (true) would then never scale a GPU node down;
    - the image tag of the cluster's Kubernetes minor (catalog), since the chart's appVersion trails releases.
    """
    values: dict[str, Any] = {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name, "tags": [ENABLED_TAG, f"{OWNER_TAG_PREFIX}{cluster_name}"]},
        "extraArgs": {
            "expander": settings.expander,
            "scale-down-unneeded-time": settings.scale_down_unneeded_time,
            "scale-down-utilization-threshold": settings.scale_down_utilization_threshold,
            "scale-down-delay-after-add": settings.scale_down_delay_after_add,
            "balance-similar-node-groups": True,
            "skip-nodes-with-local-storage": False,
        },
        "rbac": {"serviceAccount": {"create": True, "name": CLUSTER_AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "tolerations": tolerations_for(system_plans(plans)),
    }
    if image_tag:
        values["image"] = {"tag": image_tag}
    return values
