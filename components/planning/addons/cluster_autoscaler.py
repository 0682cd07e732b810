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


#: cluster-autoscaler's cluster-wide readiness gate ([CASTATE]: kubernetes/autoscaler `config/flags/flags.go` and
#: `clusterstate/clusterstate.go` IsClusterHealthy, tag cluster-autoscaler-1.35.2): a loop with more than
#: `ok-total-unready-count` (default 3) unready nodes AND more than `max-total-unready-percentage` (default 45) percent
#: of all nodes unready does nothing, neither scale-up nor scale-down. Every node counts, also those of no node
#: group: a hybrid node has no `aws:///` provider ID, so the AWS provider finds no group for it, but
#: `updateReadinessStats` adds it to the total all the same. The same count also bounds each node group's health
#: (IsNodeGroupHealthy). No released version can be told to leave nodes outside its groups out of the total
#: (kubernetes/autoscaler#10161 asks for it; kubernetes-sigs/cluster-autoscaler#88 proposes `--unready-nodes-scope`,
#: not merged), so the count is raised by the servers that can all drop out at once.
CA_OK_TOTAL_UNREADY_COUNT = 3
CA_MAX_TOTAL_UNREADY_PERCENTAGE = 45


def hybrid_node_count(plans: Iterable[PoolPlan]) -> int:
    """The on-prem servers of the stack's hybrid pools (`nodes`): all of them go unready together when the site
    link fails."""
    return sum(p.pool.nodes or 0 for p in plans if p.kind == "hybrid")


def unready_flags(plans: Iterable[PoolPlan]) -> dict[str, int]:
    """The readiness gate sized for the site (empty without hybrid pools: the defaults stand). The whole site
    unready (H servers) uses up the raised count, so a link outage never stops the cloud pools from scaling; the
    cloud keeps cluster-autoscaler's own margin of 3 on top, so more than 3 cloud nodes unready with the site down,
    or more than H + 3 with it up (and over 45 % of all nodes), still stops it. The percentage stays at the default:
    it is the count that a site outage would trip (docs/operations.md, "cluster-autoscaler and the site")."""
    servers = hybrid_node_count(plans)
    if not servers:
        return {}
    return {
        "ok-total-unready-count": CA_OK_TOTAL_UNREADY_COUNT + servers,
        "max-total-unready-percentage": CA_MAX_TOTAL_UNREADY_PERCENTAGE,
    }


#: Turns on cluster-autoscaler's ProvisioningRequest handling ([CASRC] cluster-autoscaler-1.35.2
#: config/flags/flags.go `enable-provisioning-requests`, default false). The chart already grants the RBAC on
#: `provisioningrequests.autoscaling.x-k8s.io` ([CA] chart 9.59.0 templates/clusterrole.yaml) but installs no CRD.
PROVISIONING_REQUESTS_FLAG = "enable-provisioning-requests"


def cluster_autoscaler_values(
    settings: ClusterAutoscaler,
    cluster_name: str,
    region: str,
    plans: Sequence[PoolPlan],
    image_tag: str | None,
    provisioning_requests: bool = False,
) -> dict[str, Any]:
    """Helm values of cluster-autoscaler ([CA] chart values.yaml, facts §6).

    - auto-discovery by exactly the two tags node pools put on autoscaled ASGs (`autoscaler_tags.discovery_tags`);
    - `balance-similar-node-groups`: spreads a scale-up across same-shape groups (spot pools in several AZs);
    - `skip-nodes-with-local-storage=false`: with nodeadm RAID0 every pod's emptyDir lives on instance-store NVMe,
      and the default (true) would then never scale a GPU node down;
    - with hybrid pools, the readiness gate raised by the servers' count (`unready_flags`), so a site-link outage
      does not freeze the cloud pools;
    - the image tag of the cluster's Kubernetes minor (catalog), since the chart's appVersion trails releases;
    - with Kueue's capacity check (`provisioning_requests`), ProvisioningRequests handled
      (components.planning.queues, docs/training.md#all-or-nothing-admission).
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
            **unready_flags(plans),
            **({PROVISIONING_REQUESTS_FLAG: True} if provisioning_requests else {}),
        },
        "rbac": {"serviceAccount": {"create": True, "name": CLUSTER_AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "tolerations": tolerations_for(system_plans(plans)),
    }
    if image_tag:
        values["image"] = {"tag": image_tag}
    return values
