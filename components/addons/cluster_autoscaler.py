"""cluster-autoscaler: resizes the pools in `cluster-autoscaler` mode, including GPU pools from zero.

Node pools tag their ASGs for auto-discovery and with node-template labels, taints and resources
(`components.planning.autoscaler_tags`); this release finds them by those tags, and its Pod Identity role may
resize only groups that carry both discovery tags of this cluster ([CA] README IAM policy, aws-gpu-facts.md §6).
The chart and image follow the cluster's Kubernetes minor (the autoscaler must match the control plane).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import config
from components.addons.helm import helm_release, service_account_role
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.cluster_autoscaler import (
    CLUSTER_AUTOSCALER_RELEASE,
    CLUSTER_AUTOSCALER_SERVICE_ACCOUNT,
    cluster_autoscaler_policy,
    cluster_autoscaler_values,
    nodegroup_arn_pattern,
)
from components.planning.addons.documents import as_json
from components.planning.addons.placement import KUBE_SYSTEM
from components.planning.pools import PoolPlan


class ClusterAutoscaler(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        settings: config.ClusterAutoscaler,
        plans: Sequence[PoolPlan],
        provisioning_crd: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`provisioning_crd`: the ProvisioningRequest CRD, when Kueue's capacity check sends requests; the
        autoscaler then handles them and starts after the CRD exists."""
        super().__init__("gpu-clusters:index:ClusterAutoscaler", name, None, opts)
        pin = versions.cluster_autoscaler_chart(context.kubernetes_version)
        cluster = context.cluster_name_plain
        self.policy: pulumi.Output[dict[str, Any]] = pulumi.Output.all(context.partition, context.account_id).apply(
            lambda v: cluster_autoscaler_policy(cluster, nodegroup_arn_pattern(v[0], context.region, v[1], cluster))
        )
        self.identity = service_account_role(
            context,
            "cluster-autoscaler",
            KUBE_SYSTEM,
            CLUSTER_AUTOSCALER_SERVICE_ACCOUNT,
            self.policy.apply(as_json),
            (),
            self,
        )
        self.values = cluster_autoscaler_values(
            settings,
            context.cluster_name_plain,
            context.region,
            plans,
            pin.image_tag,
            provisioning_requests=provisioning_crd is not None,
        )
        self.release: k8s.helm.v3.Release = helm_release(
            name,
            CLUSTER_AUTOSCALER_RELEASE,
            pin,
            KUBE_SYSTEM,
            self.values,
            context,
            parent=self,
            depends_on=[*self.identity, *([provisioning_crd] if provisioning_crd is not None else [])],
        )
        self.register_outputs({"release": self.release.name})
